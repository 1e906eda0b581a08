package reservation

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
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

// Naming the holders reads /proc/locks, which any user can make expensive
// (see procLocksLimit). A reservation is named when it starts and when
// hints say that its holders may have changed, but a naming waits until
// namingPace times the CPU time of the last one has passed, and at least
// namingGap: /proc/locks costs at most about 1/namingPace of a core.
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

// Status is the reservation as the agent sees it.
type Status struct {
	Reserved bool      // some other process holds a lock on byte 0
	Holders  []int     // their pids, sorted; may be empty if unknown
	Since    time.Time // when Reserved last changed, or when watching began
}

func (s Status) sameAs(o Status) bool {
	return s.Reserved == o.Reserved && slices.Equal(s.Holders, o.Holders)
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
	// Logf, if set, receives problems (a lock file that cannot be
	// recreated, a failing F_GETLK, inotify unavailable) and recreations of
	// the lock file. Each distinct problem is logged once until it clears.
	Logf func(format string, args ...any)
}

// Watcher calls back whenever the reservation changes.
type Watcher struct {
	lf   *LockFile
	opts Options
	fn   func(Status)
	note *notifier // nil without hints

	pending uint32 // hint* bits of the events since the watcher last looked
	unseen  uint32 // hint* bits of the events since the last check
	// wake is an eventfd that Close writes to, to end the watcher's wait.
	wake        int
	floodLogged time.Time     // when a flood was last logged
	readAt      time.Time     // the last read of the inotify queue
	readGap     time.Duration // the least time between two reads (see readEvents)
	done        chan struct{}

	closeOnce sync.Once

	mu      sync.Mutex
	current Status
	lastErr string

	// users is the count of other processes' open file descriptions of
	// the lock file, which decides between the poll intervals.
	users users

	// The rest belongs to the watcher's goroutine, once Watch returns.
	next       time.Time // when the next check is due
	lastCheck  time.Time
	lastEnsure time.Time
	ensureErr  error     // from the last Ensure, reported with every check
	openAt     time.Time // the last open hint: dense checks until denseFor after it
	tokens     float64   // the dense checks left in the bucket
	changes    float64   // the changes found at silentPoll left in their bucket
	tokensAt   time.Time // when tokens was last refilled
	nameAfter  time.Time // no /proc/locks before this
	nameStale  bool      // the holders may have changed since they were named
	silent     bool      // a reservation came or went without a hint (see silentPoll)

	// A naming under way (see namingPace) runs startNaming's goroutine,
	// which sends its result to named and wakes the watcher through wake.
	naming      bool
	named       chan naming
	startNaming func(naming)
	closing     atomic.Bool // Close, not a naming, wrote to wake
	namers      sync.WaitGroup

	pace      atomic.Int64 // the interval chosen after the last check, ns, for tests
	checks    atomic.Int64 // F_GETLK checks made, for tests
	procReads atomic.Int64 // reads of /proc/locks, for tests
}

// The kinds of hint, as bits of Watcher.pending.
const (
	hintOpen  = 1 << iota // someone opened the file: a lock may follow
	hintClose             // someone closed it: a lock may be gone
	hintFile              // the file or its name changed: run Ensure
)

// users follows whether other processes have the lock file open. A lease
// probe ([LockFile.alone]) says when nobody has; from there inotify's
// IN_OPEN and IN_CLOSE_* keep the count of other open file descriptions.
// Probes and checks run on the watcher's goroutine, events arrive on the
// notifier's.
type users struct {
	mu     sync.Mutex
	gen    uint64 // the file watch generation whose events count
	known  bool   // delta counts from a probe that found nobody
	delta  int    // opens minus closes since that probe
	seq    uint64 // bumped by every event that counts, to void a probe under way
	verify bool   // a close brought the count to 0: probe to confirm
	denied bool   // the lease was refused (not our file, no CAP_LEASE): trust the events
	flood  bool   // closes are not watched (see floodEvents): no count at all
	every  time.Duration
	last   time.Time // when the last probe started; zero after a restart

	// dropEvent, if set, makes the count miss events (tests of the
	// safety net).
	dropEvent func(mask uint32) bool
}

