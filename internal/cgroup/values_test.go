package cgroup

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"perfevent/internal/counter/countertest"
	"perfevent/internal/testwait"
)

// value reads event ev of the instance at path.
func value(t *testing.T, tr *Tracker, path string, ev int) uint64 {
	t.Helper()
	tr.Read([]bool{true, true})
	for _, in := range tr.Instances() {
		if in.Path != path {
			continue
		}
		for i := range tr.Len() {
			if id, v, _ := tr.At(i, ev); id == in.ID {
				return v
			}
		}
	}
	t.Fatalf("%s is not an instance (instances %v)", path, paths(tr.Instances()))
	return 0
}

// trackerWith starts a tracker of root over cpus that shares ids.
func trackerWith(t *testing.T, root string, ids *IDs, cpus []int) (*Tracker, *fakes) {
	f := &fakes{by: map[string]*countertest.Opener{}}
	tr := New(Options{
		Hierarchy: Hierarchy{Mount: root, Version: 2},
		Patterns:  []string{"/*"},
		Events:    testEvents,
		CPUs:      cpus,
		IDs:       ids,
		Opener:    f.opener,
		Rescan:    time.Hour,
		NoNotify:  true,
	})
	t.Cleanup(tr.Stop)
	tr.Start()
	return tr, f
}

// A reload and a CPU hotplug rebuild replace the Tracker: the new one's
// instances continue from the old one's values, also with a CPU fewer,
// and an event the new configuration lacks carries nothing over.
func TestTrackerCarriesAcrossGenerations(t *testing.T) {
	root := t.TempDir()
	mkdirs(t, root, "a", "b")
	ids := NewIDs()
	old, f := trackerWith(t, root, ids, []int{0, 1})
	f.get("a").Add("cpu-clock", 0, 4000, 1, 1)
	f.get("a").Add("cpu-clock", 1, 3000, 1, 1)
	f.get("b").Add("context-switches", 1, 9, 1, 1)
	if v := value(t, old, "/a", 0); v != 7000 {
		t.Fatalf("/a before the rebuild: %d, want 7000", v)
	}

	f.get("a").Add("cpu-clock", 1, 500, 1, 1) // counted after the last fetch

	// CPU 1 went offline: the rebuild counts on CPU 0 alone.
	nu, g := trackerWith(t, root, ids, []int{0})
	nu.Carry(old)
	old.Stop()
	g.get("a").Add("cpu-clock", 0, 5, 1, 1)
	if v := value(t, nu, "/a", 0); v != 7505 {
		t.Errorf("/a after the rebuild: %d, want 7505 (7000 fetched and 500 not, carried; 5 new)", v)
	}
	if v := value(t, nu, "/b", 1); v != 9 {
		t.Errorf("/b context-switches after the rebuild: %d, want 9 carried", v)
	}

	// CPU 1 is back, and the next generation counts a changed
	// context-switches (another attribute): that one starts anew.
	ev := slices.Clone(testEvents)
	ev[1].Attr.Sample = 7
	f3 := &fakes{by: map[string]*countertest.Opener{}}
	third := New(Options{Hierarchy: Hierarchy{Mount: root, Version: 2}, Patterns: []string{"/*"}, Events: ev,
		CPUs: []int{0, 1}, IDs: ids, Opener: f3.opener, Rescan: time.Hour, NoNotify: true})
	t.Cleanup(third.Stop)
	third.Start()
	third.Carry(nu)
	nu.Stop()
	if v := value(t, third, "/a", 0); v != 7505 {
		t.Errorf("/a in the third generation: %d, want 7505", v)
	}
	if v := value(t, third, "/b", 1); v != 0 {
		t.Errorf("/b's changed context-switches: %d, want 0: another event", v)
	}
	// The ids never changed.
	if got := third.Instances(); got[0] != (Instance{0, "/a"}) || got[1] != (Instance{1, "/b"}) {
		t.Errorf("instances %v, want /a 0 and /b 1 throughout", got)
	}
}

