package counter_test

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"perfevent/internal/counter"
	"perfevent/internal/counter/countertest"
	"perfevent/internal/hostfs"
	"perfevent/internal/perf"
	"perfevent/internal/testlog"
)

func sw(name string, config uint64, cpus ...int) counter.Spec {
	return counter.Spec{Name: name, Attr: unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Config: config}, CPUs: cpus}
}

// hw is an event of the hardware PMU: a descriptor of its own on each CPU,
// never grouped.
func hw(name string, config uint64, cpus ...int) counter.Spec {
	return counter.Spec{Name: name, Attr: unix.PerfEventAttr{Type: unix.PERF_TYPE_HARDWARE, Config: config}, CPUs: cpus}
}

// newSet opens a Set over a fresh fake.
func newSet(t testing.TB, specs ...counter.Spec) (*counter.Set, *countertest.Opener) {
	t.Helper()
	fake := countertest.New()
	s, _ := openSet(t, specs, counter.Config{Opener: fake})
	return s, fake
}

// openSet makes and opens a Set, failing the test if either fails, and
// returns the Open's summary.
func openSet(t testing.TB, specs []counter.Spec, cfg counter.Config) (*counter.Set, counter.Summary) {
	t.Helper()
	s, err := counter.New(specs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := s.Open()
	if err != nil {
		t.Fatal(err)
	}
	return s, sum
}

// fetch reads the given events and returns their values and Active.
func fetch(s *counter.Set, evs ...int) (vals [][]uint64, active int) {
	f := s.Begin()
	defer f.End()
	for _, ev := range evs {
		f.Need(ev)
	}
	f.Read()
	for _, ev := range evs {
		var v []uint64
		for i := range s.CPUs(ev) {
			v = append(v, f.Value(ev, i))
		}
		vals = append(vals, v)
	}
	return vals, f.Active()
}

func TestAttrPreparedForTheKernel(t *testing.T) {
	// Software events are grouped per CPU (read_format GROUP), the others
	// are not; a group's leader is opened disabled and enabled once its
	// members have joined (TestGroupLeaderOpensDisabled).
	const given = unix.PerfBitDisabled | unix.PerfBitInherit | unix.PerfBitExcludeHv
	specs := []counter.Spec{
		hw("cycles", unix.PERF_COUNT_HW_CPU_CYCLES, 0),
		sw("cpu-clock", unix.PERF_COUNT_SW_CPU_CLOCK, 0),
		sw("page-faults", unix.PERF_COUNT_SW_PAGE_FAULTS, 0),
	}
	for i := range specs {
		specs[i].Attr.Bits = given
	}
	_, fake := newSet(t, specs...)
	for _, tc := range []struct {
		event      string
		typ        uint32
		config     uint64
		readFormat uint64
		bits       uint64
	}{
		{"cycles", unix.PERF_TYPE_HARDWARE, unix.PERF_COUNT_HW_CPU_CYCLES, perf.ReadFormat, unix.PerfBitExcludeHv},
		{"cpu-clock", unix.PERF_TYPE_SOFTWARE, unix.PERF_COUNT_SW_CPU_CLOCK, perf.GroupReadFormat, unix.PerfBitExcludeHv | unix.PerfBitDisabled},
		{"page-faults", unix.PERF_TYPE_SOFTWARE, unix.PERF_COUNT_SW_PAGE_FAULTS, perf.GroupReadFormat, unix.PerfBitExcludeHv},
	} {
		a, ok := fake.Attr(tc.event, 0)
		if !ok {
			t.Fatalf("%s was never opened on cpu0", tc.event)
		}
		if a.Size != perf.AttrSize || a.Read_format != tc.readFormat {
			t.Errorf("%s: size %d read_format %#x, want %d and %#x", tc.event, a.Size, a.Read_format, perf.AttrSize, tc.readFormat)
		}
		if a.Bits != tc.bits {
			t.Errorf("%s: bits %#x, want %#x: the Spec's disabled and inherit must be cleared, the rest kept", tc.event, a.Bits, tc.bits)
		}
		if a.Type != tc.typ || a.Config != tc.config {
			t.Errorf("%s: type/config %d/%d changed", tc.event, a.Type, a.Config)
		}
	}
}

func TestNewRejectsBadSpecs(t *testing.T) {
	for _, tc := range []struct {
		specs []counter.Spec
		want  string
	}{
		{[]counter.Spec{sw("", 0, 0)}, "event #1 has an empty name"},
		{[]counter.Spec{sw("a", 0, 0), sw("a", 1, 0)}, `event "a" is listed twice (#1 and #2)`},
		{[]counter.Spec{sw("a", 0, 0, -1)}, `event "a": CPU id -1 is negative`},
		{[]counter.Spec{sw("a", 0, 1, 0, 1)}, `event "a": CPU 1 is listed twice`},
		{[]counter.Spec{sw("a", 0, 0, 1), sw("b", 0, 3, 1, 2, 3)}, `event "b": CPU 3 is listed twice`},
	} {
		_, err := counter.New(tc.specs, counter.Config{Opener: countertest.New()})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%v) = %v, want an error containing %q", tc.specs, err, tc.want)
		}
	}
}

