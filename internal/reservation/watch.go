package reservation

import (
	"errors"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultPoll is how often the Watcher checks with F_GETLK, as the C agent
// did, whenever a lock could appear without an inotify hint: someone else
// has the lock file open, a reservation is held, inotify is off or lost
// events, or nobody knows. It bounds the reaction time when inotify says
// nothing (NFS, inotify limits, a lock taken on an fd opened long ago).
const DefaultPoll = 100 * time.Millisecond

// DefaultIdlePoll is how often the Watcher checks while inotify says that
// no other process has the lock file open, so that any lock would first
// need an open that inotify reports. See the package comment for why this
// is safe, and for the rare cases in which this slower poll is the one that
// notices a lock.
const DefaultIdlePoll = time.Second

// recheckAfter is when a hint is followed up, counted from the hint. An
// IN_OPEN arrives before its process gets to F_SETLK, usually by tens of
// microseconds but by milliseconds on a busy machine, so one look is not
// enough.
var recheckAfter = []time.Duration{0, 1 * time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond}

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
	// the lock file open; 0 means DefaultIdlePoll, and it is never shorter
	// than Poll.
	IdlePoll time.Duration
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

	hints chan struct{}
	stop  chan struct{}
	done  chan struct{}

	closeOnce sync.Once

	mu      sync.Mutex
	current Status
	lastErr string

	// users is the count of other processes' open file descriptions of
	// the lock file, which decides between Poll and IdlePoll.
	users users

	checks atomic.Int64 // F_GETLK checks made, for tests
}

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

// watchFile (re)places the notifier's watch on path and restarts the count
// with the new watch's events. The count's lock is held throughout so that
// the notifier, which takes it for every event, cannot deliver an event of
// the new watch before the count knows its generation. Without a watch on
// the current file no event can be trusted, so on failure the count stays
// unknown until the next success.
func (u *users) watchFile(n *notifier, path string) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	gen, err := n.watchFile(path, fileMask)
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
	if u.denied || !due {
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
// fn runs on the watcher's own goroutine, one call at a time, and the next
// check waits for it to return, so keep it short-ish (closing or opening
// counters is fine). fn must not call Close.
func Watch(lf *LockFile, opts Options, fn func(Status)) (*Watcher, error) {
	if opts.Poll <= 0 {
		opts.Poll = DefaultPoll
	}
	if opts.IdlePoll <= 0 {
		opts.IdlePoll = DefaultIdlePoll
	}
	opts.IdlePoll = max(opts.IdlePoll, opts.Poll)
	w := &Watcher{
		lf:    lf,
		opts:  opts,
		fn:    fn,
		hints: make(chan struct{}, 1),
		stop:  make(chan struct{}),
		done:  make(chan struct{}),
	}
	w.users.every = opts.IdlePoll
	if !opts.NoNotify {
		if err := w.startNotify(); err != nil {
			w.logf("lock file %s: no inotify hints, polling every %v only: %v", lf.Path(), opts.Poll, err)
		}
	}
	st, err := lf.Check()
	if err != nil {
		w.stopNotify()
		return nil, err
	}
	w.checks.Add(1)
	if w.note != nil {
		w.users.probe(lf)
	}
	st.Since = time.Now()
	w.current = st
	fn(st)
	go w.run()
	return w, nil
}

const (
	dirMask  = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO
	fileMask = unix.IN_OPEN | unix.IN_CLOSE | unix.IN_ATTRIB | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF
)

func (w *Watcher) startNotify() error {
	path := w.lf.Path()
	n, err := watchDir(filepath.Dir(path), filepath.Base(path), dirMask, w.event)
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

// event counts an event and pokes the watcher.
func (w *Watcher) event(ev notifyEvent) {
	w.users.event(ev)
	w.poke()
}

// poke records a hint without blocking the inotify reader; hints that
// arrive while one is pending merge into it.
func (w *Watcher) poke() {
	select {
	case w.hints <- struct{}{}:
	default:
	}
}

// interval is how long the next poll may wait: IdlePoll only while hints
// work, nobody holds a reservation and nobody else has the file open.
func (w *Watcher) interval() time.Duration {
	if w.note == nil || !w.users.idle() {
		return w.opts.Poll
	}
	w.mu.Lock()
	reserved := w.current.Reserved
	w.mu.Unlock()
	if reserved {
		return w.opts.Poll
	}
	return w.opts.IdlePoll
}

func (w *Watcher) run() {
	defer close(w.done)
	next := time.Now().Add(w.interval())
	poll := time.NewTimer(time.Until(next))
	defer poll.Stop()
	// schedule brings the next poll forward when the interval shrank.
	schedule := func() {
		if at := time.Now().Add(w.interval()); at.Before(next) {
			next = at
			poll.Reset(time.Until(next))
		}
	}
	burst := time.NewTimer(time.Hour)
	burst.Stop()
	var hintAt time.Time
	var step int // index into recheckAfter of the check just made
	recheck := func() {
		w.check()
		// Skip the steps that a slow check already overran.
		for step++; step < len(recheckAfter); step++ {
			if d := time.Until(hintAt.Add(recheckAfter[step])); d > 0 {
				burst.Reset(d)
				break
			}
		}
	}

	for {
		select {
		case <-w.stop:
			return
		case <-poll.C:
			w.check()
			next = time.Now().Add(w.interval())
			poll.Reset(time.Until(next))
		case <-w.hints:
			// A new hint restarts the follow-ups from its own time.
			hintAt, step = time.Now(), 0
			recheck()
			schedule()
		case <-burst.C:
			recheck()
			schedule()
		}
	}
}

// check makes sure the descriptor still names the file, asks F_GETLK and
// calls fn if anything changed.
// ensure runs LockFile.Ensure and says whether the descriptor now refers
// to another file.
func (w *Watcher) ensure() (repaired string, reopened bool, err error) {
	dev, ino := w.lf.identity()
	repaired, err = w.lf.Ensure()
	ndev, nino := w.lf.identity()
	return repaired, dev != ndev || ino != nino, err
}

func (w *Watcher) check() {
	var problems []error
	repaired, reopened, err := w.ensure()
	if err != nil {
		problems = append(problems, err)
	} else if repaired != "" {
		w.logf("lock file %s %s", w.lf.Path(), repaired)
	}
	if reopened {
		if w.note != nil {
			// Our own open of the new file came before its watch, so it is
			// not counted; the count of the old file no longer matters.
			if err := w.users.watchFile(w.note, w.lf.Path()); err != nil {
				problems = append(problems, err)
			}
		}
	}
	st, err := w.lf.Check()
	w.checks.Add(1)
	if err != nil {
		problems = append(problems, err)
	}
	if w.note != nil {
		w.users.probe(w.lf) // a no-op unless the count is in doubt
	}
	w.problem(errors.Join(problems...))
	if err != nil {
		return
	}
	w.mu.Lock()
	changed := !st.sameAs(w.current)
	if changed {
		st.Since = w.current.Since
		if st.Reserved != w.current.Reserved {
			st.Since = time.Now()
		}
		w.current = st
	}
	w.mu.Unlock()
	if changed {
		w.fn(st)
	}
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
	w.closeOnce.Do(func() { close(w.stop) })
	<-w.done
	w.stopNotify()
	return nil
}
