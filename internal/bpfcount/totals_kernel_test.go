package bpfcount_test

import (
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"perfevent/internal/bpfcount"
	"perfevent/internal/cgroup/cgrouptest"
)

// TestKernelTotalsStayExactAcrossCPUs runs two busy loops in one cgroup,
// each held on its own CPU, so that the program on both CPUs charges
// the cgroup's one task-clock total at once: the total grows by the
// loops' own time on CPU together, as an add that lost the other CPU's
// would not. The bounds are TestKernelChargesTheRunningCgroup's.
func TestKernelTotalsStayExactAcrossCPUs(t *testing.T) {
	c := load(t, 8, taskClock, ctxSwitch)
	for ev := range c.Events() {
		if !c.Totalled(ev) {
			t.Fatalf("event %d, a software event, is summed per CPU", ev)
		}
	}
	base := mkdirs(t, "A")
	dir := filepath.Join(base, "A")
	slot, err := c.Add(id(t, dir), dir)
	if err != nil {
		t.Fatal(err)
	}
	cpus := attachAll(t, c)
	if len(cpus) < 2 {
		t.Skipf("needs 2 online CPUs, has %v", cpus)
	}
	var pids []int
	for _, cpu := range cpus[:2] {
		pid := cgrouptest.Busy(t, dir)
		var set unix.CPUSet
		set.Set(cpu)
		if err := unix.SchedSetaffinity(pid, &set); err != nil {
			t.Fatalf("holding the loop %d on cpu%d: %v", pid, cpu, err)
		}
		pids = append(pids, pid)
	}
	loops := func() (s uint64) {
		for _, pid := range pids {
			s += onCPU(t, pid)
		}
		return s
	}
	type sample struct{ pre, post, total uint64 }
	take := func() sample {
		var s sample
		s.pre = loops()
		if err := c.Sync(); err != nil {
			t.Fatal(err)
		}
		s.post = loops()
		s.total = sum(t, c, slot, 0).Value
		return s
	}
	const intervals = 5
	var off []float64
	prev := take()
	for range intervals {
		time.Sleep(200 * time.Millisecond) // an interval to count over
		s := take()
		got, lo, hi := float64(s.total-prev.total), float64(s.pre-prev.post), float64(s.post-prev.pre)
		t.Logf("loops on CPU %.4g to %.4g ns; the cgroup's task-clock %.4g ns", lo, hi, got)
		off = append(off, outside(got, lo, hi))
		prev = s
	}
	if m := median(off); m > 0.03 {
		t.Errorf("A: task-clock is %.1f%% off its two loops' time on CPU (the median of %d intervals), want within 3%%", 100*m, intervals)
	}
	if r := c.Total(slot, 0); r.Enabled == 0 || r.Running != r.Enabled {
		t.Errorf("A: task-clock enabled %d ns, running %d ns; want equal and not 0 for a software event", r.Enabled, r.Running)
	}
}

// TestKernelLoadsAMixedSet loads the program for events of every kind,
// those summed per CPU beside those totalled, through the verifier (the
// hardware events need not open here: Load opens nothing), and checks
// that the room asked for is given where the per-CPU sums fit.
func TestKernelLoadsAMixedSet(t *testing.T) {
	events := []unix.PerfEventAttr{
		{Type: unix.PERF_TYPE_HARDWARE, Config: unix.PERF_COUNT_HW_INSTRUCTIONS},
		taskClock,
		{Type: unix.PERF_TYPE_RAW, Config: 0xc0},
		ctxSwitch,
	}
	c := load(t, 64, events...)
	want := []bool{false, true, false, true}
	for ev := range c.Events() {
		if c.Totalled(ev) != want[ev] {
			t.Errorf("event %d (type %d): totalled %v, want %v", ev, events[ev].Type, c.Totalled(ev), want[ev])
		}
	}
	if c.Room() != 64 {
		t.Errorf("room for %d cgroups, want the 64 asked for", c.Room())
	}
	if r := bpfcount.RoomFor(events, 1<<20); r >= 1<<20 || r < 1 {
		t.Errorf("RoomFor a million cgroups of 2 per-CPU events: %d", r)
	}
}
