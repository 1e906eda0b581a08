package cgroup

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"perfevent/internal/bpfcount"
	"perfevent/internal/cgroup/cgrouptest"
	"perfevent/internal/testwait"
)

// loadBPF loads a bpfcount.Counter for testEvents attached to every
// online CPU, or skips naming what is missing.
func loadBPF(tb testing.TB, cgroups int) *bpfcount.Counter {
	return loadBPFOf(tb, cgroups, testEvents)
}

func loadBPFOf(tb testing.TB, cgroups int, events []Event) *bpfcount.Counter {
	tb.Helper()
	return loadBPFFor(tb, cgroups, events, 0)
}

// loadBPFFor is loadBPFOf with the maps made for possible CPUs (0: this
// machine's), skipping when the machine has more.
func loadBPFFor(tb testing.TB, cgroups int, events []Event, possible int) *bpfcount.Counter {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("needs root, to load BPF programs (CAP_BPF)")
	}
	attrs := make([]unix.PerfEventAttr, len(events))
	for i, e := range events {
		attrs[i] = e.Attr
	}
	c, err := bpfcount.Load(bpfcount.Options{Events: attrs, Cgroups: cgroups, PossibleCPUs: possible})
	if err != nil {
		tb.Skipf("needs BPF programs of type perf_event and raw_tp: %v", err)
	}
	tb.Cleanup(c.Close)
	if possible != 0 && c.CPUs() != possible {
		tb.Skipf("this machine has %d possible CPUs, more than the %d to measure", c.CPUs(), possible)
	}
	if err := c.AttachOnly(onlineCPUs(tb)); err != nil {
		tb.Skipf("needs the cgroup-switches software event (Linux 5.13): %v", err)
	}
	return c
}

// TestKernelBPFCountsAsPerf counts the same cgroups, a busy loop's, its
// parent and an idle one, with a perf Tracker and a BPF one side by side:
// the values agree, the parent is charged its child, and the BPF Tracker
// holds no descriptor per cgroup.
func TestKernelBPFCountsAsPerf(t *testing.T) {
	h := kernelHierarchy(t)
	c := loadBPF(t, 16)
	base := filepath.Join(h.Mount, fmt.Sprintf("perfevent-test-bpf-%d", os.Getpid()))
	if err := os.Mkdir(base, 0o755); err != nil {
		t.Skipf("needs root to make cgroups under %s: %v", h.Mount, err)
	}
	mkdirs(t, base, "busy", "idle")
	t.Cleanup(func() { removeTree(t, base) })
	cgrouptest.Busy(t, filepath.Join(base, "busy"))
	name := "/" + filepath.Base(base)
	start := func(bpf *bpfcount.Counter) *Tracker {
		tr := New(Options{Hierarchy: h, Patterns: []string{name, name + "/*"}, Events: testEvents,
			CPUs: onlineCPUs(t), BPF: bpf, Rescan: time.Hour, NoNotify: true})
		tr.Start()
		t.Cleanup(tr.Stop)
		return tr
	}
	perfT, bpfT := start(nil), start(c)
	if n, fds := bpfT.Stats(); n != 3 || fds != c.FDs() {
		t.Fatalf("BPF: %d cgroups on %d descriptors, want 3 on the counter's %d", n, fds, c.FDs())
	}
	need := []bool{true, true}
	read := func() (p, b map[string]uint64) {
		perfT.Read(need)
		bpfT.Read(need)
		return clocks(perfT), clocks(bpfT)
	}
	busy, parent, idle := name+"/busy", name, name+"/idle"
	// The median of a few intervals: the first may be off by tens of ms
	// on a loaded VM, as the loop's shell moved itself into the cgroup
	// while it ran, and BPF charges the slice in progress at a move to
	// the new cgroup (perf switches its counters at the move).
	const intervals = 5
	var offs []float64
	p0, b0 := read()
	for range intervals {
		time.Sleep(200 * time.Millisecond) // an interval to count over
		p1, b1 := read()
		d := func(m1, m0 map[string]uint64, n string) float64 { return float64(m1[n] - m0[n]) }
		t.Logf("perf busy %.4g parent %.4g; BPF busy %.4g parent %.4g idle %.4g",
			d(p1, p0, busy), d(p1, p0, parent), d(b1, b0, busy), d(b1, b0, parent), d(b1, b0, idle))
		pb, bb := d(p1, p0, busy), d(b1, b0, busy)
		offs = append(offs, math.Abs(bb-pb)/max(pb, 1))
		if bp := d(b1, b0, parent); bp < bb {
			t.Errorf("parent: cpu-clock grew %.4g ns in BPF mode, less than its busy child's %.4g", bp, bb)
		}
		if bi := d(b1, b0, idle); bi != 0 {
			t.Errorf("idle cgroup: cpu-clock grew %.4g ns in BPF mode, want 0", bi)
		}
		p0, b0 = p1, b1
	}
	slices.Sort(offs)
	if m := offs[len(offs)/2]; m > 0.05 {
		t.Errorf("busy cgroup: cpu-clock in BPF mode is %.1f%% off perf mode's (the median of %d intervals), want within 5%%", 100*m, intervals)
	}
}

