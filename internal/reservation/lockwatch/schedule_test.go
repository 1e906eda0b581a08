package lockwatch

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"perfevent/internal/reservation"
	"perfevent/internal/reservation/inotify"
)

// The schedule is tested on a fake clock: next is a function of the
// state and the time, and the Watcher's steps are driven at the times the
// test chooses, on a lock file whose locks and users the test sets. No
// process, no sleep.

// t0 is the fake clock's start; any time would do.
var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func TestNext(t *testing.T) {
	o := Options{}.withDefaults()
	long := t0.Add(-time.Hour) // no open, no change for an hour
	open := state{notify: true, known: true, others: 1, healthy: true, since: t0.Add(-time.Second), openAt: long, dense: true}
	nobody := state{notify: true, known: true, confirmed: true, healthy: true, since: long, openAt: long, dense: true}
	with := func(s state, f func(*state)) state { f(&s); return s }
	for _, c := range []struct {
		name string
		s    state
		want time.Duration
	}{
		{"no inotify", with(open, func(s *state) { s.notify = false }), DefaultPoll},
		{"no inotify, reserved", with(open, func(s *state) { s.notify, s.reserved = false, true }), DefaultPoll},
		{"nobody else has it open, as a lease probe confirmed", nobody, DefaultIdlePoll},
		{"nobody, not confirmed", with(nobody, func(s *state) { s.confirmed = false }), unsurePoll},
		{"nobody, but the lock file could not be repaired", with(nobody, func(s *state) { s.healthy = false }), unsurePoll},
		{"count unknown (an overflow, a flood)", with(open, func(s *state) { s.known = false }), DefaultPoll},
		{"open elsewhere", open, DefaultOpenPoll},
		{"open elsewhere, quiet for 10 s", with(open, func(s *state) { s.since = t0.Add(-openQuiet - time.Millisecond) }), openQuietPoll},
		{"open elsewhere, quiet but an open 5 s ago", with(open, func(s *state) { s.since, s.openAt = long, t0.Add(-5*time.Second) }), DefaultOpenPoll},
		{"an open 50 ms ago", with(open, func(s *state) { s.openAt = t0.Add(-50 * time.Millisecond) }), densePoll},
		{"an open 50 ms ago, bucket empty", with(open, func(s *state) { s.openAt, s.dense = t0.Add(-50*time.Millisecond), false }), DefaultOpenPoll},
		{"an open, count unknown", with(open, func(s *state) { s.openAt, s.known = t0.Add(-50*time.Millisecond), false }), densePoll},
		{"right after an open's check that found no lock", with(open, func(s *state) { s.openAt, s.followUp = t0, true }), openFollowUp},
		{"follow-up, bucket empty", with(open, func(s *state) { s.openAt, s.followUp, s.dense = t0, true, false }), DefaultOpenPoll},
		{"reserved", with(open, func(s *state) { s.reserved = true }), DefaultPoll},
		{"reserved, follow-up asked", with(open, func(s *state) { s.reserved, s.followUp = true, true }), DefaultPoll},
		{"a new reservation", with(open, func(s *state) { s.reserved, s.fresh, s.since = true, true, t0.Add(-time.Second) }), silentPoll},
		{"a reservation held for 10 s", with(open, func(s *state) { s.reserved, s.fresh, s.since = true, true, t0.Add(-silentQuiet-time.Millisecond) }), DefaultPoll},
		{"free, fresh left over", with(open, func(s *state) { s.fresh = true }), DefaultOpenPoll},
		{"reserved by a silent holder", with(open, func(s *state) { s.reserved, s.silent = true, true }), silentPoll},
		{"reserved by a silent holder, quiet for 10 s", with(open, func(s *state) { s.reserved, s.silent, s.since = true, true, long }), openQuietPoll},
		{"free, a silent holder about", with(open, func(s *state) { s.silent = true }), silentPoll},
		{"free, a silent holder about, quiet", with(open, func(s *state) { s.silent, s.since = true, long }), openQuietPoll},
		{"reserved, holders to name in 30 ms", with(open, func(s *state) { s.reserved, s.nameStale, s.nameAfter = true, true, t0.Add(30*time.Millisecond) }), 30 * time.Millisecond},
		{"reserved, holders to name now", with(open, func(s *state) { s.reserved, s.nameStale, s.nameAfter = true, true, t0.Add(-time.Second) }), densePoll},
		{"reserved, a naming under way", with(open, func(s *state) { s.reserved, s.nameStale, s.naming = true, true, true }), DefaultPoll},
		{"free, holders to name", with(open, func(s *state) { s.nameStale = true }), DefaultOpenPoll},
	} {
		if got := o.next(c.s, t0).Sub(t0); got != c.want {
			t.Errorf("%s: next check in %v, want %v", c.name, got, c.want)
		}
	}
}

