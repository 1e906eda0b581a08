package reservation

import (
	"errors"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultPoll is how often the Watcher checks with F_GETLK whatever the
// hints say, as the C agent did. It bounds the reaction time when inotify
// says nothing (NFS, inotify limits, a lock taken on an fd opened long ago).
const DefaultPoll = 100 * time.Millisecond

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
	// Poll is the interval of the F_GETLK check that always runs;
	// 0 means DefaultPoll.
	Poll time.Duration
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
	w := &Watcher{
		lf:    lf,
		opts:  opts,
		fn:    fn,
		hints: make(chan struct{}, 1),
		stop:  make(chan struct{}),
		done:  make(chan struct{}),
	}
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
	n, err := watchDir(filepath.Dir(path), filepath.Base(path), dirMask, w.poke)
	if err != nil {
		return err
	}
	if err := n.watchFile(path, fileMask); err != nil {
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

// poke records a hint without blocking the inotify reader; hints that
// arrive while one is pending merge into it.
func (w *Watcher) poke() {
	select {
	case w.hints <- struct{}{}:
	default:
	}
}

func (w *Watcher) run() {
	defer close(w.done)
	poll := time.NewTicker(w.opts.Poll)
	defer poll.Stop()
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
		case <-w.hints:
			// A new hint restarts the follow-ups from its own time.
			hintAt, step = time.Now(), 0
			recheck()
		case <-burst.C:
			recheck()
		}
	}
}

// check makes sure the descriptor still names the file, asks F_GETLK and
// calls fn if anything changed.
func (w *Watcher) check() {
	var problems []error
	recreated, err := w.lf.Ensure()
	if err != nil {
		problems = append(problems, err)
	} else if recreated {
		w.logf("lock file %s was deleted or replaced: recreated it", w.lf.Path())
		if w.note != nil {
			if err := w.note.watchFile(w.lf.Path(), fileMask); err != nil {
				problems = append(problems, err)
			}
		}
	}
	st, err := w.lf.Check()
	if err != nil {
		problems = append(problems, err)
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
