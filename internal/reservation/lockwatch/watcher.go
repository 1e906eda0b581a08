package lockwatch

import (
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
	"golang.org/x/time/rate"

	"perfevent/internal/logging"
	"perfevent/internal/reservation"
	"perfevent/internal/reservation/inotify"
)

func sameStatus(a, b reservation.Status) bool {
	return a.Reserved == b.Reserved && slices.Equal(a.Holders, b.Holders)
}

// lockFile is what the Watcher asks of the lock file
// ([reservation.LockFile]; the schedule's tests fake it).
type lockFile interface {
	Path() string
	Conflict() (locked bool, pid int, err error)
	Alone() (bool, error)
	Identity() (dev, ino uint64)
	Ensure() (repaired string, err error)
	LocksFile() string
}

// Watcher calls back whenever the reservation changes.
type Watcher struct {
	lf   lockFile
	opts Options
	fn   func(reservation.Status)
	note *inotify.Notifier // nil without hints

	pending uint32 // hint* bits of the events since the watcher last looked
	unseen  uint32 // hint* bits of the events since the last check
	// wake is an eventfd that Close writes to, to end the watcher's wait.
	wake int
	// ready is closed when the watcher's thread has its scheduling;
	// beginFd, an eventfd, is written when it may start checking
	// (Options.Paused), and begun closed just before.
	ready       chan struct{}
	beginFd     int
	begun       chan struct{}
	beginOnce   sync.Once
	floodLogged time.Time     // when a flood was last logged
	readAt      time.Time     // the last read of the inotify queue
	readGap     time.Duration // the least time between two reads (see readEvents)
	done        chan struct{}
	runs        bool // run has a goroutine, from Prepare or Start

	closeOnce sync.Once

	mu      sync.Mutex
	current reservation.Status
	lastErr string

	// users is the count of other processes' open file descriptions of
	// the lock file, which decides between the poll intervals.
	users users

	// The rest belongs to the watcher's goroutine, once Start returns.
	next time.Time // when the next check is due
	// events is the buffer for reading the inotify queue. As a field it
	// is on the heap, where its pages are touched only as reads fill them;
	// as a local of run it would be on the stack, which would then grow to
	// 128 KiB, copied and zeroed, before the first check.
	events     []byte
	lastCheck  time.Time
	lastEnsure time.Time
	ensureErr  error         // from the last Ensure, reported with every check
	openAt     time.Time     // the last open hint: dense checks until denseFor after it
	dense      *rate.Limiter // the dense checks
	changes    *rate.Limiter // the changes found at silentPoll
	nameAfter  time.Time     // no /proc/locks before this
	nameStale  bool          // the holders may have changed since they were named
	silent     bool          // a reservation came or went without a hint (see silentPoll)
	fresh      bool          // the reservation drew from changes when it started
	procLocks  string        // /proc/locks, or what a test puts there

	// A naming under way (see namingPace) runs startNaming's goroutine,
	// which sends its result to named and wakes the watcher through wake.
	naming      bool
	named       chan naming
	startNaming func(naming)
	closing     atomic.Bool // Close, not a naming, wrote to wake
	namers      sync.WaitGroup

	tid       atomic.Int32 // the watcher's thread, for tests
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

// Watch checks the lock file once, calls fn with that initial Status (so the
// caller learns whether to open its counters at all), and then calls fn
// again on every change: reserved ↔ free, or a different set of holders.
//
// fn runs on the watcher's goroutine, one call at a time, and the next
// check waits for it to return, so keep it short-ish (closing or opening
// counters is fine). fn must not call Close.
func Watch(lf *reservation.LockFile, opts Options, fn func(reservation.Status)) (*Watcher, error) {
	w, err := Prepare(lf, opts)
	if err != nil {
		return nil, err
	}
	if err := w.Start(fn); err != nil {
		w.Close()
		return nil, err
	}
	return w, nil
}

// Prepare is the first half of Watch: a Watcher that checks nothing until
// Start. A paused one (Options.Paused) starts its thread here, so that the
// thread's start and its request for a policy overlap whatever the caller
// does before Start, where Ready would otherwise wait for them. Close
// ends a Watcher that never started.
func Prepare(lf *reservation.LockFile, opts Options) (*Watcher, error) {
	w := newWatcher(lf, opts, nil)
	var err error
	if w.wake, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		return nil, fmt.Errorf("lock file %s: eventfd: %w", lf.Path(), err)
	}
	if w.opts.Paused {
		if w.beginFd, err = unix.Eventfd(0, unix.EFD_CLOEXEC); err != nil {
			unix.Close(w.wake)
			return nil, fmt.Errorf("lock file %s: eventfd: %w", lf.Path(), err)
		}
		w.runs = true
		go w.run()
	}
	return w, nil
}

