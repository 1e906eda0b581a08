package counter

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// # Reservations
//
// While perfalloc holds the counters the agent must count nothing and
// leave the PMU to the holder. Closing every descriptor does that, but
// reopening them costs one perf_event_open per event per CPU, a few
// hundred µs for a handful of events and far more on a large machine,
// exactly when the holder has just let go and the agent should be
// counting again.
//
// Release therefore distinguishes. An event that holds no PMU counter (a
// software event, a tracepoint, and the PMUs of Config.JoinSoftware, such
// as msr, which read free-running registers; the kernel files all of
// these in its software context) is disabled instead: one
// PERF_EVENT_IOC_DISABLE per group leader, which stops the group's counts
// and its time_enabled and time_running, keeping the descriptors. Every
// other event (hardware, cache, raw, breakpoints, uncore and other sysfs
// PMUs) is closed as before: a disabled event keeps what its open
// reserved, a breakpoint its debug register, an exclusive PMU its one
// event, and perfalloc promised the holder the PMU itself.
//
// What a fetch sees does not depend on which was done: during the
// reservation nothing is read, so values and dutycycles stay frozen and
// Active is 0; after it the first read still reports Active 0, as the C
// agent's does. A disabled counter resumes from its own count, so its next
// read adds what it counted between the last read and the Release, which a
// closed one loses; neither counts anything during the reservation.
//
// Resume enables what Release kept, one ioctl per leader again, and
// leaves what it closed to Reopen, which opens it: the agent paces only
// that part. A group that cannot be enabled (its descriptor is gone, or
// the kernel refuses) is closed and reopened instead; so is one that
// Release could not disable, and one that fell apart meanwhile (a named
// group split while reserved, or a member that a previous reopen could
// not open: a member cannot join a group that has already been enabled).

// holdsNoCounter says whether an event takes no PMU counter, so that
// Release may disable rather than close it.
func (s *Set) holdsNoCounter(attr *unix.PerfEventAttr) bool {
	return attr.Type == unix.PERF_TYPE_TRACEPOINT || s.grouped(attr)
}

// Released describes what a Release did, for the log.
type Released struct {
	Disabled int // descriptors kept, disabled
	Closed   int // descriptors closed
}

// Resumed describes what a Resume did, for the log.
type Resumed struct {
	Enabled int // descriptors counting again
	Reopen  int // served instances without a descriptor, for Reopen
}

// unit is what is disabled or closed as one: a group's open members, the
// leader first, or one slot read on its own.
type unit struct {
	g    int // index into Set.groups, or -1
	refs []ref
}

// units lists every unit with an open descriptor. Called with mu held.
func (s *Set) units() []unit {
	var us []unit
	for g := range s.groups {
		if open := s.groups[g].open; len(open) > 0 {
			us = append(us, unit{g, open})
		}
	}
	for i := range s.events {
		for k := range s.events[i].slots {
			if sl := &s.events[i].slots[k]; sl.src != nil && sl.grp < 0 {
				us = append(us, unit{-1, []ref{mkref(i, k)}})
			}
		}
	}
	return us
}

// keepable says whether Release may disable u rather than close it: none
// of its events holds a PMU counter, and Resume will find it whole.
func (s *Set) keepable(u unit) bool {
	for _, r := range u.refs {
		if !s.holdsNoCounter(&s.events[r.ev].attr) {
			return false
		}
	}
	if u.g < 0 {
		return true
	}
	g := &s.groups[u.g]
	if g.split {
		return false
	}
	for _, r := range g.refs {
		if sl := &s.events[r.ev].slots[r.k]; sl.served && sl.src == nil && int(sl.grp) == u.g {
			return false // a member missing since a failed reopen
		}
	}
	return true
}

// leaders are the Sources to disable or enable for us, each unit's
// leader. Called with mu held.
func (s *Set) leaders(us []unit) []Source {
	leads := make([]Source, len(us))
	for j, u := range us {
		r := u.refs[0]
		leads[j] = s.events[r.ev].slots[r.k].src
	}
	return leads
}

// unitCPUs are the CPUs of us's leaders. Called with mu held.
func (s *Set) unitCPUs(us []unit) []int {
	cpus := make([]int, len(us))
	for j, u := range us {
		cpus[j] = int(s.events[u.refs[0].ev].slots[u.refs[0].k].cpu)
	}
	return cpus
}

