package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"perfevent/internal/bpfcount"
	"perfevent/internal/cgroup/cgrouptest"
	"perfevent/internal/testwait"
)

// TestKernelCountsOneCgroup counts cpu-clock with PERF_FLAG_PID_CGROUP in
// a cgroup running a busy loop and in an empty one, against the loop's own
// time on CPU. It needs root and a cgroup v2 hierarchy.
func TestKernelCountsOneCgroup(t *testing.T) {
	h := kernelHierarchy(t)
	base := filepath.Join(h.Mount, fmt.Sprintf("perfevent-test-%d", os.Getpid()))
	if err := os.Mkdir(base, 0o755); err != nil {
		t.Skipf("needs root to make cgroups under %s: %v", h.Mount, err)
	}
	busy, idle := filepath.Join(base, "busy"), filepath.Join(base, "idle")
	for _, d := range []string{busy, idle} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { removeTree(t, base) })
	pid := cgrouptest.Busy(t, busy)

	// Every online CPU, not only those this test may run on: the loop
	// runs wherever the scheduler puts it.
	cpus := onlineCPUs(t)
	tr := New(Options{
		Hierarchy: h,
		Patterns:  []string{"/", "/" + filepath.Base(base) + "/*"},
		Events:    testEvents,
		CPUs:      cpus,
		Rescan:    time.Hour,
		NoNotify:  true,
	})
	tr.Start()
	defer tr.Stop()
	if n, fds := tr.Stats(); n != 3 || fds != 3*2*len(cpus) {
		t.Fatalf("%d cgroups on %d descriptors, want 3 on %d", n, fds, 3*2*len(cpus))
	}
	need := []bool{true, false}
	tr.Read(need)
	before := clocks(tr)
	c0 := cgrouptest.OnCPU(t, pid)
	time.Sleep(500 * time.Millisecond)
	tr.Read(need)
	after := clocks(tr)
	ran := float64(cgrouptest.OnCPU(t, pid) - c0)
	name := "/" + filepath.Base(base)
	got := float64(after[name+"/busy"] - before[name+"/busy"])
	if got < 0.9*ran || got > 1.1*ran {
		t.Errorf("busy cgroup: cpu-clock grew %.4g ns while the loop ran %.4g ns, want within 10%%", got, ran)
	}
	// The root cgroup counts every task, the loop among them.
	if all := float64(after["/"] - before["/"]); all < 0.9*ran {
		t.Errorf("root cgroup: cpu-clock grew %.4g ns, less than the loop's %.4g", all, ran)
	}
	if d := after[name+"/idle"] - before[name+"/idle"]; d != 0 {
		t.Errorf("idle cgroup: cpu-clock grew %d ns, want 0", d)
	}
}

func clocks(tr *Tracker) map[string]uint64 {
	paths := map[int32]string{}
	for _, in := range tr.Instances() {
		paths[in.ID] = in.Path
	}
	out := map[string]uint64{}
	for i := range tr.Len() {
		id, v, _ := tr.At(i, 0)
		out[paths[id]] = v
	}
	return out
}

// TestKernelRecreatedCgroup removes a counted cgroup and makes it again
// under the same path, as a quick service restart does, and checks that
// the new cgroup is counted (the dead one's counters would stay still),
// under the same instance, continuing from the old value; then that a
// Tracker replacing this one (a reload) continues the values too.
// In BPF mode the two Trackers share the agent's one bpfcount.Counter.
func TestKernelRecreatedCgroup(t *testing.T) {
	t.Run("perf", func(t *testing.T) { testRecreated(t, false) })
	t.Run("bpf", func(t *testing.T) { testRecreated(t, true) })
}

func testRecreated(t *testing.T, withBPF bool) {
	h := kernelHierarchy(t)
	var bpf *bpfcount.Counter
	if withBPF {
		bpf = loadBPF(t, 8)
	}
	base := filepath.Join(h.Mount, fmt.Sprintf("perfevent-test-re-%d", os.Getpid()))
	if err := os.Mkdir(base, 0o755); err != nil {
		t.Skipf("needs root to make cgroups under %s: %v", h.Mount, err)
	}
	svc := filepath.Join(base, "svc")
	if err := os.Mkdir(svc, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeTree(t, base) })
	_, stop := cgrouptest.BusyStop(t, svc)

	ids := NewIDs()
	name := "/" + filepath.Base(base) + "/svc"
	start := func() *Tracker {
		tr := New(Options{Hierarchy: h, Patterns: []string{"/" + filepath.Base(base) + "/*"}, Events: testEvents,
			CPUs: onlineCPUs(t), IDs: ids, BPF: bpf, Rescan: time.Hour, NoNotify: true})
		t.Cleanup(tr.Stop)
		tr.Start()
		return tr
	}
	tr := start()
	need := []bool{true, false}
	// grows waits, within a bound, for the instance to pass above.
	grows := func(tr *Tracker, above uint64, what string) uint64 {
		t.Helper()
		var v uint64
		var ok bool
		if !testwait.Until(testwait.Settle, func() bool {
			tr.Read(need)
			v, ok = clocks(tr)[name]
			return ok && v > above
		}) {
			t.Fatalf("%s: cpu-clock of %s stayed at %d (counted: %v), want above %d", what, name, v, ok, above)
		}
		return v
	}
	v1 := grows(tr, 1e6, "the first cgroup")
	id := tr.Instances()[0]

	stop()
	tr.Read(need)
	dead := clocks(tr)[name]
	if err := os.Remove(svc); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(svc, 0o755); err != nil {
		t.Fatal(err)
	}
	cgrouptest.Busy(t, svc)
	tr.rescan()
	v2 := grows(tr, dead+1e6, "the re-created cgroup")
	if v2 < v1 {
		t.Errorf("the value went back across the re-creation: %d, then %d", v1, v2)
	}
	if got := tr.Instances()[0]; got != id {
		t.Errorf("instance after the re-creation %v, want %v", got, id)
	}

	nu := start()
	nu.Carry(tr)
	tr.Read(need)
	last := clocks(tr)[name]
	tr.Stop()
	if v := grows(nu, last, "the next generation"); v < last {
		t.Errorf("the value went back across a reload: %d, then %d", last, v)
	}
}

// On this host the perf_event controller reaches the v2 cgroups, so the
// probe's open of a dummy event bound to a child succeeds and Reach says
// nothing; a directory that is no cgroup fails with EBADF, not the ENOENT
// that Reach takes for a controller that does not reach the cgroups.
func TestKernelReach(t *testing.T) {
	h := kernelHierarchy(t)
	child := filepath.Join(h.Mount, fmt.Sprintf("perfevent-reach-%d", os.Getpid()))
	if err := os.Mkdir(child, 0o755); err != nil {
		t.Skipf("needs root to make a cgroup under %s: %v", h.Mount, err)
	}
	t.Cleanup(func() { removeTree(t, child) })
	cpu := onlineCPUs(t)[0]
	if err := openDummy(child, cpu); err != nil {
		t.Fatalf("a dummy event bound to %s on CPU %d: %v", child, cpu, err)
	}
	if err := Reach(h, cpu); err != nil {
		t.Errorf("Reach(%s) = %v, want nil", h, err)
	}
	if err := openDummy(t.TempDir(), cpu); !errors.Is(err, unix.EBADF) {
		t.Errorf("a dummy event bound to a directory that is no cgroup: %v, want EBADF", err)
	}
}
