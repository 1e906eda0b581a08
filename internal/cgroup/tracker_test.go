package cgroup

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"perfevent/internal/counter"
	"perfevent/internal/counter/countertest"
	"perfevent/internal/logging"
	"perfevent/internal/testlog"
	"perfevent/internal/testwait"
)

// fakes hands each cgroup directory a fake opener of its own, so that a
// test can script every cgroup's counts.
type fakes struct {
	mu   sync.Mutex
	by   map[string]*countertest.Opener
	open func(path string) error // fails the opener's counters, if set
}

func (f *fakes) opener(dir *os.File) counter.Opener {
	f.mu.Lock()
	defer f.mu.Unlock()
	o := countertest.New()
	if f.open != nil {
		if err := f.open(dir.Name()); err != nil {
			o.FailOpen("cpu-clock", countertest.AnyCPU, err)
			o.FailOpen("context-switches", countertest.AnyCPU, err)
		}
	}
	f.by[filepath.Base(dir.Name())] = o
	return o
}

func (f *fakes) get(name string) *countertest.Opener {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.by[name]
}

var testEvents = []Event{
	{Name: "cpu-clock", Attr: unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_CPU_CLOCK}},
	{Name: "context-switches", Attr: unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_CONTEXT_SWITCHES}},
}

func mkdirs(t testing.TB, root string, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func paths(in []Instance) []string {
	var out []string
	for _, i := range in {
		out = append(out, i.Path)
	}
	return out
}

// infoLines keeps a Tracker's Info lines in logs, as the agent's log
// has them without -D.
type infoLines struct {
	logging.Logger
	mu   sync.Mutex
	logs *[]string
}

func (l *infoLines) Infof(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	*l.logs = append(*l.logs, strings.TrimSpace(fmt.Sprintf(format, args...)))
}

func newTestTracker(t *testing.T, root string, max int, f *fakes, logs *[]string) *Tracker {
	tr := New(Options{
		Hierarchy: Hierarchy{Mount: root, Version: 2},
		Patterns:  []string{"/*", "/*/*"},
		Max:       max,
		Events:    testEvents,
		CPUs:      []int{0, 1, 2},
		Opener:    f.opener,
		Rescan:    time.Hour, // the tests call rescan themselves
		NoNotify:  true,
		Log:       &infoLines{Logger: logging.Discard, logs: logs},
	})
	t.Cleanup(tr.Stop)
	return tr
}

func TestTrackerDiscoversSumsAndCaps(t *testing.T) {
	root := t.TempDir()
	mkdirs(t, root, "a.slice/x.service/deep", "b.slice", "c.slice")
	os.WriteFile(filepath.Join(root, "cgroup.procs"), nil, 0o644) // files are not cgroups
	f := &fakes{by: map[string]*countertest.Opener{}}
	var logs []string
	tr := newTestTracker(t, root, 3, f, &logs)
	tr.Start()

	// Shallower first under the cap; /a.slice/x.service is left out and
	// /a.slice/x.service/deep is too deep for the patterns.
	if got, want := paths(tr.Instances()), []string{"/a.slice", "/b.slice", "/c.slice"}; !slices.Equal(got, want) {
		t.Fatalf("instances %q, want %q", got, want)
	}
	if len(logs) != 1 || !strings.Contains(logs[0], "1 matching cgroups not counted, the cap of 3 cgroups") || !strings.Contains(logs[0], "/a.slice/x.service") {
		t.Errorf("log %q, want one line naming /a.slice/x.service and the cap", logs)
	}
	if n, fds := tr.Stats(); n != 3 || fds != 3*2*3 {
		t.Errorf("Stats = %d cgroups, %d descriptors; want 3 and 18 (3 cgroups × 2 events × 3 CPUs)", n, fds)
	}

	b := f.get("b.slice")
	for cpu := range 3 {
		// A group's times are its leader's, cpu-clock's.
		b.Add("cpu-clock", cpu, 1000*uint64(cpu+1), 100, 50)
		b.Add("context-switches", cpu, 7, 0, 0)
	}
	tr.Read([]bool{true, true})
	if tr.Len() != 3 {
		t.Fatalf("Len = %d, want 3", tr.Len())
	}
	for i := range tr.Len() {
		id, clock, _ := tr.At(i, 0)
		_, sw, duty := tr.At(i, 1)
		if id == 1 { // /b.slice
			// Summed over CPUs, each scaled up by enabled/running = 2.
			if clock != 12000 || sw != 3*14 || duty != 0.5 {
				t.Errorf("/b.slice: cpu-clock %d, context-switches %d (duty %v); want 12000, 42, 0.5", clock, sw, duty)
			}
		} else if clock != 0 {
			t.Errorf("instance %d: cpu-clock %d, want 0", id, clock)
		}
	}
	// One group read per CPU reads both events of a cgroup.
	if r := b.Reads(); r != 3 {
		t.Errorf("/b.slice: %d reads, want 3 (one group per CPU)", r)
	}
}

func TestTrackerFollowsTheTree(t *testing.T) {
	root := t.TempDir()
	mkdirs(t, root, "a", "b")
	f := &fakes{by: map[string]*countertest.Opener{}}
	var logs []string
	var changes [][]Instance
	tr := newTestTracker(t, root, 0, f, &logs)
	tr.o.Changed = func(in []Instance) { changes = append(changes, in) }
	tr.Start()
	a := f.get("a")

	os.Remove(filepath.Join(root, "a"))
	mkdirs(t, root, "c")
	tr.rescan()
	if got, want := paths(tr.Instances()), []string{"/b", "/c"}; !slices.Equal(got, want) {
		t.Fatalf("instances %q, want %q", got, want)
	}
	if a.OpenNow() != 0 {
		t.Errorf("/a removed: %d descriptors still open", a.OpenNow())
	}
	// Ids of remembered paths are not given to others, and a path that returns gets its old id.
	ids := map[string]int32{}
	for _, in := range tr.Instances() {
		ids[in.Path] = in.ID
	}
	if ids["/b"] != 1 || ids["/c"] != 2 {
		t.Errorf("ids %v, want /b 1 and /c 2", ids)
	}
	mkdirs(t, root, "a")
	tr.rescan()
	if in := tr.Instances(); in[0] != (Instance{0, "/a"}) {
		t.Errorf("first instance %v, want /a with its old id 0", in[0])
	}
	if len(changes) != 3 {
		t.Errorf("%d changes reported, want 3 (start, swap, return)", len(changes))
	}
}

// A Tracker's routine news, each cgroup counted or closed, is Debug; what
// is not counted is Info. /b, left out by the cap, is counted once /a goes.
// Its counters' problems are routine among many cgroups: Debug too.
func TestTrackerLogLevels(t *testing.T) {
	root := t.TempDir()
	mkdirs(t, root, "a", "b")
	f := &fakes{by: map[string]*countertest.Opener{}}
	var logs []string
	tr := newTestTracker(t, root, 1, f, &logs)
	var rec testlog.Recorder
	tr.o.Log = &rec
	tr.Start()
	os.Remove(filepath.Join(root, "a"))
	tr.rescan()
	f.get("b").FailRead("cpu-clock", 2, unix.EIO)
	tr.Read([]bool{true, true})
	want := []string{
		"Info: cgroups: 1 matching cgroups not counted, the cap of 1 cgroups (max in cgroups.conf) being taken by cgroups of the same or earlier patterns: [/b]",
		"Debug: cgroups: counting /a on 6 descriptors",
		"Debug: cgroups: counting /b on 6 descriptors",
		"Debug: cgroups: /a is gone or no longer matches; closing its 6 descriptors",
		`Debug: reading the group "cpu-clock", "context-switches" on cpu2 failed, keeping their last values: input/output error`,
	}
	if got := rec.Lines(); !slices.Equal(got, want) {
		t.Errorf("log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// startTracker starts a tracker of the tree at root, without a cap, with
// a fake opener per cgroup, counting events (testEvents if nil).
func startTracker(t *testing.T, root string, events []Event) (*Tracker, *fakes) {
	f := &fakes{by: map[string]*countertest.Opener{}}
	var logs []string
	tr := newTestTracker(t, root, 0, f, &logs)
	if events != nil {
		tr.o.Events = events
	}
	tr.Start()
	return tr, f
}

func TestTrackerReservation(t *testing.T) {
	root := t.TempDir()
	mkdirs(t, root, "a")
	tr, f := startTracker(t, root, nil)
	a := f.get("a")
	a.Add("cpu-clock", 0, 500, 10, 10)
	tr.Read([]bool{true, false})

	tr.Close()
	// Software events are disabled rather than closed (counter.Set.Release).
	if a.CountingNow() != 0 || a.OpenNow() != 6 {
		t.Fatalf("after Close %d descriptors count and %d are open, want none counting and the 6 kept", a.CountingNow(), a.OpenNow())
	}
	a.Add("cpu-clock", 0, 1000, 10, 10) // counts nothing while disabled
	mkdirs(t, root, "b")
	tr.rescan() // nothing opens while reserved
	if got := paths(tr.Instances()); !slices.Equal(got, []string{"/a"}) {
		t.Errorf("instances while reserved %q, want [/a]", got)
	}
	tr.Reopen()
	if a.CountingNow() != 6 {
		t.Errorf("after Reopen %d descriptors of /a count, want 6", a.CountingNow())
	}
	waitPaths(t, tr, "/a", "/b")
	a.Add("cpu-clock", 0, 20, 10, 10)
	tr.Read([]bool{true, false})
	if _, v, _ := tr.At(0, 0); v != 520 {
		t.Errorf("cpu-clock of /a after the reservation %d, want 520 (it continues)", v)
	}
}

// Resume enables the software counters at once and leaves for Reopen,
// which the agent paces, only what needs system calls by the dozen: the
// counters Close had to close, and a rescan skipped while reserved.
func TestTrackerResume(t *testing.T) {
	root := t.TempDir()
	mkdirs(t, root, "a")
	tr, f := startTracker(t, root, nil)
	a := f.get("a")
	opens := a.Opens()

	tr.Close()
	mkdirs(t, root, "b") // no rescan sees it while reserved
	if tr.Resume() {
		t.Error("Resume after a reservation that skipped nothing asks for a Reopen")
	}
	if a.CountingNow() != 6 || a.Opens() != opens {
		t.Errorf("after Resume %d descriptors count and %d were opened, want 6 and none", a.CountingNow(), a.Opens()-opens)
	}
	if got := paths(tr.Instances()); !slices.Equal(got, []string{"/a"}) {
		t.Errorf("instances after Resume %q, want [/a]: the next rescan, not Resume, finds /b", got)
	}

	tr.Close()
	tr.rescan() // skipped
	if !tr.Resume() {
		t.Fatal("Resume after a skipped rescan does not ask for a Reopen")
	}
	tr.Reopen()
	waitPaths(t, tr, "/a", "/b")
	if tr.Close(); tr.Resume() {
		t.Error("the skipped rescan is asked for again after Reopen made it")
	}

	// A counter that holds a PMU counter is closed by Close, so it needs
	// the Reopen.
	root = t.TempDir()
	mkdirs(t, root, "hw")
	tr, f = startTracker(t, root, append(slices.Clone(testEvents), Event{Name: "cycles", Attr: unix.PerfEventAttr{Type: unix.PERF_TYPE_HARDWARE, Config: unix.PERF_COUNT_HW_CPU_CYCLES}}))
	hw := f.get("hw")
	if hw.OpenNow() != 9 {
		t.Fatalf("%d descriptors open for 3 events on 3 CPUs, want 9", hw.OpenNow())
	}
	tr.Close()
	if !tr.Resume() {
		t.Fatal("Resume with closed hardware counters does not ask for a Reopen")
	}
	if hw.OpenNow() != 6 || hw.CountingNow() != 6 {
		t.Errorf("after Resume %d descriptors open and %d counting, want the 6 software ones", hw.OpenNow(), hw.CountingNow())
	}
	tr.Reopen()
	if hw.OpenNow() != 9 || hw.CountingNow() != 9 {
		t.Errorf("after Reopen %d descriptors open and %d counting, want 9", hw.OpenNow(), hw.CountingNow())
	}
}

func TestTrackerVanishedQuietly(t *testing.T) {
	root := t.TempDir()
	mkdirs(t, root, "a", "b")
	f := &fakes{by: map[string]*countertest.Opener{}, open: func(p string) error {
		if filepath.Base(p) == "a" {
			return unix.ENOENT
		}
		return unix.EACCES
	}}
	var logs []string
	tr := newTestTracker(t, root, 0, f, &logs)
	tr.Start()
	tr.rescan()
	if n := len(tr.Instances()); n != 0 {
		t.Errorf("%d instances, want 0", n)
	}
	// ENOENT is not logged at Info; another failure once, not per rescan.
	if len(logs) != 1 || !strings.Contains(logs[0], "/b cannot be counted") {
		t.Errorf("logs %q, want one line about /b", logs)
	}
}

func TestTrackerNotices(t *testing.T) {
	root := t.TempDir()
	f := &fakes{by: map[string]*countertest.Opener{}}
	seen := make(chan []Instance, 8)
	tr := New(Options{
		Hierarchy: Hierarchy{Mount: root, Version: 2},
		Patterns:  []string{"/*"},
		Events:    testEvents,
		CPUs:      []int{0},
		Opener:    f.opener,
		Rescan:    time.Hour, // so only inotify can find it
		Changed:   func(in []Instance) { seen <- in },
	})
	defer tr.Stop()
	tr.Start()
	mkdirs(t, root, "new")
	select {
	case in := <-seen:
		if got := paths(in); !slices.Equal(got, []string{"/new"}) {
			t.Errorf("instances %q, want [/new]", got)
		}
	case <-time.After(testwait.Settle):
		t.Fatalf("a new directory was not noticed within %v", testwait.Settle)
	}
}

// With inotify the periodic rescan is a slow safety net; without it, it is
// how new cgroups are found.
func TestTrackerDefaultRescan(t *testing.T) {
	for _, c := range []struct {
		noNotify bool
		want     time.Duration
	}{{false, RescanNotified}, {true, RescanPolled}} {
		tr := New(Options{
			Hierarchy: Hierarchy{Mount: t.TempDir(), Version: 2},
			Patterns:  []string{"/*"},
			Events:    testEvents,
			CPUs:      []int{0},
			Opener:    (&fakes{by: map[string]*countertest.Opener{}}).opener,
			NoNotify:  c.noNotify,
		})
		tr.Start()
		if tr.notify < 0 && !c.noNotify {
			t.Skip("needs inotify (inotify_init1 failed)")
		}
		if tr.o.Rescan != c.want {
			t.Errorf("NoNotify=%v: rescan every %v, want %v", c.noNotify, tr.o.Rescan, c.want)
		}
		tr.Stop()
	}
}

// waitPaths waits, within a bound, for the Tracker's goroutine to make the
// instances want.
func waitPaths(t *testing.T, tr *Tracker, want ...string) {
	t.Helper()
	var got []string
	if !testwait.Until(testwait.Settle, func() bool {
		got = paths(tr.Instances())
		return slices.Equal(got, want)
	}) {
		t.Fatalf("instances %q, want %q", got, want)
	}
}
