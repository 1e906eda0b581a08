package counter_test

import (
	"errors"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"perfevent/internal/counter"
	"perfevent/internal/counter/countertest"
	"perfevent/internal/perf"
	"perfevent/internal/testlog"
)

// A reservation disables the software group of each CPU, one ioctl per
// leader, and closes the hardware counters; the fetch sees what it saw
// when everything was closed, and afterwards the software values carry on
// from their own descriptors while the hardware ones are reopened.
func TestReleaseDisablesSoftwareAndClosesHardware(t *testing.T) {
	s, fake := newSet(t, sw("a", 0, 0, 1), sw("b", 1, 0, 1), hw("c", 0, 0, 1))
	fake.AddAll(100, 10, 10)
	fetch(s, 0, 1, 2)
	fake.AddAll(1, 10, 10)
	if vals, active := fetch(s, 0, 1, 2); active != 6 || vals[0][0] != 101 || vals[2][1] != 101 {
		t.Fatalf("before: active %d values %v, want 6 and 101 everywhere", active, vals)
	}
	opens, enables := fake.Opens(), fake.Enables()

	rel, err := s.Release()
	if err != nil {
		t.Fatal(err)
	}
	if rel.Disabled != 4 || rel.Closed != 2 {
		t.Errorf("Release = %+v, want 4 disabled (a and b on 2 CPUs) and 2 closed (c)", rel)
	}
	if fake.Disables() != 2 || fake.Closes() != 2 {
		t.Errorf("%d disables and %d closes, want one disable per CPU's group and c's 2 closes", fake.Disables(), fake.Closes())
	}
	if fake.OpenNow() != 4 || fake.CountingNow() != 0 {
		t.Errorf("while released %d open and %d counting, want the 4 software ones open and none counting", fake.OpenNow(), fake.CountingNow())
	}
	if !s.Reserved() {
		t.Error("Reserved() is false after Release")
	}
	for _, c := range s.Status(1) {
		if !c.Open || !c.Disabled {
			t.Errorf("b on cpu%d: %+v, want open and disabled", c.CPU, c)
		}
	}
	if c := s.Status(2)[0]; c.Open || c.Disabled {
		t.Errorf("c on cpu0: %+v, want closed", c)
	}
	fake.AddAll(1000, 10, 10) // counts nothing: nothing counts
	reads := fake.Reads()
	if vals, active := fetch(s, 0, 1, 2); active != 0 || vals[0][0] != 101 || vals[2][0] != 101 {
		t.Errorf("while released: active %d values %v, want 0 and frozen at 101", active, vals)
	}
	if fake.Reads() != reads {
		t.Errorf("%d reads while released", fake.Reads()-reads)
	}
	if rel, err := s.Release(); err != nil || rel != (counter.Released{}) {
		t.Errorf("second Release = %+v, %v; want a no-op", rel, err)
	}

	res, err := s.Resume()
	if err != nil || res.Enabled != 4 || res.Reopen != 2 {
		t.Fatalf("Resume = %+v, %v; want 4 enabled and c's 2 left to reopen", res, err)
	}
	if fake.Enables() != enables+2 || fake.Opens() != opens {
		t.Errorf("Resume: %d enables and %d opens, want 2 and none", fake.Enables()-enables, fake.Opens()-opens)
	}
	fake.AddAll(7, 10, 10)
	if vals, active := fetch(s, 0, 1, 2); active != 0 || vals[0][0] != 108 || vals[2][0] != 101 {
		t.Errorf("first read after Resume: active %d values %v, want 0, a at 108 and c still 101", active, vals)
	}
	sum, err := s.Reopen()
	if err != nil || sum.FDs != 6 || fake.Opens() != opens+2 {
		t.Fatalf("Reopen = %+v, %v, %d opens; want 6 descriptors and c's 2 opens", sum, err, fake.Opens()-opens)
	}
	fake.AddAll(2, 10, 10)
	if vals, active := fetch(s, 0, 1, 2); active != 6 || vals[0][0] != 110 || vals[2][0] != 103 {
		t.Errorf("after Reopen: active %d values %v, want 6, a at 110 and c at 103", active, vals)
	}
	if _, err := s.Reopen(); err != nil || fake.Opens() != opens+2 {
		t.Errorf("a Reopen with nothing to reopen opened %d", fake.Opens()-opens-2)
	}
}

