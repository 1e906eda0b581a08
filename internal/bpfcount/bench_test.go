package bpfcount

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"perfevent/internal/bpf"
	"perfevent/internal/bpf/asm"
	"perfevent/internal/hostfs"
	"perfevent/internal/perf"
	"perfevent/internal/testneed"
)

// BenchmarkLoad is what the agent pays at start-up when cgroups.conf
// counts events: the maps made and both programs through the verifier,
// for 2, 4 and 16 software events and room for 1,024 cgroups. It reports
// the program's size (insns) and the instructions the verifier walked
// to accept it (verified).
func BenchmarkLoad(b *testing.B) {
	testneed.Root(b, "to load BPF programs (CAP_BPF)")
	for _, n := range []int{2, 4, 16} {
		events := make([]unix.PerfEventAttr, n)
		for i := range events {
			events[i] = unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Config: uint64(i % unix.PERF_COUNT_SW_DUMMY)}
		}
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
			c, err := Load(Options{Events: events, Cgroups: 1024})
			if err != nil {
				SkipUnlessUnsupported(b, err)
			}
			size, verified := verify(b, c)
			c.Close()
			for b.Loop() {
				c, err := Load(Options{Events: events, Cgroups: 1024})
				if err != nil {
					b.Fatal(err)
				}
				c.Close()
			}
			b.ReportMetric(float64(size), "insns")
			b.ReportMetric(float64(verified), "verified")
		})
	}
}

var processed = regexp.MustCompile(`processed (\d+) insns`)

// verify loads c's switch program once more with the verifier's
// statistics, and returns its size in instructions and the instructions
// the verifier processed.
func verify(b *testing.B, c *Counter) (size, verified int) {
	body := program(c.maps(), c.nCPU, Levels)
	p, err := bpf.NewProgram(&bpf.ProgramSpec{Name: "pe_cgrp_switch", Type: bpf.PerfEvent, Instructions: body, License: license, LogLevel: bpf.LogLevelStats})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	if s := processed.FindStringSubmatch(p.VerifierLog); s != nil {
		verified, _ = strconv.Atoi(s[1])
	}
	return int(body.Size() / asm.InstructionSize), verified
}

// pingPongEnv makes the test binary one end of a ping-pong (see init):
// "ping" or "pong".
const pingPongEnv = "PERFEVENT_BPFCOUNT_PINGPONG"

func init() {
	role, ok := os.LookupEnv(pingPongEnv)
	if !ok {
		return
	}
	if err := pingPong(role); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// pingPong is one end of a ping-pong through the pipes on descriptors 3
// (in) and 4 (out), with blocking system calls, not the runtime's poller,
// so that each byte is one switch to the other process. The pong end
// sends back each byte until its input closes; the ping end reads a
// number of round trips from stdin, makes them, and says "done".
func pingPong(role string) error {
	b := []byte{0}
	trip := func() error {
		if _, err := unix.Write(4, b); err != nil {
			return err
		}
		_, err := unix.Read(3, b)
		return err
	}
	if role == "pong" {
		for {
			n, err := unix.Read(3, b)
			if n == 0 || err != nil {
				return err
			}
			if _, err := unix.Write(4, b); err != nil {
				return err
			}
		}
	}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		n, err := strconv.Atoi(in.Text())
		if err != nil {
			return err
		}
		for range n {
			if err := trip(); err != nil {
				return err
			}
		}
		fmt.Println("done")
	}
	return in.Err()
}

// pinger drives a ping-pong between two processes, each in a cgroup of
// its own, both on one CPU.
type pinger struct {
	in   io.Writer
	out  *bufio.Scanner
	pids [2]int
}

// cpuTime is the nanoseconds both ends have run, from their CPU clocks,
// which other processes' load blurs less than the wall time: a program
// run at a switch is charged to the task switched out.
func (p *pinger) cpuTime(b *testing.B) time.Duration {
	var sum time.Duration
	for _, pid := range p.pids {
		const cpuclockSched = 2 // CPUCLOCK_SCHED; a process clock has bit 2 clear
		var ts unix.Timespec
		if err := unix.ClockGettime(int32(^pid<<3|cpuclockSched), &ts); err != nil {
			b.Fatalf("the CPU clock of process %d: %v", pid, err)
		}
		sum += time.Duration(ts.Nano())
	}
	return sum
}

