package counter_test

import (
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"perfevent/internal/counter"
	"perfevent/internal/counter/countertest"
	"perfevent/internal/hostfs"
)

// ReleaseAll stops every Set as Release does each: software groups
// disabled, hardware closed, each Set's failure its own; ResumeAll starts
// them again and leaves the closed ones to Reopen.
func TestReleaseAllStopsEverySet(t *testing.T) {
	var sets []*counter.Set
	var fakes []*countertest.Opener
	for range 3 {
		s, fake := newSet(t, sw("a", 0, 0, 1), sw("b", 1, 0, 1), hw("c", 0, 0, 1))
		fake.AddAll(5, 1, 1)
		fetch(s, 0, 1, 2)
		sets, fakes = append(sets, s), append(fakes, fake)
	}
	fakes[1].FailDisable("a", 1, unix.EIO)
	rels, errs := counter.ReleaseAll(sets)
	for i, fake := range fakes {
		want := counter.Released{Disabled: 4, Closed: 2}
		if i == 1 {
			want = counter.Released{Disabled: 2, Closed: 4} // cpu1's group closed instead
		}
		if rels[i] != want {
			t.Errorf("set %d: %+v, want %+v", i, rels[i], want)
		}
		if fake.CountingNow() != 0 || !sets[i].Reserved() {
			t.Errorf("set %d: %d counting, reserved %v; want nothing counting", i, fake.CountingNow(), sets[i].Reserved())
		}
	}
	if len(errs) != 3 || errs[0] != nil || errs[2] != nil || errs[1] == nil ||
		!strings.Contains(errs[1].Error(), `disabling the group "a", "b" on cpu1 failed, so it is closed instead`) {
		t.Errorf("errors %v, want set 1's failed disable alone", errs)
	}
	if rels, errs := counter.ReleaseAll(sets); errs != nil || rels[0] != (counter.Released{}) {
		t.Errorf("a second ReleaseAll: %+v %v, want a no-op", rels, errs)
	}

	fakes[2].FailEnable("a", 0, unix.EIO)
	res, errs := counter.ResumeAll(sets)
	for i, want := range []counter.Resumed{{Enabled: 4, Reopen: 2}, {Enabled: 2, Reopen: 4}, {Enabled: 2, Reopen: 4}} {
		if res[i] != want {
			t.Errorf("set %d resumed %+v, want %+v", i, res[i], want)
		}
		if sets[i].Reserved() {
			t.Errorf("set %d still reserved", i)
		}
	}
	if len(errs) != 3 || errs[0] != nil || errs[1] != nil || errs[2] == nil || !strings.Contains(errs[2].Error(), `enabling the group "a", "b" on cpu0`) {
		t.Errorf("errors %v, want set 2's failed enable alone", errs)
	}
	fakes[2].FailEnable("a", 0, nil)
	for i, s := range sets {
		if sum, err := s.Reopen(); err != nil || sum.FDs != 6 || fakes[i].CountingNow() != 6 {
			t.Errorf("set %d: Reopen = %+v, %v, %d counting; want all 6", i, sum, err, fakes[i].CountingNow())
		}
	}
}

// boundOpener records in ran the CPUs that the calling thread may run on
// when a counter is disabled or enabled.
type boundOpener struct {
	*countertest.Opener
	*ran
}

type ran struct {
	mu  sync.Mutex
	on  map[int][]string // the counter's CPU: the calling thread's CPUs
	ops int
}

type boundSource struct {
	counter.Source
	o   *boundOpener
	cpu int
}

func (o *boundOpener) Open(event string, attr *unix.PerfEventAttr, cpu int, leader counter.Source) (counter.Source, error) {
	if l, ok := leader.(*boundSource); ok {
		leader = l.Source
	}
	src, err := o.Opener.Open(event, attr, cpu, leader)
	if err != nil {
		return nil, err
	}
	return &boundSource{src, o, cpu}, nil
}

func (b *boundSource) record() {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		panic(err)
	}
	var on []string
	for cpu := range 1024 {
		if set.IsSet(cpu) {
			on = append(on, "cpu"+itoa(cpu))
		}
	}
	b.o.mu.Lock()
	defer b.o.mu.Unlock()
	b.o.ops++
	b.o.on[b.cpu] = append(b.o.on[b.cpu], strings.Join(on, ","))
}

func (b *boundSource) Disable() error { b.record(); return b.Source.Disable() }
func (b *boundSource) Enable() error  { b.record(); return b.Source.Enable() }

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + itoa(n%10)
}

// ReleaseAll and ResumeAll disable and enable each counter from a thread
// bound to the counter's CPU, so that the kernel need not call another
// CPU; a CPU the thread cannot be bound to (here one that does not exist)
// has its counters stopped all the same, from wherever the thread runs.
func TestReleaseAllRunsOnTheCountersCPU(t *testing.T) {
	online, err := (hostfs.FS{}).OnlineCPUs()
	if err != nil {
		t.Fatal(err)
	}
	var mine unix.CPUSet
	if err := unix.SchedGetaffinity(0, &mine); err != nil {
		t.Fatal(err)
	}
	var cpus []int
	for _, cpu := range online {
		if mine.IsSet(cpu) {
			cpus = append(cpus, cpu)
		}
	}
	const absent = 1000 // beyond unix.CPUSet: never bound
	r := &ran{on: map[int][]string{}}
	var sets []*counter.Set
	var fakes []*countertest.Opener
	counting := func() (n int) {
		for _, f := range fakes {
			n += f.CountingNow()
		}
		return n
	}
	for range 4 {
		o := &boundOpener{countertest.New(), r}
		fakes = append(fakes, o.Opener)
		s, err := counter.New([]counter.Spec{sw("a", 0, append(cpus, absent)...), sw("b", 1, append(cpus, absent)...)}, counter.Config{Opener: o})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Open(); err != nil {
			t.Fatal(err)
		}
		sets = append(sets, s)
	}
	r.on, r.ops = map[int][]string{}, 0 // Open enables each group, from anywhere
	if _, errs := counter.ReleaseAll(sets); errs != nil {
		t.Fatal(errs)
	}
	if counting() != 0 {
		t.Errorf("%d counting after ReleaseAll, want none", counting())
	}
	if _, errs := counter.ResumeAll(sets); errs != nil {
		t.Fatal(errs)
	}
	if counting() != 2*4*(len(cpus)+1) {
		t.Errorf("%d counting after ResumeAll, want %d", counting(), 2*4*(len(cpus)+1))
	}
	if want := 2 * 4 * (len(cpus) + 1); r.ops != want {
		t.Errorf("%d disables and enables, want %d: one each per group", r.ops, want)
	}
	for _, cpu := range cpus {
		for _, ran := range r.on[cpu] {
			if ran != "cpu"+itoa(cpu) {
				t.Errorf("a counter on cpu%d was disabled or enabled from a thread that may run on %s", cpu, ran)
			}
		}
		if len(r.on[cpu]) != 8 {
			t.Errorf("cpu%d: %d disables and enables, want 8", cpu, len(r.on[cpu]))
		}
	}
	if len(r.on[absent]) != 8 {
		t.Errorf("the absent CPU: %d disables and enables, want 8", len(r.on[absent]))
	}
	// The threads the work ran on were given back their CPUs.
	var after unix.CPUSet
	if err := unix.SchedGetaffinity(0, &after); err != nil || after != mine {
		t.Errorf("this thread's CPUs changed: %v", err)
	}
}