// idle reports whether nobody else is known to have the file open.
func (u *users) idle() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.known && u.delta == 0
}

// others returns the number of other open file descriptions, whether
// that number is known, and whether a count of 0 is also confirmed by a
// probe: not when probes are refused, nor while a close that brought it to
// 0 awaits its probe.
func (u *users) others() (n int, known, confirmed bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.delta, u.known, u.known && !u.denied && !u.verify
}

// event applies one inotify event.
func (u *users) event(ev notifyEvent) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.dropEvent != nil && u.dropEvent(ev.mask) {
		return
	}
	switch {
	case ev.mask&unix.IN_Q_OVERFLOW != 0:
		// Opens may have been lost: only a probe can tell.
		u.known = false
	case ev.gen == 0 || ev.gen != u.gen:
		return // not about the file being counted
	case ev.mask&unix.IN_OPEN != 0:
		u.delta++
	case ev.mask&unix.IN_CLOSE != 0:
		u.delta--
		switch {
		case u.delta < 0:
			// A close of an open never counted: inotify merges an event
			// into an identical one still queued, so two opens may have
			// looked like one, and someone may still have the file open.
			u.known = false
		case u.delta == 0:
			u.verify = true
		}
	default:
		return
	}
	u.seq++
}

// setFlood watches the file without or again with its closes, and says
// whether that changed anything.
func (u *users) setFlood(n *notifier, path string, on bool) (bool, error) {
	u.mu.Lock()
	same := u.flood == on
	u.flood = on
	u.mu.Unlock()
	if same {
		return false, nil
	}
	return true, u.watchFile(n, path)
}

// watchFile (re)places the notifier's watch on path and restarts the count
// with the new watch's events. The count's lock is held throughout so that
// the notifier, which takes it for every event, cannot deliver an event of
// the new watch before the count knows its generation. Without a watch on
// the current file no event can be trusted, so on failure the count stays
// unknown until the next success.
func (u *users) watchFile(n *notifier, path string) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	mask := uint32(fileMask)
	if u.flood {
		mask &^= unix.IN_CLOSE
	}
	gen, err := n.watchFile(path, mask)
	u.known, u.delta, u.verify = false, 0, false
	u.denied = err != nil
	u.last = time.Time{}
	u.seq++
	if err == nil {
		u.gen = gen
	}
	return err
}

// probe asks the kernel whether anybody else has the file open, when the
// count is unknown (at most once per u.every) or a close brought it to 0
// (inotify may have merged two opens into one event). A probe that saw
// events arrive while it ran is discarded: they may predate it or not.
func (u *users) probe(lf *LockFile) {
	u.mu.Lock()
	due := u.verify || (!u.known && (u.last.IsZero() || time.Since(u.last) >= u.every))
	if u.denied || u.flood || !due {
		u.mu.Unlock()
		return
	}
	u.verify = false
	u.last = time.Now()
	seq := u.seq
	u.mu.Unlock()

	alone, err := lf.alone()

	u.mu.Lock()
	defer u.mu.Unlock()
	switch {
	case u.seq != seq:
		// Voided; an unknown count is probed again within u.every, a
		// count back at 0 asks for its own confirmation.
	case errors.Is(err, errLeaseDenied):
		u.denied = true
	case err != nil:
		// Unexpected: stay as we were, and try again later.
	case alone:
		u.known, u.delta = true, 0
	default:
		u.known = false
	}
}

