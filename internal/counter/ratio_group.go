package counter

import (
	"perfevent/internal/perf"

	"golang.org/x/sys/unix"
)

// # Named groups
//
// The operands of a ratio must cover the same time, or their quotient
// mixes two intervals, each scaled by its own guess when multiplexed. So
// events that share a Spec.Group are opened as one perf group per CPU, the
// first in Spec order leading, whatever their PMU: the kernel schedules a
// group onto the PMU all at once or not at all, and one read() returns every
// member's count with the group's time_enabled and time_running, by which
// each is scaled. Keep such groups small (the two operands of a ratio): a
// group needing more counters than the PMU has is never scheduled.
//
// A group that does not fit falls back to separate events, each on its own
// descriptor, multiplexed and scaled by itself as any other event: served,
// if less exact, beats not served. That happens in two ways:
//
//   - a member's open fails with EINVAL or ENOSPC when it joins (the PMU
//     refuses the combination, or has too few counters): that member alone
//     is opened on its own, and the rest stay grouped;
//   - the group opens but never runs: a read finds time_running still 0
//     after starveAfter of time_enabled (the NMI watchdog or another user
//     holds the counters it needs). The fetch only notes it; once it ends,
//     a goroutine closes the group and opens its members on their own.
//
// Both are logged through Config.Log, once. A split group stays split
// across reservations (Reopen opens its members on their own again); a new
// Set, after a reload, tries the group again.

// starveAfter is how long a named group may be enabled without ever
// running before it is split. The kernel rotates multiplexed groups every
// perf_event_mux_interval_ms (4 ms by default), so a group that fits runs
// within a few rotations even on a crowded PMU.
const starveAfter = 1_000_000_000 // ns

// doesNotFit says whether a failed join means the group is too much for
// the PMU, rather than the event being unusable on this CPU.
func doesNotFit(e *OpenError) bool {
	return e != nil && (e.Errno == unix.EINVAL || e.Errno == unix.ENOSPC)
}

// openSolo opens r on its own descriptor, outside its named group, into o.
func (s *Set) openSolo(o *opened, r ref, onlyServed bool) {
	ev := &s.events[r.ev]
	sl := &ev.slots[r.k]
	if onlyServed && !sl.served {
		return
	}
	*o.attr = ev.attr
	o.attr.Read_format = perf.ReadFormat
	src, err := s.opener.Open(ev.name, o.attr, int(sl.cpu), nil)
	if err != nil {
		o.srcs[r.ev][r.k], o.solo[r.ev][r.k] = nil, false
		o.errs[r.ev][r.k] = o.openError(s.fs, int(r.ev), ev.name, int(sl.cpu), err)
		return
	}
	o.srcs[r.ev][r.k], o.errs[r.ev][r.k], o.solo[r.ev][r.k] = src, nil, true
}

// starve notes that g, a named group or a software group with msr or
// tracepoint events in it, has never run; called with mu held by a fetch.
func (s *Set) starve(g *group, enabled uint64) {
	g.starved = true
	s.splitDue = true
	switch {
	case s.log == nil:
	case g.name != "":
		s.log.Warningf("the group %s of %s on cpu%d has not run in %.1fs enabled (the PMU lacks the counters it needs together); its members will be counted on their own",
			g.name, s.memberNames(g), g.cpu, float64(enabled)/1e9)
	default:
		// Software, msr and tracepoint events always schedule; a
		// kernel that treats the last two otherwise must not cost the
		// software events.
		s.log.Warningf("the software events' group %s on cpu%d has not run in %.1fs enabled; its members will be read on their own",
			s.memberNames(g), g.cpu, float64(enabled)/1e9)
	}
}

// splitStarved replaces each starved group by its members on their own
// descriptors. It runs outside any fetch (Fetch.End starts it), and like
// Reopen it opens and closes with mu released.
func (s *Set) splitStarved() {
	defer s.splitWG.Done()
	s.opMu.Lock()
	defer s.opMu.Unlock()
	s.mu.Lock()
	var todo []int
	for g := range s.groups {
		if s.groups[g].starved && !s.groups[g].split {
			s.groups[g].split = true
			todo = append(todo, g)
		}
	}
	if s.state != open {
		s.mu.Unlock() // Reopen opens them on their own
		return
	}
	// Only the group's open members move: one that could not join is on
	// its own already, and opening it again would leave its descriptor
	// behind, counting on the PMU for nobody.
	var closing []Source // members first, the leader last
	var moved []ref
	for _, g := range todo {
		grp := &s.groups[g]
		moved = append(moved, grp.open...)
		for j := len(grp.open) - 1; j >= 0; j-- {
			sl := &s.events[grp.open[j].ev].slots[grp.open[j].k]
			closing = append(closing, sl.src)
			sl.src = nil
			if sl.ok {
				sl.ok = false
				s.nOK--
			}
		}
		grp.open = nil
	}
	s.mu.Unlock()

	for _, src := range closing {
		src.Close() // nothing to do about an error: the descriptor is gone
	}
	o := s.newOpened()
	for _, r := range moved {
		s.openSolo(&o, r, true)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range moved {
		sl := &s.events[r.ev].slots[r.k]
		sl.opened(o.srcs[r.ev][r.k], o.errs[r.ev][r.k])
		if sl.rd != nil {
			sl.rd.last = perf.Count{}
		}
		sl.grp = -1
	}
}

// WaitSplit waits for the splitting of starved groups that fetches have
// started; for tests, and before closing a Set for good.
func (s *Set) WaitSplit() { s.splitWG.Wait() }

// newOpened is an empty opened, sized for every slot.
func (s *Set) newOpened() opened {
	o := opened{
		srcs:  make([][]Source, len(s.events)),
		errs:  make([][]*OpenError, len(s.events)),
		tried: make([]bool, len(s.groups)),
		solo:  make([][]bool, len(s.events)),
		attr:  new(unix.PerfEventAttr),
		last:  make([]*OpenError, len(s.events)),
	}
	n := 0
	for i := range s.events {
		n += len(s.events[i].slots)
	}
	srcs, errs, solo := make([]Source, n), make([]*OpenError, n), make([]bool, n)
	for i := range s.events {
		n := len(s.events[i].slots)
		o.srcs[i], srcs = srcs[:n:n], srcs[n:]
		o.errs[i], errs = errs[:n:n], errs[n:]
		o.solo[i], solo = solo[:n:n], solo[n:]
	}
	return o
}
