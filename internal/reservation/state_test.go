package reservation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"perfevent/internal/emulator"
	"perfevent/internal/pcpconf"
	"perfevent/internal/testneed"
	"perfevent/internal/testwait"
)

func TestWriteReadState(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	dir := t.TempDir()
	path := StatePath(filepath.Join(dir, "perflock"))
	if path != filepath.Join(dir, "perflock.d", "state") {
		t.Fatalf("StatePath = %s", path)
	}
	since := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	in := &State{
		Generation: 7, PID: 42, Program: "pmdaperfevent", Config: "/etc/pcp/perfevent/perfevent.conf",
		LockFile: filepath.Join(dir, "perflock"), Counters: CountersReleased, Since: since, Holders: []int{100, 200},
		Events: []EventState{{Name: "perf:cpu_clock", State: EventReleased, CPUs: 2}, {Name: "hw:cycles", State: EventFailed, Error: "no such device"}},
	}
	if err := WriteState(path, in); err != nil {
		t.Fatal(err)
	}
	if m := mode(t, path); m != 0o644 {
		t.Errorf("mode %v, want -rw-r--r--", m)
	}
	out, err := ReadState(path)
	if err != nil {
		t.Fatal(err)
	}
	if out.Generation != 7 || out.PID != 42 || !out.Since.Equal(since) || !out.HeldBy(200) || out.HeldBy(42) ||
		len(out.Events) != 2 || out.Events[1] != in.Events[1] {
		t.Errorf("round trip: got %+v", out)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("left behind: %v", entries)
	}
	raw, _ := os.ReadFile(path)
	for _, key := range []string{`"generation": 7`, `"counters": "released"`, `"holders": [`, `"state": "failed"`, `"error": "no such device"`} {
		if !strings.Contains(string(raw), key) {
			t.Errorf("state file lacks %s:\n%s", key, raw)
		}
	}
}

func TestReadStateErrors(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.state")
	if _, err := ReadState(missing); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing: %v", err)
	}
	bad := filepath.Join(dir, "bad.state")
	os.WriteFile(bad, []byte(`{"pid": "x"}`), 0o644)
	if _, err := ReadState(bad); err == nil || !strings.HasPrefix(err.Error(), "state file "+bad+": json: ") {
		t.Errorf("bad JSON: %v", err)
	}
	link := filepath.Join(dir, "link.state")
	os.Symlink(bad, link)
	if _, err := ReadState(link); err == nil {
		t.Error("followed a symbolic link")
	}
}

// A reader racing the writer sees one whole state or another, never a
// truncated or mixed file.
func TestStateAtomicReplace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "perflock.state")
	small := &State{PID: 1, Counters: CountersOpen}
	big := &State{PID: 2, Counters: CountersReleased}
	for range 300 {
		big.Events = append(big.Events, EventState{Name: strings.Repeat("x", 40), State: EventReleased, CPUs: 2})
	}
	if err := WriteState(path, small); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var reads, fails int
	var mu sync.Mutex
	{
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				s, err := ReadState(path)
				mu.Lock()
				reads++
				if err != nil || !(s.PID == 1 && len(s.Events) == 0 || s.PID == 2 && len(s.Events) == 300) {
					fails++
					t.Errorf("reader saw %v (state %v)", err, s != nil)
				}
				mu.Unlock()
			}
		})
	}
	for i := range 50 {
		s := small
		if i%2 == 0 {
			s = big
		}
		if err := WriteState(path, s); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if reads == 0 {
		t.Fatal("no reads happened")
	}
}