// Counts made between the last read and the Release are kept: the
// descriptor stood still, it did not start again from zero.
func TestReleaseKeepsTheCountBeforeIt(t *testing.T) {
	s, fake := newSet(t, sw("a", 0, 0))
	fake.AddAll(10, 1, 1)
	fetch(s, 0)
	fake.AddAll(5, 1, 1)
	s.Release()
	s.Resume()
	fake.AddAll(1, 1, 1)
	if vals, _ := fetch(s, 0); vals[0][0] != 16 {
		t.Errorf("after the reservation a = %d, want 16: 10, the 5 before the release, the 1 after", vals[0][0])
	}
}

// Reopen alone does all of it, as the cgroup tracker calls it.
func TestReopenAfterRelease(t *testing.T) {
	s, fake := newSet(t, sw("a", 0, 0, 1), hw("c", 0, 0, 1))
	fake.AddAll(3, 1, 1)
	fetch(s, 0, 1)
	s.Release()
	sum, err := s.Reopen()
	if err != nil || sum.FDs != 4 || fake.CountingNow() != 4 || s.Reserved() {
		t.Fatalf("Reopen after Release = %+v, %v, %d counting, reserved %v; want all 4 counting", sum, err, fake.CountingNow(), s.Reserved())
	}
	if _, active := fetch(s, 0, 1); active != 0 {
		t.Errorf("first read after the Reopen: active %d, want 0", active)
	}
	fake.AddAll(1, 1, 1)
	if vals, active := fetch(s, 0, 1); active != 4 || vals[0][0] != 4 || vals[1][0] != 4 {
		t.Errorf("second read: active %d values %v, want 4 and 4 everywhere", active, vals)
	}
}

// A group whose leader cannot be enabled again is closed and left to
// Reopen, which opens it whole; the error names it and says so.
func TestResumeEnableFailureReopens(t *testing.T) {
	s, fake := newSet(t, sw("a", 0, 0, 1), sw("b", 1, 0, 1))
	fake.AddAll(4, 1, 1)
	fetch(s, 0, 1)
	s.Release()
	fake.FailEnable("a", 1, unix.EIO)
	res, err := s.Resume()
	if res.Enabled != 2 || res.Reopen != 2 {
		t.Errorf("Resume = %+v, want cpu0's 2 enabled and cpu1's 2 to reopen", res)
	}
	want := `counter: enabling the group "a", "b" on cpu1 after the reservation failed, so it is reopened instead: input/output error`
	if err == nil || err.Error() != want {
		t.Errorf("Resume error %v, want %q", err, want)
	}
	if fake.OpenNow() != 2 {
		t.Errorf("%d open after the failed enable, want cpu0's 2: cpu1's group is closed", fake.OpenNow())
	}
	fake.FailEnable("a", 1, nil)
	if sum, err := s.Reopen(); err != nil || sum.FDs != 4 {
		t.Fatalf("Reopen = %+v, %v; want 4 descriptors", sum, err)
	}
	if g := fake.Group("b", 1); strings.Join(g, " ") != "a b" {
		t.Errorf("cpu1's group after the reopen: %v, want a b", g)
	}
	fake.AddAll(1, 1, 1)
	fetch(s, 0, 1)
	if vals, active := fetch(s, 0, 1); active != 4 || vals[0][1] != 5 || vals[1][1] != 5 {
		t.Errorf("after the reopen: active %d values %v, want 4 and cpu1 at 5", active, vals)
	}
}

