package bpf

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"

	"perfevent/internal/bpf/asm"
)

// ProgramType is a program's kind (enum bpf_prog_type), which says what
// may run it and which helpers it may call.
type ProgramType uint32

// The program types the agent loads.
const (
	PerfEvent     ProgramType = 7
	RawTracepoint ProgramType = 17
)

func (t ProgramType) String() string {
	switch t {
	case PerfEvent:
		return "perf_event"
	case RawTracepoint:
		return "raw_tracepoint"
	}
	return fmt.Sprintf("type %d", uint32(t))
}

// LogLevel is what the verifier writes in its log (the kernel's
// BPF_LOG_* bits).
type LogLevel uint32

const (
	// LogLevelBranch logs the state at each branch the verifier walks.
	LogLevelBranch LogLevel = 1
	// LogLevelStats logs the verifier's statistics alone, such as the
	// instructions it processed.
	LogLevelStats LogLevel = 4
)

// ProgramSpec is a program to load.
type ProgramSpec struct {
	Name         string // at most 15 bytes of [A-Za-z0-9_.]
	Type         ProgramType
	Instructions asm.Instructions
	License      string // GPL-compatible for the helpers that ask it
	// LogLevel, when not 0, asks the verifier for a log of an accepted
	// program too, in Program.VerifierLog.
	LogLevel LogLevel
}

// Program is a program the kernel accepted, held by its descriptor.
type Program struct {
	fd   int
	name string
	typ  ProgramType
	// VerifierLog is the verifier's log when the spec asked for one.
	VerifierLog string
}

// progLoadAttr is union bpf_attr for BPF_PROG_LOAD, as far as the
// expected attach type.
type progLoadAttr struct {
	progType, insnCnt          uint32
	insns, license             pointer
	logLevel, logSize          uint32
	logBuf                     pointer
	kernVersion, progFlags     uint32
	name                       [objNameLen]byte
	ifindex, expectedAttachTyp uint32
}

// Log buffer sizes: the first try's, and the most a log is given. A
// kernel before 6.4 keeps the start of a log too long for its buffer and
// says ENOSPC; a later one keeps the end, where the error is.
const (
	logSizeStart = 256 << 10
	logSizeMax   = 16 << 20
)

// NewProgram loads the program spec describes. When the kernel refuses
// it, it loads it again with the verifier's log, whose first and last
// lines the error gives.
func NewProgram(spec *ProgramSpec) (*Program, error) {
	obj := fmt.Sprintf("program %s (%s)", spec.Name, spec.Type)
	name, err := objName(spec.Name)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", obj, err)
	}
	code, err := spec.Instructions.AppendTo(nil, binary.NativeEndian)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", obj, err)
	}
	if len(code) == 0 {
		return nil, fmt.Errorf("load %s: no instructions", obj)
	}
	license := append([]byte(spec.License), 0)
	attr := progLoadAttr{progType: uint32(spec.Type), insnCnt: uint32(len(code) / asm.InstructionSize),
		insns: ptrToBytes(code), license: ptrToBytes(license), name: name}
	var log []byte
	if spec.LogLevel != 0 {
		log = make([]byte, logSizeStart)
		attr.logLevel, attr.logSize, attr.logBuf = uint32(spec.LogLevel), uint32(len(log)), ptrToBytes(log)
	}
	fd, err := bpf(cmdProgLoad, &attr)
	runtime.KeepAlive(code)
	runtime.KeepAlive(license)
	if err == nil {
		p := &Program{fd: fd, name: spec.Name, typ: spec.Type}
		if log != nil {
			p.VerifierLog = string(trimLog(log))
		}
		return p, nil
	}
	loadErr := &Error{Op: "load", Object: obj, Errno: err}
	// Again with the log, in a buffer large enough for it: the errno
	// reported stays the first load's, as a truncated log turns it into
	// ENOSPC.
	level := uint32(LogLevelBranch) | uint32(spec.LogLevel)
	for size := logSizeStart; size <= logSizeMax; size *= 4 {
		log = make([]byte, size)
		attr.logLevel, attr.logSize, attr.logBuf = level, uint32(len(log)), ptrToBytes(log)
		fd, err := bpf(cmdProgLoad, &attr)
		runtime.KeepAlive(code)
		runtime.KeepAlive(license)
		if err == nil {
			// Refused without the log, accepted with it: not the
			// verifier's doing (memory, a signal). Refused all the same.
			unix.Close(fd)
			return nil, loadErr
		}
		loadErr.Log = excerpt(string(trimLog(log)))
		if err != unix.ENOSPC {
			break
		}
	}
	return nil, loadErr
}

