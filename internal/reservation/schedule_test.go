package reservation

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The schedule is tested on a Watcher that is never started: the test
// calls step with the times it chooses and reads back when the next check
// is due. Locks are real (helper processes), the clock is not.

// schedWatcher is a Watcher with the default options whose hints come from
// the test, with others other processes counted as having the file open
// (confirmed by a probe) and nothing heard for a second before t0.
func schedWatcher(t *testing.T, others int, t0 time.Time) (string, *Watcher) {
	t.Helper()
	path, lf := tempLockFile(t)
	w := newWatcher(lf, Options{}, func(st Status) {})
	w.note = &notifier{fd: -1, fileWD: -1} // events come from the test only
	// Namings finish at once, and the next step takes them. Their cost,
	// which sets when the next one may start, is the test's too: the read
	// of /proc/locks is real, but its CPU time on a busy machine or under
	// qemu-user (7 ms, which puts the next naming 350 ms off) is not.
	w.startNaming = func(n naming) {
		n = w.readHolders(n)
		n.took = namingCost
		w.named <- n
	}
	w.users.known, w.users.delta = true, others
	long := t0.Add(-time.Second)
	w.lastCheck, w.lastEnsure, w.tokensAt, w.openAt, w.next = long, t0, t0, long, t0
	w.current = Status{Since: long}
	return path, w
}

// namingCost is the CPU time the schedule tests give each read of
// /proc/locks: a tenth of a millisecond, as on an idle machine, so the
// budget between namings is namingGap.
const namingCost = 100 * time.Microsecond

// stepAt runs a step at now and returns how long after now the next check
// is due.
func stepAt(w *Watcher, now time.Time, hints uint32) time.Duration {
	w.pending |= hints
	w.step(now)
	return w.next.Sub(now)
}

func TestScheduleAfterAnOpen(t *testing.T) {
	t0 := time.Now()
	_, w := schedWatcher(t, 1, t0)
	if got := stepAt(w, t0, hintOpen); got != openFollowUp {
		t.Fatalf("after an open with no lock yet: next check in %v, want %v", got, openFollowUp)
	}
	now := t0.Add(openFollowUp)
	if got := stepAt(w, now, 0); got != densePoll {
		t.Fatalf("follow-up found no lock: next check in %v, want %v", got, densePoll)
	}
	for now = now.Add(densePoll); now.Sub(t0) < denseFor; now = now.Add(densePoll) {
		if got := stepAt(w, now, 0); got != densePoll && now.Add(got).Sub(t0) < denseFor {
			t.Fatalf("%v after the open: next check in %v, want %v", now.Sub(t0), got, densePoll)
		}
	}
	if now = t0.Add(denseFor); w.next.After(now) {
		now = w.next
	}
	if got := stepAt(w, now, 0); got != DefaultOpenPoll {
		t.Fatalf("dense checks over, file still open: next check in %v, want %v", got, DefaultOpenPoll)
	}
	if w.silent {
		t.Fatal("no lock came or went, yet a silent holder is suspected")
	}
}

func TestScheduleHintsDrawFromTheBucket(t *testing.T) {
	t0 := time.Now()
	_, w := schedWatcher(t, 1, t0)
	w.tokens = 0
	stepAt(w, t0, 0)
	// A hint right after a check with the bucket empty waits OpenPoll.
	if got := stepAt(w, t0.Add(time.Microsecond), hintOpen); got != DefaultOpenPoll-time.Microsecond {
		t.Fatalf("hint with an empty bucket: next check in %v, want %v", got, DefaultOpenPoll-time.Microsecond)
	}
	w.tokens = denseBurst
	now := t0.Add(time.Second)
	stepAt(w, now, 0)
	if got := stepAt(w, now.Add(time.Microsecond), hintClose); got != openFollowUp-time.Microsecond {
		t.Fatalf("hint with a full bucket: next check in %v, want %v", got, openFollowUp-time.Microsecond)
	}
}