// A group that cannot be disabled is closed instead: the reservation
// still stops it.
func TestReleaseDisableFailureCloses(t *testing.T) {
	s, fake := newSet(t, sw("a", 0, 0, 1))
	fake.FailDisable("a", 0, unix.EIO)
	rel, err := s.Release()
	if rel.Disabled != 1 || rel.Closed != 1 {
		t.Errorf("Release = %+v, want cpu1 disabled and cpu0 closed", rel)
	}
	if err == nil || !strings.Contains(err.Error(), `disabling "a" on cpu0 failed, so it is closed instead: input/output error`) {
		t.Errorf("Release error %v, want it to name a on cpu0 and say it was closed", err)
	}
	if fake.OpenNow() != 1 || fake.CountingNow() != 0 {
		t.Errorf("%d open, %d counting; want cpu1's open and nothing counting", fake.OpenNow(), fake.CountingNow())
	}
	if sum, err := s.Reopen(); err != nil || sum.FDs != 2 || fake.CountingNow() != 2 {
		t.Errorf("Reopen = %+v, %v, %d counting; want both back", sum, err, fake.CountingNow())
	}
}

// A descriptor that vanished during the reservation (closed behind the
// Set's back) fails its enable; it is reopened and its value carries on.
func TestResumeAfterADescriptorVanished(t *testing.T) {
	s, fake := newSet(t, sw("a", 0, 0), counter.Spec{Name: "tp", Attr: unix.PerfEventAttr{Type: unix.PERF_TYPE_TRACEPOINT, Config: 7}, CPUs: []int{0}})
	fake.AddAll(20, 1, 1)
	fetch(s, 0, 1)
	rel, _ := s.Release()
	if rel.Disabled != 2 || rel.Closed != 0 {
		t.Fatalf("Release = %+v, want a and the tracepoint tp disabled", rel)
	}
	if !fake.Vanish("tp", 0) {
		t.Fatal("tp is not open while released")
	}
	res, err := s.Resume()
	if !errors.Is(err, unix.EBADF) || res.Enabled != 1 || res.Reopen != 1 {
		t.Fatalf("Resume = %+v, %v; want a enabled, tp to reopen and EBADF", res, err)
	}
	if sum, err := s.Reopen(); err != nil || sum.FDs != 2 {
		t.Fatalf("Reopen = %+v, %v; want 2 descriptors", sum, err)
	}
	fake.AddAll(1, 1, 1)
	fetch(s, 0, 1)
	if vals, active := fetch(s, 0, 1); active != 2 || vals[0][0] != 21 || vals[1][0] != 21 {
		t.Errorf("after the reopen: active %d values %v, want 2 and 21 for both", active, vals)
	}
}

// Close after Release closes the disabled descriptors too, as a reload
// during a reservation does with the old Set.
func TestCloseAfterRelease(t *testing.T) {
	s, fake := newSet(t, sw("a", 0, 0, 1), sw("b", 1, 0, 1))
	s.Release()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if fake.OpenNow() != 0 {
		t.Errorf("%d open after Close, want 0", fake.OpenNow())
	}
	if !s.Reserved() {
		t.Error("Reserved() is false after Close")
	}
	if sum, err := s.Reopen(); err != nil || sum.FDs != 4 {
		t.Errorf("Reopen = %+v, %v; want 4 descriptors", sum, err)
	}
}

// msr events in the software group are disabled with it: they hold no
// PMU counter either.
func TestReleaseKeepsMsrInTheSoftwareGroup(t *testing.T) {
	const msrType = 9
	fake := countertest.New()
	s, err := counter.New([]counter.Spec{sw("a", 0, 0), {Name: "msr/tsc", Attr: unix.PerfEventAttr{Type: msrType}, CPUs: []int{0}}},
		counter.Config{Opener: fake, JoinSoftware: []uint32{msrType}})
	if err != nil {
		t.Fatal(err)
	}
	s.Open()
	if rel, err := s.Release(); err != nil || rel.Disabled != 2 || fake.Disables() != 1 {
		t.Errorf("Release = %+v, %v, %d disables; want both disabled by one ioctl", rel, err, fake.Disables())
	}
}

