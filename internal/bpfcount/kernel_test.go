package bpfcount_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"perfevent/internal/bpfcount"
	"perfevent/internal/cgroup/cgrouptest"
	"perfevent/internal/hostfs"
	"perfevent/internal/perf"
	"perfevent/internal/testneed"
	"perfevent/internal/testwait"
)

var (
	taskClock = unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_TASK_CLOCK}
	ctxSwitch = unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_CONTEXT_SWITCHES}
)

// cgroup2 is the mount point of the cgroup v2 hierarchy, from mountinfo.
func cgroup2(tb testing.TB) string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		tb.Skipf("needs /proc/self/mountinfo: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if ok && len(f) >= 5 && len(g) >= 1 && g[0] == "cgroup2" {
			return f[4]
		}
	}
	tb.Skip("needs a cgroup v2 hierarchy mounted")
	return ""
}

// load loads a Counter of events, or skips naming what the kernel lacks.
func load(tb testing.TB, cgroups int, events ...unix.PerfEventAttr) *bpfcount.Counter {
	tb.Helper()
	testneed.Root(tb, "to load BPF programs (CAP_BPF)")
	testneed.PerfEvents(tb)
	c, err := bpfcount.Load(bpfcount.Options{Events: events, Cgroups: cgroups})
	if err != nil {
		bpfcount.SkipUnlessUnsupported(tb, err)
	}
	tb.Cleanup(c.Close)
	return c
}

func attachAll(tb testing.TB, c *bpfcount.Counter) []int {
	tb.Helper()
	cpus, err := (hostfs.FS{}).OnlineCPUs()
	if err != nil {
		tb.Fatal(err)
	}
	for _, cpu := range cpus {
		if err := c.Attach(cpu); err != nil {
			if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EINVAL) {
				tb.Skipf("needs the cgroup-switches software event (Linux 5.13): %v", err)
			}
			tb.Fatal(err)
		}
	}
	return cpus
}

// mkdirs makes a directory per name under a new one of the test's in the
// cgroup v2 hierarchy, and removes them all when the test ends (register
// busy loops after it: a cgroup with a task in it cannot be removed).
func mkdirs(tb testing.TB, names ...string) (base string) {
	tb.Helper()
	base = filepath.Join(cgroup2(tb), fmt.Sprintf("perfevent-bpfcount-%d", os.Getpid()))
	if err := os.Mkdir(base, 0o755); err != nil {
		tb.Skipf("needs to make cgroups under %s: %v", filepath.Dir(base), err)
	}
	tb.Cleanup(func() {
		for i := len(names) - 1; i >= 0; i-- {
			os.Remove(filepath.Join(base, names[i]))
		}
		if err := os.Remove(base); err != nil {
			tb.Errorf("removing %s: %v", base, err)
		}
	})
	for _, n := range names {
		if err := os.Mkdir(filepath.Join(base, n), 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	return base
}

// id is a cgroup's id: its directory's inode on cgroup2.
func id(tb testing.TB, dir string) uint64 {
	tb.Helper()
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		tb.Fatal(err)
	}
	return st.Ino
}

// sum is slot's event ev summed over CPUs: its total, for a Totalled
// event, which has no sums per CPU.
func sum(tb testing.TB, c *bpfcount.Counter, slot, ev int) bpfcount.Reading {
	tb.Helper()
	var s bpfcount.Reading
	for cpu := range c.CPUs() {
		r := c.Read(slot, ev, cpu)
		s.Value += r.Value
		s.Enabled += r.Enabled
		s.Running += r.Running
	}
	if !c.Totalled(ev) {
		return s
	}
	if s != (bpfcount.Reading{}) {
		tb.Fatalf("slot %d event %d is totalled, and Read finds %+v on the CPUs", slot, ev, s)
	}
	return c.Total(slot, ev)
}

// cgroupClock opens task-clock on dir's cgroup the perf way
// (PERF_FLAG_PID_CGROUP) on each CPU, and returns a function that reads
// the sum.
func cgroupClock(tb testing.TB, dir string, cpus []int) func() uint64 {
	tb.Helper()
	d, err := os.Open(dir)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { d.Close() })
	attr := taskClock
	attr.Size = uint32(unsafe.Sizeof(attr))
	attr.Read_format = perf.ReadFormat
	var fds []*perf.FD
	for _, cpu := range cpus {
		fd, err := perf.OpenCgroupCPU(&attr, int(d.Fd()), cpu)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { fd.Close() })
		fds = append(fds, fd)
	}
	return func() uint64 {
		var s uint64
		for _, fd := range fds {
			c, err := fd.Read()
			if err != nil {
				tb.Fatal(err)
			}
			s += c.Value
		}
		return s
	}
}