// A cgroup removed and made again under the same path between two rescans
// (a quick service restart) is another cgroup: its counters are opened
// anew on it, while its instance keeps its id and continues from the dead
// one's value, so that the value never goes back.
func TestTrackerRecreatedCgroup(t *testing.T) {
	root := t.TempDir()
	mkdirs(t, root, "svc", "other")
	tr, f := startTracker(t, root, nil)
	first := f.get("svc")
	first.Add("cpu-clock", 0, 1000, 1, 1)
	if v := value(t, tr, "/svc", 0); v != 1000 {
		t.Fatalf("/svc: %d, want 1000", v)
	}
	id := tr.Instances()[1]

	if err := os.Remove(filepath.Join(root, "svc")); err != nil {
		t.Fatal(err)
	}
	mkdirs(t, root, "svc")
	tr.rescan()
	second := f.get("svc")
	if second == first {
		t.Fatal("the re-created cgroup was not opened anew: the agent still counts the dead one")
	}
	if first.OpenNow() != 0 {
		t.Errorf("%d descriptors of the dead cgroup still open", first.OpenNow())
	}
	second.Add("cpu-clock", 1, 20, 1, 1)
	if v := value(t, tr, "/svc", 0); v != 1020 {
		t.Errorf("/svc after its re-creation: %d, want 1020 (1000 carried, 20 new)", v)
	}
	if got := tr.Instances()[1]; got != id {
		t.Errorf("instance after the re-creation %v, want %v", got, id)
	}

	// The same while perfalloc holds the counters: the rescan waits for
	// Reopen, which makes it.
	tr.Close()
	os.Remove(filepath.Join(root, "svc"))
	mkdirs(t, root, "svc")
	tr.rescan()
	if !tr.Resume() {
		t.Fatal("Resume after a re-creation under the reservation does not ask for a Reopen")
	}
	tr.Reopen()
	var third *countertest.Opener
	// Reopen first reopens what it had (the dead cgroup's set too); the
	// rescan it asks for then finds the new inode. Only after that rescan
	// is the re-created cgroup's counter the one served.
	testwait.Eventually(t, testwait.Settle, "the rescan Reopen asks for", func() bool {
		tr.opMu.Lock()
		defer tr.opMu.Unlock()
		return !tr.missed
	})
	if third = f.get("svc"); third == second || len(tr.Instances()) != 2 {
		t.Fatalf("the cgroup re-created under the reservation was not opened anew (%d instances)", len(tr.Instances()))
	}
	third.Add("cpu-clock", 0, 3, 1, 1)
	if v := value(t, tr, "/svc", 0); v != 1023 {
		t.Errorf("/svc after a re-creation under perfalloc: %d, want 1023", v)
	}

	// Removed for a while, and back: the same instance, continuing.
	os.Remove(filepath.Join(root, "svc"))
	tr.rescan()
	if got := paths(tr.Instances()); !slices.Equal(got, []string{"/other"}) {
		t.Fatalf("instances with /svc gone: %q", got)
	}
	mkdirs(t, root, "svc")
	tr.rescan()
	if v := value(t, tr, "/svc", 0); v != 1023 {
		t.Errorf("/svc back after a while: %d, want 1023", v)
	}
}