// tally takes the errors of an ioctl on each unit's leader, made outside
// mu, and returns how many descriptors it stopped or started, the units
// it failed on, and one error per failure, worded by format (the unit's
// name, then the error).
func (s *Set) tally(us []unit, opErrs []error, format string) (n int, failed []unit, errs []error) {
	for j, u := range us {
		if err := opErrs[j]; err != nil {
			errs = append(errs, fmt.Errorf(format, s.unitName(u), err))
			failed = append(failed, u)
			continue
		}
		n += len(u.refs)
	}
	return n, failed, errs
}

// detach takes u's descriptors out of the Set and returns them in the
// order they must be closed: members first, the leader last (closed
// first, it would leave them behind as counters of their own). Called
// with mu held.
func (s *Set) detach(u unit) []Source {
	srcs := make([]Source, 0, len(u.refs))
	for j := len(u.refs) - 1; j >= 0; j-- {
		sl := &s.events[u.refs[j].ev].slots[u.refs[j].k]
		srcs = append(srcs, sl.src)
		sl.src, sl.off = nil, false
		if sl.ok {
			sl.ok = false
			s.nOK--
		}
	}
	if u.g >= 0 {
		s.groups[u.g].open = nil
	}
	return srcs
}

// closeAll closes srcs, naming u's events in the errors.
func (s *Set) closeAll(srcs []Source, u unit) []error {
	var errs []error
	for _, src := range srcs {
		if err := src.Close(); err != nil {
			errs = append(errs, fmt.Errorf("counter: closing %s: %w", s.unitName(u), err))
		}
	}
	return errs
}

// unitName names u for the log: `"cpu-clock" on cpu0`, or
// `the group "a", "b" on cpu1`.
func (s *Set) unitName(u unit) string {
	cpu := s.events[u.refs[0].ev].slots[u.refs[0].k].cpu
	if len(u.refs) == 1 {
		return fmt.Sprintf("%q on cpu%d", s.events[u.refs[0].ev].name, cpu)
	}
	names := ""
	for j, r := range u.refs {
		if j > 0 {
			names += ", "
		}
		names += fmt.Sprintf("%q", s.events[r.ev].name)
	}
	return fmt.Sprintf("the group %s on cpu%d", names, cpu)
}

// Release stops every counter for a reservation: it closes the descriptors
// of events that hold a PMU counter and disables the others (see
// "Reservations"). Values and dutycycles freeze at their last read, and
// Active reports 0, until Reopen, or Resume and Reopen. When Release
// returns, nothing counts and no PMU counter is held. A unit that cannot
// be disabled is closed instead, and the error says so. Releasing a Set
// that is not counting does nothing.
func (s *Set) Release() (Released, error) {
	s.opMu.Lock()
	defer s.opMu.Unlock()
	st := s.stop()
	if st == nil {
		return Released{}, nil
	}
	return s.stopped(st, st.ioctls(nil, Source.Disable))
}

// stopping is what Release does to a Set between marking it released and
// telling what it did: disable the leaders of keep (one ioctl each, which
// ReleaseAll makes on the leader's CPU), close the descriptors of closing.
type stopping struct {
	keep         []unit
	leads        []Source
	cpus         []int // each leader's CPU
	closing      [][]Source
	closingUnits []unit
}

// ioctls runs op on each of st's leaders, by run when it is not nil, and
// returns each one's error.
func (st *stopping) ioctls(run *onCPUs, op func(Source) error) []error {
	errs := make([]error, len(st.leads))
	for j, l := range st.leads {
		if run != nil {
			run.add(st.cpus[j], func() { errs[j] = op(l) })
		} else {
			errs[j] = op(l)
		}
	}
	return errs
}