// Reopen after a Release tells Config.Log of a descriptor it had to
// reopen rather than enable (it vanished), and reopens it.
func TestReopenAfterReleaseLogsAFailedEnable(t *testing.T) {
	fake := countertest.New()
	var rec testlog.Recorder
	s, err := counter.New([]counter.Spec{sw("a", 0, 0)}, counter.Config{Opener: fake, Log: &rec})
	if err != nil {
		t.Fatal(err)
	}
	s.Open()
	s.Release()
	fake.Vanish("a", 0)
	if sum, err := s.Reopen(); err != nil || sum.FDs != 1 || fake.Opens() != 2 {
		t.Errorf("Reopen = %+v, %v, %d opens; want a reopened", sum, err, fake.Opens())
	}
	want := `Warning: counter: enabling "a" on cpu0 after the reservation failed, so it is reopened instead: bad file descriptor`
	if logs := rec.Lines(); len(logs) != 1 || logs[0] != want {
		t.Errorf("logged %q, want [%q]", logs, want)
	}
}

// Releases and resumes (hardware closed and reopened among them) racing
// fetches: values never go back, Active is all or nothing, and everything
// counts at the end. Run with -race.
func TestReleaseResumeConcurrentWithFetches(t *testing.T) {
	s, fake := newSet(t, sw("a", 0, 0, 1), hw("c", 0, 0, 1))
	fake.Step(perf.Count{Value: 1, Enabled: 1, Running: 1})
	stop := make(chan struct{})
	go func() {
		defer close(stop)
		for i := range 200 {
			s.Release()
			if i%2 == 0 {
				s.Resume()
			}
			s.Reopen()
		}
	}()
	// Active 2: a resumed, c not yet reopened.
	fetchUntil(t, s, stop, 0, 2, 4)
	if fake.CountingNow() != 4 {
		t.Errorf("%d counters counting at the end, want 4", fake.CountingNow())
	}
}

// Counting is Status in short: the CPUs open and not disabled, and the
// first CPU's error, whether its open or its read failed, through an open
// with failures, a failing read, a Release and a Close.
func TestCountingAgreesWithStatus(t *testing.T) {
	fake := countertest.New()
	fake.FailOpen("c", 1, unix.ENOENT)
	fake.FailOpen("d", countertest.AnyCPU, unix.EACCES)
	s, err := counter.New([]counter.Spec{sw("a", 0, 0, 1, 2), sw("b", 1, 0, 1, 2), hw("c", 0, 0, 1, 2), hw("d", 1, 2, 0)}, counter.Config{Opener: fake})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Open(); err != nil {
		t.Fatal(err)
	}
	fake.FailRead("c", 2, unix.EIO)
	fetch(s, 0, 1, 2, 3)
	fetch(s, 0, 1, 2, 3)
	check := func(when string, want [][2]any) {
		t.Helper()
		for ev := range s.NumEvents() {
			cpus, why := s.Counting(ev)
			wantCPUs, wantWhy := 0, error(nil)
			for _, c := range s.Status(ev) {
				if c.Open && !c.Disabled {
					wantCPUs++
				}
				if wantWhy == nil && c.OpenErr != nil {
					wantWhy = c.OpenErr
				}
				if wantWhy == nil && c.ReadErr != nil {
					wantWhy = c.ReadErr
				}
			}
			if cpus != wantCPUs || why != wantWhy {
				t.Errorf("%s: Counting(%s) = %d, %v; Status says %d, %v", when, s.Name(ev), cpus, why, wantCPUs, wantWhy)
			}
			if cpus != want[ev][0] || (why == nil) != (want[ev][1] == nil) || why != nil && !errors.Is(why, want[ev][1].(error)) {
				t.Errorf("%s: Counting(%s) = %d, %v; want %d, %v", when, s.Name(ev), cpus, why, want[ev][0], want[ev][1])
			}
		}
	}
	check("open", [][2]any{{3, nil}, {3, nil}, {2, unix.ENOENT}, {0, unix.EACCES}})
	if _, err := s.Release(); err != nil {
		t.Fatal(err)
	}
	check("released", [][2]any{{0, nil}, {0, nil}, {0, unix.ENOENT}, {0, unix.EACCES}})
	if _, err := s.Reopen(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	check("closed", [][2]any{{0, nil}, {0, nil}, {0, unix.ENOENT}, {0, unix.EACCES}})
}
