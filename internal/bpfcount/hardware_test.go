package bpfcount_test

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"perfevent/internal/bpfcount"
	"perfevent/internal/perf"
	"perfevent/internal/testneed"
)

var (
	instructions = unix.PerfEventAttr{Type: unix.PERF_TYPE_HARDWARE, Config: unix.PERF_COUNT_HW_INSTRUCTIONS}
	cycles       = unix.PerfEventAttr{Type: unix.PERF_TYPE_HARDWARE, Config: unix.PERF_COUNT_HW_CPU_CYCLES}
)

// loopEnv makes the test binary a loop helper (see TestMain): its value
// is the loop's iterations, 0 for a helper that only waits.
const loopEnv = "PERFEVENT_BPFCOUNT_LOOP"

// loopIterations is long enough for the multiplexing timer to rotate the
// events many times on an emulated arm64 machine, short enough to take
// about a second there.
const loopIterations = 20_000_000

func TestMain(m *testing.M) {
	if v, ok := os.LookupEnv(loopEnv); ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s=%q: %v\n", loopEnv, v, err)
			os.Exit(2)
		}
		if err := loopHelper(n); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

var sink uint64

// spin runs a loop of n iterations that touches no memory but sink.
//
//go:noinline
func spin(n int) uint64 {
	x := uint64(1)
	for i := range n {
		x = x*6364136223846793005 + uint64(i)
	}
	return x
}

// loopHelper is the process counted in a cgroup: it says "ready",
// waits for a line on stdin, runs the loop, says "done", and waits for
// stdin to close. With n = 0 it only waits.
func loopHelper(n int) error {
	out := bufio.NewWriter(os.Stdout)
	in := bufio.NewReader(os.Stdin)
	fmt.Fprintln(out, "ready")
	out.Flush()
	if n > 0 {
		if _, err := in.ReadString('\n'); err != nil {
			return err
		}
		sink += spin(n)
		fmt.Fprintln(out, "done")
		out.Flush()
	}
	io.Copy(io.Discard, in)
	return nil
}

// helper is a loop helper started in a cgroup.
type helper struct {
	in  io.WriteCloser
	out *bufio.Reader
	pid int
}

// startHelper starts the test binary as a loop helper of n iterations
// inside the cgroup dir (CLONE_INTO_CGROUP, so that it never runs
// elsewhere), waits for it to be ready, and stops it when the test ends.
// Register it after whatever removes dir.
func startHelper(tb testing.TB, dir string, n int) *helper {
	tb.Helper()
	exe, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	d, err := os.Open(dir)
	if err != nil {
		tb.Fatal(err)
	}
	defer d.Close()
	cmd := exec.Command(exe)
	// Few threads, and nothing that runs beside the loop for long.
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", loopEnv, n), "GOMAXPROCS=1", "GODEBUG=asyncpreemptoff=1", "GOGC=off")
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(d.Fd()), Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = os.Stderr
	h := &helper{}
	if h.in, err = cmd.StdinPipe(); err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	h.out = bufio.NewReader(stdout)
	if err := cmd.Start(); err != nil {
		tb.Skipf("needs to start a process inside a cgroup (clone3 CLONE_INTO_CGROUP, Linux 5.7): %v", err)
	}
	h.pid = cmd.Process.Pid
	tb.Cleanup(func() {
		h.in.Close()
		if err := cmd.Wait(); err != nil {
			tb.Errorf("the loop helper in %s: %v", dir, err)
		}
	})
	h.expect(tb, "ready")
	return h
}

func (h *helper) expect(tb testing.TB, word string) {
	tb.Helper()
	if l, err := h.out.ReadString('\n'); err != nil || l != word+"\n" {
		tb.Fatalf("the loop helper said %q (%v), want %s", l, err, word)
	}
}

// run runs the helper's loop and waits for it to end.
func (h *helper) run(tb testing.TB) {
	tb.Helper()
	if _, err := io.WriteString(h.in, "go\n"); err != nil {
		tb.Fatal(err)
	}
	h.expect(tb, "done")
}