func TestStateFileRefreshes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "perflock.state")
	sf, err := NewStateFile(path, State{Program: "pmdaperfevent", Counters: CountersOpen}, 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	s, err := WaitState(ctx, path, 0, func(s *State) bool { return s.Generation >= 3 })
	if err != nil {
		t.Fatalf("the state was not refreshed: %v (last %+v)", err, s)
	}
	if s.PID != os.Getpid() || s.StartTicks == 0 || s.RefreshSeconds != 0.01 || s.Started.IsZero() {
		t.Errorf("filled-in fields: %+v", s)
	}
	t.Run("alive", func(t *testing.T) {
		emulator.SkipOwnStartTime(t)
		if err := s.Alive(); err != nil {
			t.Errorf("Alive: %v", err)
		}
	})
	if err := s.Fresh(time.Now()); err != nil {
		t.Errorf("Fresh: %v", err)
	}
	if err := sf.Update(func(s *State) { s.Counters = CountersReleased; s.Holders = []int{9} }); err != nil {
		t.Fatal(err)
	}
	if s, _ := ReadState(path); s.Counters != CountersReleased || !s.HeldBy(9) {
		t.Errorf("after Update: %+v", s)
	}
	if err := sf.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Close left the state file: %v", err)
	}
}

// Post does not wait for a write under way, which is what the lock watcher
// needs of it; the posts made meanwhile are written together (at most one
// write each for the one under way and the one due), the newest state
// last, and a failed write is reported to the Post whose change it
// carried.
func TestStateFilePost(t *testing.T) {
	path := filepath.Join(t.TempDir(), "perflock.state")
	sf, err := NewStateFile(path, State{Program: "pmdaperfevent", Counters: CountersOpen}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	defer sf.Close()
	before, err := ReadState(path)
	if err != nil {
		t.Fatal(err)
	}
	failures := make(chan error, 8)
	failed := func(err error) { failures <- err }

	sf.writeMu.Lock() // a write that takes its time
	posted := make(chan struct{})
	go func() {
		sf.Post(func(s *State) { s.Counters = CountersReleased; s.Holders = []int{7} }, failed)
		sf.Post(func(s *State) { s.Holders = []int{7, 8} }, failed)
		close(posted)
	}()
	select {
	case <-posted:
	case <-time.After(patience):
		sf.writeMu.Unlock()
		t.Fatal("Post waited for the write under way")
	}
	if s, _ := ReadState(path); s.Generation != before.Generation {
		t.Errorf("written while a write was under way: %+v", s)
	}
	sf.writeMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	s, err := WaitState(ctx, path, 0, func(s *State) bool { return slices.Equal(s.Holders, []int{7, 8}) })
	if err != nil || s.Counters != CountersReleased || s.Generation > before.Generation+2 {
		t.Errorf("after two posts: %+v, %v; want both changes, in at most two writes (generation %d)", s, err, before.Generation+2)
	}
	select {
	case err := <-failures:
		t.Errorf("a write that worked reported %v", err)
	default:
	}

	// A directory that is gone makes the write fail, and the Post hears.
	sf.dir.Close()
	sf.Post(func(s *State) { s.Holders = nil }, failed)
	select {
	case err := <-failures:
		if !strings.Contains(err.Error(), "state directory "+filepath.Dir(path)) {
			t.Errorf("a failed posted write: %v, want it to name the state directory", err)
		}
	case <-time.After(patience):
		t.Fatal("a failed posted write was never reported")
	}
}

// Only one agent reports in a state file; a second one, started by hand
// beside it, must leave the file alone, and the file outlives it.
func TestStateFileHasOneOwner(t *testing.T) {
	path := filepath.Join(t.TempDir(), "perflock.d", "state")
	first, err := NewStateFile(path, State{Program: "first", Counters: CountersOpen}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	second, err := NewStateFile(path, State{Program: "second"}, time.Hour)
	if !errors.Is(err, ErrStateOwned) || second != nil {
		t.Fatalf("second NewStateFile: %v, want ErrStateOwned", err)
	}
	// Naming the owner needs its start time, which qemu-user makes up.
	if want := fmt.Sprintf("state file %s belongs to first (pid %d), which runs: another agent reports there", path, os.Getpid()); emulator.Name() == "" && err.Error() != want {
		t.Errorf("error %q\nwant  %q", err, want)
	}
	if s, err := ReadState(path); err != nil || s.Program != "first" {
		t.Errorf("state after the second agent tried: %+v %v", s, err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	// Once the owner is gone, the next agent takes over.
	third, err := NewStateFile(path, State{Program: "third"}, time.Hour)
	if err != nil {
		t.Fatalf("after the owner closed: %v", err)
	}
	third.Close()
}

// A restarted agent can start while the old one has exited but still
// holds its claim (a zombie whose last thread is closing descriptors):
// it waits for the claim rather than leaving the file alone.
func TestStateFileClaimOfAnExitedAgent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "perflock.d", "state")
	old, err := NewStateFile(path, State{Program: "old"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// The old agent's record names a process that has gone; its claim
	// is released 200 ms later, as its descriptors would be.
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Skip("needs true(1)")
	}
	if err := old.Update(func(s *State) { s.PID, s.StartTicks = gone.Process.Pid, 0 }); err != nil {
		t.Fatal(err)
	}
	release := time.AfterFunc(200*time.Millisecond, func() { old.dir.unclaim() })
	defer release.Stop()
	start := time.Now()
	next, err := NewStateFile(path, State{Program: "next"}, time.Hour)
	if err != nil {
		t.Fatalf("after the old agent exited: %v", err)
	}
	defer next.Close()
	if waited := time.Since(start); waited < 150*time.Millisecond {
		t.Errorf("claimed after %v, before the old claim was released", waited)
	}
	if s, err := ReadState(path); err != nil || s.Program != "next" {
		t.Errorf("state after the restart: %+v %v", s, err)
	}
}

// An agent killed with SIGKILL keeps its descriptors, and with them its
// claim on the state directory, for as long as it takes to close its
// counters: a D or R state with PF_EXITING, no /proc/PID/exe, and no
// zombie yet. Its restarted successor must wait for the claim, not take
// the dying agent for a live one (qa's TestFaultLockFileUser on a busy
// machine: "state file ... belongs to pmdaperfevent (pid 619), which
// runs", and perfalloc could not confirm the release).
// No process can be held in that state, so the lines are canned: what
// /proc/PID/stat showed, polled in a loop, of pmdaperfevents killed while
// they counted the events of qa/testdata/vm.conf.
func TestStateLivenessWhileExiting(t *testing.T) {
	for _, c := range []struct {
		stat  string
		start uint64
		why   string
	}{
		// Just after the kill, before it took effect.
		{"14610 (pmdaperfevent) R 14605 14462 434 0 -1 4194560 769 0 3 0 1 0 0 0 20 0 9 0 3044106 1260257280 1733 18446744073709551615 4194304 6406321 140736929094992 0 0 256 0 4096 2143416063 0 0 0 17 1 0 0 0 0 0 9347072 9490496 956272640 140736929102359 140736929102520 140736929102520 140736929103829 9\n", 3044106, ""},
		{"15827 (pmdaperfevent) D 15822 15358 434 0 -1 4195596 706 0 0 0 0 0 0 0 20 0 1 0 3046154 0 0 18446744073709551615 0 0 0 0 0 0 1002059776 4096 2143416063 1 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 9\n", 3046154, "it is exiting"},
		{"15915 (pmdaperfevent) R 15910 15358 434 0 -1 4195596 778 0 0 0 0 0 0 0 20 0 1 0 3046311 0 0 18446744073709551615 0 0 0 0 0 0 1002059776 4096 2143416063 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 9\n", 3046311, "it is exiting"},
		// The leader a zombie while other threads still close descriptors.
		{"14764 (pmdaperfevent) Z 14744 14462 434 0 -1 4228364 764 0 0 0 0 1 0 0 20 0 5 0 3044266 0 0 18446744073709551615 0 0 0 0 0 0 0 4096 2143416063 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 9\n", 3044266, "it has exited, and its parent has not reaped it yet"},
	} {
		st, err := parseStat(1, []byte(c.stat))
		if err != nil {
			t.Fatal(err)
		}
		if st.startTicks != c.start {
			t.Errorf("%q: start %d, want %d", c.stat, st.startTicks, c.start)
		}
		if why := st.leaving(); why != c.why {
			t.Errorf("%q: %q, want %q", c.stat, why, c.why)
		}
	}
	if _, err := parseStat(720, []byte("720 (pmdaperfevent) R 713 713 713 0 -1 x 1525")); err == nil {
		t.Error("a short line parsed")
	}
}

func TestStateLiveness(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip("needs true(1)")
	}
	dead := &State{Program: "pmdaperfevent", PID: cmd.Process.Pid}
	if err := dead.Alive(); err == nil || err.Error() != "pmdaperfevent (pid "+itoa(dead.PID)+") is not running" {
		t.Errorf("dead pid: %v", err)
	}
	// An exited writer that its parent has not reaped yet still answers
	// kill(pid, 0): start one and leave it unreaped.
	zombie := exec.Command("true")
	if err := zombie.Start(); err != nil {
		t.Fatal(err)
	}
	defer zombie.Wait()
	ticks, err := ProcessStartTicks(zombie.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, testwait.Settle, "true(1) to exit", func() bool {
		st, _ := processStat(zombie.Process.Pid)
		return st.state == 'Z'
	})
	exited := &State{Program: "pmdaperfevent", PID: zombie.Process.Pid, StartTicks: ticks}
	if err := exited.Alive(); err == nil || !strings.Contains(err.Error(), "it has exited, and its parent has not reaped it yet") {
		t.Errorf("unreaped pid: %v", err)
	}
	if err := (&State{PID: os.Getpid()}).Alive(); err != nil {
		t.Errorf("the test itself: %v", err)
	}
	reused := &State{PID: os.Getpid(), StartTicks: 1}
	if err := reused.Alive(); err == nil || !strings.Contains(err.Error(), "the pid now belongs to another process") {
		t.Errorf("recycled pid: %v", err)
	}
	now := time.Now()
	stale := &State{Generation: 5, Written: now.Add(-time.Minute), RefreshSeconds: 10}
	if err := stale.Fresh(now); err == nil || err.Error() != "state generation 5 was written 1m0s ago, but the writer promised to refresh it every 10s" {
		t.Errorf("stale: %v", err)
	}
	if err := stale.Fresh(now.Add(-30 * time.Second)); err != nil {
		t.Errorf("30 s old with a 10 s refresh: %v", err)
	}
}

func TestWaitStateWakesOnRename(t *testing.T) {
	path := filepath.Join(t.TempDir(), "perflock.state")
	go func() {
		time.Sleep(20 * time.Millisecond)
		WriteState(path, &State{Generation: 1})
	}()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	// An hour-long poll: only the inotify hint can end this wait in time.
	if s, err := WaitState(ctx, path, time.Hour, func(s *State) bool { return s.Generation == 1 }); err != nil {
		t.Fatalf("%v (last %+v)", err, s)
	}
}

func TestWaitStateTimeout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "perflock.state")
	WriteState(path, &State{Generation: 4})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	s, err := WaitState(ctx, path, 0, func(*State) bool { return false })
	if !errors.Is(err, context.DeadlineExceeded) || s == nil || s.Generation != 4 {
		t.Errorf("got %+v, %v; want the last state and DeadlineExceeded", s, err)
	}
}