// stop marks s released and says what is left to do, or nil when s is not
// counting; opMu held.
func (s *Set) stop() *stopping {
	var keep []unit
	var closing [][]Source
	var closingUnits []unit
	s.mu.Lock()
	if s.state != open {
		s.mu.Unlock()
		return nil
	}
	for _, u := range s.units() {
		if s.keepable(u) {
			keep = append(keep, u)
			for _, r := range u.refs {
				s.events[r.ev].slots[r.k].off = true
			}
			continue
		}
		closing = append(closing, s.detach(u))
		closingUnits = append(closingUnits, u)
	}
	for i := range s.events {
		for k := range s.events[i].slots {
			s.events[i].slots[k].ok = false
		}
	}
	s.nOK = 0
	s.state = released
	st := &stopping{keep: keep, leads: s.leaders(keep), cpus: s.unitCPUs(keep), closing: closing, closingUnits: closingUnits}
	s.mu.Unlock()
	return st
}

// stopped finishes what stop began, once the leaders' disables returned
// opErrs; opMu held.
func (s *Set) stopped(st *stopping, opErrs []error) (Released, error) {
	var rel Released
	disabled, failed, errs := s.tally(st.keep, opErrs, "counter: disabling %s failed, so it is closed instead: %w")
	rel.Disabled = disabled
	for j, srcs := range st.closing {
		rel.Closed += len(srcs)
		errs = append(errs, s.closeAll(srcs, st.closingUnits[j])...)
	}
	s.drop(failed)
	for _, u := range failed {
		rel.Closed += len(u.refs)
	}
	return rel, errors.Join(errs...)
}

// drop detaches and closes units that Release had kept and that could
// not be disabled or enabled. Their close errors add nothing to that
// failure: the descriptor is gone either way.
func (s *Set) drop(us []unit) {
	if len(us) == 0 {
		return
	}
	var srcs []Source
	s.mu.Lock()
	for _, u := range us {
		srcs = append(srcs, s.detach(u)...)
	}
	s.mu.Unlock()
	for _, src := range srcs {
		src.Close()
	}
}

// Resume starts again what Release disabled, one ioctl per group leader,
// and serves the counters again: the first read reports Active 0, as
// after a reopen. What Release closed, or what cannot be enabled (closed
// now, and named in the error), is left for Reopen; Resumed.Reopen says
// whether there is any. Resuming a Set that Release did not stop does
// nothing.
func (s *Set) Resume() (Resumed, error) {
	s.opMu.Lock()
	defer s.opMu.Unlock()
	res, errs := s.resume()
	return res, errors.Join(errs...)
}

// resume is Resume with opMu held.
func (s *Set) resume() (Resumed, []error) {
	st, res := s.start()
	if st == nil {
		return res, nil
	}
	return s.started(st, st.ioctls(nil, Source.Enable))
}

// start says what Resume must do to s: enable st.keep, drop what split
// meanwhile (in st.closingUnits). It is nil, with what Resume returns,
// when Release did not stop s; opMu held.
func (s *Set) start() (*stopping, Resumed) {
	var enable, drop []unit
	s.mu.Lock()
	if s.state != released {
		res := Resumed{Reopen: s.missing()}
		s.mu.Unlock()
		return nil, res
	}
	// Every descriptor open now is one Release kept.
	for _, u := range s.units() {
		if u.g >= 0 && s.groups[u.g].split {
			drop = append(drop, u) // split meanwhile: Reopen opens its members on their own
			continue
		}
		enable = append(enable, u)
	}
	st := &stopping{keep: enable, leads: s.leaders(enable), cpus: s.unitCPUs(enable), closingUnits: drop}
	s.mu.Unlock()
	return st, Resumed{}
}

// started finishes what start began, once the leaders' enables returned
// opErrs; opMu held.
func (s *Set) started(st *stopping, opErrs []error) (Resumed, []error) {
	enabled, failed, errs := s.tally(st.keep, opErrs, "counter: enabling %s after the reservation failed, so it is reopened instead: %w")
	s.drop(append(st.closingUnits, failed...))
	res := Resumed{Enabled: enabled}

	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.events {
		for k := range s.events[i].slots {
			s.events[i].slots[k].off = false
		}
	}
	s.state = open
	s.fresh = true
	res.Reopen = s.missing()
	return res, errs
}

// missing counts the served instances without a descriptor. Called with
// mu held.
func (s *Set) missing() int {
	n := 0
	for i := range s.events {
		for _, k := range s.events[i].inst {
			if s.events[i].slots[k].src == nil {
				n++
			}
		}
	}
	return n
}
