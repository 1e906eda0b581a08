package agent

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"perfevent/internal/counter"
	"perfevent/internal/metrics"
	"perfevent/internal/reservation"
	"perfevent/internal/reservation/lockwatch"
)

// openLock opens (or creates) the lock file and prepares the directory of
// the state file for the user the agent will run as.
func (a *Agent) openLock(uid, gid int) error {
	lf, err := reservation.OpenIn(a.fs.FS, a.o.LockFile, a.o.LockAccess)
	if err != nil {
		return err
	}
	a.lock = lf
	if err := reservation.CheckLockDir(a.o.LockFile); err != nil {
		a.log.Warningf("%v", err)
	}
	// A refused directory is never written: without it there is no state
	// file at all.
	d, err := reservation.PrepareStateDir(a.o.LockFile, uid, gid, a.trusted...)
	if err != nil {
		a.log.Warningf("%v; perfalloc will not be able to confirm releases", err)
	}
	a.stateDir = d
	return nil
}

// prepareWatch starts the lock watcher's thread, paused, before the
// configuration is read: the thread's start and its real-time policy,
// which the drop of privileges must wait for, then overlap the build.
func (a *Agent) prepareWatch() {
	w, err := lockwatch.Prepare(a.lock, lockwatch.Options{
		Poll:     a.o.Poll,
		NoNotify: a.o.NoInotify,
		Log:      a.log,
		// Begin lets it check once the privileges are dropped: Drop's
		// all-thread calls then find its thread in a read they leave
		// alone (see Paused).
		Paused: true,
	})
	if err != nil {
		a.log.Errorf("perfalloc lock file: %v; counters stay open and perfalloc cannot reserve them", err)
		return
	}
	a.watcher = w
}

// watchLock starts watching the lock file: counters stop while someone
// holds a read lock on it (counter.Set.Release: closed if they hold a PMU
// counter, disabled if not) and count again when the last holder lets go.
// The state file beside it tells perfalloc when that has happened.
func (a *Agent) watchLock() error {
	if a.stateDir != nil {
		st, err := reservation.NewStateFileIn(a.stateDir, reservation.State{
			Program:  Program,
			Config:   a.o.Config,
			LockFile: a.o.LockFile,
			Counters: reservation.CountersOpen,
			Since:    time.Now(),
			Holders:  []int{},
			Events:   a.events(),
		}, 0)
		switch {
		case errors.Is(err, reservation.ErrStateOwned):
			a.log.Warningf("%v; this agent leaves it alone and perfalloc cannot confirm its releases", err)
		case err != nil:
			a.log.Warningf("state file: %v; perfalloc will not be able to confirm releases", err)
		default:
			a.state = st
			a.published.Store(st)
		}
	}
	if err := a.watcher.Start(a.reservationChanged); err != nil {
		a.watcher.Close()
		a.watcher = nil
		return err
	}
	return nil
}

func (a *Agent) stopReservation() {
	if a.watcher != nil {
		a.watcher.Close()
	}
	if a.state != nil {
		a.state.Close() // removes the file: no agent, no state
	}
	if a.stateDir != nil {
		a.stateDir.Close()
	}
	if a.lock != nil {
		a.lock.Close()
	}
}

// reservationChanged runs on the watcher's goroutine.
func (a *Agent) reservationChanged(s reservation.Status) {
	a.mu.Lock()
	defer a.mu.Unlock()
	g := a.gen.Load()
	set := g.set
	a.holds.update(s, time.Now())
	a.status = s
	switch {
	case s.Reserved && !a.reserved:
		a.armMaxHold()
		start := time.Now()
		rel, err := set.Release()
		if err != nil {
			a.log.Warningf("releasing counters for perfalloc: %v", err)
		}
		g.closeCgroups()
		took := time.Since(start).Round(time.Microsecond)
		// A lock taken and dropped in a loop must not fill the log: the
		// cycles beyond the pace of reopens are counted, not told.
		a.quietCycle = !a.cycleLog.AllowN(a.now(), 1)
		if a.quietCycle {
			a.untold++
			break
		}
		msg := fmt.Sprintf("counters released for perfalloc (holders %s) in %v: %s disabled, %d closed",
			pids(s.Holders), took, plural(rel.Disabled, "descriptor"), rel.Closed)
		if a.untold > 0 {
			msg += fmt.Sprintf(" (%s since the last one logged)", plural(a.untold, "reservation"))
			a.untold = 0
		}
		a.log.Infof("%s", msg)
	case !s.Reserved && a.reserved:
		a.reserved = false
		a.stopMaxHold()
		if a.overridden {
			// Counting resumed at the maximum hold already.
			a.overridden = false
			a.log.Infof("perfalloc's lock, held past the maximum hold, is let go")
			break
		}
		a.resumeLocked(g)
		if a.reloadDue {
			// Read and built by the reloader, never on this thread: the
			// watcher must not wait for files.
			a.reloadDue = false
			a.RequestReload()
		}
	}
	a.reserved = s.Reserved
	a.updateState(&s)
}

// resumeLocked starts the counters of g again after a reservation; the
// caller holds a.mu. Enabling what Release disabled is one ioctl per group
// and is done at once; reopening what it closed (events × CPUs system
// calls, for each cgroup too) and rescanning the cgroups is paced: a user
// who takes and drops the lock in a loop must not make the agent reopen
// every counter and log it hundreds of times a second. A few reopens in a
// row are immediate; beyond that, one per minReopen, the pace of the C
// agent's poll.
func (a *Agent) resumeLocked(g *generation) {
	start := time.Now()
	res, err := g.set.Resume()
	if err != nil {
		a.log.Warningf("resuming counters after perfalloc: %v", err)
	}
	cgroups := g.resumeCgroups()
	took := time.Since(start).Round(time.Microsecond)
	if res.Reopen > 0 || cgroups {
		a.pace()
	}
	if res.Reopen > 0 {
		a.reopenLocked(g.set, res.Enabled)
	} else if !a.quietCycle {
		a.log.Infof("counters resumed after perfalloc in %v: %s enabled again", took, plural(res.Enabled, "descriptor"))
	}
	if cgroups {
		g.reopenCgroups()
	}
}