// Ids stay bounded however many cgroups come and go, a live cgroup's id is
// never another's, and a path that returns soon keeps its id.
func TestIDsBounded(t *testing.T) {
	const keep = 100
	ids := NewIDsKeeping(keep)
	live := map[int32]string{}
	hold := func(p string) int32 {
		id, _ := ids.acquire(p)
		if q, ok := live[id]; ok {
			t.Fatalf("%s got id %d, which live %s has", p, id, q)
		}
		live[id] = p
		return id
	}
	// Ten long-lived cgroups, and 100,000 that come and go, 50 at once.
	for i := range 10 {
		hold(fmt.Sprintf("/system.slice/s%d.service", i))
	}
	var top, id400 int32
	var window []string
	for i := range 100000 {
		p := fmt.Sprintf("/job/%d", i)
		id := hold(p)
		top = max(top, id)
		if i == 400 {
			id400 = id
		}
		window = append(window, p)
		if len(window) > 50 {
			q := window[0]
			window = window[1:]
			for id, r := range live {
				if r == q {
					delete(live, id)
				}
			}
			ids.release(q, nil)
		}
		if i == 500 {
			// A path that went recently comes back with its id.
			id, _ := ids.acquire("/job/400")
			ids.release("/job/400", nil)
			if id != id400 {
				t.Errorf("/job/400 came back as %d, want its id %d", id, id400)
			}
		}
	}
	if bound := int32(10 + 51 + keep); top >= bound {
		t.Errorf("ids reached %d after 100,000 cgroups, want below %d (live + kept)", top, bound)
	}
	if n := ids.Len(); n > 10+51+keep {
		t.Errorf("%d paths remembered, want at most %d", n, 10+51+keep)
	}
	if n := len(ids.gone); n > 2*keep+64 {
		t.Errorf("%d refs to gone paths, want at most %d", n, 2*keep+64)
	}
}

// Under churn the log says each thing once, and at most logBurst lines a
// logEvery, then how many it left out.
func TestTrackerQuietLog(t *testing.T) {
	root := t.TempDir()
	mkdirs(t, root, "a")
	f := &fakes{by: map[string]*countertest.Opener{}}
	var logs []string
	tr := newTestTracker(t, root, 1, f, &logs)
	clock := time.Unix(0, 0)
	tr.now = func() time.Time { return clock }
	tr.Start()
	for i := range 300 {
		d := filepath.Join(root, fmt.Sprintf("z%d", i))
		mkdirs(t, root, filepath.Base(d))
		tr.rescan()
		os.Remove(d)
	}
	if len(logs) != logBurst {
		t.Fatalf("%d lines for 300 cgroups left out one after the other, want %d:\n%s", len(logs), logBurst, strings.Join(logs, "\n"))
	}
	clock = clock.Add(logEvery)
	mkdirs(t, root, "late")
	tr.rescan()
	if len(logs) != logBurst+1 || !strings.Contains(logs[logBurst], "(297 more lines about cgroups were not logged") {
		t.Errorf("the line after the pause: %q, want it to count the 297 not logged", logs[logBurst:])
	}
	// What stays left out is not named again.
	clock = clock.Add(logEvery)
	tr.rescan()
	if len(logs) != logBurst+1 {
		t.Errorf("a rescan that changed nothing logged %q", logs[logBurst+1:])
	}
}

// Patterns are priorities: under the cap a cgroup of an earlier pattern
// takes the place of one of a later pattern, even one counted already, so
// that whoever may make cgroups under the later pattern cannot blind the
// earlier ones; within one pattern, counted cgroups stay.
func TestTrackerPatternPriority(t *testing.T) {
	root := t.TempDir()
	mkdirs(t, root, "user.slice/u1", "user.slice/u2", "user.slice/u3")
	f := &fakes{by: map[string]*countertest.Opener{}}
	var logs []string
	tr := newTestTracker(t, root, 3, f, &logs)
	tr.o.Patterns = []string{"/system.slice/*", "/user.slice/*"}
	tr.Start()
	if got := paths(tr.Instances()); !slices.Equal(got, []string{"/user.slice/u1", "/user.slice/u2", "/user.slice/u3"}) {
		t.Fatalf("instances %q", got)
	}
	mkdirs(t, root, "system.slice/a.service", "user.slice/u0")
	tr.rescan()
	want := []string{"/user.slice/u1", "/user.slice/u2", "/system.slice/a.service"}
	if got := paths(tr.Instances()); !slices.Equal(got, want) {
		t.Errorf("instances %q, want %q: the service in, u3 out, u0 not in before u1 and u2", got, want)
	}
	if !strings.Contains(strings.Join(logs, "\n"), "/user.slice/u0 /user.slice/u3") {
		t.Errorf("the log does not name u0 and u3 as left out: %q", logs)
	}
}