// Watch checks the lock file once, calls fn with that initial Status (so the
// caller learns whether to open its counters at all), and then calls fn
// again on every change: reserved ↔ free, or a different set of holders.
//
// fn runs on the watcher's goroutine, one call at a time, and the next
// check waits for it to return, so keep it short-ish (closing or opening
// counters is fine). fn must not call Close.
func Watch(lf *LockFile, opts Options, fn func(Status)) (*Watcher, error) {
	w := newWatcher(lf, opts, fn)
	var err error
	if w.wake, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		return nil, fmt.Errorf("lock file %s: eventfd: %w", lf.Path(), err)
	}
	if !w.opts.NoNotify {
		if err := w.startNotify(); err != nil {
			w.logf("lock file %s: no inotify hints, polling every %v only: %v", lf.Path(), w.opts.Poll, err)
		}
	}
	now := time.Now()
	st, err := w.look(now, Status{}, false)
	if err != nil {
		w.stopNotify()
		unix.Close(w.wake)
		return nil, err
	}
	if w.naming {
		// Nobody waits for the first Status yet: it may as well be named.
		st = w.settle(<-w.named, st)
	}
	w.lastCheck, w.lastEnsure, w.tokensAt = now, now, now
	if w.note != nil {
		w.users.probe(lf)
	}
	st.Since = now
	w.current = st
	w.pace.Store(int64(w.interval(now)))
	w.next = now.Add(w.interval(now))
	fn(st)
	go w.run()
	return w, nil
}

// newWatcher fills in the defaults of opts; it starts nothing.
func newWatcher(lf *LockFile, opts Options, fn func(Status)) *Watcher {
	if opts.Poll <= 0 {
		opts.Poll = DefaultPoll
	}
	if opts.IdlePoll <= 0 {
		opts.IdlePoll = DefaultIdlePoll
	}
	if opts.OpenPoll <= 0 {
		opts.OpenPoll = DefaultOpenPoll
	}
	opts.IdlePoll = max(opts.IdlePoll, opts.Poll)
	opts.OpenPoll = min(opts.OpenPoll, opts.Poll)
	w := &Watcher{
		lf:      lf,
		opts:    opts,
		fn:      fn,
		done:    make(chan struct{}),
		tokens:  denseBurst,
		changes: silentBurst,
		readGap: densePoll,
		named:   make(chan naming, 1),
	}
	w.startNaming = w.nameAside
	w.users.every = min(opts.IdlePoll, max(opts.Poll, unsurePoll))
	return w
}

const (
	dirMask  = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO
	fileMask = unix.IN_OPEN | unix.IN_CLOSE | unix.IN_ATTRIB | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF
)

func (w *Watcher) startNotify() error {
	path := w.lf.Path()
	n, err := newNotifier(filepath.Dir(path), filepath.Base(path), dirMask, w.event)
	if err != nil {
		return err
	}
	if err := w.users.watchFile(n, path); err != nil {
		n.close()
		return err
	}
	w.note = n
	return nil
}

func (w *Watcher) stopNotify() {
	if w.note != nil {
		w.note.close()
	}
}

// event counts an event and notes its kind. A loop of opens and closes
// makes hundreds of thousands a second, so it is kept short.
func (w *Watcher) event(ev notifyEvent) {
	w.users.event(ev)
	var kind uint32
	switch {
	case ev.mask&unix.IN_Q_OVERFLOW != 0, ev.gen == 0: // lost events, or the directory
		kind = hintOpen | hintClose | hintFile
	case ev.mask&unix.IN_OPEN != 0:
		kind = hintOpen
	case ev.mask&unix.IN_CLOSE != 0:
		kind = hintClose
	default:
		kind = hintFile
	}
	w.pending |= kind
}

// readEvents takes what the inotify queue holds, in one read. The next
// read waits until readGap has passed, so that a loop of opens cannot keep
// the agent busy: events arriving in a flood are taken in batches (the
// kernel queues up to fs.inotify.max_queued_events, 16384 by default, and
// reports an overflow beyond).
func (w *Watcher) readEvents(buf []byte, now time.Time) {
	since := now.Sub(w.readAt)
	w.readAt = now
	n, err := w.note.readNow(buf)
	if err != nil {
		w.problem(fmt.Errorf("lock file %s: %w", w.lf.Path(), err))
	}
	if n > floodEvents && float64(n) > floodRate*since.Seconds() {
		w.flooded(n)
	}
}

