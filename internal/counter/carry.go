package counter

// Carry makes s continue the values of old, the Set it replaces: each
// counter of s that old also had (the same event name and attribute, on
// the same CPU) starts from old's value rather than from zero. The agent
// builds a new Set when its configuration is reloaded and when CPUs go
// offline or come back; without Carry every value would drop to near zero
// then, which pmlogger and rate conversion would read as a counter reset
// on every instance. A CPU that was not in old (one that came back) starts
// from zero, as a new instance does.
//
// Call it after s.Open and before s is read or published: it takes old's
// lock, then s's, never both at once.
func (s *Set) Carry(old *Set) {
	if old == nil || old == s {
		return
	}
	type key struct {
		name string
		cpu  int
	}
	vals := map[key]uint64{}
	old.mu.Lock()
	for i := range old.events {
		ev := &old.events[i]
		j, ok := s.byName[ev.name]
		if !ok || s.events[j].attr != ev.attr {
			continue
		}
		for _, k := range ev.inst {
			vals[key{ev.name, ev.slots[k].cpu}] = ev.slots[k].value
		}
	}
	old.mu.Unlock()

	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.events {
		ev := &s.events[i]
		for k := range ev.slots {
			if v, ok := vals[key{ev.name, ev.slots[k].cpu}]; ok {
				ev.slots[k].value = v
			}
		}
	}
}