// reopenLocked reopens the counters after a reservation; enabled is how
// many descriptors Resume enabled before. The caller holds a.mu.
// Failures already in the log (the events this machine could not count at
// start-up, or that failed the same way at an earlier reopen) are counted
// in the one Info line, not listed again: a perfalloc run every minute must
// not fill the log with them.
func (a *Agent) reopenLocked(set *counter.Set, enabled int) {
	start := time.Now()
	sum, err := set.Reopen()
	if err != nil {
		a.log.Warningf("reopening counters: %v", err)
	}
	var fresh []string
	known := 0
	for _, line := range sum.FailureLines() {
		if a.told[line] {
			known++
			continue
		}
		fresh = append(fresh, line)
		a.told[line] = true
	}
	msg := fmt.Sprintf("counters reopened after perfalloc in %v: %d of %d events served on %d descriptors",
		time.Since(start).Round(time.Microsecond), sum.Served, sum.Events, sum.FDs)
	if enabled > 0 {
		msg += fmt.Sprintf(" (%d of them enabled again, not reopened)", enabled)
	}
	if known > 0 {
		msg += "; still failing as logged before: " + plural(known, "event")
	}
	if len(fresh) > 0 {
		msg += "; failing anew: " + plural(len(fresh), "event") + ", below"
	}
	a.log.Infof("%s", msg)
	for _, line := range fresh {
		a.log.Warningf("%s", line)
	}
}

// updateState has the state file rewritten; s is nil when only the events
// changed.
// The caller holds a.mu.
func (a *Agent) updateState(s *reservation.Status) {
	if a.state == nil {
		return
	}
	events := a.events()
	overridden := a.overridden
	// Posted, not written here: this runs on the lock watcher's thread,
	// which must not wait for the file system.
	// A report that changes nothing, as the watcher's first, is not
	// written again.
	a.state.PostChange(func(st *reservation.State) bool {
		changed := !slices.Equal(st.Events, events)
		if s != nil {
			counters := reservation.CountersOpen
			if s.Reserved && !overridden {
				counters = reservation.CountersReleased
			}
			if st.Counters != counters {
				st.Since = time.Now()
				changed = true
			}
			st.Counters = counters
			changed = changed || !slices.Equal(st.Holders, s.Holders)
			st.Holders = append(st.Holders[:0], s.Holders...)
		}
		st.Events = events
		return changed
	}, func(err error) { a.log.Warningf("state file: %v", err) })
}

// events describes every configured event for the state file.
func (a *Agent) events() []reservation.EventState {
	set := a.gen.Load().set
	out := make([]reservation.EventState, 0, set.NumEvents())
	for ev := range set.NumEvents() {
		e := reservation.EventState{Name: set.Name(ev), State: reservation.EventFailed}
		cpus, why := set.Counting(ev)
		e.CPUs = cpus
		switch {
		case e.CPUs > 0:
			e.State = reservation.EventCounting
		case len(set.CPUs(ev)) > 0 && set.Reserved():
			e.State = reservation.EventReleased
		}
		if why != nil {
			e.Error = why.Error()
		}
		out = append(out, e)
	}
	return out
}

func pids(p []int) string {
	if len(p) == 0 {
		return "unknown"
	}
	s := ""
	for i, pid := range p {
		if i > 0 {
			s += ","
		}
		s += strconv.Itoa(pid)
	}
	return s
}

// holding says that perfalloc's reservation stops counting now: the lock
// is held, and not past the maximum hold. The caller holds a.mu.
func (a *Agent) holding() bool { return a.reserved && !a.overridden }

// reservations is what the table needs to serve perfevent.reservation.*.
func (a *Agent) reservations() *metrics.Reservations {
	return &metrics.Reservations{Reader: a.holds, Holders: a.holds.instances}
}

// armMaxHold starts the maximum hold of a reservation that begins; the
// caller holds a.mu.
func (a *Agent) armMaxHold() {
	if a.o.MaxHold <= 0 {
		return
	}
	a.holdSeq++
	seq := a.holdSeq
	a.holdTimer = time.AfterFunc(a.o.MaxHold, func() { a.holdExpired(seq) })
}

// stopMaxHold stops it when the reservation ends; the caller holds a.mu.
func (a *Agent) stopMaxHold() {
	if a.holdTimer != nil {
		a.holdTimer.Stop()
		a.holdTimer = nil
	}
}

// holdExpired resumes counting when reservation seq has lasted the
// maximum hold. The holder keeps its lock, and the agent its counters
// until the lock is let go and taken again.
func (a *Agent) holdExpired(seq int) {
	if a.closing.Load() {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.reserved || a.overridden || seq != a.holdSeq {
		return
	}
	a.overridden = true
	a.holdTimer = nil
	a.holds.expired()
	a.log.Warningf("perfalloc's reservation by %s has lasted the maximum hold of %v: counting resumes although the lock is still held (pmdaperfevent -max-hold)", a.holds.who(), a.o.MaxHold)
	a.resumeLocked(a.gen.Load())
	if a.reloadDue {
		// Read and built by the reloader, never under a.mu.
		a.reloadDue = false
		a.RequestReload()
	}
	// A copy: the state file's goroutine reads it after a.mu is let go.
	st := a.status
	st.Holders = slices.Clone(st.Holders)
	a.updateState(&st)
}