// Start is the second half of Watch, for a Watcher from Prepare; call it
// once, and Begin (for a paused one) only after it.
func (w *Watcher) Start(fn func(reservation.Status)) error {
	w.fn = fn
	if !w.opts.NoNotify {
		if err := w.startNotify(); err != nil {
			w.logf("lock file %s: no inotify hints, polling every %v only: %v", w.lf.Path(), w.opts.Poll, err)
		}
	}
	now := time.Now()
	st, err := w.look(now, reservation.Status{}, false)
	if err != nil {
		return err
	}
	if w.naming {
		// Nobody waits for the first Status yet: it may as well be named.
		st = w.settle(<-w.named, st)
	}
	w.lastCheck, w.lastEnsure = now, now
	if w.note != nil {
		w.users.probe(w.lf, now)
	}
	st.Since = now
	w.current = st
	w.schedule(now, false)
	fn(st)
	if !w.opts.Paused {
		w.runs = true
		go w.run()
	}
	return nil
}

// Ready waits until the watcher's thread has asked for its scheduling: a
// caller about to give up the privilege a real-time policy needs waits for
// it first. It does not wait for Begin.
func (w *Watcher) Ready() { <-w.ready }

// Begin lets a watcher started with Options.Paused check; it does nothing
// after the first call, or for a watcher that was not paused.
func (w *Watcher) Begin() {
	w.beginOnce.Do(func() {
		close(w.begun)
		if w.opts.Paused {
			one := [8]byte{1}
			unix.Write(w.beginFd, one[:])
		}
	})
}

// newWatcher fills in the defaults of opts; it starts nothing.
func newWatcher(lf lockFile, opts Options, fn func(reservation.Status)) *Watcher {
	opts = opts.withDefaults()
	w := &Watcher{
		lf:        lf,
		opts:      opts,
		fn:        fn,
		done:      make(chan struct{}),
		ready:     make(chan struct{}),
		begun:     make(chan struct{}),
		dense:     newDenseBucket(),
		changes:   newSilentBucket(),
		readGap:   densePoll,
		named:     make(chan naming, 1),
		procLocks: lf.LocksFile(),
	}
	w.startNaming = w.nameAside
	w.users.every = opts.unsure()
	return w
}

const (
	dirMask  = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO
	fileMask = unix.IN_OPEN | unix.IN_CLOSE | unix.IN_ATTRIB | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF
)

func (w *Watcher) startNotify() error {
	path := w.lf.Path()
	n, err := inotify.New(filepath.Dir(path), filepath.Base(path), dirMask, w.event)
	if err != nil {
		return err
	}
	if err := w.users.watchFile(n, path); err != nil {
		n.Close()
		return err
	}
	w.note = n
	return nil
}

func (w *Watcher) stopNotify() {
	if w.note != nil {
		w.note.Close()
	}
}

