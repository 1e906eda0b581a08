package lockwatch

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"perfevent/internal/testwait"

	"perfevent/internal/reservation"
	"perfevent/internal/reservation/inotify"
)

// Attacks an unprivileged local user can make on the agent's lock watcher.
// Each runs in a helper process until it is killed, after saying "ready".
var attacks = []struct {
	name string
	what string
}{
	{"openclose", "opens and closes the lock file in a loop, never locking it"},
	{"lockclose", "opens, read-locks and closes the lock file in a loop"},
	{"fdlock", "keeps the lock file open and locks and unlocks it in a loop"},
	{"fdlock-50ms", "keeps the lock file open and locks or unlocks it every 50 ms: a silent holder, not an attack"},
	{"holdopen", "keeps the lock file open, never locking it"},
	{"manylocks", "holds 60,000 POSIX locks on a file of its own and a reservation"},
	{"manylocks-openclose", "holds 60,000 POSIX locks and a reservation, and opens and closes the lock file in a loop"},
}

// manyLocks is the number of unrelated locks the manylocks attacks hold,
// each a line of /proc/locks.
const manyLocks = 60000

func helperAttack(kind, path string) {
	openLock := func() int { return helperOpenFile(path) }
	if strings.HasPrefix(kind, "manylocks") {
		var ownFD uintptr
		// Spread over files of 600 locks each, since adding a lock scans
		// the file's list; gaps between the bytes keep the kernel from
		// merging them.
		for i := range int64(manyLocks) {
			if i%600 == 0 {
				own, err := os.Create(filepath.Join(filepath.Dir(path), fmt.Sprint("own", i)))
				if err != nil {
					helperFail(err)
				}
				ownFD = own.Fd()
			}
			lk := unix.Flock_t{Type: unix.F_RDLCK, Start: 2 * (i % 600), Len: 1}
			if err := unix.FcntlFlock(ownFD, unix.F_SETLK, &lk); err != nil {
				helperFail(err)
			}
		}
		if _, err := reservation.Reserve(path); err != nil {
			helperFail(err)
		}
	}
	fmt.Println("ready")
	switch kind {
	case "openclose", "manylocks-openclose":
		for {
			unix.Close(openLock())
		}
	case "lockclose":
		for {
			fd := openLock()
			unix.FcntlFlock(uintptr(fd), unix.F_SETLK, &helperReadLock)
			unix.Close(fd)
		}
	case "fdlock":
		fd := openLock()
		for {
			unix.FcntlFlock(uintptr(fd), unix.F_SETLK, &helperReadLock)
			unix.FcntlFlock(uintptr(fd), unix.F_SETLK, &helperUnlock)
		}
	case "fdlock-50ms":
		fd := openLock()
		for {
			unix.FcntlFlock(uintptr(fd), unix.F_SETLK, &helperReadLock)
			time.Sleep(50 * time.Millisecond)
			unix.FcntlFlock(uintptr(fd), unix.F_SETLK, &helperUnlock)
			time.Sleep(50 * time.Millisecond)
		}
	case "holdopen", "manylocks":
		openLock()
		io.Copy(io.Discard, os.Stdin)
	}
	os.Exit(0)
}

// attackCost is what the watcher spent while an attack ran.
type attackCost struct {
	elapsed   time.Duration
	cpu       time.Duration // user + system time of this whole process
	switches  int64         // its context switches, voluntary or not: wake-ups
	checks    int64         // F_GETLK checks
	procReads int64         // reads of /proc/locks
	callbacks int64
}

func (c attackCost) String() string {
	s := c.elapsed.Seconds()
	return fmt.Sprintf("%.2f%% of a core (%.0f ticks per 10 s), %.0f checks/s, %.0f context switches/s, %.1f /proc/locks reads/s, %.1f callbacks/s",
		100*c.cpu.Seconds()/s, 1000*c.cpu.Seconds()/s, float64(c.checks)/s, float64(c.switches)/s, float64(c.procReads)/s, float64(c.callbacks)/s)
}

// processUsage is this process's CPU time and context switches so far.
func processUsage() (time.Duration, int64) {
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), ru.Nvcsw + ru.Nivcsw
}