// trimLog is log up to its NUL.
func trimLog(log []byte) []byte {
	for i, c := range log {
		if c == 0 {
			return log[:i]
		}
	}
	return log
}

// FD is the program's descriptor, -1 once closed.
func (p *Program) FD() int { return p.fd }

// Close lets go of the program's descriptor: the kernel unloads it when
// nothing else holds it (a perf event it is attached to does).
func (p *Program) Close() error {
	return closeFD(&p.fd)
}

// testRunAttr is union bpf_attr for BPF_PROG_TEST_RUN.
type testRunAttr struct {
	progFD, retval, dataSizeIn, dataSizeOut uint32
	dataIn, dataOut                         uint64
	repeat, duration, ctxSizeIn, ctxSizeOut uint32
	ctxIn, ctxOut                           uint64
	flags, cpu, batchSize                   uint32
	_                                       uint32
}

// testRunOnCPU is BPF_F_TEST_RUN_ON_CPU.
const testRunOnCPU = 1

// RunOnCPU runs the program once on cpu, without input, through
// BPF_PROG_TEST_RUN (an IPI when cpu is another): a raw tracepoint
// program (Linux 5.10). It needs no capability beyond the descriptor.
func (p *Program) RunOnCPU(cpu int) error {
	attr := testRunAttr{progFD: uint32(p.fd), flags: testRunOnCPU, cpu: uint32(cpu)}
	if _, err := bpf(cmdProgTestRun, &attr); err != nil {
		return &Error{Op: "run", Object: fmt.Sprintf("program %s (%s) on cpu%d", p.name, p.typ, cpu), Errno: err}
	}
	return nil
}

// ProgramStats is what the kernel counts of a program's runs while
// statistics are on (EnableStats).
type ProgramStats struct {
	Runtime  uint64 // nanoseconds, all runs together
	RunCount uint64
}

// progInfo is struct bpf_prog_info as far as run_cnt; the fields before
// run_time_ns are not read.
type progInfo struct {
	_         [192]byte
	runTimeNs uint64
	runCnt    uint64
}

// objInfoAttr is union bpf_attr for BPF_OBJ_GET_INFO_BY_FD.
type objInfoAttr struct {
	fd, infoLen uint32
	info        pointer
}

// Stats is the program's run time and count so far.
func (p *Program) Stats() (ProgramStats, error) {
	var info progInfo
	attr := objInfoAttr{fd: uint32(p.fd), infoLen: uint32(unsafe.Sizeof(info)), info: ptrTo(&info)}
	if _, err := bpf(cmdObjGetInfoByFD, &attr); err != nil {
		return ProgramStats{}, &Error{Op: "get info of", Object: fmt.Sprintf("program %s (%s)", p.name, p.typ), Errno: err}
	}
	return ProgramStats{Runtime: info.runTimeNs, RunCount: info.runCnt}, nil
}

// StatsRunTime is BPF_STATS_RUN_TIME: programs' run time and count.
const StatsRunTime = 0

// Stats is statistics turned on, until Close.
type Stats struct{ fd int }

// EnableStats turns on statistics of kind typ for every program
// (Linux 5.8) until the Stats is closed.
func EnableStats(typ uint32) (*Stats, error) {
	attr := struct{ typ uint32 }{typ}
	fd, err := bpf(cmdEnableStats, &attr)
	if err != nil {
		return nil, &Error{Op: "enable", Object: fmt.Sprintf("statistics %d", typ), Errno: err}
	}
	return &Stats{fd: fd}, nil
}

// Close turns the statistics off, unless another holder keeps them on.
func (s *Stats) Close() error {
	return closeFD(&s.fd)
}
