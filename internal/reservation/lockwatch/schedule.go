package lockwatch

import (
	"time"

	"golang.org/x/time/rate"

	"perfevent/internal/logging"
)

// DefaultPoll is how often the Watcher checks with F_GETLK, as the C agent
// did, while inotify cannot be trusted to announce a lock: inotify is off
// or lost events, or a reservation is held (its end is usually announced
// by a close; a holder that unlocks and keeps the file open is polled at
// silentPoll once the Watcher has seen one). It bounds the reaction time
// when inotify says nothing (NFS, inotify limits).
const DefaultPoll = 100 * time.Millisecond

// DefaultIdlePoll is how often the Watcher checks while inotify says that
// no other process has the lock file open and the kernel confirmed it (a
// lease probe), so that any lock would first need an open that inotify
// reports, and a deleted or replaced lock file is an event of its
// directory. It is a safety net only, for what no event announces (see the
// package comment): each timer of an idle Go program wakes its poller, its
// monitor thread and often a worker, so a 1 s tick was most of an idle
// agent's wake-ups.
const DefaultIdlePoll = time.Minute

// unsurePoll is how often the Watcher checks while the count says nobody
// but could not be confirmed (the lease is refused, so two opens that
// inotify merged into one event go unnoticed), or the lock file could not
// be repaired; and how often an unknown count is probed again. Never
// longer than IdlePoll.
const unsurePoll = time.Second

// DefaultOpenPoll is how often the Watcher checks while another process
// has the lock file open and holds no lock: it may lock at any moment
// through the descriptor it has, and taking a lock makes no inotify event.
// A check is one F_GETLK; see RELIABILITY.md for what a user who keeps the
// file open forever costs the agent at this pace.
const DefaultOpenPoll = 4 * time.Millisecond

// A file kept open for openQuiet without an open or a change of the
// reservation is polled every openQuietPoll instead of OpenPoll: a tool
// that keeps the file open for hours then costs the agent less than 1 %
// of a core, and its first lock is seen within openQuietPoll.
const (
	openQuiet     = 10 * time.Second
	openQuietPoll = 10 * time.Millisecond
)

// After an IN_OPEN the lock usually follows within microseconds, but on a
// busy machine the opener may lose its CPU in between, so the Watcher
// checks every densePoll for denseFor after the open. Dense checks are
// drawn from a bucket of denseBurst that refills at denseRefill per second,
// so that a loop of opens cannot keep the watcher at that pace: with the
// bucket empty, hints are followed up at OpenPoll.
const (
	densePoll   = time.Millisecond
	denseFor    = 100 * time.Millisecond
	denseBurst  = 200
	denseRefill = 50
)

// openFollowUp is how long after an open hint's check, if it found no
// lock, the Watcher looks once more before the dense checks: the lock
// usually lands microseconds after the open.
const openFollowUp = 250 * time.Microsecond

// A holder that locks and unlocks through a descriptor it keeps open makes
// no inotify event, so only the poll sees it. Once the Watcher has seen
// the reservation start or end with no hint to explain it, it knows such a
// holder is about and checks every silentPoll while anybody else has the
// file open, reserved or not, and every openQuietPoll once silentQuiet
// passes without an open or a change; it forgets when the count of other
// users is back to 0. Every change those checks find costs the agent a
// callback (its counters closed or opened) and a naming, so changes are
// drawn from a bucket of silentBurst that refills at silentRefill per
// second: while it is empty the schedule is the one without a silent
// holder, so a loop of locks and unlocks on a kept descriptor costs what
// it did before there was a silent pace (mostly Poll: it is nearly always
// locked).
const (
	silentPoll   = time.Millisecond
	silentQuiet  = openQuiet
	silentBurst  = 100
	silentRefill = 25
)

// Before the Watcher has seen a holder lock or unlock without a hint, a
// holder that keeps the file open and unlocks through it would be seen at
// Poll: its lock came right after its open, as perfalloc's does. So every
// new reservation is checked every silentPoll for its first silentQuiet,
// which sees such an unlock at once; perfalloc's own end is a close, a
// hint, either way. Each such reservation draws a change from the bucket
// of silent changes, so a loop of reservations costs no more than a
// silent holder does.