// startPingPong starts the two ends in the cgroup directories a and b,
// pinned to cpu, and stops them when the benchmark ends.
func startPingPong(b *testing.B, a, bDir string, cpu int) *pinger {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	var ab, ba [2]int
	if err := unix.Pipe2(ab[:], unix.O_CLOEXEC); err != nil {
		b.Fatal(err)
	}
	if err := unix.Pipe2(ba[:], unix.O_CLOEXEC); err != nil {
		b.Fatal(err)
	}
	files := []*os.File{os.NewFile(uintptr(ab[0]), "a→b"), os.NewFile(uintptr(ab[1]), "a→b"), os.NewFile(uintptr(ba[0]), "b→a"), os.NewFile(uintptr(ba[1]), "b→a")}
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	p := &pinger{}
	errc := make(chan error, 1)
	// The ends inherit the CPU affinity of the thread that starts them.
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with its pinning
		var set unix.CPUSet
		set.Set(cpu)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			errc <- err
			return
		}
		start := func(role, dir string, in, out *os.File) (*exec.Cmd, error) {
			d, err := os.Open(dir)
			if err != nil {
				return nil, err
			}
			b.Cleanup(func() { d.Close() })
			cmd := exec.Command(exe)
			cmd.Env = append(os.Environ(), pingPongEnv+"="+role, "GOMAXPROCS=1", "GOGC=off")
			cmd.ExtraFiles = []*os.File{in, out}
			cmd.Stderr = os.Stderr
			// No Pdeathsig: the thread that starts them ends first.
			cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(d.Fd())}
			return cmd, nil
		}
		ping, err := start("ping", a, files[2], files[1])
		if err != nil {
			errc <- err
			return
		}
		pong, err := start("pong", bDir, files[0], files[3])
		if err != nil {
			errc <- err
			return
		}
		w, err := ping.StdinPipe()
		if err != nil {
			errc <- err
			return
		}
		r, err := ping.StdoutPipe()
		if err != nil {
			errc <- err
			return
		}
		if err := ping.Start(); err != nil {
			errc <- err
			return
		}
		if err := pong.Start(); err != nil {
			ping.Process.Kill()
			ping.Wait()
			errc <- err
			return
		}
		b.Cleanup(func() {
			w.Close()
			ping.Wait()
			pong.Wait()
		})
		p.in, p.out = w, bufio.NewScanner(r)
		p.pids = [2]int{ping.Process.Pid, pong.Process.Pid}
		errc <- nil
	}()
	if err := <-errc; err != nil {
		b.Skipf("needs to start processes inside cgroups (clone3 CLONE_INTO_CGROUP, Linux 5.7) on cpu%d: %v", cpu, err)
	}
	return p
}

// trips makes n round trips.
func (p *pinger) trips(b *testing.B, n int) {
	if _, err := fmt.Fprintln(p.in, n); err != nil {
		b.Fatal(err)
	}
	if !p.out.Scan() || p.out.Text() != "done" {
		b.Fatalf("the ping end said %q (%v), want done", p.out.Text(), p.out.Err())
	}
}

// cgroup2Mount is the mount point of the cgroup v2 hierarchy.
func cgroup2Mount(b *testing.B) string {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		b.Skipf("needs /proc/self/mountinfo: %v", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if ok && len(f) >= 5 && len(g) >= 1 && g[0] == "cgroup2" {
			return f[4]
		}
	}
	b.Skip("needs a cgroup v2 hierarchy mounted")
	return ""
}

