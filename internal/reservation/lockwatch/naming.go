package lockwatch

import (
	"runtime"
	"time"

	"golang.org/x/sys/unix"

	"perfevent/internal/reservation"
)

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
	n.holders, n.err = reservation.LockHolders(w.procLocks, n.dev, n.ino)
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
func (w *Watcher) settle(n naming, cur reservation.Status) reservation.Status {
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
	return reservation.Status{Reserved: true, Holders: holders, Since: cur.Since}
}