// A slot keeps its CPU id in an int32; a larger id is refused rather than
// cut short.
func TestNewRejectsCPUIdsBeyondInt32(t *testing.T) {
	if strconv.IntSize < 64 {
		t.Skip("needs a 64-bit int to hold a CPU id beyond int32")
	}
	big := math.MaxInt32
	big++
	_, err := counter.New([]counter.Spec{sw("a", 0, 0, big)}, counter.Config{Opener: countertest.New()})
	if want := fmt.Sprintf(`event "a": CPU id %d is out of range`, big); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("New: %v, want an error containing %q", err, want)
	}
}

// CPUs listed in any order are served in that order.
func TestCPUsInSpecOrder(t *testing.T) {
	s, _ := newSet(t, sw("a", 0, 3, 0, 2), hw("b", 0, 2, 1))
	if got := s.CPUs(0); !slices.Equal(got, []int{3, 0, 2}) {
		t.Errorf("CPUs of a: %v, want [3 0 2]", got)
	}
	if got := s.CPUs(1); !slices.Equal(got, []int{2, 1}) {
		t.Errorf("CPUs of b: %v, want [2 1]", got)
	}
}

func TestScale(t *testing.T) {
	for _, tc := range []struct{ raw, en, run, want uint64 }{
		{1000, 100, 100, 1000},               // not multiplexed
		{1000, 100, 50, 2000},                // on the PMU half the time
		{1000, 300, 100, 3000},               // a third
		{10, 3, 2, 15},                       // exact: 10×3/2
		{7, 3, 2, 10},                        // 10.5 truncated
		{1000, 100, 0, 1000},                 // never ran: unscaled
		{1000, 100, 200, 1000},               // nonsense times: unscaled
		{1 << 62, 1 << 40, 1 << 39, 1 << 63}, // needs 128-bit intermediate
		{1 << 63, 1 << 40, 1 << 38, 1 << 63}, // overflows 64 bits: unscaled
	} {
		if got := counter.Scale(tc.raw, tc.en, tc.run); got != tc.want {
			t.Errorf("Scale(%d, %d, %d) = %d, want %d", tc.raw, tc.en, tc.run, got, tc.want)
		}
	}
}

func TestMultiplexedAccumulationAndDutycycle(t *testing.T) {
	s, fake := newSet(t, sw("ev", 3, 0, 1))
	// cpu0 always on the PMU; cpu1 on it half the time, then a quarter.
	fake.Add("ev", 0, 100, 1000, 1000)
	fake.Add("ev", 1, 100, 1000, 500)
	vals, _ := fetch(s, 0)
	if vals[0][0] != 100 || vals[0][1] != 200 {
		t.Fatalf("after one read: %v, want [100 200]", vals[0])
	}
	fake.Add("ev", 0, 50, 1000, 1000)
	fake.Add("ev", 1, 30, 1000, 250)
	vals, _ = fetch(s, 0)
	if vals[0][0] != 150 || vals[0][1] != 200+120 {
		t.Fatalf("after two reads: %v, want [150 320]", vals[0])
	}
	f := s.Begin()
	d0, d1 := f.Dutycycle(0, 0), f.Dutycycle(0, 1)
	f.End()
	// Cumulative since open: cpu1 ran 750 of 2000 ns.
	if d0 != 1.0 || d1 != 0.375 {
		t.Errorf("dutycycle %v %v, want 1 0.375", d0, d1)
	}
}