// BenchmarkSwitch is what a switch between two cgroups costs with the
// program attached: a ping-pong between processes in two cgroups on one
// CPU, each round trip two switches, ns/op a round trip, cpu-ns/op the
// CPU time both processes used for it. ns/run is the
// program's own time per run (the kernel's bpf stats, whose two clock
// reads it includes), without perf's dispatch to it. program=none is the
// ping-pong with nothing attached; exit a program that only returns (the
// dispatch and the stats' clock reads, as ns/op less none's); read one
// that reads the events and takes the deltas; full the program, with the
// ping-pong's two cgroups and others up to N counted; uncached the
// program without its cache, walking the levels at every run.
func BenchmarkSwitch(b *testing.B) {
	s := newSwitchBench(b, true)
	b.Run("program=none", func(b *testing.B) { s.run(b, nil, 0) })
	b.Run("program=exit", func(b *testing.B) {
		s.run(b, func(maps, int) asm.Instructions {
			return asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}
		}, 0)
	})
	b.Run("program=read", func(b *testing.B) {
		s.run(b, func(m maps, nCPU int) asm.Instructions {
			return append(readEvents(m), asm.Mov.Imm(asm.R0, 0), asm.Return())
		}, 0)
	})
	for _, n := range []int{1, 10, 100, switchBenchCgroups} {
		b.Run(fmt.Sprintf("program=full/cgroups=%d", n), func(b *testing.B) {
			s.run(b, func(m maps, nCPU int) asm.Instructions { return program(m, nCPU, Levels) }, n)
		})
		b.Run(fmt.Sprintf("program=uncached/cgroups=%d", n), func(b *testing.B) {
			s.run(b, func(m maps, nCPU int) asm.Instructions {
				ins := append(readEvents(m), findSlot(m, Levels, "charge")...)
				return append(ins, charge(m, nCPU)...)
			}, n)
		})
	}
}

// switchBenchCgroups is the most cgroups BenchmarkSwitch counts.
const switchBenchCgroups = 1000

type switchBench struct {
	pp     *pinger
	dirs   []string // the parent, the ping-pong's two, the others
	cpus   []int
	events []unix.PerfEventAttr
}

// newSwitchBench makes the cgroups and starts the ping-pong, with BPF
// run-time statistics on until the benchmark ends if stats says so.
func newSwitchBench(b *testing.B, stats bool) *switchBench {
	testneed.Root(b, "to load BPF programs (CAP_BPF) and make cgroups")
	var err error
	if stats {
		st, err := bpf.EnableStats(bpf.StatsRunTime)
		if err != nil {
			b.Skipf("needs BPF run-time statistics (Linux 5.8): %v", err)
		}
		b.Cleanup(func() { st.Close() })
	}
	s := &switchBench{events: []unix.PerfEventAttr{
		{Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_CPU_CLOCK},
		{Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_CONTEXT_SWITCHES},
	}}
	if s.cpus, err = (hostfs.FS{}).OnlineCPUs(); err != nil {
		b.Fatal(err)
	}
	base := filepath.Join(cgroup2Mount(b), fmt.Sprintf("perfevent-bpfbench-%d", os.Getpid()))
	for _, n := range []string{"", "pp-a", "pp-b"} {
		s.dirs = append(s.dirs, filepath.Join(base, n))
	}
	for i := range switchBenchCgroups - 2 {
		s.dirs = append(s.dirs, filepath.Join(base, fmt.Sprintf("n-%04d", i)))
	}
	b.Cleanup(func() {
		for i := len(s.dirs) - 1; i >= 0; i-- {
			os.Remove(s.dirs[i])
		}
	})
	for _, d := range s.dirs {
		if err := os.Mkdir(d, 0o755); err != nil {
			b.Skipf("needs to make cgroups: %v", err)
		}
	}
	s.pp = startPingPong(b, s.dirs[1], s.dirs[2], s.cpus[len(s.cpus)-1])
	return s
}