// flooded stops the watch on closes after a read of n events.
func (w *Watcher) flooded(n int) {
	changed, err := w.users.setFlood(w.note, w.lf.Path(), true)
	switch {
	case err != nil:
		w.logf("lock file %s: %d inotify events in one read, and its watch without closes failed: %v", w.lf.Path(), n, err)
	case changed && time.Since(w.floodLogged) >= floodLogEvery:
		// A user can start a flood every second or so; one line an hour
		// says it is happening.
		w.floodLogged = time.Now()
		w.logf("lock file %s: %d inotify events in one read: not counting its users until opens pause for %v (logged at most hourly)", w.lf.Path(), n, floodQuiet)
	}
}

// refill tops up the buckets of dense checks and of silent changes.
func (w *Watcher) refill(now time.Time) {
	dt := now.Sub(w.tokensAt).Seconds()
	w.tokens = min(denseBurst, w.tokens+dt*denseRefill)
	w.changes = min(silentBurst, w.changes+dt*silentRefill)
	w.tokensAt = now
}

func (w *Watcher) reserved() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.current.Reserved
}

// gap is the pace of the checks after an open, and of the reads of the
// inotify queue: dense while the bucket lasts, OpenPoll after that.
func (w *Watcher) gap() time.Duration {
	if w.tokens >= 1 {
		return densePoll
	}
	return w.opts.OpenPoll
}

// hintGap is the shortest time between the last check and one that a hint
// asks for: none to speak of while the bucket lasts, OpenPoll after that.
func (w *Watcher) hintGap() time.Duration {
	if w.tokens >= 1 {
		return openFollowUp
	}
	return w.opts.OpenPoll
}

// interval is how long the next poll may wait after a check: densely for a
// while after an open, OpenPoll while someone else has the file open,
// silentPoll while a holder that makes no events may be about, IdlePoll
// while nobody has (1 s while that is not confirmed), and Poll whenever
// the hints may miss a lock.
func (w *Watcher) interval(now time.Time) time.Duration {
	iv := w.pollInterval(now)
	if w.reserved() && w.nameStale && !w.naming {
		// Name the holders as soon as the budget allows; a naming
		// under way wakes the watcher when it is done.
		iv = min(iv, max(densePoll, w.nameAfter.Sub(now)))
	}
	return iv
}

// pollInterval is interval without the naming of holders.
func (w *Watcher) pollInterval(now time.Time) time.Duration {
	reserved := w.reserved()
	if w.note == nil {
		return w.opts.Poll
	}
	n, known, confirmed := w.users.others()
	if known && n == 0 {
		w.silent = false // whoever locked silently has gone
	}
	// With the bucket of silent changes empty, the schedule is the one
	// without a silent holder.
	silent := w.silent && w.changes >= 1
	switch {
	case reserved && silent:
		return w.silentPace(now)
	case reserved:
		// Over when the holders unlock, which perfalloc does by closing
		// the file (a hint).
		return w.opts.Poll
	case known && n == 0 && confirmed && w.ensureErr == nil:
		// Whoever opened the file has closed it again: the next lock
		// needs an open first, which wakes the notifier.
		return w.opts.IdlePoll
	case known && n == 0:
		return w.users.every
	case now.Sub(w.openAt) < denseFor:
		return w.gap()
	case silent:
		return w.silentPace(now)
	case !known:
		return w.opts.Poll
	case n > 0:
		w.mu.Lock()
		since := w.current.Since
		w.mu.Unlock()
		if now.Sub(since) > openQuiet && now.Sub(w.openAt) > openQuiet {
			return max(w.opts.OpenPoll, min(w.opts.Poll, openQuietPoll))
		}
		return w.opts.OpenPoll
	}
	return w.opts.IdlePoll
}