// event counts an event and notes its kind. A loop of opens and closes
// makes hundreds of thousands a second, so it is kept short.
func (w *Watcher) event(ev inotify.Event) {
	w.users.event(ev)
	var kind uint32
	switch {
	case ev.Mask&unix.IN_Q_OVERFLOW != 0, ev.Gen == 0: // lost events, or the directory
		kind = hintOpen | hintClose | hintFile
	case ev.Mask&unix.IN_OPEN != 0:
		kind = hintOpen
	case ev.Mask&unix.IN_CLOSE != 0:
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
	n, err := w.note.ReadNow(buf)
	if err != nil {
		w.problem(fmt.Errorf("lock file %s: %w", w.lf.Path(), err))
	}
	if flood(n, since) {
		w.flooded(n, now)
	}
}

// flooded stops the watch on closes after a read of n events.
func (w *Watcher) flooded(n int, now time.Time) {
	changed, err := w.users.setFlood(w.note, w.lf.Path(), true)
	switch {
	case err != nil:
		w.logf("lock file %s: %d inotify events in one read, and its watch without closes failed: %v", w.lf.Path(), n, err)
	case changed && now.Sub(w.floodLogged) >= floodLogEvery:
		// A user can start a flood every second or so; one line an hour
		// says it is happening.
		w.floodLogged = now
		w.logf("lock file %s: %d inotify events in one read: not counting its users until opens pause for %v (logged at most hourly)", w.lf.Path(), n, floodQuiet)
	}
}

func (w *Watcher) reserved() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.current.Reserved
}

// state is what the schedule needs to know, at now.
func (w *Watcher) state(now time.Time) state {
	w.mu.Lock()
	reserved, since := w.current.Reserved, w.current.Since
	w.mu.Unlock()
	n, known, confirmed := w.users.others()
	if known && n == 0 {
		w.silent = false // whoever locked silently has gone
	}
	return state{
		notify:    w.note != nil,
		reserved:  reserved,
		since:     since,
		others:    n,
		known:     known,
		confirmed: confirmed,
		healthy:   w.ensureErr == nil,
		openAt:    w.openAt,
		dense:     w.dense.TokensAt(now) >= 1,
		silent:    w.silent && w.changes.TokensAt(now) >= 1,
		fresh:     w.fresh,
		nameStale: w.nameStale,
		naming:    w.naming,
		nameAfter: w.nameAfter,
	}
}

// schedule sets when the next check is due after one at now; followUp says
// that it followed an open hint.
func (w *Watcher) schedule(now time.Time, followUp bool) {
	s := w.state(now)
	s.followUp = followUp
	w.next = w.opts.next(s, now)
	w.pace.Store(int64(w.next.Sub(now)))
	w.readGap = w.opts.gap(s)
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
	if !setScheduling() {
		defer runtime.UnlockOSThread()
	} // else the thread ends with the goroutine, and its policy with it
	w.tid.Store(int32(unix.Gettid()))
	close(w.ready)
	if w.opts.Paused {
		// A blocking read, which the runtime's signals do not end: the
		// kernel restarts it after the handler (see Options.Paused).
		var b [8]byte
		for {
			if _, err := unix.Read(w.beginFd, b[:]); err != unix.EINTR {
				break
			}
		}
		// What Start set, before Begin, is this goroutine's from here.
		<-w.begun
		if w.closing.Load() {
			return // closed before it began, perhaps before Start
		}
	}
	if w.note != nil {
		w.events = make([]byte, inotify.BufSize)
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
				fds = append(fds, unix.PollFd{Fd: int32(w.note.Fd()), Events: unix.POLLIN})
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
			w.readEvents(w.events, now)
		}
		w.step(now)
	}
}