// run times the ping-pong with the switch program variant (none if nil)
// attached on every CPU and the first counted cgroups of s.dirs[1:]
// counted.
func (s *switchBench) run(b *testing.B, variant func(maps, int) asm.Instructions, counted int) {
	if variant == nil {
		s.pp.trips(b, 1000)
		cpu := s.pp.cpuTime(b)
		b.ResetTimer()
		s.pp.trips(b, b.N)
		b.StopTimer()
		b.ReportMetric(float64(s.pp.cpuTime(b)-cpu)/float64(b.N), "cpu-ns/op")
		return
	}
	c, err := Load(Options{Events: s.events, Cgroups: switchBenchCgroups})
	if err != nil {
		SkipUnlessUnsupported(b, err)
	}
	defer c.Close()
	p, err := bpf.NewProgram(&bpf.ProgramSpec{Name: "pe_bench", Type: bpf.PerfEvent, Instructions: variant(c.maps(), c.nCPU), License: license})
	if err != nil {
		b.Fatal(err)
	}
	c.onSwitch.Close()
	c.onSwitch = p
	for _, d := range s.dirs[1 : 1+counted] {
		var st unix.Stat_t
		if err := unix.Stat(d, &st); err != nil {
			b.Fatal(err)
		}
		if _, err := c.Add(st.Ino, d); err != nil {
			b.Fatal(err)
		}
	}
	if err := c.AttachOnly(s.cpus); err != nil {
		b.Skipf("needs the cgroup-switches software event (Linux 5.13): %v", err)
	}
	s.pp.trips(b, 1000)
	before, err := c.onSwitch.Stats()
	if err != nil {
		b.Fatal(err)
	}
	cpu := s.pp.cpuTime(b)
	b.ResetTimer()
	s.pp.trips(b, b.N)
	b.StopTimer()
	b.ReportMetric(float64(s.pp.cpuTime(b)-cpu)/float64(b.N), "cpu-ns/op")
	after, err := c.onSwitch.Stats()
	if err != nil {
		b.Fatal(err)
	}
	runs := after.RunCount - before.RunCount
	b.ReportMetric(float64(after.Runtime-before.Runtime)/float64(max(runs, 1)), "ns/run")
	b.ReportMetric(float64(runs)/float64(b.N), "runs/op")
}

