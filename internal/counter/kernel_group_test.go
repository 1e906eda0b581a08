package counter_test

import (
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"perfevent/internal/counter"
	"perfevent/internal/perf"
)

// countingOpener opens real counters and counts their reads: each Read or
// ReadGroup of a perf.FD is exactly one read() system call.
type countingOpener struct{ reads atomic.Int64 }

type countingSource struct {
	counter.Source
	o *countingOpener
}

func (o *countingOpener) Open(event string, attr *unix.PerfEventAttr, cpu int, leader counter.Source) (counter.Source, error) {
	if leader != nil {
		leader = leader.(*countingSource).Source
	}
	src, err := counter.KernelOpener{}.Open(event, attr, cpu, leader)
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
// software events and (on x86) msr/tsc on every CPU: one descriptor per
// event per CPU as before, but a full fetch reads each CPU's group once,
// msr/tsc inside it, and every member counts without multiplexing.
func TestKernelGroupReads(t *testing.T) {
	needKernelPerf(t)
	cpus := onlineCPUs(t)
	specs := countingSpecs(t, cpus)

	o := &countingOpener{}
	s, err := counter.New(specs, counter.Config{Opener: o})
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
			t.Errorf("a full fetch made %d reads, want %d: one group per CPU, msr/tsc included", got, want)
		}
		return vals
	}
	v1 := read()
	t1 := time.Now()
	busyEveryCPU(t, cpus)
	time.Sleep(50 * time.Millisecond)
	v2 := read()
	checkCounting(t, s, specs, v1, v2, uint64(time.Since(t1)), sum.FDs)

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