// runAttack watches a fresh lock file while the attack kind runs for d,
// and returns the cost. The process must not be doing anything else.
func runAttack(t testing.TB, kind string, opts Options, d time.Duration) attackCost {
	t.Helper()
	path, lf := tempLockFile(t)
	var calls atomic.Int64
	w, err := Watch(lf, opts, func(Status) { calls.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()

	cmd := helperCommand("attack-"+kind, path)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
	}()
	if line, err := bufio.NewReader(stdout).ReadString('\n'); strings.TrimSpace(line) != "ready" {
		t.Fatalf("attack %s: %q %v", kind, line, err)
	}
	time.Sleep(100 * time.Millisecond) // the start-up transition

	calls0 := calls.Load()
	start := time.Now()
	cpu0, sw0 := processUsage()
	checks0, reads0 := w.checks.Load(), w.procReads.Load()
	time.Sleep(d)
	cpu1, sw1 := processUsage()
	cost := attackCost{
		elapsed:   time.Since(start),
		cpu:       cpu1 - cpu0,
		switches:  sw1 - sw0,
		checks:    w.checks.Load() - checks0,
		procReads: w.procReads.Load() - reads0,
	}
	cost.callbacks = calls.Load() - calls0
	return cost
}

// BenchmarkWatcherUnderAttack measures the watcher's CPU while each attack
// runs for ATTACK_SECONDS (default 5); run it with -benchtime=1x. The CPU
// is the whole test process's, which does nothing else meanwhile.
func BenchmarkWatcherUnderAttack(b *testing.B) {
	d := 5 * time.Second
	if s := os.Getenv("ATTACK_SECONDS"); s != "" {
		if v, err := time.ParseDuration(s + "s"); err == nil {
			d = v
		}
	}
	for _, a := range append(attacks, struct{ name, what string }{"none", "nobody touches the lock file"}) {
		b.Run(a.name, func(b *testing.B) {
			var c attackCost
			for range b.N {
				c = runAttack(b, a.name, Options{}, d)
			}
			s := c.elapsed.Seconds()
			b.ReportMetric(100*c.cpu.Seconds()/s, "%cpu")
			b.ReportMetric(float64(c.checks)/s, "checks/s")
			b.ReportMetric(float64(c.switches)/s, "switches/s")
			b.ReportMetric(float64(c.procReads)/s, "proclocks/s")
			b.ReportMetric(float64(c.callbacks)/s, "callbacks/s")
			b.ReportMetric(0, "ns/op")
			b.Logf("%s: %v", a.what, c)
		})
	}
}

// The watcher's rate limits hold under each attack. These are counts, not
// times, so a busy machine can only lower them: at most one check per
// densePoll, and /proc/locks no more often than namingGap, or, when it is
// as big as the manylocks attacks make it, not again within the second.
func TestWatcherUnderAttackIsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three attacks for a second each")
	}
	const d = time.Second
	for _, a := range []struct {
		kind      string
		procReads int64
	}{
		{"openclose", 0},
		{"lockclose", int64(d / namingGap)},
		{"manylocks-openclose", 1},
	} {
		c := runAttack(t, a.kind, Options{}, d)
		t.Logf("%s: %v", a.kind, c)
		if most := int64(c.elapsed/densePoll) + 2; c.checks > most {
			t.Errorf("%s: %d checks in %v, want at most %d", a.kind, c.checks, c.elapsed, most)
		}
		if c.procReads > a.procReads+1 {
			t.Errorf("%s: %d reads of /proc/locks in %v, want at most %d", a.kind, c.procReads, c.elapsed, a.procReads+1)
		}
		if c.callbacks > c.checks {
			t.Errorf("%s: %d callbacks, more than the %d checks", a.kind, c.callbacks, c.checks)
		}
	}
}

// A flood is told by the rate of the events, not by how many one read
// brings: a read that comes late (the watcher's thread waited for a CPU, or
// its callback for the agent) finds all the events of that time, and a
// loop of perfalloc runs is no flood. The inotify queue is real, the clock
// of the reads is the test's.
func TestWatcherLateReadIsNoFlood(t *testing.T) {
	path, lf := tempLockFile(t)
	w := newWatcher(lf, Options{}, func(Status) {})
	if err := w.startNotify(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.stopNotify)
	flood := func() bool {
		w.users.mu.Lock()
		defer w.users.mu.Unlock()
		return w.users.flood
	}
	// Each cycle is two events, an open and a close, which do not merge.
	const cycles = floodEvents
	openClose := func() {
		for range cycles {
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			f.Close()
		}
	}
	buf := make([]byte, inotify.BufSize)
	t0 := time.Now()
	w.readEvents(buf, t0)

	openClose()
	late := t0.Add(time.Duration(2*cycles) * time.Second / 1000) // 1000 a second
	w.readEvents(buf, late)
	if flood() {
		t.Fatalf("%d events read %v after the last read: taken for a flood", 2*cycles, late.Sub(t0))
	}

	openClose()
	w.readEvents(buf, late.Add(DefaultOpenPoll))
	if !flood() {
		t.Fatalf("%d events read %v after the last read: not taken for a flood", 2*cycles, DefaultOpenPoll)
	}
}

// In a flood the watcher stops watching closes; reservations are still
// seen (the open is a hint, the end a poll), and once opens pause for
// floodQuiet it watches closes and counts users again.
func TestWatcherFloodGivesUpTheCount(t *testing.T) {
	fast, slow := 10*time.Millisecond, time.Hour
	path, w, ch := newTestWatcher(t, Options{Poll: fast, OpenPoll: fast, IdlePoll: slow})
	waitInterval(t, w, slow, "nobody else has the file open")
	w.flooded(floodEvents+1, time.Now()) // as if one read had brought that many events
	w.users.mu.Lock()
	flood, known := w.users.flood, w.users.known
	w.users.mu.Unlock()
	if !flood || known {
		t.Fatalf("after a flood: flood %v, count known %v; want true, false", flood, known)
	}
	o := startOpener(t, path, "open")
	o.reserve(t, ch)
	o.release(t, ch) // no close event: the poll sees it
	testwait.Eventually(t, patience, "the flood to end after the last open", func() bool {
		w.users.mu.Lock()
		defer w.users.mu.Unlock()
		return !w.users.flood
	})
	waitInterval(t, w, slow, "closes watched again, nobody has the file open")
}
