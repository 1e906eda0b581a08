package counter_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"perfevent/internal/counter"
	"perfevent/internal/counter/countertest"
	"perfevent/internal/perf"
	"perfevent/internal/testlog"
)

// ipcSpecs are instructions and cycles in one named group on cpu0 and
// cpu1, and branches on their own.
func ipcSpecs() []counter.Spec {
	ins, cyc, br := hw("instructions", 1, 0, 1), hw("cycles", 0, 0, 1), hw("branches", 4, 0, 1)
	ins.Group, cyc.Group = "ipc", "ipc"
	return []counter.Spec{ins, cyc, br}
}

// logSet opens specs over fake, collecting what the Set logs.
func logSet(t *testing.T, fake *countertest.Opener, specs ...counter.Spec) (*counter.Set, *testlog.Recorder) {
	t.Helper()
	var l testlog.Recorder
	s, err := counter.New(specs, counter.Config{Opener: fake, Log: &l})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Open(); err != nil {
		t.Fatal(err)
	}
	return s, &l
}

// reserve closes the Set and reopens it, as a perfalloc reservation does.
func reserve(t *testing.T, s *counter.Set) {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reopen(); err != nil {
		t.Fatal(err)
	}
}

// A named group of hardware events is one perf group per CPU, and one
// read scales every member by the group's own times: on cpu1 the group
// ran a quarter of the time, so both counts are ×4 and their quotient is
// what it was on the PMU.
func TestNamedGroupScalesPerGroup(t *testing.T) {
	s, fake := newSet(t, ipcSpecs()...)
	wantGroup(t, fake, "cycles", 0, "instructions", "cycles")
	wantGroup(t, fake, "cycles", 1, "instructions", "cycles")
	wantGroup(t, fake, "branches", 0) // not in any group
	if a, _ := fake.Attr("cycles", 1); a.Read_format != perf.GroupReadFormat {
		t.Errorf("cycles read_format %#x, want the group's %#x", a.Read_format, perf.GroupReadFormat)
	}
	fake.Add("instructions", 0, 3000, 100, 100)
	fake.Add("cycles", 0, 1000, 0, 0)
	fake.Add("instructions", 1, 500, 400, 100)
	fake.Add("cycles", 1, 250, 0, 0)
	fake.Add("branches", 1, 10, 400, 200) // multiplexed by itself: ×2
	before := fake.Reads()
	vals, _ := fetch(s, 0, 1, 2)
	if want := "[[3000 2000] [1000 1000] [0 20]]"; fmt.Sprint(vals) != want {
		t.Errorf("values %v, want %s", vals, want)
	}
	if n := fake.Reads() - before; n != 4 {
		t.Errorf("%d reads, want 4: one per CPU for the group, one per CPU for branches", n)
	}
}

// A member the PMU will not take into the group (EINVAL or ENOSPC on
// joining) is counted on its own, and said so; the other members stay
// grouped, and another error leaves the member unserved on that CPU.
func TestNamedGroupMemberThatCannotJoin(t *testing.T) {
	fake := countertest.New()
	fake.FailJoin("cycles", 1, unix.ENOSPC)
	specs := ipcSpecs()
	third := hw("refs", 7, 0, 1)
	third.Group = "ipc"
	fake.FailJoin("refs", 0, unix.EACCES)
	s, log := logSet(t, fake, append(specs, third)...)
	wantGroup(t, fake, "instructions", 0, "instructions", "cycles")
	wantGroup(t, fake, "instructions", 1, "instructions", "refs")
	wantGroup(t, fake, "cycles", 1) // on its own
	if a, _ := fake.Attr("cycles", 1); a.Read_format != perf.ReadFormat {
		t.Errorf("cycles on cpu1 read_format %#x, want a counter's own %#x", a.Read_format, perf.ReadFormat)
	}
	if !strings.Contains(log.String(), `"cycles" does not fit in the group ipc on cpu1 (no space left on device)`) {
		t.Errorf("log:\n%s", log)
	}
	ev, _ := s.Lookup("refs")
	if got := fmt.Sprint(s.CPUs(ev)); got != "[1]" {
		t.Errorf("refs served on %s, want [1]: EACCES is not a group that does not fit", got)
	}
	fake.Add("cycles", 1, 40, 10, 5) // scaled by its own times
	vals, active := fetch(s, 1)
	if vals[0][1] != 80 || active != 0 {
		t.Errorf("cycles %v, active %d; want cpu1 80 and the first read's 0", vals, active)
	}
	// Reopen after a reservation puts it on its own again.
	reserve(t, s)
	wantGroup(t, fake, "cycles", 1)
	if fake.OpenNow() != 7 {
		t.Errorf("%d open after Reopen, want 7", fake.OpenNow())
	}
}