func TestNextOptions(t *testing.T) {
	o := Options{Poll: 10 * time.Millisecond, OpenPoll: time.Second, IdlePoll: time.Millisecond}.withDefaults()
	if o.OpenPoll != o.Poll || o.IdlePoll != o.Poll {
		t.Fatalf("OpenPoll %v, IdlePoll %v: want both clamped to Poll %v", o.OpenPoll, o.IdlePoll, o.Poll)
	}
	if got := o.unsure(); got != o.Poll {
		t.Errorf("unsure interval %v, want %v (never above IdlePoll)", got, o.Poll)
	}
	quietOpen := state{notify: true, known: true, others: 1}
	if got := o.next(quietOpen, t0).Sub(t0); got != o.Poll {
		t.Errorf("quiet open elsewhere with Poll %v: next check in %v, want %v", o.Poll, got, o.Poll)
	}
}

func TestHintDue(t *testing.T) {
	o := Options{}.withDefaults()
	if got := o.hintDue(state{dense: true}, t0).Sub(t0); got != openFollowUp {
		t.Errorf("hint, bucket full: %v after the last check, want %v", got, openFollowUp)
	}
	if got := o.hintDue(state{}, t0).Sub(t0); got != DefaultOpenPoll {
		t.Errorf("hint, bucket empty: %v after the last check, want %v", got, DefaultOpenPoll)
	}
}

func TestFlood(t *testing.T) {
	for _, c := range []struct {
		n     int
		since time.Duration
		want  bool
	}{
		{floodEvents, time.Microsecond, false}, // not more than floodEvents
		{floodEvents + 1, time.Millisecond, true},
		{floodEvents + 1, 2 * DefaultOpenPoll, false}, // below floodRate
		{10000, time.Second, false},                   // a late read of a busy shell loop
		{16384, 100 * time.Millisecond, true},         // a queue full within 100 ms
	} {
		if got := flood(c.n, c.since); got != c.want {
			t.Errorf("%d events in %v: flood %v, want %v", c.n, c.since, got, c.want)
		}
	}
}

// fakeLock is a lock file whose locks, users and repairs the test sets.
type fakeLock struct {
	path     string
	locked   bool
	pid      int   // F_GETLK's holder
	holders  []int // what /proc/locks names
	alone    bool  // the lease probe's answer
	leaseErr error
	dev, ino uint64
}

func (f *fakeLock) LocksFile() string            { return reservation.ProcLocks }
func (f *fakeLock) Path() string                 { return f.path }
func (f *fakeLock) Conflict() (bool, int, error) { return f.locked, f.pid, nil }
func (f *fakeLock) Alone() (bool, error)         { return f.alone, f.leaseErr }
func (f *fakeLock) Identity() (uint64, uint64)   { return f.dev, f.ino }
func (f *fakeLock) Ensure() (string, error)      { return "", nil }

// lock has pids take the lock (F_GETLK names the first); none unlocks.
func (f *fakeLock) lock(pids ...int) {
	f.locked, f.holders, f.pid = len(pids) > 0, slices.Sorted(slices.Values(pids)), 0
	if len(pids) > 0 {
		f.pid = pids[0]
	}
}

// schedWatcher is a Watcher with the default options on a fake lock file,
// never started: its hints come from the test, with others other processes
// counted as having the file open (confirmed by a probe) and nothing heard
// for a second before t0. Its namings finish at once, with the fake's
// holders, and the next step takes them.
func schedWatcher(t *testing.T, others int) (*fakeLock, *Watcher) {
	t.Helper()
	dir := t.TempDir()
	f := &fakeLock{path: filepath.Join(dir, "perflock"), dev: 8, ino: 42, alone: others == 0}
	if err := os.WriteFile(f.path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	w := newWatcher(f, Options{}, func(Status) {})
	// A real notifier, on a file of the test's, so that the count can be
	// restarted (a flood); nobody reads its events but the test.
	n, err := inotify.New(dir, "perflock", dirMask, w.event)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Close)
	w.note = n
	if err := w.users.watchFile(n, f.path); err != nil {
		t.Fatal(err)
	}
	w.startNaming = func(n naming) {
		n.holders, n.took = slices.Clone(f.holders), namingCost
		w.procReads.Add(1)
		w.named <- n
	}
	w.users.known, w.users.delta = true, others
	long := t0.Add(-time.Second)
	w.lastCheck, w.lastEnsure, w.openAt, w.next = long, t0, long, t0
	w.current = Status{Since: long}
	return f, w
}

