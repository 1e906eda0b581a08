package bpfcount

import "fmt"

// slots hands out the rows of the counts map: one per cgroup counted,
// reused after a cgroup goes, the lowest free one first so that the rows
// in use stay packed at the start of the map. A cgroup may be added more
// than once (the Trackers of two generations count it while one hands
// over to the other): it keeps its slot until the last remove.
type slots struct {
	byID map[uint64]*held
	free []int // descending, so that the lowest is popped first
	next int   // the rows from here on were never used
	max  int
}

type held struct {
	slot, refs int
}

func newSlots(max int) *slots {
	return &slots{byID: map[uint64]*held{}, max: max}
}

// add gives id a slot. added says id was not counted before; fresh that
// the slot was never used, so that its counts are still zero.
func (s *slots) add(id uint64) (slot int, added, fresh bool, err error) {
	if h, ok := s.byID[id]; ok {
		h.refs++
		return h.slot, false, false, nil
	}
	switch {
	case len(s.free) > 0:
		slot = s.free[len(s.free)-1]
		s.free = s.free[:len(s.free)-1]
	case s.next < s.max:
		slot, fresh = s.next, true
		s.next++
	default:
		return 0, false, false, fmt.Errorf("bpfcount: all %d cgroup slots are taken", s.max)
	}
	s.byID[id] = &held{slot: slot, refs: 1}
	return slot, true, fresh, nil
}

// remove lets go of one add of id. gone says that was the last, and the
// slot is free.
func (s *slots) remove(id uint64) (slot int, gone, ok bool) {
	h, ok := s.byID[id]
	if !ok {
		return 0, false, false
	}
	if h.refs--; h.refs > 0 {
		return h.slot, false, true
	}
	delete(s.byID, id)
	i := len(s.free)
	for i > 0 && s.free[i-1] < h.slot {
		i--
	}
	s.free = append(s.free, 0)
	copy(s.free[i+1:], s.free[i:])
	s.free[i] = h.slot
	return h.slot, true, true
}

// index is where the counts map keeps a slot's event on a CPU: a slot's
// entries are together, so that a new cgroup's are cleared in one stretch.
func index(slot, ev, cpu, nEvents, nCPU int) int {
	return (slot*nEvents+ev)*nCPU + cpu
}
