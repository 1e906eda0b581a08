package counter

import "golang.org/x/sys/unix"

// Carry makes s continue the values of old, the Set it replaces: each
// counter of s that old also had (the same event name and attribute, on
// the same CPU) starts from old's value rather than from zero. The agent
// builds a new Set when its configuration is reloaded and when CPUs go
// offline or come back; without Carry every value would drop to near zero
// then, which pmlogger and rate conversion would read as a counter reset
// on every instance. A CPU that went offline is not in s, but s keeps its
// value for the next Carry: when the CPU comes back its value continues
// from where it froze, as after a reservation, so no instance ever goes
// backwards.
//
// Call it after s.Open and before s is read or published: it reads old
// once more, so that what old counted since its last fetch is not lost,
// and takes old's lock, then s's, never both at once.
func (s *Set) Carry(old *Set) {
	if old == nil || old == s {
		return
	}
	// What old counted since the last fetch carries too: read it once
	// more, as a fetch would (a fetch in flight on old waits its turn).
	f := old.Begin()
	for i := range old.events {
		f.Need(i)
	}
	f.Read()
	f.End()

	vals := map[carryKey]uint64{}
	old.mu.Lock()
	for k, v := range old.carried {
		vals[k] = v
	}
	for i := range old.events {
		ev := &old.events[i]
		for j, k := range ev.inst {
			vals[carryKey{ev.name, ev.attr, int(ev.slots[k].cpu)}] = ev.reads[j].value
		}
	}
	old.mu.Unlock()

	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.events {
		ev := &s.events[i]
		for j, k := range ev.inst {
			key := carryKey{ev.name, ev.attr, int(ev.slots[k].cpu)}
			if v, ok := vals[key]; ok {
				ev.reads[j].value = v
				delete(vals, key)
			}
		}
	}
	// What is left belongs to CPUs (or events) s does not serve; only
	// events s still has are worth keeping.
	s.carried = nil
	for key, v := range vals {
		if j, ok := s.byName[key.name]; ok && s.events[j].attr == key.attr {
			if s.carried == nil {
				s.carried = map[carryKey]uint64{}
			}
			s.carried[key] = v
		}
	}
}

// carryKey names a value for Carry: an event as configured, on one CPU.
type carryKey struct {
	name string
	attr unix.PerfEventAttr
	cpu  int
}