// silentPace is the interval while a holder that makes no events may lock
// or unlock (see silentPoll).
func (w *Watcher) silentPace(now time.Time) time.Duration {
	w.mu.Lock()
	since := w.current.Since
	w.mu.Unlock()
	if now.Sub(since) > silentQuiet && now.Sub(w.openAt) > silentQuiet {
		return min(w.opts.Poll, openQuietPoll)
	}
	return min(w.opts.Poll, silentPoll)
}

// run waits for the next check, an inotify event or Close, and acts. It
// keeps its goroutine on one OS thread, which sleeps in ppoll on the
// inotify descriptor with the time to the next check as its timeout: an
// event or the timeout wakes that thread and nothing else, and the
// timeout has the kernel's resolution (the runtime's timers round up to a
// millisecond, and each is a hand-off between threads). On a busy machine
// every hand-off is a wait for a CPU.
func (w *Watcher) run() {
	defer close(w.done)
	runtime.LockOSThread()
	if !setSlice(watcherSlice) {
		defer runtime.UnlockOSThread()
	} // else the thread ends with the goroutine, and its slice with it
	var buf []byte
	if w.note != nil {
		buf = make([]byte, notifyBufSize)
	}
	fds := make([]unix.PollFd, 0, 2)
	for {
		now := time.Now()
		wait := w.next.Sub(now)
		fds = append(fds[:0], unix.PollFd{Fd: int32(w.wake), Events: unix.POLLIN})
		if w.note != nil {
			if paced := w.readAt.Add(w.readGap).Sub(now); paced > 0 {
				wait = min(wait, paced)
			} else {
				fds = append(fds, unix.PollFd{Fd: int32(w.note.fd), Events: unix.POLLIN})
			}
		}
		ts := unix.NsecToTimespec(int64(max(wait, 0)))
		if _, err := unix.Ppoll(fds, &ts, nil); err != nil && err != unix.EINTR {
			// Not expected with valid descriptors; do not spin on it.
			w.problem(fmt.Errorf("lock file %s: ppoll: %w", w.lf.Path(), err))
			time.Sleep(densePoll)
		}
		if fds[0].Revents != 0 {
			// A naming is done (step takes its result), or Close. Close
			// marks itself before it writes, so a read that took its
			// write as well still sees the mark.
			var b [8]byte
			unix.Read(w.wake, b[:])
			if w.closing.Load() {
				return
			}
		}
		now = time.Now()
		if len(fds) > 1 && fds[1].Revents != 0 {
			w.readEvents(buf, now)
		}
		w.step(now)
	}
}

// watcherSlice is the CPU slice the watcher's thread asks the scheduler
// for; 0 leaves the default.
var watcherSlice = 100 * time.Microsecond

// setSlice asks the scheduler (EEVDF, Linux 6.12 and later) for a slice of
// d for the calling thread, 0 for the default. A short slice lets the
// thread preempt, when it wakes, a task with a longer one: a busy process
// at the same priority no longer runs out its slice (1.4 ms here) before
// the watcher gets the CPU. Its share of the CPU does not change, and it
// needs no privilege; earlier kernels ignore sched_runtime for SCHED_OTHER.
// It says whether the call succeeded.
func setSlice(d time.Duration) bool {
	if watcherSlice <= 0 {
		return false
	}
	attr := unix.SchedAttr{
		Size:    unix.SizeofSchedAttr,
		Policy:  unix.SCHED_NORMAL,
		Flags:   unix.SCHED_FLAG_RESET_ON_FORK,
		Runtime: uint64(d),
	}
	// The thread's nice value is kept, as sched_setattr sets it too; the
	// system call returns 20 - nice.
	if prio, err := unix.Getpriority(unix.PRIO_PROCESS, 0); err == nil {
		attr.Nice = int32(20 - prio)
	}
	return unix.SchedSetAttr(0, &attr, 0) == nil
}