// TestKernelBPFChurnKeepsDescriptors makes and removes 200 cgroups under a
// BPF Tracker: the process's descriptors are as many after as before, and
// every cgroup was counted while it lived.
func TestKernelBPFChurnKeepsDescriptors(t *testing.T) {
	h := kernelHierarchy(t)
	c := loadBPF(t, 64)
	base := filepath.Join(h.Mount, fmt.Sprintf("perfevent-test-bpfchurn-%d", os.Getpid()))
	if err := os.Mkdir(base, 0o755); err != nil {
		t.Skipf("needs root to make cgroups under %s: %v", h.Mount, err)
	}
	t.Cleanup(func() { removeTree(t, base) })
	name := "/" + filepath.Base(base)
	tr := New(Options{Hierarchy: h, Patterns: []string{name + "/*"}, Events: testEvents,
		CPUs: onlineCPUs(t), BPF: c, Rescan: time.Hour, NoNotify: true})
	tr.Start()
	defer tr.Stop()
	fds := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}
	before := fds()
	for round := range 4 {
		for i := range 50 {
			mkdirs(t, base, fmt.Sprintf("c%d-%d", round, i))
		}
		tr.rescan()
		if n := tr.Counted(); n != 50 {
			t.Fatalf("round %d: %d cgroups counted, want 50", round, n)
		}
		if got := fds(); got != before {
			t.Errorf("round %d: %d descriptors open with 50 cgroups counted, %d with none", round, got, before)
		}
		for i := range 50 {
			if err := os.Remove(filepath.Join(base, fmt.Sprintf("c%d-%d", round, i))); err != nil {
				t.Fatal(err)
			}
		}
		tr.rescan()
		if !testwait.Until(testwait.Settle, func() bool { return tr.Counted() == 0 && c.Counted() == 0 }) {
			t.Fatalf("round %d: %d cgroups still counted (%d in the map) after all were removed", round, tr.Counted(), c.Counted())
		}
	}
	if got := fds(); got != before {
		t.Errorf("%d descriptors open after 200 cgroups came and went, %d before", got, before)
	}
}