// namingCost is the CPU time the schedule tests give each read of
// /proc/locks: a tenth of a millisecond, as on an idle machine, so the
// budget between namings is namingGap.
const namingCost = 100 * time.Microsecond

// stepAt runs a step at now with hints and returns how long after now the
// next check is due.
func stepAt(w *Watcher, now time.Time, hints uint32) time.Duration {
	w.pending |= hints
	w.step(now)
	return w.next.Sub(now)
}

// A walk through the states, each step at a time of the test's: what
// happens (to the lock, the users, the hints) and when the next check is
// due after it.
func TestScheduleWalk(t *testing.T) {
	type event struct {
		at     time.Duration // after t0
		what   string
		hints  uint32
		change func(f *fakeLock, w *Watcher)
		want   time.Duration // next check after the step
	}
	users := func(n int) func(*fakeLock, *Watcher) {
		return func(f *fakeLock, w *Watcher) {
			w.users.mu.Lock()
			w.users.delta = n
			w.users.mu.Unlock()
			f.alone = n == 0
		}
	}
	both := func(fs ...func(*fakeLock, *Watcher)) func(*fakeLock, *Watcher) {
		return func(f *fakeLock, w *Watcher) {
			for _, fn := range fs {
				fn(f, w)
			}
		}
	}
	lock := func(pids ...int) func(*fakeLock, *Watcher) {
		return func(f *fakeLock, w *Watcher) { f.lock(pids...) }
	}
	for _, walk := range []struct {
		name   string
		others int
		steps  []event
	}{
		{"perfalloc: open, lock, close", 0, []event{
			{0, "idle", 0, nil, DefaultIdlePoll},
			{time.Second, "open, lock", hintOpen, both(users(1), lock(100)), silentPoll},
			{2 * time.Second, "held", 0, nil, silentPoll},
			{time.Second + silentQuiet + time.Millisecond, "held for 10 s", 0, nil, DefaultPoll},
			{time.Minute, "close", hintClose, both(users(0), lock()), DefaultIdlePoll},
		}},
		{"a holder that keeps its descriptor, before it is known to", 0, []event{
			{0, "open, lock", hintOpen, both(users(1), lock(100)), silentPoll},
			{50 * time.Millisecond, "unlock, no close: seen at once", 0, lock(), densePoll},
			{time.Second, "lock again: now known silent", 0, lock(100), silentPoll},
			{time.Second + silentQuiet + time.Millisecond, "held for 10 s", 0, nil, openQuietPoll},
		}},
		{"an open whose lock comes late", 0, []event{
			{0, "open", hintOpen, users(1), openFollowUp},
			{openFollowUp, "follow-up", 0, nil, densePoll},
			{50 * time.Millisecond, "a dense check", 0, nil, densePoll},
			// Named once more when the open's dense checks end.
			{60 * time.Millisecond, "the lock", 0, lock(100), silentPoll},
			{5 * time.Second, "close", hintClose, both(users(0), lock()), DefaultIdlePoll},
		}},
		{"open elsewhere, no lock, then quiet", 1, []event{
			{0, "open", hintOpen, users(1), openFollowUp},
			{denseFor, "dense checks over", 0, nil, DefaultOpenPoll},
			{openQuiet + time.Second, "quiet", 0, nil, openQuietPoll},
			{openQuiet + 2*time.Second, "another open", hintOpen, users(2), openFollowUp},
			{openQuiet + 3*time.Second, "not quiet any more", 0, nil, DefaultOpenPoll},
		}},
		{"a holder that locks without opening", 1, []event{
			{0, "open elsewhere", 0, nil, DefaultOpenPoll},
			{time.Second, "its lock: no hint", 0, lock(100), silentPoll},
			{2 * time.Second, "its unlock", 0, lock(), silentPoll},
			{3 * time.Second, "its lock again", 0, lock(100), silentPoll},
			{3*time.Second + silentQuiet + time.Millisecond, "quiet", 0, nil, openQuietPoll},
			{4*time.Second + silentQuiet, "unlock, close", hintClose, both(users(0), lock()), DefaultIdlePoll},
		}},
		{"an open inotify missed: the idle poll is the safety net", 0, []event{
			{0, "idle", 0, nil, DefaultIdlePoll},
			// The count says nobody, so the holder that locked is gone
			// for all the schedule knows: Poll until its close.
			{DefaultIdlePoll, "the lock", 0, lock(100), DefaultPoll},
			{DefaultIdlePoll + time.Second, "its close, never opened", hintClose, func(f *fakeLock, w *Watcher) {
				w.users.event(inotify.Event{Mask: unix.IN_CLOSE_NOWRITE, Gen: w.users.gen})
				f.lock()
			}, DefaultIdlePoll}, // a probe found nobody
		}},
		{"the lease is refused", 0, []event{
			{0, "open, lock", hintOpen, both(users(1), lock(100), func(f *fakeLock, w *Watcher) { w.users.denied = true }), silentPoll},
			{time.Second, "close", hintClose, both(users(0), lock()), unsurePoll},
		}},
		{"a close of an open never counted", 0, []event{
			{0, "close", hintClose, func(f *fakeLock, w *Watcher) {
				w.users.event(inotify.Event{Mask: unix.IN_CLOSE_NOWRITE, Gen: w.users.gen})
				f.alone = false // a process inotify merged away still has it open
			}, DefaultPoll},
			{DefaultPoll, "no probe yet", 0, nil, DefaultPoll},
			{unsurePoll + DefaultPoll, "probe: nobody", 0, func(f *fakeLock, w *Watcher) { f.alone = true }, DefaultIdlePoll},
		}},
		{"a flood of opens", 0, []event{
			{0, "flood", hintOpen, func(f *fakeLock, w *Watcher) { w.flooded(floodEvents+1, t0) }, openFollowUp},
			{denseFor, "opens go on", hintOpen, nil, openFollowUp},
			{2 * denseFor, "no count, no lock", 0, nil, DefaultPoll},
			{denseFor + floodQuiet, "opens paused: counted afresh, a probe", 0, nil, DefaultIdlePoll},
		}},
	} {
		t.Run(walk.name, func(t *testing.T) {
			f, w := schedWatcher(t, walk.others)
			for _, e := range walk.steps {
				if e.change != nil {
					e.change(f, w)
				}
				now := t0.Add(e.at)
				w.next = now // a check is due
				got := stepAt(w, now, e.hints)
				if w.naming || w.nameStale {
					got = stepAt(w, now, 0) // the naming done
				}
				if got != e.want {
					t.Fatalf("%v, %s: next check in %v, want %v (reserved %v, silent %v)", e.at, e.what, got, e.want, w.reserved(), w.silent)
				}
			}
		})
	}
}