func TestDutycycleZeroBeforeEnabled(t *testing.T) {
	s, _ := newSet(t, sw("ev", 3, 0))
	fetch(s, 0)
	f := s.Begin()
	defer f.End()
	if d := f.Dutycycle(0, 0); d != 0 {
		t.Errorf("dutycycle with enabled=0 is %v, want 0", d)
	}
}

func TestRawCountWrapsAndAccumulatorWraps(t *testing.T) {
	s, fake := newSet(t, sw("ev", 3, 0))
	const near = ^uint64(0) - 9 // 10 below the wrap
	fake.Set("ev", 0, perf.Count{Value: near, Enabled: 10, Running: 10})
	vals, _ := fetch(s, 0)
	if vals[0][0] != near {
		t.Fatalf("value %d, want %d", vals[0][0], near)
	}
	// The raw count passes 2^64: the delta is 25, and the accumulator
	// wraps the same way a PCP counter does.
	fake.Add("ev", 0, 25, 10, 10)
	vals, _ = fetch(s, 0)
	if want := uint64(15); vals[0][0] != want {
		t.Errorf("value %d after the wrap, want %d", vals[0][0], want)
	}
}

func TestFailedReadKeepsValueAndLogsOnce(t *testing.T) {
	fake := countertest.New()
	var rec testlog.Recorder
	s, err := counter.New([]counter.Spec{sw("ev", 3, 0, 1)}, counter.Config{
		Opener: fake,
		Log:    &rec,
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Open()
	fake.AddAll(10, 1, 1)
	fetch(s, 0)
	fetch(s, 0) // past the first-read mute
	fake.FailRead("ev", 1, unix.EIO)
	fake.AddAll(5, 1, 1)
	for range 3 {
		vals, active := fetch(s, 0)
		if vals[0][0] != 15 || vals[0][1] != 10 {
			t.Fatalf("values %v, want [15 10]: cpu1 must keep its last value", vals[0])
		}
		if active != 1 {
			t.Errorf("active %d, want 1 (cpu1's read fails)", active)
		}
	}
	if logs := rec.Lines(); len(logs) != 1 || !strings.HasPrefix(logs[0], "Warning: ") || !strings.Contains(logs[0], `"ev" on cpu1`) || !strings.Contains(logs[0], "input/output error") {
		t.Errorf("logs %q, want one warning naming ev, cpu1 and EIO", logs)
	}
	if st := s.Status(0); !errors.Is(st[1].ReadErr, unix.EIO) || st[0].ReadErr != nil {
		t.Errorf("status %+v, want cpu1 ReadErr EIO", st)
	}
	fake.FailRead("ev", 1, nil)
	vals, active := fetch(s, 0)
	// cpu1's counter kept counting: it catches up on the read that works.
	if vals[0][1] != 15 || active != 2 {
		t.Errorf("after recovery values %v active %d, want cpu1=15 and 2", vals[0], active)
	}
	if logs := rec.Lines(); len(logs) != 2 || logs[1] != `Warning: reading "ev" on cpu1 works again` {
		t.Errorf("logs %q, want a recovery line", logs)
	}
}

func TestReadsOnlyWhatIsNeededOncePerFetch(t *testing.T) {
	// a and b are software events, read as one group per CPU; c has a
	// descriptor of its own per CPU. So a fetch of a and b is one read()
	// per CPU, and NeedAll one more per CPU for c.
	s, fake := newSet(t, sw("a", 0, 0, 1), sw("b", 1, 0, 1), hw("c", 2, 0, 1))
	if _, err := s.AddDerived(counter.DerivedSpec{Name: "ab", Terms: []counter.Term{{"a", 1}, {"b", 2}}}); err != nil {
		t.Fatal(err)
	}
	f := s.Begin()
	f.Need(0)
	f.Need(0)
	f.NeedDerived(0) // a again, and b
	f.Read()
	f.End()
	if fake.Reads() != 2 {
		t.Errorf("%d reads, want 2 (a and b's group once on 2 CPUs)", fake.Reads())
	}
	if n := fake.ReadsOf("c", 0) + fake.ReadsOf("c", 1); n != 0 {
		t.Errorf("c was read %d times but never asked for", n)
	}
	// Marks do not carry over to the next fetch.
	f = s.Begin()
	f.Read()
	f.End()
	if fake.Reads() != 2 {
		t.Errorf("%d reads after an empty fetch, want still 2", fake.Reads())
	}
	f = s.Begin()
	f.NeedAll()
	f.Read()
	f.End()
	if fake.Reads() != 6 {
		t.Errorf("%d reads after NeedAll, want 6 (2 groups and c twice)", fake.Reads())
	}
}

func TestPartialOpenFailure(t *testing.T) {
	fake := countertest.New()
	fake.FailOpen("cycles", countertest.AnyCPU, unix.ENOENT)
	fake.FailOpen("tsc", 1, unix.ENODEV)
	s, sum := openSet(t, []counter.Spec{
		{Name: "cycles", CPUs: []int{0, 1}},
		{Name: "tsc", CPUs: []int{0, 1, 2}},
		sw("cpu-clock", 0, 0, 1),
	}, counter.Config{Opener: fake})
	if sum.Events != 3 || sum.Served != 2 || sum.FDs != 4 || sum.Failed != 3 {
		t.Errorf("summary %+v, want 3 events, 2 served, 4 fds, 3 failures", sum)
	}
	if got, want := sum.String(), "2 of 3 events served on 4 descriptors; 3 opens failed"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	lines := sum.FailureLines()
	want := []string{
		`perf_event_open failed for "cycles" on cpus 0-1: not supported on this machine (e.g. a VM without a hardware PMU) (ENOENT)`,
		`perf_event_open failed for "tsc" on cpu1: CPU 1 is offline (ENODEV)`,
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("FailureLines:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	if c := s.CPUs(0); len(c) != 0 {
		t.Errorf("cycles served on %v, want none", c)
	}
	if c := s.CPUs(1); fmt.Sprint(c) != "[0 2]" {
		t.Errorf("tsc instances %v, want [0 2]", c)
	}
	st := s.Status(1)
	if st[1].Served || st[1].Open || st[1].OpenErr == nil || st[1].OpenErr.Kind != counter.CPUOffline {
		t.Errorf("tsc cpu1 status %+v, want unserved with a CPUOffline error", st[1])
	}
	fake.AddAll(1, 1, 1)
	_, active := fetch(s, 0, 1, 2)
	_, active = fetch(s, 0, 1, 2)
	if active != 4 {
		t.Errorf("active %d, want 4", active)
	}
}

func TestActiveAndValuesAcrossCloseReopen(t *testing.T) {
	// b is not a software event, so that reading a alone reads a alone
	// (TestGroupCloseReopen does this with a group).
	s, fake := newSet(t, sw("a", 0, 0, 1), hw("b", 1, 0, 1))
	fake.AddAll(100, 10, 10)
	// The first fetch after open reads but reports 0, as the C agent does.
	vals, active := fetch(s, 0, 1)
	if active != 0 || vals[0][0] != 100 {
		t.Fatalf("first fetch: active %d value %d, want 0 and 100", active, vals[0][0])
	}
	fake.AddAll(1, 10, 10)
	if vals, active = fetch(s, 0, 1); active != 4 || vals[0][0] != 101 {
		t.Fatalf("second fetch: active %d value %d, want 4 and 101", active, vals[0][0])
	}

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if fake.OpenNow() != 0 || fake.Closes() != 4 {
		t.Fatalf("after Close %d open, %d closes; want 0 and 4", fake.OpenNow(), fake.Closes())
	}
	if !s.Reserved() {
		t.Error("Reserved() is false after Close")
	}
	if fake.Add("a", 0, 1000, 1, 1) {
		t.Error("a closed counter still counts in the fake")
	}
	reads := fake.Reads()
	for range 2 {
		if vals, active = fetch(s, 0, 1); active != 0 || vals[0][0] != 101 {
			t.Errorf("while closed: active %d value %d, want 0 and the frozen 101", active, vals[0][0])
		}
	}
	if fake.Reads() != reads {
		t.Errorf("%d reads while closed", fake.Reads()-reads)
	}
	if err := s.Close(); err != nil || fake.Closes() != 4 {
		t.Errorf("second Close: %v, %d closes; want nil and still 4", err, fake.Closes())
	}

	sum, err := s.Reopen()
	if err != nil || sum.FDs != 4 || fake.OpenNow() != 4 {
		t.Fatalf("Reopen: %+v %v, %d open; want 4 fds", sum, err, fake.OpenNow())
	}
	// Before any read and on the first read: 0. The new descriptor starts
	// from 0, so the value continues from 101 without a jump.
	if _, active = fetch(s); active != 0 {
		t.Errorf("after reopen, before a read: active %d, want 0", active)
	}
	fake.AddAll(7, 10, 10)
	if vals, active = fetch(s, 0); active != 0 || vals[0][0] != 108 {
		t.Errorf("first read after reopen: active %d value %d, want 0 and 108", active, vals[0][0])
	}
	fake.AddAll(2, 10, 10)
	if vals, active = fetch(s, 0); active != 2 || vals[0][0] != 110 {
		t.Errorf("second read after reopen (a only): active %d value %d, want 2 and 110", active, vals[0][0])
	}
	if _, active = fetch(s, 1); active != 4 {
		t.Errorf("after b is read too: active %d, want 4", active)
	}
}

// A Set that replaces another on a reload counts its first read: only a
// reservation (or the start) may show active 0.
func TestCountFirstRead(t *testing.T) {
	fake := countertest.New()
	s, _ := openSet(t, []counter.Spec{sw("a", 0, 0, 1)}, counter.Config{Opener: fake, CountFirstRead: true})
	fake.AddAll(5, 10, 10)
	if vals, active := fetch(s, 0); active != 2 || vals[0][0] != 5 {
		t.Errorf("first read: active %d value %d, want 2 and 5", active, vals[0][0])
	}
	s.Close()
	s.Reopen()
	if _, active := fetch(s, 0); active != 0 {
		t.Errorf("first read after a reopen: active %d, want 0 as without the option", active)
	}
	if _, active := fetch(s, 0); active != 2 {
		t.Errorf("second read after a reopen: active %d, want 2", active)
	}
}

func TestReopenFailureKeepsInstances(t *testing.T) {
	s, fake := newSet(t, sw("a", 0, 0, 1))
	fake.AddAll(5, 1, 1)
	fetch(s, 0)
	s.Close()
	fake.FailOpen("a", 1, unix.EBUSY)
	sum, err := s.Reopen()
	if err != nil || sum.FDs != 1 || sum.Failed != 1 || sum.Failures[0].Kind != counter.Busy {
		t.Fatalf("Reopen = %+v, %v; want 1 fd and one Busy failure", sum, err)
	}
	if c := s.CPUs(0); fmt.Sprint(c) != "[0 1]" {
		t.Errorf("instances %v changed after a failed reopen, want [0 1]", c)
	}
	fake.AddAll(1, 1, 1)
	fetch(s, 0)
	vals, active := fetch(s, 0)
	if vals[0][1] != 5 || vals[0][0] != 6 || active != 1 {
		t.Errorf("values %v active %d, want [6 5] and 1", vals[0], active)
	}
}

func TestOpenReopenMisuse(t *testing.T) {
	fake := countertest.New()
	s, _ := counter.New([]counter.Spec{sw("a", 0, 0)}, counter.Config{Opener: fake})
	if _, err := s.Reopen(); err == nil {
		t.Error("Reopen before Open succeeded")
	}
	if _, err := s.AddDerived(counter.DerivedSpec{Name: "d", Terms: []counter.Term{{"a", 1}}}); err == nil {
		t.Error("AddDerived before Open succeeded")
	}
	s.Open()
	if _, err := s.Open(); err == nil {
		t.Error("second Open succeeded")
	}
	if sum, err := s.Reopen(); err != nil || fake.Opens() != 1 || sum.FDs != 1 {
		t.Errorf("Reopen of an open set: %v, %d opens; want a no-op", err, fake.Opens())
	}
}

func TestDerived(t *testing.T) {
	fake := countertest.New()
	fake.FailOpen("broken", countertest.AnyCPU, unix.EINVAL)
	s, err := counter.New([]counter.Spec{
		// cs multiplexes below, which only a hardware event does; a group's
		// members share their leader's times.
		sw("faults", 2, 0, 1), hw("cs", 3, 0, 1), sw("one", 4, 0), sw("swapped", 5, 1, 0), {Name: "broken", CPUs: []int{0, 1}},
	}, counter.Config{Opener: fake})
	if err != nil {
		t.Fatal(err)
	}
	s.Open()
	for _, tc := range []struct {
		terms []counter.Term
		want  string
	}{
		{nil, `derived "d" has no member events`},
		{[]counter.Term{{"faults", 1}, {"nope", 1}}, `derived "d": member "nope" is not a configured event`},
		{[]counter.Term{{"faults", 1}, {"broken", 1}}, `derived "d": member "broken" did not open on any CPU`},
		{[]counter.Term{{"faults", 1}, {"one", 1}}, `derived "d": member "one" counts on cpu0 but "faults" on cpus 0-1; members need the same CPUs`},
		{[]counter.Term{{"faults", 1}, {"swapped", 1}}, `member "swapped" counts on cpus 1,0 but "faults" on cpus 0-1`},
	} {
		_, err := s.AddDerived(counter.DerivedSpec{Name: "d", Terms: tc.terms})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("AddDerived(%v) = %v, want an error containing %q", tc.terms, err, tc.want)
		}
	}
	d, err := s.AddDerived(counter.DerivedSpec{Name: "sw_faults_cs", Terms: []counter.Term{{"faults", 1}, {"cs", 0.5}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddDerived(counter.DerivedSpec{Name: "sw_faults_cs", Terms: []counter.Term{{"cs", 1}}}); err == nil {
		t.Error("a second derived with the same name was accepted")
	}
	if s.NumDerived() != 1 || s.DerivedName(d) != "sw_faults_cs" || fmt.Sprint(s.DerivedCPUs(d)) != "[0 1]" {
		t.Errorf("derived %d: %d %q %v", d, s.NumDerived(), s.DerivedName(d), s.DerivedCPUs(d))
	}
	fake.Add("faults", 0, 10, 1, 1)
	fake.Add("faults", 1, 20, 1, 1)
	fake.Add("cs", 0, 100, 1, 1)
	fake.Add("cs", 1, 300, 2, 1) // multiplexed: scaled to 600
	f := s.Begin()
	f.NeedDerived(d)
	f.Read()
	d0, d1 := f.DerivedValue(d, 0), f.DerivedValue(d, 1)
	f.End()
	if d0 != 60 || d1 != 320 {
		t.Errorf("derived values %v %v, want 60 and 320", d0, d1)
	}
	if fake.Reads() != 4 {
		t.Errorf("%d reads for one derived fetch, want 4 (faults' group and cs on 2 CPUs)", fake.Reads())
	}
}

// A reservation can arrive in the middle of fetches; run with -race.
func TestCloseReopenConcurrentWithFetches(t *testing.T) {
	s, fake := newSet(t, sw("a", 0, 0, 1), sw("b", 1, 0, 1))
	fake.Step(perf.Count{Value: 1, Enabled: 1, Running: 1})
	stop := make(chan struct{})
	go func() {
		defer close(stop)
		for range 200 {
			s.Close()
			s.Reopen()
		}
	}()
	fetchUntil(t, s, stop, 0, 4)
	if fake.OpenNow() != 4 {
		t.Errorf("%d counters open at the end, want 4", fake.OpenNow())
	}
}

// fetchUntil fetches events 0 and 1 of s on their first CPU until stop
// is closed, and fails t when a value goes back or Active is none of
// actives: what a fetch racing the Set's reservations may see.
func fetchUntil(t *testing.T, s *counter.Set, stop <-chan struct{}, actives ...int) {
	t.Helper()
	last := []uint64{0, 0}
	for done := false; !done; {
		select {
		case <-stop:
			done = true
		default:
		}
		vals, active := fetch(s, 0, 1)
		for ev := range last {
			if vals[ev][0] < last[ev] {
				t.Fatalf("event %d went backwards: %d after %d", ev, vals[ev][0], last[ev])
			}
			last[ev] = vals[ev][0]
		}
		if !slices.Contains(actives, active) {
			t.Fatalf("active %d, want one of %v", active, actives)
		}
	}
}

// Summary.Failures come event by event, each in its Spec's CPU order, so
// that a caller takes each event's failures as one run of them.
func TestFailuresInEventThenCPUOrder(t *testing.T) {
	fake := countertest.New()
	fake.FailOpen("a", countertest.AnyCPU, unix.ENOENT)
	fake.FailOpen("c", countertest.AnyCPU, unix.EACCES)
	_, sum := openSet(t, []counter.Spec{hw("a", 0, 2, 0, 1), sw("b", 0, 0, 1), hw("c", 1, 1, 0)}, counter.Config{Opener: fake})
	var got []string
	for _, f := range sum.Failures {
		got = append(got, fmt.Sprintf("%s/%v", f.Event, f.CPUs))
	}
	if want := []string{"a/[2 0 1]", "c/[1 0]"}; !slices.Equal(got, want) || sum.Failed != 5 {
		t.Errorf("failures %v (%d opens), want %v (5)", got, sum.Failed, want)
	}
}

// The CPUs on which an event failed alike share one cause in the Summary,
// yet Status and Counting name each CPU's own.
func TestSharedFailureNamesEachCPU(t *testing.T) {
	fake := countertest.New()
	fake.FailOpen("a", countertest.AnyCPU, unix.ENOENT)
	fake.FailOpen("a", 2, unix.ENODEV)
	s, sum := openSet(t, []counter.Spec{hw("a", 0, 0, 1, 2, 3)}, counter.Config{Opener: fake})
	var got []string
	for _, f := range sum.Failures {
		got = append(got, fmt.Sprintf("%v %v", f.CPUs, f.Kind))
	}
	if want := []string{"[0 1] unsupported", "[2] cpu-offline", "[3] unsupported"}; !slices.Equal(got, want) || sum.Failed != 4 {
		t.Errorf("failures %q (%d opens), want %q (4)", got, sum.Failed, want)
	}
	for _, st := range s.Status(0) {
		if st.OpenErr == nil || st.OpenErr.CPU != st.CPU || !strings.Contains(st.OpenErr.Error(), fmt.Sprintf("on cpu%d ", st.CPU)) {
			t.Errorf("cpu%d's status: %v", st.CPU, st.OpenErr)
		}
	}
	if n, why := s.Counting(0); n != 0 || why == nil || !strings.HasPrefix(why.Error(), `perf_event_open failed on cpu0 for "a"`) {
		t.Errorf("Counting: %d CPUs, %v; want none, cpu0's failure", n, why)
	}
}

// A pass of opens reads perf_event_paranoid once for its advice, however
// many CPUs refuse: here the setting changes after the first refusal, and
// every failure of that Open still says what the first one read.
func TestPermissionAdviceReadOncePerOpen(t *testing.T) {
	fs := hostfs.FS{Proc: t.TempDir()}
	p := fs.ParanoidFile()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fake := countertest.New()
	fake.FailOpen("cycles", countertest.AnyCPU, unix.EACCES)
	opener := &rewritingOpener{Opener: fake, path: p}
	_, sum := openSet(t, []counter.Spec{hw("cycles", 0, 0, 1, 2, 3)}, counter.Config{Opener: opener, FS: fs})
	var got []string
	for _, f := range sum.Failures {
		for range f.CPUs {
			got = append(got, f.Advice)
		}
	}
	want := "permission denied: kernel.perf_event_paranoid is 2 (see " + p + "); run as root or grant CAP_PERFMON"
	if !slices.Equal(got, []string{want, want, want, want}) {
		t.Errorf("Open's advice %q, want the first reading, %q, on all 4 CPUs", got, want)
	}
}

// rewritingOpener sets perf_event_paranoid to 3 before its second open,
// once the first refusal's advice is written, as an administrator
// changing it during the opens would.
type rewritingOpener struct {
	counter.Opener
	path  string
	opens int
}

func (o *rewritingOpener) Open(event string, attr *unix.PerfEventAttr, cpu int, leader counter.Source) (counter.Source, error) {
	if o.opens++; o.opens == 2 {
		os.WriteFile(o.path, []byte("3\n"), 0o644)
	}
	return o.Opener.Open(event, attr, cpu, leader)
}