// step acts on the hints that are pending and checks if a check is due.
func (w *Watcher) step(now time.Time) {
	w.refill(now)
	select {
	case n := <-w.named:
		cur := w.Current()
		w.report(now, w.settle(n, cur), cur)
		// The next check was set while the naming ran, without it. If
		// the holders are to be named again (a lock that may follow an
		// open, see look), that check must come at the naming's budget,
		// not at the next poll.
		if due := now.Add(w.interval(now)); due.Before(w.next) {
			w.next = due
		}
	default:
	}
	kinds := w.pending
	w.pending = 0
	if kinds&hintOpen != 0 {
		w.openAt = now
	}
	if kinds&(hintOpen|hintClose) != 0 {
		// While reserved, another holder may have come or gone.
		w.nameStale = true
	}
	if kinds&hintFile != 0 {
		w.lastEnsure = time.Time{}
	}
	if kinds != 0 {
		// A hint asks for a check now, but no sooner than a gap after
		// the last one; events in between wait for it.
		if due := w.lastCheck.Add(w.hintGap()); due.Before(w.next) {
			w.next = due
		}
	}
	w.unseen |= kinds
	if now.Before(w.next) {
		return
	}
	kinds, w.unseen = w.unseen, 0
	if w.tokens >= 1 && now.Sub(w.lastCheck) < w.opts.OpenPoll {
		w.tokens--
	}
	changed := w.check(now)
	if changed && kinds == 0 && now.Sub(w.openAt) >= denseFor && w.note != nil {
		// Nothing announced it: a holder that locks through a
		// descriptor it keeps open.
		if w.silent {
			w.changes--
		}
		w.silent = true
	}
	w.lastCheck = now
	iv := w.interval(now)
	if kinds&hintOpen != 0 && w.tokens >= 1 && !w.reserved() {
		// The open's lock may be on its way: look again soon.
		iv = min(iv, openFollowUp)
	}
	w.next = now.Add(iv)
	w.pace.Store(int64(iv))
	w.readGap = w.gap()
}

// ensure repairs the lock file if it was deleted, replaced or had its mode
// changed (LockFile.Ensure), and says what it repaired and whether the
// descriptor now refers to another file, whose users must be counted
// afresh.
func (w *Watcher) ensure() (repaired string, reopened bool, err error) {
	dev, ino := w.lf.identity()
	repaired, err = w.lf.Ensure()
	ndev, nino := w.lf.identity()
	return repaired, dev != ndev || ino != nino, err
}

// conflict asks the kernel, with one F_GETLK and no /proc/locks, whether
// another process holds a lock that conflicts with a write lock on byte 0.
func (l *LockFile) conflict() (unix.Flock_t, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart, Start: 0, Len: 1}
	if l.fd < 0 {
		return lk, fmt.Errorf("lock file %s: already closed", l.path)
	}
	if err := unix.FcntlFlock(uintptr(l.fd), unix.F_GETLK, &lk); err != nil {
		return lk, fmt.Errorf("lock file %s: F_GETLK: %w", l.path, err)
	}
	return lk, nil
}