// taskCounters opens events on each thread of process pid, inherited by
// the threads it starts later, and pinned, so that the events under test
// cannot take their counters: it returns a function that reads each
// event's sum over the threads.
func taskCounters(tb testing.TB, pid int, events ...unix.PerfEventAttr) func() []uint64 {
	tb.Helper()
	tids, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		tb.Fatal(err)
	}
	fds := make([][]int, len(events))
	for _, t := range tids {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			tb.Fatal(err)
		}
		for i, a := range events {
			a.Size = perf.AttrSize
			a.Bits = unix.PerfBitPinned | unix.PerfBitInherit
			fd, err := unix.PerfEventOpen(&a, tid, -1, -1, unix.PERF_FLAG_FD_CLOEXEC)
			if err != nil {
				tb.Fatalf("event %d on thread %d of the loop helper: %v", i, tid, err)
			}
			tb.Cleanup(func() { unix.Close(fd) })
			fds[i] = append(fds[i], fd)
		}
	}
	return func() []uint64 {
		sums := make([]uint64, len(events))
		for i := range events {
			for _, fd := range fds[i] {
				var b [8]byte
				if n, err := unix.Read(fd, b[:]); err != nil || n != 8 {
					tb.Fatalf("reading a task counter of the loop helper: %d bytes, %v", n, err)
				}
				sums[i] += binary.NativeEndian.Uint64(b[:])
			}
		}
		return sums
	}
}

// needHardwarePMU skips tb unless the kernel counts instructions.
func needHardwarePMU(tb testing.TB) {
	tb.Helper()
	testneed.PerfEvents(tb)
	a := instructions
	a.Size = perf.AttrSize
	fd, err := unix.PerfEventOpen(&a, 0, -1, -1, unix.PERF_FLAG_FD_CLOEXEC)
	if err != nil {
		tb.Skipf("needs a hardware PMU that counts instructions: %v", err)
	}
	unix.Close(fd)
}

// hwRun is what the program charged the cgroups base, A and B over one
// run of the loop in A, with B holding a helper that only waits: per
// cgroup and event, the sum over CPUs of the deltas, and of the deltas
// scaled by time enabled over time running, as perf stat scales; and
// what the loop's process counted meanwhile by its own task counters,
// which follow each of its threads, the Go runtime's too.
type hwRun struct {
	raw, scaled map[string][]float64
	running     map[string][]float64 // the share of the time on the PMU
	inst, cyc   float64
}

func countLoop(t *testing.T, c *bpfcount.Counter) hwRun {
	base := mkdirs(t, "A", "B")
	slots := map[string]int{}
	for _, n := range []string{".", "A", "B"} {
		dir := filepath.Join(base, n)
		s, err := c.Add(id(t, dir), dir)
		if err != nil {
			t.Fatal(err)
		}
		slots[n] = s
	}
	attachAll(t, c)
	startHelper(t, filepath.Join(base, "B"), 0)
	loop := startHelper(t, filepath.Join(base, "A"), loopIterations)
	own := taskCounters(t, loop.pid, instructions, cycles)
	readSlot := func(slot int) [][]bpfcount.Reading {
		var evs [][]bpfcount.Reading
		for ev := range c.Events() {
			var cpus []bpfcount.Reading
			for cpu := range c.CPUs() {
				cpus = append(cpus, c.Read(slot, ev, cpu))
			}
			evs = append(evs, cpus)
		}
		return evs
	}
	// Read sums what the BPF program has charged so far, and the helpers'
	// runtime threads (sysmon) can be charged between two slots' reads:
	// the parent is read before and after its children, and the reading
	// is kept once the two agree, nothing having been charged between.
	read := func() map[string][][]bpfcount.Reading {
		for try := 0; ; try++ {
			if err := c.Sync(); err != nil {
				t.Fatal(err)
			}
			m := map[string][][]bpfcount.Reading{}
			for _, n := range []string{".", "A", "B"} {
				m[n] = readSlot(slots[n])
			}
			if slices.EqualFunc(readSlot(slots["."]), m["."], slices.Equal) {
				return m
			}
			if try == 100 {
				t.Fatal("the parent's sums changed between every two reads of its children")
			}
		}
	}
	// The helper waits meanwhile: its counters stand still.
	ownBefore, before := own(), read()
	loop.run(t)
	after, ownAfter := read(), own()
	inst, cyc := ownAfter[0]-ownBefore[0], ownAfter[1]-ownBefore[1]
	if inst < loopIterations {
		t.Fatalf("the loop's process counted %d instructions in a loop of %d iterations", inst, loopIterations)
	}
	r := hwRun{raw: map[string][]float64{}, scaled: map[string][]float64{}, running: map[string][]float64{}, inst: float64(inst), cyc: float64(cyc)}
	for n := range slots {
		for ev := range c.Events() {
			var raw, scaled, enabled, running float64
			for cpu := range c.CPUs() {
				a, b := before[n][ev][cpu], after[n][ev][cpu]
				v, e, run := float64(b.Value-a.Value), float64(b.Enabled-a.Enabled), float64(b.Running-a.Running)
				raw += v
				enabled += e
				running += run
				if run > 0 {
					scaled += v * e / run
				}
			}
			r.raw[n] = append(r.raw[n], raw)
			r.scaled[n] = append(r.scaled[n], scaled)
			r.running[n] = append(r.running[n], running/math.Max(enabled, 1))
		}
	}
	return r
}

