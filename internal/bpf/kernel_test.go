package bpf_test

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"perfevent/internal/bpf"
	"perfevent/internal/bpf/asm"
	"perfevent/internal/emulator"
	"perfevent/internal/testneed"
)

// needBPF skips a test under an emulator, which has no bpf(2), or as an
// ordinary user.
func needBPF(t *testing.T) {
	t.Helper()
	emulator.Skip(t, "bpf(2) is not emulated: it fails with ENOSYS")
	testneed.Root(t, "to create BPF maps and load programs (CAP_BPF)")
}

func newMap(t *testing.T, spec bpf.MapSpec) *bpf.Map {
	t.Helper()
	needBPF(t)
	m, err := bpf.NewMap(&spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// TestKernelMapElements updates, looks up and deletes in a hash map, and
// checks the errors of a key there already and of one not there.
func TestKernelMapElements(t *testing.T) {
	m := newMap(t, bpf.MapSpec{Name: "pe_test_hash", Type: bpf.Hash, KeySize: 8, ValueSize: 4, MaxEntries: 4})
	if err := m.Update(uint64(1<<40), uint32(7), bpf.UpdateNoExist); err != nil {
		t.Fatal(err)
	}
	err := m.Update(uint64(1<<40), uint32(8), bpf.UpdateNoExist)
	if !errors.Is(err, bpf.ErrKeyExist) || !errors.Is(err, unix.EEXIST) || !strings.Contains(err.Error(), "map pe_test_hash (hash)") {
		t.Errorf("a second UpdateNoExist: %v, want EEXIST naming the map", err)
	}
	v := make([]byte, 4)
	if err := m.Lookup(uint64(1<<40), v); err != nil || v[0]|v[3] != 7 {
		t.Errorf("lookup: % x, %v; want 7", v, err)
	}
	if err := m.Delete(uint64(1 << 40)); err != nil {
		t.Fatal(err)
	}
	err = m.Delete(uint64(1 << 40))
	if !errors.Is(err, bpf.ErrKeyNotExist) || !errors.Is(err, unix.ENOENT) || !strings.Contains(err.Error(), "ENOENT") {
		t.Errorf("a delete of a key not there: %v, want ErrKeyNotExist", err)
	}
	if err := m.Update(uint32(1), uint32(1), bpf.UpdateAny); err == nil || !strings.Contains(err.Error(), "pe_test_hash: a key of 4 bytes, want 8") {
		t.Errorf("a 4-byte key into a map of 8-byte keys: %v", err)
	}
}

// TestKernelRefusesAMap checks the error of a map the kernel will not
// make: it names the map and the errno, and leaves no descriptor.
func TestKernelRefusesAMap(t *testing.T) {
	needBPF(t)
	before := fds(t)
	// An array's keys are u32 indexes.
	_, err := bpf.NewMap(&bpf.MapSpec{Name: "pe_test_bad", Type: bpf.Array, KeySize: 8, ValueSize: 8, MaxEntries: 1})
	if !errors.Is(err, unix.EINVAL) || !strings.Contains(err.Error(), "create map pe_test_bad (array): EINVAL") {
		t.Errorf("an array of 8-byte keys: %v, want EINVAL naming the map", err)
	}
	if _, err := bpf.NewMap(&bpf.MapSpec{Name: "pe-bad-name", Type: bpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: 1}); err == nil || !strings.Contains(err.Error(), `"pe-bad-name" has '-'`) {
		t.Errorf("a name with a dash: %v", err)
	}
	if after := fds(t); after != before {
		t.Errorf("%d descriptors open before, %d after", before, after)
	}
}

// TestKernelLoadsAndRuns loads a program that counts its runs in a map,
// runs it on a CPU and reads what it wrote and its statistics.
func TestKernelLoadsAndRuns(t *testing.T) {
	m := newMap(t, bpf.MapSpec{Name: "pe_test_arr", Type: bpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: 1, Flags: unix.BPF_F_MMAPABLE})
	p, err := bpf.NewProgram(&bpf.ProgramSpec{Name: "pe_test_run", Type: bpf.RawTracepoint, License: "GPL", LogLevel: bpf.LogLevelStats,
		Instructions: asm.Instructions{
			asm.Mov.Imm(asm.R1, 0),
			asm.StoreMem(asm.RFP, -8, asm.R1, asm.Word),
			asm.LoadMapPtr(asm.R1, m.FD()),
			asm.Mov.Reg(asm.R2, asm.RFP),
			asm.Add.Imm(asm.R2, -8),
			asm.FnMapLookupElem.Call(),
			asm.JEq.Imm(asm.R0, 0, "exit"),
			asm.Mov.Imm(asm.R1, 1),
			asm.AddAtomic.Mem(asm.R0, asm.R1, asm.DWord, 0),
			asm.Mov.Imm(asm.R0, 0).WithSymbol("exit"),
			asm.Return(),
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if !strings.Contains(p.VerifierLog, "processed") {
		t.Errorf("the statistics' log %q lacks the instructions processed", p.VerifierLog)
	}
	for range 3 {
		if err := p.RunOnCPU(0); err != nil {
			t.Skipf("needs BPF_PROG_TEST_RUN of a raw tracepoint program on a CPU (Linux 5.10): %v", err)
		}
	}
	v := make([]byte, 8)
	if err := m.Lookup(uint32(0), v); err != nil {
		t.Fatal(err)
	}
	if v[0]|v[7] != 3 {
		t.Errorf("3 runs counted % x", v)
	}
	if _, err := p.Stats(); err != nil {
		t.Errorf("statistics: %v", err)
	}
	// No such CPU.
	err = p.RunOnCPU(1 << 20)
	if !errors.Is(err, unix.ENXIO) && !errors.Is(err, unix.EINVAL) || !strings.Contains(err.Error(), "run program pe_test_run (raw_tracepoint) on cpu1048576: E") {
		t.Errorf("a run on cpu 1<<20: %v, want ENXIO or EINVAL naming the program and the CPU", err)
	}
}

// TestKernelRefusesAProgram checks the error of a program the verifier
// refuses: the program's name, the errno and the log's last lines, where
// the reason is, within bounds; and no descriptor left behind.
func TestKernelRefusesAProgram(t *testing.T) {
	needBPF(t)
	// Many instructions the verifier logs, and then an exit with R0
	// never written.
	var insns asm.Instructions
	for range 200 {
		insns = append(insns, asm.Mov.Imm(asm.R1, 1))
	}
	insns = append(insns, asm.Return())
	before := fds(t)
	_, err := bpf.NewProgram(&bpf.ProgramSpec{Name: "pe_test_bad", Type: bpf.PerfEvent, License: "GPL", Instructions: insns})
	if !errors.Is(err, unix.EACCES) {
		t.Fatalf("exit with R0 unset: %v, want EACCES", err)
	}
	msg := err.Error()
	t.Log(msg)
	for _, want := range []string{"load program pe_test_bad (perf_event): EACCES", "the verifier's log:", "R0 !read_ok", "lines left out"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the error lacks %q:\n%s", want, msg)
		}
	}
	if n := strings.Count(msg, "\n"); n > 40 {
		t.Errorf("the error has %d lines, want the log cut to 31:\n%s", n, msg)
	}
	if after := fds(t); after != before {
		t.Errorf("%d descriptors open before, %d after", before, after)
	}
}

func TestPossibleCPU(t *testing.T) {
	n, err := bpf.PossibleCPU()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("/sys/devices/system/cpu/possible")
	if err != nil {
		t.Skipf("needs /sys/devices/system/cpu/possible: %v", err)
	}
	// The list is in ascending order: its last number is the highest.
	list := strings.TrimSpace(string(b))
	last, err := strconv.Atoi(list[strings.LastIndexAny(list, ",-")+1:])
	if err != nil {
		t.Fatalf("%s: %v", list, err)
	}
	if n != last+1 {
		t.Errorf("%d possible CPUs from %q, want %d", n, list, last+1)
	}
}

// fds is the number of descriptors this process has open.
func fds(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("needs /proc/self/fd: %v", err)
	}
	return len(ents)
}
