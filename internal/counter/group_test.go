package counter_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"perfevent/internal/counter"
	"perfevent/internal/counter/countertest"
	"perfevent/internal/perf"
	"perfevent/internal/testlog"
)

// abc is three software events on cpu0 and cpu1: one group per CPU.
func abc() []counter.Spec {
	return []counter.Spec{sw("a", 0, 0, 1), sw("b", 1, 0, 1), sw("c", 2, 0, 1)}
}

func wantGroup(t *testing.T, fake *countertest.Opener, event string, cpu int, want ...string) {
	t.Helper()
	if got := fake.Group(event, cpu); !slices.Equal(got, want) {
		t.Errorf("group of %s on cpu%d is %q, want %q", event, cpu, got, want)
	}
}

func TestGroupReadsOncePerCPU(t *testing.T) {
	s, fake := newSet(t, abc()...)
	wantGroup(t, fake, "b", 0, "a", "b", "c")
	wantGroup(t, fake, "c", 1, "a", "b", "c")
	if a, _ := fake.Attr("b", 1); a.Read_format != perf.GroupReadFormat || a.Bits&unix.PerfBitDisabled != 0 {
		t.Errorf("member b: read_format %#x bits %#x, want %#x and not disabled", a.Read_format, a.Bits, perf.GroupReadFormat)
	}
	// A group read returns the leader's times: on cpu1 the group was on
	// the PMU half the time, which scales every member ×2.
	for cpu, times := range [][2]uint64{{100, 100}, {100, 50}} {
		fake.Add("a", cpu, 1, times[0], times[1])
		fake.Add("b", cpu, 20, 0, 0)
		fake.Add("c", cpu, 300, 0, 0)
	}
	f := s.Begin()
	f.Need(1) // b only: its group brings a and c along
	f.Read()
	f.End()
	if fake.Reads() != 2 || fake.ReadsOf("a", 0) != 1 || fake.ReadsOf("c", 1) != 1 {
		t.Errorf("%d reads (a/cpu0 %d, c/cpu1 %d), want 2: one per CPU's group", fake.Reads(), fake.ReadsOf("a", 0), fake.ReadsOf("c", 1))
	}
	vals, active := fetch(s, 0, 1, 2) // each group is still read once
	if fake.Reads() != 4 {
		t.Errorf("%d reads after the second fetch, want 4", fake.Reads())
	}
	if want := "[[1 2] [20 40] [300 600]]"; fmt.Sprint(vals) != want {
		t.Errorf("values %v, want %s", vals, want)
	}
	if active != 6 {
		t.Errorf("active %d, want 6: three events on two CPUs", active)
	}
	f = s.Begin()
	for ev := range 3 {
		if d0, d1 := f.Dutycycle(ev, 0), f.Dutycycle(ev, 1); d0 != 1 || d1 != 0.5 {
			t.Errorf("%s dutycycle %v %v, want 1 and the group's 0.5", s.Name(ev), d0, d1)
		}
	}
	f.End()
	// The same again, later: deltas scale with the group's new times.
	fake.Add("a", 1, 0, 100, 25)
	fake.Add("c", 1, 10, 0, 0)
	if vals, _ = fetch(s, 2); vals[0][1] != 640 {
		t.Errorf("c on cpu1 = %d, want 600 + 10×100/25", vals[0][1])
	}
}

func TestGroupMemberOpenFailure(t *testing.T) {
	fake := countertest.New()
	fake.FailOpen("b", 1, unix.ENOENT)
	s, err := counter.New(abc(), counter.Config{Opener: fake})
	if err != nil {
		t.Fatal(err)
	}
	sum, _ := s.Open()
	if sum.FDs != 5 || sum.Failed != 1 || sum.Failures[0].Event != "b" || !slices.Equal(sum.Failures[0].CPUs, []int{1}) {
		t.Fatalf("summary %+v, want 5 descriptors and b failing on cpu1", sum)
	}
	if got := fmt.Sprint(s.CPUs(1)); got != "[0]" {
		t.Errorf("b served on %s, want [0]", got)
	}
	wantGroup(t, fake, "a", 1, "a", "c")
	fake.Add("a", 1, 1, 10, 10)
	fake.Add("c", 1, 3, 0, 0)
	vals, _ := fetch(s, 0, 1, 2)
	vals, active := fetch(s, 0, 1, 2)
	if want := "[[0 1] [0] [0 3]]"; fmt.Sprint(vals) != want {
		t.Errorf("values %v, want %s", vals, want)
	}
	if active != 5 || fake.Reads() != 4 {
		t.Errorf("active %d after %d reads, want 5 after 4", active, fake.Reads())
	}
}