func TestScheduleAfterAnOpen(t *testing.T) {
	_, w := schedWatcher(t, 1)
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
	_, w := schedWatcher(t, 1)
	w.dense.AllowN(t0, denseBurst)
	stepAt(w, t0, 0)
	// A hint right after a check with the bucket empty waits OpenPoll.
	if got := stepAt(w, t0.Add(time.Microsecond), hintOpen); got != DefaultOpenPoll-time.Microsecond {
		t.Fatalf("hint with an empty bucket: next check in %v, want %v", got, DefaultOpenPoll-time.Microsecond)
	}
	now := t0.Add(time.Second) // refilled by denseRefill
	stepAt(w, now, 0)
	if got := stepAt(w, now.Add(time.Microsecond), hintClose); got != openFollowUp-time.Microsecond {
		t.Fatalf("hint with tokens in the bucket: next check in %v, want %v", got, openFollowUp-time.Microsecond)
	}
	// Checks closer than OpenPoll draw from the bucket, one each.
	before := w.dense.TokensAt(now)
	stepAt(w, now.Add(openFollowUp), 0)
	if after := w.dense.TokensAt(now.Add(openFollowUp)); after > before-0.9 {
		t.Errorf("a dense check took nothing from the bucket: %.2f tokens, then %.2f", before, after)
	}
}