// look asks F_GETLK and, when the holders need naming and the budget
// allows, /proc/locks; quick leaves the naming for later (marked stale).
// cur is the Status last reported.
func (w *Watcher) look(now time.Time, cur Status, quick bool) (Status, error) {
	lk, err := w.lf.conflict()
	w.checks.Add(1)
	if err != nil {
		return Status{}, err
	}
	if lk.Type == unix.F_UNLCK {
		w.nameStale = false
		return Status{}, nil
	}
	pid := int(lk.Pid) // -1 for an OFD lock, which has no owner
	if w.note == nil {
		// No hint says when holders come and go: name them again as
		// often as the budget allows.
		w.nameStale = true
	}
	if cur.Reserved && !w.nameStale && (pid <= 0 || slices.Contains(cur.Holders, pid)) {
		return Status{Reserved: true, Holders: cur.Holders}, nil
	}
	// F_GETLK's holder for now, named in full when the naming is done.
	w.nameStale = true
	holders := slices.Clone(cur.Holders)
	if pid > 0 && !slices.Contains(holders, pid) {
		holders = append(holders, pid)
		slices.Sort(holders)
	}
	if !quick && !w.naming && !now.Before(w.nameAfter) {
		dev, ino := w.lf.identity()
		n := naming{at: now, since: cur.Since, dev: dev, ino: ino, pid: pid}
		w.nameStale = false // until a hint says the holders changed again
		if end := w.openAt.Add(denseFor); now.Before(end) {
			// The opener may not have taken its lock yet (a busy machine
			// can preempt it between open and fcntl), and F_GETLK shows
			// only the first holder: name them once more when its dense
			// checks are over.
			w.nameStale, n.again = true, end
		}
		w.naming = true
		w.startNaming(n)
	}
	return Status{Reserved: true, Holders: holders}, nil
}

// naming is one read of /proc/locks for the holders of the lock file, from
// the request (at, the file, F_GETLK's holder then) to the result.
type naming struct {
	at       time.Time
	since    time.Time // the Since of the reservation it names
	dev, ino uint64
	pid      int       // F_GETLK's holder when it started
	again    time.Time // if set, name again no sooner than this
	holders  []int
	err      error
	took     time.Duration // its CPU time
}

// nameAside is startNaming: it names the holders on a goroutine of its
// own, which sends the result and wakes the watcher.
func (w *Watcher) nameAside(n naming) {
	w.namers.Add(1)
	go func() {
		defer w.namers.Done()
		w.named <- w.readHolders(n)
		one := [8]byte{1}
		unix.Write(w.wake, one[:])
	}()
}

// readHolders reads /proc/locks for n and says what it cost.
func (w *Watcher) readHolders(n naming) naming {
	// One thread throughout, so that its CPU time is the read's.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start, cpu := time.Now(), threadCPUTime()
	n.holders, n.err = lockHolders(w.lf.locks, n.dev, n.ino)
	n.took = time.Since(start)
	// The budget is for what the read costs, not for the time the thread
	// waited: most of a read's wall time is the kernel waiting for an RCU
	// grace period, and on a busy machine a 1 ms read can take 40 ms, and
	// 50 times that would leave a new holder unnamed for seconds.
	if c := threadCPUTime() - cpu; c >= 0 && c < n.took {
		n.took = c
	}
	w.procReads.Add(1)
	return n
}

// settle takes a finished naming and returns the Status it makes of cur,
// the Status last reported: the holders it found, if the reservation is
// still on (the next check says whether it still is).
func (w *Watcher) settle(n naming, cur Status) Status {
	w.naming = false
	w.nameAfter = n.at.Add(max(namingGap, namingPace*n.took))
	if w.nameAfter.Before(n.again) {
		w.nameAfter = n.again
	}
	if !cur.Reserved {
		return cur // over while it was being named
	}
	if !cur.Since.Equal(n.since) {
		// Over, and another one began, while it was being named: that
		// one has its own holders.
		w.nameStale = true
		return cur
	}
	holders := n.holders
	if n.err != nil || len(holders) == 0 {
		// /proc/locks unreadable, or device numbers that do not match
		// (btrfs subvolumes report another st_dev): F_GETLK names one
		// holder, which is better than none.
		holders = nil
		if n.pid > 0 {
			holders = []int{n.pid}
		}
	}
	return Status{Reserved: true, Holders: holders, Since: cur.Since}
}