// TestKernelChargesTheRunningCgroup runs a busy loop in the cgroup A/child
// and nothing in B, and checks task-clock as the program charges it: the
// child's grows by the loop's own time on CPU, its parent A's by as much,
// B's hardly at all, and A's as a perf cgroup counter on A does.
//
// On a busy machine this test may be preempted anywhere, so each reference
// is read just before and just after each Sync, and the charge must lie
// between the reference's growth over the inner and over the outer
// window, with 3% for the switches' own time. A perf cgroup counter read
// while its cgroup runs on another CPU can lag by the slice in progress
// (its readings before and after a Sync are often equal), so A's charge
// may differ from it by 5%.
func TestKernelChargesTheRunningCgroup(t *testing.T) {
	c := load(t, 8, taskClock, ctxSwitch)
	base := mkdirs(t, "A", "A/child", "B")
	slots := map[string]int{}
	for _, n := range []string{"A", "A/child", "B"} {
		s, err := c.Add(id(t, filepath.Join(base, n)), filepath.Join(base, n))
		if err != nil {
			t.Fatal(err)
		}
		slots[n] = s
	}
	cpus := attachAll(t, c)
	pid := cgrouptest.Busy(t, filepath.Join(base, "A/child"))
	perfA := cgroupClock(t, filepath.Join(base, "A"), cpus)

	type sample struct {
		bpf                                  map[string]uint64
		loopPre, loopPost, perfPre, perfPost uint64
		// The child's sums just before and after the others are read:
		// the program may charge it on the loop's CPU meanwhile.
		childPre, childPost uint64
	}
	take := func() sample {
		var s sample
		s.loopPre, s.perfPre = onCPU(t, pid), perfA()
		if err := c.Sync(); err != nil {
			t.Fatal(err)
		}
		s.perfPost, s.loopPost = perfA(), onCPU(t, pid)
		s.bpf = map[string]uint64{}
		s.childPre = sum(t, c, slots["A/child"], 0).Value
		for n, slot := range slots {
			s.bpf[n] = sum(t, c, slot, 0).Value
		}
		s.childPost = sum(t, c, slots["A/child"], 0).Value
		return s
	}
	// The median of several intervals: the first may be off by tens of
	// ms on a loaded VM, as the loop's shell moved itself into the cgroup
	// while it ran, and the program charges the slice in progress at a
	// move to the new cgroup.
	const intervals = 5
	var child, parent, idle []float64
	prev := take()
	for range intervals {
		time.Sleep(200 * time.Millisecond) // an interval to count over
		s := take()
		d := func(n string) float64 { return float64(s.bpf[n] - prev.bpf[n]) }
		// Each reference's growth over the outer window (before the
		// first Sync to after the second) and the inner one.
		loopHi, loopLo := float64(s.loopPost-prev.loopPre), float64(s.loopPre-prev.loopPost)
		perfHi, perfLo := float64(s.perfPost-prev.perfPre), float64(s.perfPre-prev.perfPost)
		t.Logf("loop on CPU %.4g to %.4g ns; perf cgroup A %.4g to %.4g ns; task-clock child %.4g, A %.4g, B %.4g", loopLo, loopHi, perfLo, perfHi, d("A/child"), d("A"), d("B"))
		child = append(child, outside(d("A/child"), loopLo, loopHi))
		parent = append(parent, outside(d("A"), perfLo, perfHi))
		idle = append(idle, d("B")/max(loopLo, 1))
		if lo, hi := float64(s.childPre-prev.childPost), float64(s.childPost-prev.childPre); d("A") < lo || d("A") > hi {
			t.Errorf("A: task-clock grew %.4g ns, its only busy child's %.4g to %.4g", d("A"), lo, hi)
		}
		prev = s
	}
	if m := median(child); m > 0.03 {
		t.Errorf("A/child: task-clock is %.1f%% off the loop's time on CPU (the median of %d intervals), want within 3%%", 100*m, intervals)
	}
	if m := median(parent); m > 0.05 {
		t.Errorf("A: task-clock is %.1f%% off a perf cgroup counter on A (the median of %d intervals), want within 5%%", 100*m, intervals)
	}
	if m := median(idle); m > 0.01 {
		t.Errorf("B (idle): task-clock grew %.1f%% of the loop's time (the median of %d intervals), want about 0", 100*m, intervals)
	}
	if r := sum(t, c, slots["A/child"], 0); r.Enabled == 0 || r.Running != r.Enabled {
		t.Errorf("A/child: task-clock enabled %d ns, running %d ns; want equal and not 0 for a software event", r.Enabled, r.Running)
	}
	if n := sum(t, c, slots["A/child"], 1).Value; n == 0 {
		t.Errorf("A/child: no context switch charged, though the loop shares the CPUs with this test")
	}
}