func TestGroupLeaderOpenFailure(t *testing.T) {
	fake := countertest.New()
	fake.FailOpen("a", 0, unix.ENOENT)
	var rec testlog.Recorder
	s, err := counter.New(abc(), counter.Config{
		Opener: fake,
		Log:    &rec,
	})
	if err != nil {
		t.Fatal(err)
	}
	if sum, _ := s.Open(); sum.FDs != 5 {
		t.Fatalf("summary %+v, want 5 descriptors", sum)
	}
	// b leads on cpu0 instead, and so it is the one opened disabled.
	wantGroup(t, fake, "c", 0, "b", "c")
	if a, _ := fake.Attr("b", 0); a.Bits&unix.PerfBitDisabled == 0 {
		t.Errorf("b on cpu0 leads but was not opened disabled: bits %#x", a.Bits)
	}
	if a, _ := fake.Attr("b", 1); a.Bits&unix.PerfBitDisabled != 0 {
		t.Errorf("b on cpu1 is a member but was opened disabled: bits %#x", a.Bits)
	}
	fake.Add("b", 0, 7, 1, 1)
	fake.Add("c", 0, 9, 0, 0)
	fetch(s, 0, 1, 2)
	vals, active := fetch(s, 0, 1, 2)
	if want := "[[0] [7 0] [9 0]]"; fmt.Sprint(vals) != want || active != 5 {
		t.Errorf("values %v active %d, want %s and 5", vals, active, want)
	}

	// A failed group read fails every member on that CPU, logged once.
	fake.FailRead("c", 0, unix.EIO)
	fake.Add("b", 0, 1, 1, 1)
	for range 2 {
		vals, active = fetch(s, 1)
		if vals[0][0] != 7 || active != 3 {
			t.Errorf("with cpu0's group failing: b %v, active %d; want 7 kept and 3", vals[0], active)
		}
	}
	if logs := rec.Texts(); len(logs) != 1 || !strings.Contains(logs[0], `the group "b", "c" on cpu0 failed`) || !strings.Contains(logs[0], "input/output error") {
		t.Errorf("logs %q, want one line naming the group, cpu0 and EIO", logs)
	}
	for _, ev := range []int{1, 2} {
		if st := s.Status(ev)[0]; !errors.Is(st.ReadErr, unix.EIO) {
			t.Errorf("%s on cpu0: ReadErr %v, want EIO", s.Name(ev), st.ReadErr)
		}
	}
	fake.FailRead("c", 0, nil)
	if vals, active = fetch(s, 1); vals[0][0] != 8 || active != 5 {
		t.Errorf("after recovery b %v active %d, want 8 and 5", vals[0], active)
	}
	if logs := rec.Lines(); len(logs) != 2 || logs[1] != `Warning: reading "b", "c" on cpu0 works again` {
		t.Errorf("logs %q, want a recovery line", logs)
	}
}

func TestGroupEnableFailure(t *testing.T) {
	fake := countertest.New()
	fake.FailEnable("a", 1, unix.EBUSY)
	s, err := counter.New(abc(), counter.Config{Opener: fake})
	if err != nil {
		t.Fatal(err)
	}
	sum, _ := s.Open()
	if sum.FDs != 3 || sum.Failed != 3 || fake.OpenNow() != 3 {
		t.Fatalf("summary %+v with %d open, want cpu1's group of 3 closed and failed", sum, fake.OpenNow())
	}
	for _, f := range sum.Failures {
		if !slices.Equal(f.CPUs, []int{1}) || f.Kind != counter.Busy || !strings.Contains(f.Err.Error(), "enabling the group of software events on cpu1") {
			t.Errorf("failure %+v, want cpu1, Busy and the enable named", f)
		}
	}
	if got := fmt.Sprint(s.CPUs(0), s.CPUs(1), s.CPUs(2)); got != "[0] [0] [0]" {
		t.Errorf("instances %s, want cpu0 only", got)
	}
}