// within fails unless got is within [want·(1-below), want·(1+above)].
func within(t *testing.T, what string, got, want, below, above float64) {
	t.Helper()
	if got < want*(1-below) || got > want*(1+above) {
		t.Errorf("%s = %.0f, want %.0f −%g %% +%g %%", what, got, want, 100*below, 100*above)
	} else {
		t.Logf("%s = %.0f, %+.0f against %.0f (%+.3f %%)", what, got, got-want, want, 100*(got/want-1))
	}
}

// TestKernelChargesHardwareEvents counts instructions and cycles per
// cgroup: a loop of a fixed number of iterations in A, a helper that
// only waits in B, nothing in their parent of its own. A is charged what
// the loop's process counts on its own threads (the program and a task
// counter start and stop counting a few hundred instructions apart at
// each switch, and the Go runtime's own threads run a varying few
// hundred thousand more in some runs); B nothing; the parent what A and
// B are.
func TestKernelChargesHardwareEvents(t *testing.T) {
	testneed.Root(t, "to load BPF programs (CAP_BPF)")
	needHardwarePMU(t)
	c := load(t, 8, instructions, cycles)
	r := countLoop(t, c)
	within(t, "A's instructions against the loop process's own", r.raw["A"][0], r.inst, 0.005, 0.005)
	within(t, "A's cycles against the loop process's own", r.raw["A"][1], r.cyc, 0.005, 0.005)
	for ev, name := range []string{"instructions", "cycles"} {
		if r.running["A"][ev] != 1 {
			t.Errorf("A's %s ran %.4f of the time enabled, want 1: two events fit the PMU", name, r.running["A"][ev])
		}
		if b := r.raw["B"][ev]; b != 0 {
			t.Errorf("B's %s = %.0f, want 0: its one task waited on a pipe all along", name, b)
		}
		if p, ab := r.raw["."][ev], r.raw["A"][ev]+r.raw["B"][ev]; p != ab {
			t.Errorf("the parent's %s = %.0f, want A's and B's %.0f: it holds no task of its own", name, p, ab)
		}
	}
}

// TestKernelScalesMultiplexedHardwareEvents counts instructions eight
// times over, more events than the PMU has counters: each runs part of
// the time, and scaled by time enabled over time running each comes
// within 1 % of what the loop's process counts on its own.
func TestKernelScalesMultiplexedHardwareEvents(t *testing.T) {
	testneed.Root(t, "to load BPF programs (CAP_BPF)")
	needHardwarePMU(t)
	events := make([]unix.PerfEventAttr, 8)
	for i := range events {
		events[i] = instructions
	}
	c := load(t, 8, events...)
	r := countLoop(t, c)
	multiplexed := false
	for ev := range events {
		run := r.running["A"][ev]
		multiplexed = multiplexed || run < 0.95
		t.Logf("instructions #%d: on the PMU %.3f of the time, %.0f counted", ev, run, r.raw["A"][ev])
		within(t, fmt.Sprintf("A's instructions #%d, scaled, against the loop process's own", ev), r.scaled["A"][ev], r.inst, 0.01, 0.01)
	}
	if !multiplexed {
		t.Errorf("every copy of instructions ran over 95 %% of the time; want them multiplexed: %v", r.running["A"])
	}
}