// BenchmarkDispatch is perf's dispatch from a software event to a BPF
// program, which BenchmarkSwitch's ns/run leaves out: at a switch between
// cgroups perf fires context-switches and then cgroup-switches, one
// dispatch after the other. A program on the first stamps the time as it
// ends; one on the second takes the time as it starts. Their gap,
// dispatch-ns, is the way out of one dispatch and into the next, one
// dispatch in all, less the clock read it includes (clock-ns, two reads
// in a row). No run-time statistics: they would add their own clock
// reads to the gap.
func BenchmarkDispatch(b *testing.B) {
	s := newSwitchBench(b, false)
	nCPU, err := bpf.PossibleCPU()
	if err != nil {
		b.Fatal(err)
	}
	// Per CPU: the stamp, the gaps' sum and count, the clock reads' sum
	// and count.
	const stamp, gapSum, gaps, clockSum, clocks = 0, 8, 16, 24, 32
	times, err := bpf.NewMap(&bpf.MapSpec{Name: "pe_bench_disp", Type: bpf.Array, KeySize: 4, ValueSize: 40, MaxEntries: uint32(nCPU)})
	if err != nil {
		b.Fatal(err)
	}
	defer times.Close()
	lookup := func(exit string) asm.Instructions {
		return asm.Instructions{
			asm.FnGetSmpProcessorId.Call(),
			asm.StoreMem(asm.RFP, -8, asm.R0, asm.Word),
			asm.LoadMapPtr(asm.R1, times.FD()),
			asm.Mov.Reg(asm.R2, asm.RFP),
			asm.Add.Imm(asm.R2, -8),
			asm.FnMapLookupElem.Call(),
			asm.JEq.Imm(asm.R0, 0, exit),
		}
	}
	add := func(dst asm.Register, off int16, src asm.Register) asm.Instructions {
		return asm.Instructions{
			asm.LoadMem(asm.R1, dst, off, asm.DWord),
			asm.Add.Reg(asm.R1, src),
			asm.StoreMem(dst, off, asm.R1, asm.DWord),
		}
	}
	exit := asm.Instructions{asm.Mov.Imm(asm.R0, 0).WithSymbol("exit"), asm.Return()}
	first := append(lookup("exit"),
		asm.Mov.Reg(asm.R7, asm.R0),
		asm.FnKtimeGetNs.Call(),
		asm.Mov.Reg(asm.R8, asm.R0),
		asm.FnKtimeGetNs.Call(),
		asm.StoreMem(asm.R7, stamp, asm.R0, asm.DWord),
		asm.Sub.Reg(asm.R0, asm.R8),
		asm.Mov.Imm(asm.R9, 1),
	)
	first = append(first, add(asm.R7, clockSum, asm.R0)...)
	first = append(first, add(asm.R7, clocks, asm.R9)...)
	first = append(first, exit...)
	second := asm.Instructions{
		asm.FnKtimeGetNs.Call(),
		asm.Mov.Reg(asm.R6, asm.R0),
	}
	second = append(second, lookup("exit")...)
	second = append(second,
		asm.LoadMem(asm.R1, asm.R0, stamp, asm.DWord),
		asm.JEq.Imm(asm.R1, 0, "exit"),
		asm.Mov.Imm(asm.R2, 0),
		asm.StoreMem(asm.R0, stamp, asm.R2, asm.DWord),
		asm.Sub.Reg(asm.R6, asm.R1),
		asm.JGT.Imm(asm.R6, 100_000, "exit"), // the vCPU was preempted
		asm.Mov.Reg(asm.R7, asm.R0),
		asm.Mov.Imm(asm.R9, 1),
	)
	second = append(second, add(asm.R7, gapSum, asm.R6)...)
	second = append(second, add(asm.R7, gaps, asm.R9)...)
	second = append(second, exit...)
	attach := func(config uint64, ins asm.Instructions) {
		p, err := bpf.NewProgram(&bpf.ProgramSpec{Name: "pe_bench_disp", Type: bpf.PerfEvent, Instructions: ins, License: license})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { p.Close() })
		for _, cpu := range s.cpus {
			attr := unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Config: config, Size: perf.AttrSize, Sample: 1, Bits: unix.PerfBitDisabled}
			fd, err := unix.PerfEventOpen(&attr, -1, cpu, -1, unix.PERF_FLAG_FD_CLOEXEC)
			if err != nil {
				b.Skipf("needs software event %d on cpu%d: %v", config, cpu, err)
			}
			b.Cleanup(func() { unix.Close(fd) })
			if err := unix.IoctlSetInt(fd, unix.PERF_EVENT_IOC_SET_BPF, p.FD()); err != nil {
				b.Fatal(err)
			}
			if err := unix.IoctlSetInt(fd, unix.PERF_EVENT_IOC_ENABLE, 0); err != nil {
				b.Fatal(err)
			}
		}
	}
	attach(unix.PERF_COUNT_SW_CONTEXT_SWITCHES, first)
	attach(cgroupSwitches, second)
	s.pp.trips(b, 1000)
	sum := func() (gap, clock [2]uint64) {
		for cpu := range nCPU {
			var v [5]uint64
			if err := times.Lookup(uint32(cpu), unsafe.Slice((*byte)(unsafe.Pointer(&v)), unsafe.Sizeof(v))); err != nil {
				b.Fatal(err)
			}
			gap[0], gap[1] = gap[0]+v[1], gap[1]+v[2]
			clock[0], clock[1] = clock[0]+v[3], clock[1]+v[4]
		}
		return
	}
	gap0, clock0 := sum()
	b.ResetTimer()
	s.pp.trips(b, b.N)
	b.StopTimer()
	gap1, clock1 := sum()
	g := float64(gap1[0]-gap0[0]) / float64(max(gap1[1]-gap0[1], 1))
	c := float64(clock1[0]-clock0[0]) / float64(max(clock1[1]-clock0[1], 1))
	b.ReportMetric(g-c, "dispatch-ns")
	b.ReportMetric(c, "clock-ns")
	b.ReportMetric(float64(gap1[1]-gap0[1])/float64(b.N), "gaps/op")
}