func TestGroupCloseReopen(t *testing.T) {
	s, fake := newSet(t, abc()...)
	fake.AddAll(10, 1, 1)
	fetch(s, 0)
	fetch(s, 0)
	// The fake fails Close of a leader whose members are still open.
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if fake.OpenNow() != 0 || fake.Closes() != 6 {
		t.Fatalf("after Close %d open, %d closes; want 0 and 6", fake.OpenNow(), fake.Closes())
	}
	reads := fake.Reads()
	if vals, active := fetch(s, 0, 1, 2); active != 0 || vals[1][1] != 10 || fake.Reads() != reads {
		t.Errorf("while closed: values %v active %d, %d reads; want frozen 10s, 0 and none", vals, active, fake.Reads()-reads)
	}

	// a is gone from cpu0 for now: b leads there after the reopen.
	fake.FailOpen("a", 0, unix.EBUSY)
	sum, err := s.Reopen()
	if err != nil || sum.FDs != 5 || sum.Failed != 1 {
		t.Fatalf("Reopen: %+v %v; want 5 descriptors and a's failure", sum, err)
	}
	wantGroup(t, fake, "b", 0, "b", "c")
	wantGroup(t, fake, "a", 1, "a", "b", "c")
	if got := fmt.Sprint(s.CPUs(0)); got != "[0 1]" {
		t.Errorf("a's instances %s after a failed reopen, want [0 1]", got)
	}
	fake.AddAll(1, 1, 1)
	fetch(s, 0, 1, 2)
	vals, active := fetch(s, 0, 1, 2)
	if want := "[[10 11] [11 11] [11 11]]"; fmt.Sprint(vals) != want || active != 5 {
		t.Errorf("after reopen values %v active %d, want %s and 5", vals, active, want)
	}

	s.Close()
	fake.FailOpen("a", 0, nil)
	if sum, err = s.Reopen(); err != nil || sum.FDs != 6 {
		t.Fatalf("second Reopen: %+v %v", sum, err)
	}
	wantGroup(t, fake, "c", 0, "a", "b", "c")
}