// outside is how far got lies outside [lo, hi], as a fraction of the
// bound it passes.
func outside(got, lo, hi float64) float64 {
	switch {
	case got < lo:
		return (lo - got) / max(lo, 1)
	case got > hi:
		return (got - hi) / max(hi, 1)
	}
	return 0
}

func median(x []float64) float64 {
	x = slices.Clone(x)
	slices.Sort(x)
	return x[len(x)/2]
}

// onCPU is the nanoseconds process pid has run, from its CPU clock: unlike
// /proc/PID/schedstat, which lags by up to a tick while the task runs, the
// clock brings a running task's time up to date when read.
func onCPU(tb testing.TB, pid int) uint64 {
	tb.Helper()
	const cpuclockSched = 2 // CPUCLOCK_SCHED; a process clock has bit 2 clear
	var ts unix.Timespec
	if err := unix.ClockGettime(int32(^pid<<3|cpuclockSched), &ts); err != nil {
		tb.Fatalf("the CPU clock of process %d: %v", pid, err)
	}
	return uint64(ts.Nano())
}

// openFDs is the number of this process's open descriptors.
func openFDs(tb testing.TB) int {
	tb.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		tb.Fatal(err)
	}
	return len(ents)
}

// TestKernelDescriptorsStayConstant adds and removes 200 cgroups while
// counting: the process holds as many descriptors after as before, and a
// slot freed is reused from zero.
func TestKernelDescriptorsStayConstant(t *testing.T) {
	c := load(t, 16, taskClock, ctxSwitch)
	attachAll(t, c)
	base := mkdirs(t)
	before, held := openFDs(t), c.FDs()
	for i := range 200 {
		dir := filepath.Join(base, fmt.Sprintf("c%d", i))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		cid := id(t, dir)
		if _, err := c.Add(cid, dir); err != nil {
			t.Fatal(err)
		}
		if i%50 == 0 {
			if err := c.Sync(); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.Remove(cid); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(dir); err != nil {
			t.Fatal(err)
		}
	}
	if got := openFDs(t); got != before {
		t.Errorf("%d descriptors open after 200 cgroups came and went, %d before", got, before)
	}
	if got := c.FDs(); got != held {
		t.Errorf("the counter holds %d descriptors after 200 cgroups, %d before", got, held)
	}
	if n := c.Counted(); n != 0 {
		t.Errorf("%d cgroups counted after all were removed", n)
	}
}

// TestKernelDeepCgroupLeavesItsSums counts a cgroup 12 levels below the
// test's own and the test's: a busy loop in the deep one is charged to
// both (the program looks deeper than a few levels), and when the deep
// one is removed its sums stay in the test's cgroup, whose value does
// not go back, and the loop is charged to it from then on.
func TestKernelDeepCgroupLeavesItsSums(t *testing.T) {
	c := load(t, 8, taskClock)
	var names []string
	p := ""
	for i := range 12 {
		p = filepath.Join(p, fmt.Sprintf("d%d", i))
		names = append(names, p)
	}
	base := mkdirs(t, names...)
	deep := filepath.Join(base, p)
	top, err := c.Add(id(t, base), base)
	if err != nil {
		t.Fatal(err)
	}
	deepID := id(t, deep)
	low, err := c.Add(deepID, deep)
	if err != nil {
		t.Fatal(err)
	}
	attachAll(t, c)
	pid := cgrouptest.Busy(t, deep)
	charged := func(slot int, over uint64) bool {
		return testwait.Until(testwait.Settle, func() bool {
			if err := c.Sync(); err != nil {
				t.Fatal(err)
			}
			return sum(t, c, slot, 0).Value > over
		})
	}
	from := onCPU(t, pid)
	if !testwait.Until(testwait.Settle, func() bool { return onCPU(t, pid) > from+uint64(50*time.Millisecond) }) {
		t.Fatal("the loop did not run 50 ms")
	}
	if !charged(low, uint64(20*time.Millisecond)) {
		t.Fatalf("a cgroup %d levels below the test's was charged %d ns of task-clock while a loop ran in it", len(names), sum(t, c, low, 0).Value)
	}
	if err := c.Sync(); err != nil {
		t.Fatal(err)
	}
	// The descendant first: the program may charge it meanwhile.
	lowBefore := sum(t, c, low, 0).Value
	before := sum(t, c, top, 0).Value
	if before < lowBefore {
		t.Errorf("the test's cgroup counted %d ns of task-clock, less than the %d of its busy descendant", before, lowBefore)
	}
	if err := c.Remove(deepID); err != nil {
		t.Fatal(err)
	}
	if after := sum(t, c, top, 0).Value; after < before {
		t.Errorf("the test's cgroup counted %d ns of task-clock after its counted descendant went, %d before", after, before)
	}
	if !charged(top, before+uint64(20*time.Millisecond)) {
		t.Errorf("the test's cgroup was not charged the loop left in its uncounted descendant: %d ns of task-clock, %d before", sum(t, c, top, 0).Value, before)
	}
}

// TestKernelCacheFollowsTheCountedSet runs a busy loop in B, below the
// test's counted cgroup, while the set of counted cgroups changes: the
// program remembers per CPU which slot a cgroup's walk found, so each
// change must reach it. B is first charged to the test's cgroup (cached
// as not counted itself), then, once added, to its own slot; once
// removed, to the test's cgroup again, and C, idle, added after it and
// given B's old slot, must not be charged B's loop.
func TestKernelCacheFollowsTheCountedSet(t *testing.T) {
	c := load(t, 8, taskClock)
	base := mkdirs(t, "B", "C")
	b, cDir := filepath.Join(base, "B"), filepath.Join(base, "C")
	top, err := c.Add(id(t, base), base)
	if err != nil {
		t.Fatal(err)
	}
	attachAll(t, c)
	pid := cgrouptest.Busy(t, b)
	value := func(slot int) uint64 {
		if err := c.Sync(); err != nil {
			t.Fatal(err)
		}
		return sum(t, c, slot, 0).Value
	}
	grows := func(slot int, by uint64) bool {
		from := value(slot)
		return testwait.Until(testwait.Settle, func() bool { return value(slot) > from+by })
	}
	const slice = uint64(20 * time.Millisecond)
	from := onCPU(t, pid)
	if !testwait.Until(testwait.Settle, func() bool { return onCPU(t, pid) > from+uint64(50*time.Millisecond) }) {
		t.Fatal("the loop did not run 50 ms")
	}
	if !grows(top, slice) {
		t.Fatalf("the test's cgroup was not charged the loop in its uncounted child: %d ns of task-clock", value(top))
	}
	bID := id(t, b)
	slotB, err := c.Add(bID, b)
	if err != nil {
		t.Fatal(err)
	}
	if !grows(slotB, slice) {
		t.Fatalf("B, counted after its loop ran, was charged %d ns of task-clock: the program kept charging its parent", value(slotB))
	}
	if err := c.Remove(bID); err != nil {
		t.Fatal(err)
	}
	slotC, err := c.Add(id(t, cDir), cDir)
	if err != nil {
		t.Fatal(err)
	}
	if slotC != slotB {
		t.Fatalf("C took slot %d, not B's freed %d", slotC, slotB)
	}
	before := value(top)
	if !grows(top, 2*slice) {
		t.Fatalf("the test's cgroup was not charged the loop in B after B was no longer counted: %d ns of task-clock, %d before", value(top), before)
	}
	if got := value(slotC); got > uint64(time.Millisecond) {
		t.Errorf("C, idle, was charged %d ns of task-clock in the slot B had: the program kept charging B's slot", got)
	}
}
