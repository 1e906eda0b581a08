package lockwatch

import (
	"errors"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"perfevent/internal/reservation"
	"perfevent/internal/reservation/inotify"
)

// users follows whether other processes have the lock file open. A lease
// probe ([reservation.LockFile.Alone]) says when nobody has; from there inotify's
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
func (u *users) event(ev inotify.Event) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.dropEvent != nil && u.dropEvent(ev.Mask) {
		return
	}
	switch {
	case ev.Mask&unix.IN_Q_OVERFLOW != 0:
		// Opens may have been lost: only a probe can tell.
		u.known = false
	case ev.Gen == 0 || ev.Gen != u.gen:
		return // not about the file being counted
	case ev.Mask&unix.IN_OPEN != 0:
		u.delta++
	case ev.Mask&unix.IN_CLOSE != 0:
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
func (u *users) setFlood(n *inotify.Notifier, path string, on bool) (bool, error) {
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
func (u *users) watchFile(n *inotify.Notifier, path string) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	mask := uint32(fileMask)
	if u.flood {
		mask &^= unix.IN_CLOSE
	}
	gen, err := n.WatchFile(path, mask)
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
func (u *users) probe(lf lockFile, now time.Time) {
	u.mu.Lock()
	due := u.verify || (!u.known && (u.last.IsZero() || now.Sub(u.last) >= u.every))
	if u.denied || u.flood || !due {
		u.mu.Unlock()
		return
	}
	u.verify = false
	u.last = now
	seq := u.seq
	u.mu.Unlock()

	alone, err := lf.Alone()

	u.mu.Lock()
	defer u.mu.Unlock()
	switch {
	case u.seq != seq:
		// Voided; an unknown count is probed again within u.every, a
		// count back at 0 asks for its own confirmation.
	case errors.Is(err, reservation.ErrLeaseDenied):
		u.denied = true
	case err != nil:
		// Unexpected: stay as we were, and try again later.
	case alone:
		u.known, u.delta = true, 0
	default:
		u.known = false
	}
}
