package counter_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"perfevent/internal/cgroup/cgrouptest"
	"perfevent/internal/counter"
	"perfevent/internal/perf"
)

// countingOpener opens real counters and counts their reads: each Read or
// ReadGroup of a perf.FD is exactly one read() system call.
// base, if set, opens the counters instead of KernelOpener.
type countingOpener struct {
	reads atomic.Int64
	base  counter.Opener
}

type countingSource struct {
	counter.Source
	o *countingOpener
}

func (o *countingOpener) Open(event string, attr *unix.PerfEventAttr, cpu int, leader counter.Source) (counter.Source, error) {
	if leader != nil {
		leader = leader.(*countingSource).Source
	}
	base := o.base
	if base == nil {
		base = counter.KernelOpener{}
	}
	src, err := base.Open(event, attr, cpu, leader)
	if err != nil {
		return nil, err
	}
	return &countingSource{src, o}, nil
}

func (c *countingSource) Read() (perf.Count, error) {
	c.o.reads.Add(1)
	return c.Source.Read()
}

func (c *countingSource) ReadGroup(v []uint64) (uint64, uint64, error) {
	c.o.reads.Add(1)
	return c.Source.ReadGroup(v)
}

// perfFDs counts this process's perf event descriptors.
func perfFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatalf("listing /proc/self/fd: %v", err)
	}
	n := 0
	for _, e := range ents {
		if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && strings.Contains(target, "perf_event") {
			n++
		}
	}
	return n
}

// TestKernelGroupReads is the agent's usual set on a VM, the seven
// software events and (on x86) msr/tsc on every CPU, with the tracepoint
// sched:sched_switch where tracefs has it: one descriptor per event per
// CPU as before, but a full fetch reads each CPU's group once, msr/tsc and
// the tracepoint inside it, and every member counts without multiplexing.
func TestKernelGroupReads(t *testing.T) {
	needKernelPerf(t)
	cpus := onlineCPUs(t)
	specs := countingSpecs(t, cpus)
	if id, ok := schedSwitchID(t); ok {
		specs = append(specs, counter.Spec{Name: "sched:sched_switch", Attr: unix.PerfEventAttr{Type: unix.PERF_TYPE_TRACEPOINT, Config: id}, CPUs: cpus})
	}

	o := &countingOpener{}
	s, err := counter.New(specs, counter.Config{Opener: o, JoinSoftware: agentJoin(t)})
	if err != nil {
		t.Fatal(err)
	}
	before := perfFDs(t)
	sum, err := s.Open()
	if err != nil || len(sum.Failures) > 0 {
		t.Fatalf("Open: %v %v", err, sum.FailureLines())
	}
	defer s.Close()
	if want := len(specs) * len(cpus); sum.FDs != want || perfFDs(t)-before != want {
		t.Errorf("%d descriptors in the summary, %d new in /proc/self/fd; want %d: one per event per CPU", sum.FDs, perfFDs(t)-before, want)
	}

	read := func() [][]uint64 {
		n := o.reads.Load()
		vals := readAll(t, s, specs)
		if got, want := o.reads.Load()-n, int64(len(cpus)); got != want {
			t.Errorf("a full fetch made %d reads, want %d: one group per CPU, msr/tsc and the tracepoint included", got, want)
		}
		return vals
	}
	w1 := window{start: time.Now()}
	v1 := read()
	w1.end = time.Now()
	busyEveryCPU(t, cpus)
	time.Sleep(50 * time.Millisecond)
	w2 := window{start: time.Now()}
	v2 := read()
	w2.end = time.Now()
	checkCounting(t, s, specs, v1, v2, w1, w2, sum.FDs)

	// Close and reopen the groups: every descriptor goes and comes back,
	// and the members count again.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if n := perfFDs(t); n != before {
		t.Errorf("%d perf descriptors after Close, want %d", n, before)
	}
	if sum, err = s.Reopen(); err != nil || sum.FDs != len(specs)*len(cpus) || perfFDs(t)-before != sum.FDs {
		t.Fatalf("Reopen: %v %v, %d new perf descriptors", sum, err, perfFDs(t)-before)
	}
	v3 := read()
	busyEveryCPU(t, cpus)
	time.Sleep(20 * time.Millisecond)
	v4 := read()
	for ev, sp := range specs {
		for i, cpu := range s.CPUs(ev) {
			if v4[ev][i] <= v3[ev][i] && !mayStandStill[sp.Name] {
				t.Errorf("after reopen %s cpu%d went from %d to %d", sp.Name, cpu, v3[ev][i], v4[ev][i])
			}
		}
	}
}