// A holder that locks and unlocks through a descriptor it keeps open: the
// poll finds the lock with no hint to explain it, and from then on the
// watcher checks every silentPoll, reserved or not, until nobody else has
// the file open.
func TestScheduleSilentHolder(t *testing.T) {
	t0 := time.Now()
	path, w := schedWatcher(t, 1, t0)
	if got := stepAt(w, t0, 0); got != DefaultOpenPoll {
		t.Fatalf("file open elsewhere, no lock: next check in %v, want %v", got, DefaultOpenPoll)
	}
	h := startHolder(t, path, false)
	now := t0.Add(DefaultOpenPoll)
	got := stepAt(w, now, 0)
	if !w.reserved() || !w.silent {
		t.Fatalf("lock found by the poll: reserved %v, silent holder %v; want both", w.reserved(), w.silent)
	}
	if got != silentPoll {
		t.Fatalf("reserved by a silent holder: next check in %v, want %v", got, silentPoll)
	}
	// The naming budget does not stretch the interval.
	w.nameStale, w.nameAfter = true, now.Add(50*time.Millisecond)
	if got := w.interval(now); got != silentPoll {
		t.Fatalf("holders to be named in 50 ms: interval %v, want %v", got, silentPoll)
	}
	w.nameStale = false

	h.release(t)
	now = now.Add(silentPoll)
	if got := stepAt(w, now, 0); w.reserved() || got != silentPoll {
		t.Fatalf("after the unlock: reserved %v, next check in %v; want free, %v", w.reserved(), got, silentPoll)
	}
	// Quiet for silentQuiet: the pace drops.
	now = now.Add(silentQuiet + time.Second)
	if got := stepAt(w, now, 0); got != openQuietPoll {
		t.Fatalf("quiet for %v: next check in %v, want %v", silentQuiet, got, openQuietPoll)
	}
	// Everybody closed: the suspicion ends with the count.
	w.users.delta = 0
	now = now.Add(openQuietPoll)
	if got := stepAt(w, now, hintClose); w.silent || got != DefaultIdlePoll {
		t.Fatalf("nobody has the file open: silent %v, next check in %v; want false, %v", w.silent, got, DefaultIdlePoll)
	}
}

// perfalloc's lock follows its open: not silent, and while it is held the
// watcher waits for the close at Poll.
func TestScheduleAnnouncedHolder(t *testing.T) {
	t0 := time.Now()
	path, w := schedWatcher(t, 0, t0)
	h := startHolder(t, path, false)
	w.users.delta = 1 // its open, as inotify would count it
	got := stepAt(w, t0, hintOpen)
	if !w.reserved() || w.silent {
		t.Fatalf("lock right after an open: reserved %v, silent %v; want reserved, not silent", w.reserved(), w.silent)
	}
	if got != DefaultPoll {
		t.Fatalf("reserved by perfalloc: next check in %v, want %v", got, DefaultPoll)
	}
	// Not silent either when the lock is seen by a dense check, up to
	// denseFor after the open.
	h.release(t)
	stepAt(w, t0.Add(densePoll), hintClose)
	h = startHolder(t, path, false)
	now := t0.Add(denseFor / 2)
	stepAt(w, now, 0)
	if !w.reserved() || w.silent {
		t.Fatalf("lock %v after an open: reserved %v, silent %v; want reserved, not silent", denseFor/2, w.reserved(), w.silent)
	}
	h.release(t)
}

// A loop of locks and unlocks on a kept descriptor empties the bucket of
// silent changes, and the schedule is the one without a silent holder
// until it refills.
func TestScheduleSilentChangesDrawFromTheBucket(t *testing.T) {
	t0 := time.Now()
	_, w := schedWatcher(t, 1, t0)
	w.silent = true
	w.current.Since = t0
	if got := w.interval(t0); got != silentPoll {
		t.Fatalf("silent holder, full bucket: interval %v, want %v", got, silentPoll)
	}
	w.changes = 0.5
	if got := w.interval(t0); got != DefaultOpenPoll {
		t.Fatalf("silent holder, empty bucket, free: interval %v, want %v", got, DefaultOpenPoll)
	}
	w.current.Reserved = true
	if got := w.interval(t0); got != DefaultPoll {
		t.Fatalf("silent holder, empty bucket, reserved: interval %v, want %v", got, DefaultPoll)
	}
	w.current.Reserved = false
	now := t0.Add(time.Second / silentRefill)
	w.refill(now)
	if got := w.interval(now); got != silentPoll {
		t.Fatalf("bucket refilled by one: interval %v, want %v", got, silentPoll)
	}
}

// A second holder that takes its lock a moment after its open, when the
// holders have just been named, is named once the open's dense checks
// are over: F_GETLK shows only one holder, and no event marks the lock.
func TestScheduleNamesALateSecondHolder(t *testing.T) {
	t0 := time.Now()
	path, w := schedWatcher(t, 1, t0)
	first := startHolder(t, path, false)
	defer first.release(t)
	w.users.delta = 2
	stepAt(w, t0, hintOpen) // the second's open, before its lock
	if st := w.Current(); !st.Reserved || !slices.Equal(st.Holders, []int{first.pid()}) {
		t.Fatalf("before the second lock: %+v, want reserved by %d", st, first.pid())
	}
	second := startHolder(t, path, false)
	defer second.release(t)
	// Until the naming after the window.
	for now := t0.Add(densePoll); w.nameStale || w.naming || now.Before(t0.Add(denseFor)); now = w.next {
		if now.Sub(t0) > time.Minute {
			t.Fatalf("a minute after the open the holders are still to be named (%v)", w.Current().Holders)
		}
		stepAt(w, now, 0)
	}
	want := []int{first.pid(), second.pid()}
	slices.Sort(want)
	if st := w.Current(); !slices.Equal(st.Holders, want) {
		t.Fatalf("after the open's dense checks: holders %v, want %v", st.Holders, want)
	}
}