// Naming the holders reads /proc/locks, which any user can make expensive.
// A reservation is named when it starts and when hints say that its
// holders may have changed, but a naming waits until namingPace times the
// CPU time of the last one has passed, and at least namingGap:
// /proc/locks costs at most about 1/namingPace of a core.
//
// The read runs on a goroutine of its own, never on the watcher's thread:
// the kernel takes its file-lock rwsem for writing to list the locks, and
// that first waits for an RCU grace period, 4-12 ms of wall time for
// 0.1 ms of CPU here whenever the last read was more than a few
// milliseconds ago; a check held up behind it would see an unlock that
// much later.
const (
	namingPace = 50
	namingGap  = 10 * time.Millisecond
)

// A loop of opens and closes makes hundreds of thousands of events a
// second, and reading them would take most of a core even when they are
// taken thousands at a time. So when one read brings more than floodEvents,
// at more than floodRate a second since the read before, the Watcher stops
// watching closes: inotify merges an event into an identical one still
// queued, so a run of opens is then one event per read. Without closes
// nobody is counted, so the Watcher polls at Poll, with the dense checks
// after each open hint, until floodQuiet passes without one; then it
// watches closes again and counts afresh.
//
// The rate matters, not the number alone: a read that comes late (the
// watcher's thread waited for a CPU, or its callback took 200 ms on a busy
// machine) finds all the events of that time, and a shell loop of
// perfalloc runs, a few thousand events a second, is no flood. floodRate
// is floodEvents per DefaultOpenPoll, the pace of the reads when they are
// on time; a real flood late for one read is seen at the next, which comes
// a read gap later, full.
const (
	floodEvents   = 128
	floodRate     = floodEvents * float64(time.Second) / float64(DefaultOpenPoll)
	floodQuiet    = time.Second
	floodLogEvery = time.Hour
)

// flood says whether n events in one read, since after the read before,
// are a flood.
func flood(n int, since time.Duration) bool {
	return n > floodEvents && float64(n) > floodRate*since.Seconds()
}

// Options tune a Watcher. The zero value is what the agent wants.
type Options struct {
	// Poll is the interval of the F_GETLK check while a lock could appear
	// without a hint; 0 means DefaultPoll.
	Poll time.Duration
	// IdlePoll is the interval of the F_GETLK check while nobody else has
	// the lock file open, as the kernel confirmed; 0 means DefaultIdlePoll,
	// and it is never shorter than Poll.
	IdlePoll time.Duration
	// OpenPoll is the interval of the F_GETLK check while another process
	// has the lock file open without a lock; 0 means DefaultOpenPoll, and
	// it is never longer than Poll.
	OpenPoll time.Duration
	// NoNotify turns off the inotify hints, leaving only the poll.
	NoNotify bool
	// Paused has Prepare (or Watch) start the watcher's thread, which
	// asks for its scheduling (Ready waits for that), but leave the checks
	// after the first, Start's, until Begin. Until then the thread blocks
	// in a read of an eventfd: a caller that changes the credentials of
	// every thread (privilege.Drop) has each of its calls run on that
	// thread by a signal's handler, after which the kernel restarts the
	// read, where the checks' ppoll would return EINTR and the thread
	// would go back to the runtime's scheduler for a processor each time.
	// The thread's real-time policy is asked for while the caller is
	// still root. Events meanwhile wait in inotify's queue, and Begin acts
	// on them at once.
	Paused bool
	// Log, if set, is warned of problems (a lock file that cannot be
	// recreated, a failing F_GETLK, inotify unavailable) and recreations of
	// the lock file. Each distinct problem is logged once until it clears.
	Log logging.Logger
}

// withDefaults fills in the zero fields.
func (o Options) withDefaults() Options {
	if o.Poll <= 0 {
		o.Poll = DefaultPoll
	}
	if o.IdlePoll <= 0 {
		o.IdlePoll = DefaultIdlePoll
	}
	if o.OpenPoll <= 0 {
		o.OpenPoll = DefaultOpenPoll
	}
	o.IdlePoll = max(o.IdlePoll, o.Poll)
	o.OpenPoll = min(o.OpenPoll, o.Poll)
	return o
}

// unsure is the interval while a count of 0 is not confirmed, and how
// often an unknown count is probed again.
func (o *Options) unsure() time.Duration {
	return min(o.IdlePoll, max(o.Poll, unsurePoll))
}

// The buckets of the schedule: dense checks after hints, and changes found
// at the silent pace.
func newDenseBucket() *rate.Limiter  { return rate.NewLimiter(denseRefill, denseBurst) }
func newSilentBucket() *rate.Limiter { return rate.NewLimiter(silentRefill, silentBurst) }

