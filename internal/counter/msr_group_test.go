package counter_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"perfevent/internal/counter"
	"perfevent/internal/counter/countertest"
	"perfevent/internal/perf"
	"perfevent/internal/testlog"
)

// msrType stands for the msr PMU's dynamic type in the fake's tests; each
// names it in Config.JoinSoftware rather than depend on the host's.
const msrType = 12

func msr(name string, config uint64, cpus ...int) counter.Spec {
	return counter.Spec{Name: name, Attr: unix.PerfEventAttr{Type: msrType, Config: config}, CPUs: cpus}
}

// msrSpecs lists msr/tsc first on purpose: a software event must still
// lead each CPU's group.
func msrSpecs() []counter.Spec {
	return []counter.Spec{msr("msr/tsc", 0, 0, 1), sw("a", 0, 0, 1), sw("b", 1, 0, 1)}
}

func newMSRSet(t *testing.T, fake *countertest.Opener, cfg counter.Config) *counter.Set {
	t.Helper()
	return newJoinSet(t, fake, joiners[0], cfg)
}

// joiner is a kind of event that joins the software group of its CPU when
// Config.JoinSoftware names its type: the agent names msr and tracepoints.
type joiner struct {
	name string
	typ  uint32
}

var joiners = []joiner{{"msr/tsc", msrType}, {"sched:sched_switch", unix.PERF_TYPE_TRACEPOINT}}

// forJoiners runs test for each kind of joiner.
func forJoiners(t *testing.T, test func(*testing.T, joiner)) {
	for _, j := range joiners {
		t.Run(j.name, func(t *testing.T) { test(t, j) })
	}
}