// perfalloc's lock follows its open: not silent, and once it has been held
// for silentQuiet the watcher waits for the close at Poll.
func TestScheduleAnnouncedHolder(t *testing.T) {
	f, w := schedWatcher(t, 0)
	f.lock(100)
	w.users.delta = 1 // its open, as inotify would count it
	got := stepAt(w, t0, hintOpen)
	if !w.reserved() || w.silent {
		t.Fatalf("lock right after an open: reserved %v, silent %v; want reserved, not silent", w.reserved(), w.silent)
	}
	if got != silentPoll {
		t.Fatalf("reserved by perfalloc: next check in %v, want %v", got, silentPoll)
	}
	now := t0.Add(silentQuiet + time.Millisecond)
	if got := w.opts.next(w.state(now), now).Sub(now); got != DefaultPoll {
		t.Fatalf("reserved by perfalloc for %v: next check in %v, want %v", silentQuiet, got, DefaultPoll)
	}
	// Not silent either when the lock is seen by a dense check, up to
	// denseFor after the open.
	f.lock()
	stepAt(w, t0.Add(densePoll), hintClose)
	f.lock(100)
	now = t0.Add(denseFor / 2)
	w.next = now
	stepAt(w, now, 0)
	if !w.reserved() || w.silent {
		t.Fatalf("lock %v after an open: reserved %v, silent %v; want reserved, not silent", denseFor/2, w.reserved(), w.silent)
	}
}

// A loop of locks and unlocks on a kept descriptor empties the bucket of
// silent changes, and the schedule is the one without a silent holder
// until it refills.
func TestScheduleSilentChangesDrawFromTheBucket(t *testing.T) {
	f, w := schedWatcher(t, 1)
	now := t0
	n := 0
	for ; n == 0 || w.changes.TokensAt(now) >= 1; n++ {
		if n > 2*silentBurst {
			t.Fatalf("%d silent changes in %v, and the bucket still has %.1f", n, now.Sub(t0), w.changes.TokensAt(now))
		}
		f.lock(100)
		if n%2 == 1 {
			f.lock()
		}
		now = now.Add(time.Millisecond)
		w.next = now
		stepAt(w, now, 0)
	}
	// A millisecond apart, each draws one and the bucket gains 1/40.
	if n < silentBurst {
		t.Fatalf("the bucket of %d was empty after %d changes", silentBurst, n)
	}
	if !w.silent {
		t.Fatal("changes with no hint: no silent holder suspected")
	}
	want := DefaultOpenPoll
	if w.reserved() {
		want = DefaultPoll
	}
	// The poll's interval, without the naming of the holders.
	if got := w.opts.poll(w.state(now), now); got != want {
		t.Fatalf("silent holder, bucket empty, reserved %v: next check in %v, want %v", w.reserved(), got, want)
	}
	now = now.Add(time.Second / silentRefill)
	if got := w.opts.poll(w.state(now), now); got != silentPoll {
		t.Fatalf("bucket refilled by one: next check in %v, want %v", got, silentPoll)
	}
}

// A second holder that takes its lock a moment after its open, when the
// holders have just been named, is named once the open's dense checks
// are over: F_GETLK shows only one holder, and no event marks the lock.
func TestScheduleNamesALateSecondHolder(t *testing.T) {
	f, w := schedWatcher(t, 1)
	f.lock(100)
	w.users.delta = 2
	stepAt(w, t0, hintOpen) // the second's open, before its lock
	stepAt(w, t0, 0)        // the naming done
	if st := w.Current(); !st.Reserved || !slices.Equal(st.Holders, []int{100}) {
		t.Fatalf("before the second lock: %+v, want reserved by 100", st)
	}
	f.lock(100, 101)
	for now := t0.Add(densePoll); w.nameStale || w.naming || now.Before(t0.Add(denseFor)); now = w.next {
		if now.Sub(t0) > time.Minute {
			t.Fatalf("a minute after the open the holders are still to be named (%v)", w.Current().Holders)
		}
		stepAt(w, now, 0)
	}
	if st := w.Current(); !slices.Equal(st.Holders, []int{100, 101}) {
		t.Fatalf("after the open's dense checks: holders %v, want [100 101]", st.Holders)
	}
}