func TestDefaultLockPath(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "pcp.conf")
	os.WriteFile(conf, []byte("# PCP\nPCP_VAR_DIR=/x\nPCP_PMDAS_DIR=\"/opt/pmdas\"\n"), 0o644)
	t.Setenv("PCP_CONF", conf)
	t.Setenv("PCP_PMDAS_DIR", "")
	if got := DefaultLockPath(); got != "/opt/pmdas/perfevent/perflock" {
		t.Errorf("from pcp.conf: %s", got)
	}
	loaded := pcpconf.Load()
	os.Remove(conf)
	if got := LockPathIn(loaded); got != "/opt/pmdas/perfevent/perflock" {
		t.Errorf("from pcp.conf as loaded before it went away: %s", got)
	}
	os.WriteFile(conf, []byte("PCP_PMDAS_DIR=/opt/pmdas\n"), 0o644)
	t.Setenv("PCP_PMDAS_DIR", "/env/pmdas")
	if got := DefaultLockPath(); got != "/env/pmdas/perfevent/perflock" {
		t.Errorf("from the environment: %s", got)
	}
	t.Setenv("PCP_PMDAS_DIR", "")
	t.Setenv("PCP_CONF", conf+".missing")
	if got := DefaultLockPath(); got != "/var/lib/pcp/pmdas/perfevent/perflock" {
		t.Errorf("default: %s", got)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestPrepareStateDir(t *testing.T) {
	testneed.Root(t, "to give the directory to another user")
	const nobody = 65534
	dir := t.TempDir()
	lock := filepath.Join(dir, "perflock")
	d, err := PrepareStateDir(lock, nobody, nobody)
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	var st syscall.Stat_t
	if err := syscall.Lstat(StateDir(lock), &st); err != nil || st.Uid != nobody || st.Mode&0o777 != 0o755 {
		t.Fatalf("state dir: uid %d mode %#o, %v; want %d and 0755", st.Uid, st.Mode&0o777, err, nobody)
	}
	// Again, already prepared: fine.
	if d, err = PrepareStateDir(lock, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	d.Close()
	// Root after a run as nobody (-U root in pmcd.conf): nobody's
	// directory is adopted only when nobody is named as an earlier user.
	if _, err := PrepareStateDir(lock, 0, 0); err == nil {
		t.Error("root took a directory of nobody's that it was not told to trust")
	}
	if d, err = PrepareStateDir(lock, 0, 0, nobody); err != nil {
		t.Fatal(err)
	}
	d.Close()
	if err := syscall.Lstat(StateDir(lock), &st); err != nil || st.Uid != 0 {
		t.Errorf("adopted state dir: uid %d, %v; want root's", st.Uid, err)
	}

	for name, spoil := range map[string]func(path string){
		"symlink":        func(p string) { os.Symlink(t.TempDir(), p) },
		"file":           func(p string) { os.WriteFile(p, nil, 0o644) },
		"world-writable": func(p string) { os.Mkdir(p, 0o755); os.Chmod(p, 0o777) },
		"foreign owner":  func(p string) { os.Mkdir(p, 0o755); os.Chown(p, 12345, 12345) },
	} {
		lock := filepath.Join(t.TempDir(), "perflock")
		spoil(StateDir(lock))
		_, err := PrepareStateDir(lock, nobody, nobody)
		if err == nil || !strings.Contains(err.Error(), StateDir(lock)) || !strings.Contains(err.Error(), "remove it and restart the agent") {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

// A state directory planted after start-up, as a link to another directory
// or as a directory of another user's, is refused and never written: the
// file in the link's target is neither replaced nor deleted.
func TestReplacedStateDirIsNeverWritten(t *testing.T) {
	testneed.Root(t, "to give the directory to another user")
	const nobody = 65534
	for _, kind := range []string{"symlink", "directory of another user"} {
		top := t.TempDir()
		os.Chmod(top, 0o1777) // like /tmp
		lock := filepath.Join(top, "perflock")
		if err := CheckLockDir(lock); err == nil || !strings.Contains(err.Error(), "writable by group or others") {
			t.Errorf("CheckLockDir of a 1777 directory: %v", err)
		}
		d, err := PrepareStateDir(lock, nobody, nobody)
		if err != nil {
			t.Fatal(err)
		}
		sf, err := NewStateFileIn(d, State{Program: "pmdaperfevent"}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		// The attacker moves the directory away and plants theirs.
		os.Rename(StateDir(lock), StateDir(lock)+".old")
		target := t.TempDir()
		os.WriteFile(filepath.Join(target, "state"), []byte("theirs\n"), 0o644)
		os.Chown(filepath.Join(target, "state"), nobody, nobody)
		switch kind {
		case "symlink":
			os.Chown(target, nobody, nobody)
			os.Symlink(target, StateDir(lock))
		default:
			os.Chown(target, 12345, 12345)
			os.Rename(target, StateDir(lock))
			target = StateDir(lock)
		}
		if err := sf.Update(func(*State) {}); err == nil || !strings.Contains(err.Error(), "remove it and restart the agent") {
			t.Errorf("%s: Update = %v, want the directory refused", kind, err)
		}
		sf.Close()
		d.Close()
		if data, err := os.ReadFile(filepath.Join(target, "state")); string(data) != "theirs\n" {
			t.Errorf("%s: the planted directory's state is now %q, %v", kind, data, err)
		}
		if entries, _ := os.ReadDir(target); len(entries) != 1 {
			t.Errorf("%s: the agent wrote into the planted directory: %v", kind, entries)
		}
	}
}

// When the lock file's directory is deleted and made again, the state
// directory comes back with the next write.
func TestStateDirComesBack(t *testing.T) {
	top := filepath.Join(t.TempDir(), "perfevent")
	os.Mkdir(top, 0o755)
	lock := filepath.Join(top, "perflock")
	d, err := PrepareStateDir(lock, os.Geteuid(), os.Getegid())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	sf, err := NewStateFileIn(d, State{Program: "pmdaperfevent"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	defer sf.Close()
	if err := os.RemoveAll(top); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(top, 0o755)
	if err := sf.Update(func(s *State) { s.Counters = CountersReleased }); err != nil {
		t.Fatal(err)
	}
	if s, err := ReadState(StatePath(lock)); err != nil || s.Counters != CountersReleased {
		t.Errorf("state after the directory came back: %+v, %v", s, err)
	}
}

// A PostChange whose update changes nothing asks for no write: the lock
// watcher's first report at start-up is such a one.
func TestStateFilePostChangeUnchanged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "perflock.state")
	sf, err := NewStateFile(path, State{Program: "pmdaperfevent", Counters: CountersOpen}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	defer sf.Close()
	before, err := ReadState(path)
	if err != nil {
		t.Fatal(err)
	}
	due := func() bool {
		sf.mu.Lock()
		defer sf.mu.Unlock()
		return sf.posted
	}
	sf.writeMu.Lock() // the writer takes the first post, then waits here
	sf.PostChange(func(s *State) bool { s.Holders = []int{7}; return true }, nil)
	deadline := time.Now().Add(patience)
	for due() && time.Now().Before(deadline) {
		runtime.Gosched()
	}
	if due() {
		sf.writeMu.Unlock()
		t.Fatal("the writer did not take the first post")
	}
	sf.PostChange(func(s *State) bool { return false }, nil)
	again := due()
	sf.writeMu.Unlock()
	if again {
		t.Errorf("an update that changed nothing asked for a write")
	}
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	s, err := WaitState(ctx, path, 0, func(s *State) bool { return slices.Equal(s.Holders, []int{7}) })
	if err != nil || s.Generation != before.Generation+1 {
		t.Errorf("after a change and an update that changed nothing: %+v, %v; want one write (generation %d)", s, err, before.Generation+1)
	}
}

// TestEncodeStateIsMarshalIndent: the state file is what encoding/json
// would write, byte for byte, for states with and without holders, events,
// errors and start ticks, in zones with and without an offset, and for
// strings every escape applies to.
func TestEncodeStateIsMarshalIndent(t *testing.T) {
	odd := "a\"b\\c\b\f\n\r\t\x00\x1f\x7f <>& \u2028\u2029 é 日本 \xff\xc3 \xed\xa0\x80 end"
	zone := time.FixedZone("X", -(3*3600 + 30*60))
	states := []State{
		{},
		{Generation: 1, Written: time.Date(2026, 12, 5, 14, 23, 4, 123456789, time.UTC), RefreshSeconds: 60,
			Program: "pmdaperfevent", PID: 4242, StartTicks: 987654321, Started: time.Date(2026, 12, 5, 14, 23, 4, 0, zone),
			Config: "/etc/pcp/perfevent/perfevent.conf", LockFile: "/var/lib/pcp/pmdas/perfevent/perflock",
			Counters: CountersOpen, Since: time.Date(2026, 1, 2, 3, 4, 5, 600, time.Local), Holders: []int{},
			Events: []EventState{}},
		{Generation: 1<<64 - 1, RefreshSeconds: 0.25, PID: -1, Counters: CountersReleased, Holders: []int{100, 200, 300},
			Events: []EventState{{Name: "perf:cpu_clock", State: EventReleased, CPUs: 2}, {Name: odd, State: EventFailed, Error: odd}}},
		{RefreshSeconds: 1e-7, Program: odd, Holders: []int{7}},
		{RefreshSeconds: 1e21, Config: "<script>&amp;</script>"},
		{RefreshSeconds: 123456.789e-3, Events: []EventState{{Name: "x", Error: "e"}}},
	}
	for i, s := range states {
		want, err := json.MarshalIndent(&s, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, '\n')
		got, err := encodeState(&s)
		if err != nil {
			t.Errorf("state %d: %v", i, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("state %d:\n%s\nwant\n%s", i, got, want)
		}
	}
	for _, s := range []State{{Written: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}, {RefreshSeconds: math.NaN()}, {RefreshSeconds: math.Inf(1)}} {
		if _, err := json.Marshal(&s); err == nil {
			t.Fatalf("encoding/json takes %+v", s)
		}
		if _, err := encodeState(&s); err == nil {
			t.Errorf("encodeState takes what encoding/json refuses: %+v", s)
		}
	}
}

// TestProcessStatReadsWhatReadFileDoes: the start ticks of this process
// as its whole /proc/PID/stat gives them, and a missing pid as a missing file.
func TestProcessStatReadsWhatReadFileDoes(t *testing.T) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Skipf("needs /proc: %v", err)
	}
	want, err := parseStat(os.Getpid(), b)
	if err != nil {
		t.Fatal(err)
	}
	got, err := processStat(os.Getpid())
	if err != nil || got.startTicks != want.startTicks || got.startTicks == 0 {
		t.Errorf("processStat = %+v, %v; /proc/self/stat says %+v", got, err, want)
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip("needs true(1)")
	}
	if _, err := processStat(cmd.Process.Pid); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "/proc/"+itoa(cmd.Process.Pid)+"/stat") {
		t.Errorf("a reaped pid: %v", err)
	}
}

// Close waits for the writes under way, heartbeats and Posts, and nothing
// writes the file again after it, not even a late Update: an agent that
// has stopped reports nothing.
func TestStateFileCloseEndsWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "perflock.state")
	sf, err := NewStateFile(path, State{Program: "pmdaperfevent", Counters: CountersOpen}, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range 200 {
			sf.Post(func(s *State) { s.Holders = []int{i} }, nil)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if s, err := WaitState(ctx, path, 0, func(s *State) bool { return s.Generation >= 3 }); err != nil {
		t.Fatalf("posts and heartbeats wrote nothing: %v (last %+v)", err, s)
	}
	if err := sf.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait() // Posts after Close start no writer
	if err := sf.Update(func(s *State) { s.Holders = []int{-1} }); err != nil {
		t.Errorf("Update after Close: %v", err)
	}
	sf.Post(func(s *State) { s.Holders = []int{-2} }, nil)
	if err := sf.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the state file is back after Close: %v", err)
	}
}

// The state file's content is made in one allocation: appendState sizes
// its buffer for the state before it writes.
func TestAppendStateAllocatesOnce(t *testing.T) {
	s := State{Generation: 3, Written: time.Now(), RefreshSeconds: 60, Program: "pmdaperfevent", PID: 4242, StartTicks: 99,
		Started: time.Now(), Config: "/var/lib/pcp/pmdas/perfevent-go/perfevent.conf", LockFile: "/var/lib/pcp/pmdas/perfevent/perflock",
		Counters: CountersOpen, Since: time.Now(), Holders: []int{1, 22, 333}}
	for i := range 40 {
		s.Events = append(s.Events, EventState{Name: "hwcounters.some_event_name_" + strconv.Itoa(i), State: EventFailed, CPUs: 768,
			Error: "not supported on this machine (e.g. a VM without a hardware PMU) (ENOENT)"})
	}
	if n := testing.AllocsPerRun(10, func() { appendState(nil, &s) }); n != 1 {
		t.Errorf("%v allocations, want 1", n)
	}
}