// cgroup2Mount finds where the cgroup v2 hierarchy is mounted, or skips.
func cgroup2Mount(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		t.Skipf("needs /proc/self/mounts: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[2] == "cgroup2" {
			return f[1]
		}
	}
	t.Skip("needs a cgroup v2 hierarchy mounted")
	return ""
}

// TestKernelCgroupMSRInGroup counts a cgroup running a busy loop with
// cpu-clock and msr/tsc (PERF_FLAG_PID_CGROUP): msr/tsc sits in each CPU's
// software group there too, one read per CPU, and it counts TSC ticks only
// while the cgroup runs, at a clock rate a TSC can have.
func TestKernelCgroupMSRInGroup(t *testing.T) {
	needKernelPerf(t)
	cpus := onlineCPUs(t)
	const msrType = "/sys/bus/event_source/devices/msr/type"
	if _, err := os.Stat(msrType); err != nil {
		t.Skipf("needs the msr PMU (x86): %v", err)
	}
	dir := filepath.Join(cgroup2Mount(t), fmt.Sprintf("perfevent-msr-test-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("needs root to make a cgroup: %v", err)
	}
	t.Cleanup(func() {
		if err := os.Remove(dir); err != nil {
			t.Errorf("removing %s: %v", dir, err)
		}
	})
	pid := cgrouptest.Busy(t, dir)
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)

	specs := []counter.Spec{
		{Name: "cpu-clock", Attr: unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_CPU_CLOCK}, CPUs: cpus},
		{Name: "msr/tsc", Attr: unix.PerfEventAttr{Type: uint32(sysfsInt(t, msrType))}, CPUs: cpus},
	}
	o := &countingOpener{base: counter.CgroupOpener{Dir: fd}}
	s, err := counter.New(specs, counter.Config{Opener: o, JoinSoftware: agentJoin(t)})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := s.Open()
	if err != nil || len(sum.Failures) > 0 {
		t.Fatalf("Open: %v %v", err, sum.FailureLines())
	}
	defer s.Close()
	total := func() (clock, tsc uint64) {
		n := o.reads.Load()
		f := s.Begin()
		defer f.End()
		f.NeedAll()
		f.Read()
		if got := o.reads.Load() - n; got != int64(len(cpus)) {
			t.Errorf("a full fetch made %d reads, want %d: one group per CPU, msr/tsc included", got, len(cpus))
		}
		for i, cpu := range cpus {
			clock += f.Value(0, i)
			tsc += f.Value(1, i)
			// A cgroup's times advance only while it runs on the
			// CPU; msr/tsc shares cpu-clock's, whatever they are.
			if d0, d1 := f.Dutycycle(0, i), f.Dutycycle(1, i); d0 != d1 || (d0 != 0 && d0 < 0.99) {
				t.Errorf("cpu%d: dutycycles cpu-clock %v msr/tsc %v, want the same, 0 or 1", cpu, d0, d1)
			}
		}
		return clock, tsc
	}
	// The loop's run time is read on both sides of each reading, which
	// brackets what cpu-clock may count however long the test's thread
	// waits for a CPU in between (a factor around one read of it was not
	// enough on a busy machine). schedstat adds the running task's time
	// at the scheduler's tick, so each side may be a tick or two behind.
	const tickSlack = 10 * time.Millisecond
	r1a := cgrouptest.OnCPU(t, pid)
	c1, t1 := total()
	r1b := cgrouptest.OnCPU(t, pid)
	time.Sleep(300 * time.Millisecond)
	r2a := cgrouptest.OnCPU(t, pid)
	c2, t2 := total()
	r2b := cgrouptest.OnCPU(t, pid)
	clock, tsc := float64(c2-c1), float64(t2-t1)
	least, most := time.Duration(r2a-r1b), time.Duration(r2b-r1a)
	low, high := time.Duration(float64(least)*(1-clockSlack))-tickSlack, time.Duration(float64(most)*(1+clockSlack))+tickSlack
	if d := time.Duration(c2 - c1); c2 < c1 || d < low || d > high {
		t.Errorf("cpu-clock grew %v while the loop ran %v to %v", d, least, most)
	}
	ghz := tsc / clock
	t.Logf("the cgroup ran %.4g ns of cpu-clock, %.4g msr/tsc ticks: %.3g GHz", clock, tsc, ghz)
	if ghz < 0.1 || ghz > 10 {
		t.Errorf("msr/tsc grew %.4g ticks in %.4g ns of the cgroup on CPU: %.3g GHz, not a TSC's rate", tsc, clock, ghz)
	}
}