// An opener may take its lock only after the naming its open started (a
// busy machine can preempt it between open and fcntl). The naming then
// asks to be repeated when the open's dense checks end, and the check
// that does it must be scheduled even though the hints and the poll say
// nothing until much later.
func TestScheduleNamesAgainAfterALateLock(t *testing.T) {
	f, w := schedWatcher(t, 2)
	w.opts.Poll = time.Hour           // only the naming's own schedule can name 101
	w.changes.AllowN(t0, silentBurst) // nor the checks of a new reservation
	var got []Status
	w.fn = func(st Status) { got = append(got, st) }

	f.lock(100)
	stepAt(w, t0, hintOpen) // 100's lock, and 101's open, which does not lock yet
	if len(got) != 1 || !slices.Equal(got[0].Holders, []int{100}) {
		t.Fatalf("after the first lock: callbacks %+v, want one naming 100", got)
	}
	f.lock(100, 101)
	now := t0.Add(time.Millisecond)
	stepAt(w, now, 0) // takes the naming, which found 100 alone
	if !w.nameStale {
		t.Fatal("a naming during the dense checks did not ask for another")
	}
	if end := t0.Add(denseFor); w.next.After(end) {
		t.Fatalf("the holders are named again in %v, want by the end of the dense checks (%v)", w.next.Sub(now), denseFor)
	}
	for i := 0; i < 3 && len(got) < 2; i++ {
		stepAt(w, w.next, 0) // the naming, then its result
	}
	if len(got) != 2 || !slices.Equal(got[1].Holders, []int{100, 101}) {
		t.Fatalf("after the second naming: callbacks %+v, want holders [100 101]", got)
	}
}

// Naming the holders reads /proc/locks, whose wall time is mostly the
// kernel waiting for an RCU grace period (milliseconds, for a tenth of a
// millisecond of CPU). An unlock in that time must be seen by the next
// check, not after the read: here the read is of a FIFO that the test
// fills only once it has seen the unlock reported. When the watcher
// read /proc/locks itself, the first step waited for the writer.
func TestScheduleUnlockWhileNaming(t *testing.T) {
	f, w := schedWatcher(t, 1)
	var got []Status
	w.fn = func(st Status) { got = append(got, st) }
	w.startNaming = w.nameAside // the watcher's own: a goroutine
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(wake) })
	w.wake = wake

	w.procLocks = filepath.Join(t.TempDir(), "locks")
	if err := unix.Mkfifo(w.procLocks, 0o600); err != nil {
		t.Fatal(err)
	}
	f.lock(100)
	line := fmt.Sprintf("1: POSIX  ADVISORY  READ 100 %02x:%02x:%d 0 0\n", unix.Major(f.dev), unix.Minor(f.dev), f.ino)
	unlocked := make(chan struct{})
	var stuck atomic.Bool
	go func() {
		select {
		case <-unlocked:
		case <-time.After(patience):
			stuck.Store(true) // a step is waiting for the read: let it go
		}
		if fifo, err := os.OpenFile(w.procLocks, os.O_WRONLY, 0); err == nil {
			fifo.WriteString(line)
			fifo.Close()
		}
	}()

	stepAt(w, t0, hintOpen) // the open and its lock
	if len(got) != 1 || !got[0].Reserved || !w.naming {
		t.Fatalf("after the lock: callbacks %+v, naming under way %v; want one, reserved, and a naming", got, w.naming)
	}
	f.lock()
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

// Checks at the silent pace are bounded by the bucket of silent changes,
// not the one of dense checks: a holder that keeps its reservation for a
// while must not leave the hints of the next perfalloc without dense
// checks.
func TestScheduleSilentPaceLeavesTheDenseBucket(t *testing.T) {
	f, w := schedWatcher(t, 1)
	f.lock(100)
	w.next = t0
	stepAt(w, t0, hintOpen) // perfalloc's open and lock: a new reservation
	now := t0.Add(denseFor)
	for end := now.Add(time.Second); now.Before(end); now = w.next {
		stepAt(w, now, 0)
	}
	if got := w.pace.Load(); time.Duration(got) != silentPoll {
		t.Fatalf("a reservation of a second: next check in %v, want %v", time.Duration(got), silentPoll)
	}
	if left := w.dense.TokensAt(now); left < denseBurst-denseRefill {
		t.Errorf("a second of checks at the silent pace left %.0f dense checks of %d", left, denseBurst)
	}
}