// TestKernelBPFThroughPerfalloc: perfalloc's release detaches the BPF
// counter's CPUs, so that the PMU is free, and the values freeze; Resume
// asks for Reopen, which attaches them again, and the values count on.
func TestKernelBPFThroughPerfalloc(t *testing.T) {
	h := kernelHierarchy(t)
	c := loadBPF(t, 8)
	base := filepath.Join(h.Mount, fmt.Sprintf("perfevent-test-bpfpa-%d", os.Getpid()))
	if err := os.Mkdir(base, 0o755); err != nil {
		t.Skipf("needs root to make cgroups under %s: %v", h.Mount, err)
	}
	mkdirs(t, base, "busy")
	t.Cleanup(func() { removeTree(t, base) })
	pid := cgrouptest.Busy(t, filepath.Join(base, "busy"))
	cpus := onlineCPUs(t)
	tr := New(Options{Hierarchy: h, Patterns: []string{"/" + filepath.Base(base) + "/*"}, Events: testEvents,
		CPUs: cpus, BPF: c, Rescan: time.Hour, NoNotify: true})
	tr.Start()
	defer tr.Stop()
	name := "/" + filepath.Base(base) + "/busy"
	need := []bool{true, false}
	value := func() uint64 { tr.Read(need); return clocks(tr)[name] }
	ran := func(ns uint64) {
		t.Helper()
		from := cgrouptest.OnCPU(t, pid)
		if !testwait.Until(testwait.Settle, func() bool { return cgrouptest.OnCPU(t, pid) > from+ns }) {
			t.Fatalf("the loop did not run %d ns", ns)
		}
	}
	ran(1e7)
	if v := value(); v == 0 {
		t.Fatal("the busy cgroup counted nothing before perfalloc")
	}

	tr.Close()
	if got := c.Attached(); len(got) != 0 {
		t.Errorf("CPUs %v still attached under perfalloc, want none", got)
	}
	frozen := value()
	ran(5e7)
	if v := value(); v != frozen {
		t.Errorf("cpu-clock went from %d to %d under perfalloc, want it frozen", frozen, v)
	}
	if !tr.Resume() {
		t.Fatal("Resume asks for no Reopen, though the CPUs are detached")
	}
	tr.Reopen()
	if got := c.Attached(); !slices.Equal(got, cpus) {
		t.Errorf("CPUs %v attached after perfalloc, want %v", got, cpus)
	}
	if !testwait.Until(testwait.Settle, func() bool { return value() > frozen+1e7 }) {
		t.Errorf("cpu-clock stayed at %d after perfalloc", value())
	}
}

// TestKernelBPFParentKeepsAGoneChildsCounts counts a busy child and its
// parent with BPF, where the program charges the child alone and the
// parent's value adds the child's: the loop is stopped and the child
// removed with no fetch between, and the parent's value after still
// holds what the loop ran since the last fetch.
func TestKernelBPFParentKeepsAGoneChildsCounts(t *testing.T) {
	h := kernelHierarchy(t)
	c := loadBPF(t, 8)
	base := filepath.Join(h.Mount, fmt.Sprintf("perfevent-test-bpfgone-%d", os.Getpid()))
	if err := os.Mkdir(base, 0o755); err != nil {
		t.Skipf("needs root to make cgroups under %s: %v", h.Mount, err)
	}
	mkdirs(t, base, "busy")
	t.Cleanup(func() { removeTree(t, base) })
	pid, stop := cgrouptest.BusyStop(t, filepath.Join(base, "busy"))
	name := "/" + filepath.Base(base)
	tr := New(Options{Hierarchy: h, Patterns: []string{name, name + "/*"}, Events: testEvents,
		CPUs: onlineCPUs(t), BPF: c, Rescan: time.Hour, NoNotify: true})
	tr.Start()
	defer tr.Stop()
	need := []bool{true, false}
	tr.Read(need)
	before := clocks(tr)[name]
	from := cgrouptest.OnCPU(t, pid)
	if !testwait.Until(testwait.Settle, func() bool { return cgrouptest.OnCPU(t, pid) > from+1e8 }) {
		t.Fatal("the loop did not run 100 ms")
	}
	ran := cgrouptest.OnCPU(t, pid) - from
	stop()
	if err := os.Remove(filepath.Join(base, "busy")); err != nil {
		t.Fatal(err)
	}
	tr.rescan()
	if n := tr.Counted(); n != 1 {
		t.Fatalf("%d cgroups counted after the child went, want its parent alone", n)
	}
	tr.Read(need)
	// schedstat lags the loop by up to a tick: a tenth of the loop's
	// time may be missing from the reference, not from the parent.
	after := clocks(tr)[name]
	if after < before || after-before < ran*9/10 {
		t.Errorf("the parent's cpu-clock went from %d to %d ns over the child's last 100 ms and its removal, while the loop ran %d ns", before, after, ran)
	}
}