// newJoinSet opens msrSpecs with j's event in msr/tsc's place, JoinSoftware
// naming j's type unless cfg says otherwise.
func newJoinSet(t *testing.T, fake *countertest.Opener, j joiner, cfg counter.Config) *counter.Set {
	t.Helper()
	cfg.Opener = fake
	if cfg.JoinSoftware == nil {
		cfg.JoinSoftware = []uint32{j.typ}
	}
	specs := msrSpecs()
	specs[0].Name, specs[0].Attr.Type = j.name, j.typ
	s, err := counter.New(specs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Open(); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestJoinsSoftwareGroup(t *testing.T) { forJoiners(t, testJoinsSoftwareGroup) }

func testJoinsSoftwareGroup(t *testing.T, j joiner) {
	fake := countertest.New()
	s := newJoinSet(t, fake, j, counter.Config{})
	wantGroup(t, fake, j.name, 0, "a", "b", j.name)
	wantGroup(t, fake, j.name, 1, "a", "b", j.name)
	if a, _ := fake.Attr(j.name, 0); a.Read_format != perf.GroupReadFormat || a.Bits&unix.PerfBitDisabled != 0 {
		t.Errorf("%s: read_format %#x bits %#x, want %#x and not disabled (a member)", j.name, a.Read_format, a.Bits, perf.GroupReadFormat)
	}
	// On cpu1 the group was on the PMU half the time (it never is, with
	// these events; the point is that msr/tsc takes the group's times).
	fake.Add("a", 0, 1, 100, 100)
	fake.Add("a", 1, 1, 100, 50)
	fake.Add(j.name, 0, 1000, 0, 0)
	fake.Add(j.name, 1, 2000, 0, 0)
	fetch(s, 0)
	if fake.Reads() != 2 {
		t.Errorf("%d reads for %s alone, want 2: its group on each CPU", fake.Reads(), j.name)
	}
	vals, active := fetch(s, 0, 1, 2)
	if fake.Reads() != 4 || active != 6 {
		t.Errorf("%d reads, active %d after a full fetch; want 4 and 6", fake.Reads(), active)
	}
	if want := "[[1000 4000] [1 2] [0 0]]"; fmt.Sprint(vals) != want {
		t.Errorf("values %v, want %s", vals, want)
	}
	f := s.Begin()
	for ev := range 3 {
		if d0, d1 := f.Dutycycle(ev, 0), f.Dutycycle(ev, 1); d0 != 1 || d1 != 0.5 {
			t.Errorf("%s dutycycle %v %v, want the group's 1 and 0.5", s.Name(ev), d0, d1)
		}
	}
	f.End()
}

// An empty JoinSoftware keeps msr on descriptors of its own, as before.
func TestMSRJoinSoftwareEmpty(t *testing.T) {
	fake := countertest.New()
	s := newMSRSet(t, fake, counter.Config{JoinSoftware: []uint32{}})
	wantGroup(t, fake, "a", 0, "a", "b")
	if a, _ := fake.Attr("msr/tsc", 0); a.Read_format != perf.ReadFormat || fake.Group("msr/tsc", 0) != nil {
		t.Errorf("msr/tsc: read_format %#x, group %q; want a descriptor of its own", a.Read_format, fake.Group("msr/tsc", 0))
	}
	fetch(s, 0, 1, 2)
	if fake.Reads() != 4 {
		t.Errorf("%d reads for a full fetch, want 4: a group and msr/tsc per CPU", fake.Reads())
	}
}

// A kernel that will not put msr in the software group leaves it on its
// own descriptor on that CPU, logged once, with its own dutycycle.
func TestJoinRefused(t *testing.T) { forJoiners(t, testJoinRefused) }

func testJoinRefused(t *testing.T, j joiner) {
	fake := countertest.New()
	fake.FailJoin(j.name, 1, unix.EINVAL)
	var l testlog.Recorder
	s := newJoinSet(t, fake, j, counter.Config{Log: &l})
	wantGroup(t, fake, j.name, 0, "a", "b", j.name)
	wantGroup(t, fake, "a", 1, "a", "b")
	if a, _ := fake.Attr(j.name, 1); a.Read_format != perf.ReadFormat {
		t.Errorf("%s on cpu1 reopened with read_format %#x, want %#x", j.name, a.Read_format, perf.ReadFormat)
	}
	if got := fmt.Sprint(s.CPUs(0)); got != "[0 1]" {
		t.Errorf("%s served on %s, want [0 1]", j.name, got)
	}
	if st := s.Status(0)[1]; st.OpenErr != nil || !st.Open {
		t.Errorf("%s on cpu1: %+v, want open with no error", j.name, st)
	}
	if len(l.Texts()) != 1 || !strings.Contains(l.Texts()[0], fmt.Sprintf("%q cannot join the software events' group on cpu1", j.name)) || !strings.Contains(l.Texts()[0], "invalid argument") {
		t.Errorf("logs %q, want one line naming %s, cpu1 and EINVAL", j.name, l.Texts())
	}
	fake.Add("a", 1, 1, 100, 100)
	fake.Add(j.name, 1, 30, 100, 25)
	fetch(s, 0, 1, 2)
	vals, active := fetch(s, 0, 1, 2)
	if fake.Reads() != 6 || active != 6 {
		t.Errorf("%d reads, active %d; want 6 (cpu0 one group, cpu1 a group and %s) and 6", fake.Reads(), active, j.name)
	}
	if vals[0][1] != 120 {
		t.Errorf("%s on cpu1 = %d, want 30 scaled by its own times ×4", j.name, vals[0][1])
	}
	f := s.Begin()
	if d := f.Dutycycle(0, 1); d != 0.25 {
		t.Errorf("%s on cpu1 dutycycle %v, want its own 0.25", j.name, d)
	}
	f.End()

	// It stays on its own across a reservation while the kernel refuses.
	s.Close()
	if _, err := s.Reopen(); err != nil {
		t.Fatal(err)
	}
	if g := fake.Group(j.name, 1); g != nil {
		t.Errorf("after Reopen %s on cpu1 is in %q, want on its own", j.name, g)
	}
}

// A software event that cannot join is not retried on its own: it would
// fail there too.
func TestSoftwareJoinRefusedNotRetried(t *testing.T) {
	fake := countertest.New()
	fake.FailJoin("b", 0, unix.EINVAL)
	s := newMSRSet(t, fake, counter.Config{})
	if st := s.Status(2)[0]; st.Open || !errors.Is(st.OpenErr, unix.EINVAL) {
		t.Errorf("b on cpu0: %+v, want not open, EINVAL", st)
	}
	wantGroup(t, fake, "a", 0, "a", "msr/tsc")
}

// A failed group read fails msr/tsc with the software events of its CPU:
// the same error, the value kept, Active down by every member, ReadFailed
// told once, and all of them back together.
func TestJoinedGroupReadFails(t *testing.T) { forJoiners(t, testJoinedGroupReadFails) }

func testJoinedGroupReadFails(t *testing.T, j joiner) {
	fake := countertest.New()
	told := 0
	var l testlog.Recorder
	s := newJoinSet(t, fake, j, counter.Config{Log: &l, ReadFailed: func() { told++ }})
	fake.AddAll(10, 10, 10)
	fetch(s, 0, 1, 2)
	fake.AddAll(10, 10, 10)
	vals, active := fetch(s, 0, 1, 2)
	if vals[0][0] != 20 || active != 6 {
		t.Fatalf("%s %v, active %d; want 20 and 6", j.name, vals[0], active)
	}
	fake.FailRead("a", 0, unix.EIO)
	fake.AddAll(5, 5, 5)
	for range 2 {
		vals, active = fetch(s, 0)
		if vals[0][0] != 20 || vals[0][1] != 25 || active != 3 {
			t.Errorf("with cpu0's group failing: %s %v active %d; want [20 25] and 3", j.name, vals[0], active)
		}
	}
	for ev := range 3 {
		if st := s.Status(ev)[0]; !errors.Is(st.ReadErr, unix.EIO) {
			t.Errorf("%s on cpu0: ReadErr %v, want EIO", s.Name(ev), st.ReadErr)
		}
		if st := s.Status(ev)[1]; st.ReadErr != nil {
			t.Errorf("%s on cpu1: ReadErr %v, want none", s.Name(ev), st.ReadErr)
		}
	}
	if told != 1 || len(l.Texts()) != 1 || !strings.Contains(l.Texts()[0], fmt.Sprintf("the group \"a\", \"b\", %q on cpu0 failed", j.name)) {
		t.Errorf("ReadFailed told %d times, logs %q; want once, naming the whole group", told, l.Texts())
	}
	fake.FailRead("a", 0, nil)
	vals, active = fetch(s, 0)
	if vals[0][0] != 25 || active != 6 {
		t.Errorf("after recovery %s %v active %d, want 25 (counted while failing) and 6", j.name, vals[0], active)
	}
}

// A new Set (a reload) carries msr/tsc's value like any other member's.
func TestMSRGroupCarry(t *testing.T) {
	fake := countertest.New()
	old := newMSRSet(t, fake, counter.Config{})
	fake.AddAll(7, 1, 1)
	fetch(old, 0, 1, 2)
	fake.AddAll(7, 1, 1)
	fetch(old, 0, 1, 2)
	old.Close()
	s := newMSRSet(t, fake, counter.Config{CountFirstRead: true})
	s.Carry(old)
	fake.AddAll(1, 1, 1)
	fetch(s, 0, 1, 2)
	fake.AddAll(1, 1, 1)
	if vals, _ := fetch(s, 0, 1, 2); fmt.Sprint(vals) != "[[16 16] [16 16] [16 16]]" {
		t.Errorf("after Carry values %v, want each member's 14 continued by 2", vals)
	}
}

// Software and msr events always run; should a kernel ever leave such a
// group off the CPU, it is split as a starved named group is, while a
// group of software events alone is left as it is.
func TestMSRGroupNeverRuns(t *testing.T) {
	fake := countertest.New()
	var l testlog.Recorder
	s := newMSRSet(t, fake, counter.Config{Log: &l})
	fake.Add("a", 0, 0, 2e9, 0) // cpu0's group never ran
	fake.Add("a", 1, 5, 2e9, 2e9)
	fetch(s, 0, 1, 2)
	s.WaitSplit()
	if len(l.Texts()) != 1 || !strings.Contains(l.Texts()[0], `the software events' group "a", "b", "msr/tsc" on cpu0 has not run in 2.0s`) {
		t.Errorf("logs %q, want one line about cpu0's group", l.Texts())
	}
	for _, ev := range []string{"a", "b", "msr/tsc"} {
		if g := fake.Group(ev, 0); g != nil {
			t.Errorf("%s on cpu0 in group %q after the split, want on its own", ev, g)
		}
	}
	wantGroup(t, fake, "a", 1, "a", "b", "msr/tsc")
	fake.Add("msr/tsc", 0, 40, 10, 10)
	fetch(s, 0, 1, 2)
	fake.Add("msr/tsc", 0, 40, 10, 10)
	vals, active := fetch(s, 0, 1, 2)
	if vals[0][0] != 80 || active != 6 {
		t.Errorf("msr/tsc on cpu0 on its own: %v active %d, want 80 and 6", vals[0], active)
	}

	plain := countertest.New()
	ps, err := counter.New(abc(), counter.Config{Opener: plain, Log: &l, JoinSoftware: []uint32{}})
	if err != nil {
		t.Fatal(err)
	}
	ps.Open()
	plain.Add("a", 0, 0, 2e9, 0)
	fetch(ps, 0)
	ps.WaitSplit()
	wantGroup(t, plain, "a", 0, "a", "b", "c")
}