func TestMixedGroupedAndSingle(t *testing.T) {
	specs := []counter.Spec{
		hw("cycles", unix.PERF_COUNT_HW_CPU_CYCLES, 0, 1),
		sw("cpu-clock", unix.PERF_COUNT_SW_CPU_CLOCK, 0, 1),
		{Name: "msr/tsc", Attr: unix.PerfEventAttr{Type: msrType}, CPUs: []int{0, 1}},
		{Name: "sched:sched_switch", Attr: unix.PerfEventAttr{Type: unix.PERF_TYPE_TRACEPOINT, Config: 312}, CPUs: []int{0, 1}},
		{Name: "L1-dcache-loads", Attr: unix.PerfEventAttr{Type: unix.PERF_TYPE_HW_CACHE}, CPUs: []int{0, 1}},
		{Name: "r01c2", Attr: unix.PerfEventAttr{Type: unix.PERF_TYPE_RAW, Config: 0x1c2}, CPUs: []int{0, 1}},
		sw("page-faults", unix.PERF_COUNT_SW_PAGE_FAULTS, 0, 1),
	}
	fake := countertest.New()
	s, err := counter.New(specs, counter.Config{Opener: fake, JoinSoftware: []uint32{msrType}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Open(); err != nil {
		t.Fatal(err)
	}
	for _, sp := range specs {
		a, _ := fake.Attr(sp.Name, 1)
		g := fake.Group(sp.Name, 1)
		if sp.Attr.Type == unix.PERF_TYPE_SOFTWARE || sp.Attr.Type == msrType {
			if a.Read_format != perf.GroupReadFormat || !slices.Equal(g, []string{"cpu-clock", "page-faults", "msr/tsc"}) {
				t.Errorf("%s: read_format %#x group %q, want grouped with the software events, msr last", sp.Name, a.Read_format, g)
			}
		} else if a.Read_format != perf.ReadFormat || g != nil {
			t.Errorf("%s: read_format %#x group %q, want a descriptor of its own", sp.Name, a.Read_format, g)
		}
	}
	fake.AddAll(1, 1, 1)
	fetch(s, 0, 1, 2, 3, 4, 5, 6)
	vals, active := fetch(s, 0, 1, 2, 3, 4, 5, 6)
	if want := 2 * 2 * (1 + 4); fake.Reads() != want {
		t.Errorf("%d reads for two full fetches, want %d: on each of 2 CPUs one group and four singles", fake.Reads(), want)
	}
	if active != 14 {
		t.Errorf("active %d, want 14: seven events on two CPUs", active)
	}
	for ev, v := range vals {
		if fmt.Sprint(v) != "[1 1]" {
			t.Errorf("%s = %v, want [1 1]", specs[ev].Name, v)
		}
	}
}

// Thousands of software events on a CPU would make one group whose read
// the kernel refuses (E2BIG from the 2,046th member on); they are split
// into groups that each stay well under it and are read with one read().
func TestManySoftwareEventsSplitIntoGroups(t *testing.T) {
	const n = 2100
	specs := make([]counter.Spec, n)
	for i := range specs {
		specs[i] = sw(fmt.Sprintf("e%d", i), uint64(i), 0, 1)
	}
	fake := countertest.New()
	s, err := counter.New(specs, counter.Config{Opener: fake})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := s.Open()
	if err != nil || sum.Served != n || len(sum.Failures) != 0 {
		t.Fatalf("Open: %v, %s; want all %d events served", err, sum, n)
	}
	seen := 0
	groups := 0
	for i := 0; i < n; i += len(fake.Group(fmt.Sprintf("e%d", i), 0)) {
		members := fake.Group(fmt.Sprintf("e%d", i), 0)
		if len(members) == 0 {
			t.Fatalf("e%d on cpu0 is not open in a group", i)
		}
		if len(members) > countertest.MaxGroup {
			t.Fatalf("a group of %d counters; the kernel allows %d", len(members), countertest.MaxGroup)
		}
		seen += len(members)
		groups++
	}
	if seen != n {
		t.Errorf("%d events open in groups on cpu0, want %d", seen, n)
	}
	evs := make([]int, n)
	for i := range evs {
		evs[i] = i
	}
	fetch(s, evs...) // the first read after an open sets the baseline
	before := fake.Reads()
	fake.AddAll(7, 10, 10)
	vals, active := fetch(s, evs...)
	if active != 2*n {
		t.Errorf("active %d, want %d: every event on both CPUs", active, 2*n)
	}
	if vals[n-1][1] != 7 {
		t.Errorf("last event on cpu1 reads %d, want 7", vals[n-1][1])
	}
	if reads := fake.Reads() - before; reads != 2*groups {
		t.Errorf("%d reads for one fetch, want %d: one per group", reads, 2*groups)
	}
}

// CPU ids far apart, which no kernel gives but a Spec may, group as dense
// ones do: each CPU's software events in one group, a named group's
// members in one group per CPU.
func TestGroupsOfSparseCPUs(t *testing.T) {
	const far = 1 << 30
	specs := []counter.Spec{
		sw("a", 0, 3, far), sw("b", 1, 3, far),
		{Name: "x", Attr: unix.PerfEventAttr{Type: unix.PERF_TYPE_HARDWARE}, CPUs: []int{3, far}, Group: "r"},
		{Name: "y", Attr: unix.PerfEventAttr{Type: unix.PERF_TYPE_HARDWARE, Config: 1}, CPUs: []int{3, far}, Group: "r"},
	}
	_, fake := newSet(t, specs...)
	for _, cpu := range []int{3, far} {
		wantGroup(t, fake, "b", cpu, "a", "b")
		wantGroup(t, fake, "y", cpu, "x", "y")
	}
}