// Naming the holders reads /proc/locks, whose wall time is mostly the
// kernel waiting for an RCU grace period (milliseconds, for a tenth of a
// millisecond of CPU). An unlock in that time must be seen by the next
// check, not after the read: here the read is of a FIFO that the test
// fills only once it has seen the unlock reported. When the watcher
// read /proc/locks itself, the first step waited for the writer.
func TestScheduleUnlockWhileNaming(t *testing.T) {
	t0 := time.Now()
	path, w := schedWatcher(t, 1, t0)
	var got []Status
	w.fn = func(st Status) { got = append(got, st) }
	w.startNaming = w.nameAside // the watcher's own: a goroutine
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(wake) })
	w.wake = wake

	fifo := filepath.Join(t.TempDir(), "locks")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	w.lf.locks = fifo
	h := startHolder(t, path, false)
	dev, ino := w.lf.identity()
	line := fmt.Sprintf("1: POSIX  ADVISORY  READ %d %02x:%02x:%d 0 0\n", h.pid(), unix.Major(dev), unix.Minor(dev), ino)
	unlocked := make(chan struct{})
	var stuck atomic.Bool
	go func() {
		select {
		case <-unlocked:
		case <-time.After(10 * time.Second):
			stuck.Store(true) // a step is waiting for the read: let it go
		}
		if f, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
			f.WriteString(line)
			f.Close()
		}
	}()

	stepAt(w, t0, hintOpen) // the open and its lock
	if len(got) != 1 || !got[0].Reserved || !w.naming {
		t.Fatalf("after the lock: callbacks %+v, naming under way %v; want one, reserved, and a naming", got, w.naming)
	}
	h.release(t)
	stepAt(w, t0.Add(time.Millisecond), hintClose)
	close(unlocked)
	if stuck.Load() {
		t.Fatal("the checks waited for the read of /proc/locks")
	}
	if len(got) != 2 || got[1].Reserved {
		t.Fatalf("after the unlock: callbacks %+v, want the reservation over", got)
	}

	// The naming ends; what it found is about a reservation that is over.
	var one [8]byte
	unix.Read(wake, one[:])
	stepAt(w, t0.Add(2*time.Millisecond), 0)
	if len(got) != 2 || w.naming || w.Current().Reserved {
		t.Fatalf("after the naming: callbacks %+v, naming %v, %+v; want no new callback, the reservation over", got, w.naming, w.Current())
	}
	if w.procReads.Load() != 1 {
		t.Errorf("%d reads of /proc/locks, want 1", w.procReads.Load())
	}
}

// An opener may take its lock only after the naming its open started (a
// busy machine can preempt it between open and fcntl, and under emulation
// that is common). The naming then asks to be repeated when the open's
// dense checks end, and the check that does it must be scheduled even
// though the hints and the poll say nothing until much later.
func TestScheduleNamesAgainAfterALateLock(t *testing.T) {
	t0 := time.Now()
	path, w := schedWatcher(t, 2, t0)
	w.opts.Poll = time.Hour // only the naming's own schedule can name h2
	var got []Status
	w.fn = func(st Status) { got = append(got, st) }

	h := startHolder(t, path, false)
	stepAt(w, t0, hintOpen) // h's lock, and h2's open, which does not lock yet
	if len(got) != 1 || !slices.Equal(got[0].Holders, []int{h.pid()}) {
		t.Fatalf("after the first lock: callbacks %+v, want one naming %d", got, h.pid())
	}
	h2 := startHolder(t, path, false)
	now := t0.Add(time.Millisecond)
	stepAt(w, now, 0) // takes the naming, which found h alone
	if !w.nameStale {
		t.Fatal("a naming during the dense checks did not ask for another")
	}
	if end := t0.Add(denseFor); w.next.After(end) {
		t.Fatalf("the holders are named again in %v, want by the end of the dense checks (%v)", w.next.Sub(now), denseFor)
	}
	for i := 0; i < 3 && len(got) < 2; i++ {
		stepAt(w, w.next, 0) // the naming, then its result
	}
	want := []int{h.pid(), h2.pid()}
	slices.Sort(want)
	if len(got) != 2 || !slices.Equal(got[1].Holders, want) {
		t.Fatalf("after the second naming: callbacks %+v, want holders %v", got, want)
	}
}
