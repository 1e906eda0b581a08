package bpfcount_test

import (
	"testing"
	"time"

	"perfevent/internal/privilege"
	"perfevent/internal/testexec"
	"perfevent/internal/testneed"
)

// TestKernelAfterThePrivilegeDrop loads as root and then becomes an
// ordinary user with CAP_PERFMON alone, as the agent does, and checks
// what the agent relies on afterwards: a cgroup added to the map and
// another removed, a Sync, a CPU detached and attached again (its events
// reopened into the array, the program attached to a new cgroup-switches
// event), and counts that keep coming.
func TestKernelAfterThePrivilegeDrop(t *testing.T) {
	if testexec.Rerunning(t) {
		afterDrop(t)
		return
	}
	testneed.Root(t, "to load BPF programs and then drop to another user")
	testneed.User(t, "nobody")
	testexec.Rerun(t)
}

func afterDrop(t *testing.T) {
	c := load(t, 8, taskClock)
	cpus := attachAll(t, c)
	// The root cgroup is charged whatever runs; the other id is of no
	// cgroup, which the map does not mind.
	root := id(t, cgroup2(t))
	const other = 1 << 62
	if _, err := c.Add(other, "/perfevent-no-such-cgroup"); err != nil {
		t.Fatal(err)
	}
	acct, err := privilege.LookupAccount("nobody")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := acct.Drop(privilege.CounterCapability()); err != nil {
		t.Skipf("needs to drop to nobody with %s: %v", privilege.Name(privilege.CounterCapability()), err)
	}
	slot, err := c.Add(root, "/")
	if err != nil {
		t.Fatalf("adding a cgroup as nobody with CAP_PERFMON: %v", err)
	}
	if err := c.Remove(other); err != nil {
		t.Errorf("removing a cgroup as nobody with CAP_PERFMON: %v", err)
	}
	cpu := cpus[len(cpus)-1]
	c.Detach(cpu)
	if err := c.Attach(cpu); err != nil {
		t.Errorf("attaching cpu%d again as nobody with CAP_PERFMON: %v", cpu, err)
	}
	t0 := time.Now()
	if err := c.Sync(); err != nil {
		t.Fatalf("Sync as nobody with CAP_PERFMON: %v", err)
	}
	before := c.Total(slot, 0).Value
	time.Sleep(100 * time.Millisecond) // an interval to count over
	if err := c.Sync(); err != nil {
		t.Fatal(err)
	}
	window := time.Since(t0)
	// task-clock on a CPU, charged to the root cgroup, grows by the
	// interval's length whatever runs there. It is totalled over the
	// CPUs: the others grow by the window at most, and the one attached
	// again by most of it.
	others := time.Duration(len(c.Attached())-1) * window
	if got := c.Total(slot, 0).Value - before; got < uint64(others+50*time.Millisecond) {
		t.Errorf("cpu%d attached again as nobody: the root cgroup's task-clock on %d CPUs grew %d ns in %v", cpu, len(c.Attached()), got, window)
	}
}