// state is all the schedule of checks depends on, as the Watcher knows it
// after a check.
type state struct {
	notify   bool      // inotify hints are on
	reserved bool      // the reservation as last reported
	since    time.Time // when it last started or ended
	// others is the count of other open file descriptions of the lock
	// file; known says it is counted, confirmed that a count of 0 is also
	// the kernel's (a lease probe).
	others           int
	known, confirmed bool
	healthy          bool      // the lock file is as it should be
	openAt           time.Time // the last open hint
	dense            bool      // a dense check is left in its bucket
	silent           bool      // a holder that locks without opening is about, and a change is left in its bucket
	fresh            bool      // the reservation drew a change from that bucket when it started
	followUp         bool      // the check followed an open hint and found no lock
	nameStale        bool      // the holders are to be named again
	naming           bool      // a naming is under way
	nameAfter        time.Time // no naming before this
}

// next is when the check after one at now is due: densely for a while
// after an open, OpenPoll while someone else has the file open, silentPoll
// while a holder that makes no events may be about, IdlePoll while nobody
// has (unsure while that is not confirmed), and Poll whenever the hints
// may miss a lock; sooner when the holders are to be named.
func (o *Options) next(s state, now time.Time) time.Time {
	iv := o.poll(s, now)
	if s.followUp && s.dense && !s.reserved {
		// The open's lock may be on its way: look again soon.
		iv = min(iv, openFollowUp)
	}
	if s.reserved && s.nameStale && !s.naming {
		// Name the holders as soon as the budget allows; a naming
		// under way wakes the watcher when it is done.
		iv = min(iv, max(densePoll, s.nameAfter.Sub(now)))
	}
	return now.Add(iv)
}

// poll is the interval of next without the naming of holders and the
// follow-up of an open.
func (o *Options) poll(s state, now time.Time) time.Duration {
	iv, _ := o.pace(s, now)
	return iv
}

// pace is poll's interval, and whether it is the silent pace, which the
// bucket of silent changes bounds (the checks at that pace draw nothing
// from the bucket of dense checks, which is for hints).
func (o *Options) pace(s state, now time.Time) (iv time.Duration, silent bool) {
	if !s.notify {
		return o.Poll, false
	}
	switch {
	case s.reserved && s.silent:
		return o.silentPace(s, now), true
	case s.reserved && s.fresh && !quiet(s, now, silentQuiet):
		return min(o.Poll, silentPoll), true
	case s.reserved:
		// Over when the holders unlock, which perfalloc does by closing
		// the file (a hint).
		return o.Poll, false
	case s.known && s.others == 0 && s.confirmed && s.healthy:
		// Whoever opened the file has closed it again: the next lock
		// needs an open first, which wakes the notifier.
		return o.IdlePoll, false
	case s.known && s.others == 0:
		return o.unsure(), false
	case now.Sub(s.openAt) < denseFor:
		return o.gap(s), false
	case s.silent:
		return o.silentPace(s, now), true
	case !s.known:
		return o.Poll, false
	case quiet(s, now, openQuiet):
		return max(o.OpenPoll, min(o.Poll, openQuietPoll)), false
	}
	return o.OpenPoll, false
}

// quiet says whether d has passed without an open or a change of the
// reservation.
func quiet(s state, now time.Time, d time.Duration) bool {
	return now.Sub(s.since) > d && now.Sub(s.openAt) > d
}

// silentPace is the interval while a holder that makes no events may lock
// or unlock (see silentPoll).
func (o *Options) silentPace(s state, now time.Time) time.Duration {
	if quiet(s, now, silentQuiet) {
		return min(o.Poll, openQuietPoll)
	}
	return min(o.Poll, silentPoll)
}

// gap is the pace of the checks after an open, and of the reads of the
// inotify queue: dense while the bucket lasts, OpenPoll after that.
func (o *Options) gap(s state) time.Duration {
	if s.dense {
		return densePoll
	}
	return o.OpenPoll
}

// hintDue is when a hint that arrives after a check at last asks for the
// next: none to speak of while the bucket lasts, OpenPoll after that.
func (o *Options) hintDue(s state, last time.Time) time.Time {
	if s.dense {
		return last.Add(openFollowUp)
	}
	return last.Add(o.OpenPoll)
}