// step acts on the hints that are pending and checks if a check is due.
// It reads no clock: now is the time of the step, which tests choose.
func (w *Watcher) step(now time.Time) {
	select {
	case n := <-w.named:
		cur := w.Current()
		w.report(now, w.settle(n, cur), cur)
		// The next check was set while the naming ran, without it. If
		// the holders are to be named again (a lock that may follow an
		// open, see look), that check must come at the naming's budget,
		// not at the next poll.
		if due := w.opts.next(w.state(now), now); due.Before(w.next) {
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
		if due := w.opts.hintDue(w.state(now), w.lastCheck); due.Before(w.next) {
			w.next = due
		}
	}
	w.unseen |= kinds
	if now.Before(w.next) {
		return
	}
	kinds, w.unseen = w.unseen, 0
	if now.Sub(w.lastCheck) < w.opts.OpenPoll {
		if _, silent := w.opts.pace(w.state(now), now); !silent {
			w.dense.AllowN(now, 1) // a dense check, if the bucket has one
		}
	}
	changed := w.check(now)
	if changed && kinds == 0 && now.Sub(w.openAt) >= denseFor && w.note != nil {
		// Nothing announced it: a holder that locks through a
		// descriptor it keeps open.
		if w.silent {
			w.changes.AllowN(now, 1)
		}
		w.silent = true
	}
	if changed {
		w.fresh = w.note != nil && !w.silent && w.reserved() && w.changes.AllowN(now, 1)
	}
	w.lastCheck = now
	w.schedule(now, kinds&hintOpen != 0)
}

// ensure repairs the lock file if it was deleted, replaced or had its mode
// changed (LockFile.Ensure), and says what it repaired and whether the
// descriptor now refers to another file, whose users must be counted
// afresh.
func (w *Watcher) ensure() (repaired string, reopened bool, err error) {
	dev, ino := w.lf.Identity()
	repaired, err = w.lf.Ensure()
	ndev, nino := w.lf.Identity()
	return repaired, dev != ndev || ino != nino, err
}

// look asks F_GETLK and, when the holders need naming and the budget
// allows, /proc/locks; quick leaves the naming for later (marked stale).
// cur is the Status last reported.
func (w *Watcher) look(now time.Time, cur reservation.Status, quick bool) (reservation.Status, error) {
	locked, pid, err := w.lf.Conflict() // pid is -1 for an OFD lock
	w.checks.Add(1)
	if err != nil {
		return reservation.Status{}, err
	}
	if !locked {
		w.nameStale = false
		return reservation.Status{}, nil
	}
	if w.note == nil {
		// No hint says when holders come and go: name them again as
		// often as the budget allows.
		w.nameStale = true
	}
	if cur.Reserved && !w.nameStale && (pid <= 0 || slices.Contains(cur.Holders, pid)) {
		return reservation.Status{Reserved: true, Holders: cur.Holders}, nil
	}
	// F_GETLK's holder for now, named in full when the naming is done.
	w.nameStale = true
	holders := slices.Clone(cur.Holders)
	if pid > 0 && !slices.Contains(holders, pid) {
		holders = append(holders, pid)
		slices.Sort(holders)
	}
	if !quick && !w.naming && !now.Before(w.nameAfter) {
		dev, ino := w.lf.Identity()
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
	return reservation.Status{Reserved: true, Holders: holders}, nil
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
		w.users.probe(w.lf, now) // a no-op unless the count is in doubt
	}
	if err != nil {
		return false
	}
	changed = st.Reserved != cur.Reserved
	if st.Reserved && !cur.Reserved && w.nameStale {
		cur = w.Current()
		if st, err := w.look(now, cur, false); err == nil {
			w.report(now, st, cur)
		}
	}
	return changed
}

// report calls fn with st if it differs from cur, the Status last
// reported.
func (w *Watcher) report(now time.Time, st, cur reservation.Status) {
	if sameStatus(st, cur) {
		return
	}
	st.Since = cur.Since
	if st.Reserved != cur.Reserved {
		st.Since = now
	}
	w.mu.Lock()
	w.current = st
	w.mu.Unlock()
	// The callback keeps the thread's policy. Giving it the default one
	// costs a sched_setattr that re-places the thread in its run queue,
	// and on a busy machine that let other processes run first: 7.7-20 ms
	// before the callback started, in 3 of 1500 callbacks. The callback
	// is short (an ioctl per group leader for the counters that hold no
	// PMU counter, and the agent paces the reopens of the others).
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
	logging.Or(w.opts.Log).Warningf(format, args...)
}

// Current returns the Status last passed to the callback.
func (w *Watcher) Current() reservation.Status {
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
		if !w.runs {
			close(w.done) // Start failed, or never came
		}
		w.closing.Store(true)
		w.Begin() // a paused watcher sees the closing at its first wait
		one := [8]byte{1}
		unix.Write(w.wake, one[:])
		<-w.done
		w.namers.Wait() // a naming under way writes to wake when done
		w.stopNotify()
		unix.Close(w.wake)
		if w.opts.Paused {
			unix.Close(w.beginFd)
		}
	})
	<-w.done
	return nil
}
