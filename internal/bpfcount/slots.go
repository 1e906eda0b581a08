package bpfcount

import "fmt"

// slots hands out the rows of the counts map: one per cgroup counted,
// reused after a cgroup goes, the lowest free one first so that the rows
// in use stay packed at the start of the map.
type slots struct {
	byID map[uint64]int
	free []int // descending, so that the lowest is popped first
	next int   // the rows from here on were never used
	max  int
}

func newSlots(max int) *slots {
	return &slots{byID: map[uint64]int{}, max: max}
}

// add gives id a slot; fresh says the slot was never used, so its counts
// are still zero.
func (s *slots) add(id uint64) (slot int, fresh bool, err error) {
	if _, ok := s.byID[id]; ok {
		return 0, false, fmt.Errorf("bpfcount: cgroup id %d is counted already", id)
	}
	switch {
	case len(s.free) > 0:
		slot = s.free[len(s.free)-1]
		s.free = s.free[:len(s.free)-1]
	case s.next < s.max:
		slot, fresh = s.next, true
		s.next++
	default:
		return 0, false, fmt.Errorf("bpfcount: all %d cgroup slots are taken", s.max)
	}
	s.byID[id] = slot
	return slot, fresh, nil
}

// remove frees id's slot and returns it.
func (s *slots) remove(id uint64) (int, bool) {
	slot, ok := s.byID[id]
	if !ok {
		return 0, false
	}
	delete(s.byID, id)
	i := len(s.free)
	for i > 0 && s.free[i-1] < slot {
		i--
	}
	s.free = append(s.free, 0)
	copy(s.free[i+1:], s.free[i:])
	s.free[i] = slot
	return slot, true
}

// index is where the counts map keeps a slot's event on a CPU: a slot's
// entries are together, so that a new cgroup's are cleared in one stretch.
func index(slot, ev, cpu, nEvents, nCPU int) int {
	return (slot*nEvents+ev)*nCPU + cpu
}