// A group that opens but never runs (time_running still 0 after a second
// enabled) is split after the fetch that sees it: its members get their
// own descriptors and count from there, keeping their values.
func TestNamedGroupThatNeverRuns(t *testing.T) {
	fake := countertest.New()
	s, log := logSet(t, fake, ipcSpecs()...)
	fake.Add("instructions", 0, 0, 2e9, 0) // cpu0's group never ran
	fake.Add("instructions", 1, 30, 2e9, 2e9)
	fake.Add("cycles", 1, 10, 0, 0)
	fetch(s, 0, 1)
	s.WaitSplit()
	if !strings.Contains(log.String(), `the group ipc of "instructions", "cycles" on cpu0 has not run in 2.0s`) {
		t.Errorf("log:\n%s", log)
	}
	wantGroup(t, fake, "cycles", 0)
	wantGroup(t, fake, "instructions", 0)
	wantGroup(t, fake, "cycles", 1, "instructions", "cycles")
	if fake.OpenNow() != 6 {
		t.Errorf("%d open after the split, want 6", fake.OpenNow())
	}
	fake.Add("instructions", 0, 700, 10, 10)
	fake.Add("cycles", 0, 100, 10, 5)
	vals, _ := fetch(s, 0, 1)
	if want := "[[700 30] [200 10]]"; fmt.Sprint(vals) != want {
		t.Errorf("values after the split %v, want %s", vals, want)
	}
	// It stays split across a reservation, and no second split starts.
	reserve(t, s)
	wantGroup(t, fake, "cycles", 0)
	fetch(s, 0, 1)
	s.WaitSplit()
	if n := strings.Count(log.String(), "has not run"); n != 1 {
		t.Errorf("%d starvation lines, want 1:\n%s", n, log)
	}
}

// A named group in the kernel: cpu-clock and context-switches, a ratio's
// operands, with task-clock, in a group of their own per CPU beside the
// CPU's group of the other software events. A full fetch reads both groups
// of each CPU once, and cpu-clock counts the elapsed time on every CPU.
func TestKernelNamedGroup(t *testing.T) {
	needKernelPerf(t)
	cpus := onlineCPUs(t)
	soft := func(name string, config uint64, group string) counter.Spec {
		return counter.Spec{Name: name, Attr: unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Config: config}, CPUs: cpus, Group: group}
	}
	specs := []counter.Spec{
		soft("cpu-clock", unix.PERF_COUNT_SW_CPU_CLOCK, "cs"),
		soft("context-switches", unix.PERF_COUNT_SW_CONTEXT_SWITCHES, "cs"),
		soft("page-faults", unix.PERF_COUNT_SW_PAGE_FAULTS, ""),
		// checkClock holds cpu-clock to task-clock, read in the same group.
		soft("task-clock", unix.PERF_COUNT_SW_TASK_CLOCK, "cs"),
	}
	o := &countingOpener{}
	s, err := counter.New(specs, counter.Config{Opener: o})
	if err != nil {
		t.Fatal(err)
	}
	if sum, err := s.Open(); err != nil || len(sum.Failures) > 0 {
		t.Fatalf("Open: %v %v", err, sum.FailureLines())
	}
	defer s.Close()
	n := o.reads.Load()
	v1, w1 := readTimed(t, s, specs)
	if got, want := o.reads.Load()-n, int64(2*len(cpus)); got != want {
		t.Errorf("a full fetch made %d reads, want %d: the named group and the software group per CPU", got, want)
	}
	busyEveryCPU(t, cpus)
	time.Sleep(50 * time.Millisecond)
	v2, w2 := readTimed(t, s, specs)
	checkClock(t, s, v1, v2, w1, w2)
	for i, cpu := range cpus {
		if v2[1][i] <= v1[1][i] {
			t.Errorf("context-switches on cpu%d did not move: %d then %d", cpu, v1[1][i], v2[1][i])
		}
	}
}

// A group whose last member could not join, and whose other members then
// never run (as on an Arm PMU, which does not count a leader still
// disabled against its counters, so a group one too large is accepted but
// never scheduled, and the next member is refused with EINVAL): the split
// reopens the starved members only. The member already on its own keeps
// its one descriptor and its count.
func TestNamedGroupSplitAfterAMemberCouldNotJoin(t *testing.T) {
	fake := countertest.New()
	specs := ipcSpecs()
	third := hw("refs", 7, 0, 1)
	third.Group = "ipc"
	fake.FailJoin("refs", 0, unix.EINVAL)
	s, log := logSet(t, fake, append(specs, third)...)
	wantGroup(t, fake, "refs", 0) // on its own from the start
	if fake.OpenNow() != 8 {
		t.Fatalf("%d open, want 8: both groups, refs alone on cpu0 and branches", fake.OpenNow())
	}
	fake.Add("instructions", 0, 0, 2e9, 0) // cpu0's group never ran
	fake.Add("refs", 0, 50, 2e9, 1e9)      // refs ran half the time: 100
	fake.Add("instructions", 1, 30, 2e9, 2e9)
	ins, _ := s.Lookup("instructions")
	ref, _ := s.Lookup("refs")
	fetch(s, ins, ref)
	s.WaitSplit()
	if !strings.Contains(log.String(), `the group ipc of "instructions", "cycles" on cpu0 has not run`) {
		t.Errorf("log:\n%s", log)
	}
	if n := fake.OpenNow(); n != 8 {
		t.Errorf("%d open after the split, want 8: three on their own on cpu0, the group of three on cpu1 and branches", n)
	}
	fake.Add("refs", 0, 20, 10, 10)
	vals, _ := fetch(s, ref)
	if vals[0][0] != 120 {
		t.Errorf("refs on cpu0 = %d after the split, want 120: its own descriptor goes on counting", vals[0][0])
	}
}