// check is one look at the reservation: every Poll, or after a hint about
// the file itself, it runs ensure first; then it asks F_GETLK, calls fn if
// the reservation or its holders changed, and probes the count of users if
// it is in doubt. It says whether the reservation started or ended.
func (w *Watcher) check(now time.Time) (changed bool) {
	if w.note != nil && now.Sub(w.openAt) >= floodQuiet {
		if _, err := w.users.setFlood(w.note, w.lf.Path(), false); err != nil {
			w.ensureErr = err
		}
	}
	if w.note == nil || now.Sub(w.lastEnsure) >= w.opts.Poll {
		w.lastEnsure = now
		var problems []error
		repaired, reopened, err := w.ensure()
		if err != nil {
			problems = append(problems, err)
		} else if repaired != "" {
			w.logf("lock file %s %s", w.lf.Path(), repaired)
		}
		if reopened && w.note != nil {
			// Our own open of the new file came before its watch, so it is
			// not counted; the count of the old file no longer matters.
			if err := w.users.watchFile(w.note, w.lf.Path()); err != nil {
				problems = append(problems, err)
			}
		}
		w.ensureErr = errors.Join(problems...)
	}
	// A new reservation is reported at once with the holder F_GETLK
	// names, and only then named in full: the counters' release does not
	// wait for /proc/locks, and a single holder makes one callback.
	cur := w.Current()
	st, err := w.look(now, cur, !cur.Reserved)
	w.problem(errors.Join(w.ensureErr, err))
	if err == nil {
		w.report(now, st, cur)
	}
	if w.note != nil {
		w.users.probe(w.lf) // a no-op unless the count is in doubt
	}
	if err != nil {
		return false
	}
	changed = st.Reserved != cur.Reserved
	if st.Reserved && !cur.Reserved && w.nameStale {
		cur = w.Current()
		// The step's time, not the clock's: the schedule runs on the
		// times it is given, which tests choose.
		if st, err := w.look(now, cur, false); err == nil {
			w.report(now, st, cur)
		}
	}
	return changed
}

// report calls fn with st if it differs from cur, the Status last
// reported.
func (w *Watcher) report(now time.Time, st, cur Status) {
	if st.sameAs(cur) {
		return
	}
	st.Since = cur.Since
	if st.Reserved != cur.Reserved {
		st.Since = now
	}
	w.mu.Lock()
	w.current = st
	w.mu.Unlock()
	// The callback keeps the short slice. Giving it the default one
	// costs a sched_setattr that re-places the thread in its run queue,
	// and on a busy machine that let other processes run first: 7.7-20 ms
	// before the callback started, in 3 of 1500 callbacks. The callback
	// is short now (an ioctl per group leader for the counters that hold
	// no PMU counter); where it reopens hardware counters, the short
	// slice cuts its CPU share into smaller pieces but does not shrink it.
	w.fn(st)
}

// problem logs err if it differs from the last one; nil clears it.
func (w *Watcher) problem(err error) {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	w.mu.Lock()
	repeat := msg == w.lastErr
	w.lastErr = msg
	w.mu.Unlock()
	if msg != "" && !repeat {
		w.logf("%s", msg)
	}
}

func (w *Watcher) logf(format string, args ...any) {
	if w.opts.Logf != nil {
		w.opts.Logf(format, args...)
	}
}

// Current returns the Status last passed to the callback.
func (w *Watcher) Current() Status {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.current
	st.Holders = slices.Clone(st.Holders)
	return st
}

// Close stops the watcher. When it returns, fn is not running and will not
// be called again. The LockFile stays open.
func (w *Watcher) Close() error {
	w.closeOnce.Do(func() {
		w.closing.Store(true)
		one := [8]byte{1}
		unix.Write(w.wake, one[:])
		<-w.done
		w.namers.Wait() // a naming under way writes to wake when done
		w.stopNotify()
		unix.Close(w.wake)
	})
	<-w.done
	return nil
}

// threadCPUTime is the CPU time the calling thread has used.
func threadCPUTime() time.Duration {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}