// perfalloc's Close waits for a rescan in progress; a rescan stops opening
// cgroups as soon as Close waits, and Reopen finishes its work.
func TestTrackerRescanYieldsToClose(t *testing.T) {
	root := t.TempDir()
	tr, _ := startTracker(t, root, nil)
	mkdirs(t, root, "a", "b")
	tr.closing.Add(1)
	tr.rescan()
	tr.closing.Add(-1)
	if n := len(tr.Instances()); n != 0 {
		t.Errorf("%d cgroups opened while Close waited, want 0", n)
	}
	tr.Close()
	if !tr.Resume() {
		t.Fatal("the rescan cut short is not asked for again")
	}
	tr.Reopen()
	waitPaths(t, tr, "/a", "/b")
}

// The descriptor budget caps the cgroups before max does on a machine
// with many CPUs, and the log says which bound is reached.
func TestTrackerDescriptorBudget(t *testing.T) {
	root := t.TempDir()
	mkdirs(t, root, "a", "b", "c")
	f := &fakes{by: map[string]*countertest.Opener{}}
	var logs []string
	tr := newTestTracker(t, root, 10, f, &logs)
	tr = New(Options{Hierarchy: tr.o.Hierarchy, Patterns: tr.o.Patterns, Max: 10, Descriptors: 13, Events: testEvents,
		CPUs: []int{0, 1, 2}, Opener: f.opener, Rescan: time.Hour, NoNotify: true, Log: tr.o.Log})
	t.Cleanup(tr.Stop)
	tr.Start()
	if n, fds := tr.Stats(); n != 2 || fds != 12 {
		t.Errorf("%d cgroups on %d descriptors under a budget of 13, want 2 on 12 (2 events × 3 CPUs each)", n, fds)
	}
	if len(logs) != 1 || !strings.Contains(logs[0], "the cap of 2 cgroups (descriptors 13 in cgroups.conf for 2 events × 3 CPUs a cgroup)") || !strings.Contains(logs[0], "/c") {
		t.Errorf("log %q, want one line naming /c and the descriptor budget", logs)
	}
}

// While the tree keeps changing, a cgroup is opened by the second rescan
// that sees it: one that lives less than that costs no open and no close.
// A re-created one keeps its old member meanwhile. A quiet rescan opens
// at once.
func TestTrackerBusyRescan(t *testing.T) {
	root := t.TempDir()
	mkdirs(t, root, "svc")
	tr, f := startTracker(t, root, nil)
	first := f.get("svc")

	mkdirs(t, root, "short")
	tr.scanTree(true)
	os.Remove(filepath.Join(root, "short"))
	tr.scanTree(true)
	if f.get("short") != nil {
		t.Error("a cgroup seen by one busy rescan only was opened")
	}

	mkdirs(t, root, "long")
	os.Remove(filepath.Join(root, "svc"))
	mkdirs(t, root, "svc")
	tr.scanTree(true)
	if f.get("long") != nil || f.get("svc") != first {
		t.Fatal("a busy rescan opened cgroups it saw for the first time")
	}
	if got := paths(tr.Instances()); !slices.Equal(got, []string{"/svc"}) {
		t.Errorf("instances %q, want the re-created /svc kept meanwhile", got)
	}
	tr.scanTree(true)
	if f.get("long") == nil || f.get("svc") == first {
		t.Fatal("the second busy rescan did not open what the first saw")
	}
	if got := paths(tr.Instances()); !slices.Equal(got, []string{"/svc", "/long"}) {
		t.Errorf("instances %q, want [/svc /long]", got)
	}

	mkdirs(t, root, "quiet")
	tr.rescan()
	if f.get("quiet") == nil {
		t.Error("a quiet rescan did not open a new cgroup")
	}
}
