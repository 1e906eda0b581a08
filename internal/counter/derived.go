package counter

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"perfevent/internal/cpulist"
)

// Term is one member of a derived event: an event of the Set by name, and
// the factor its value is multiplied by.
type Term struct {
	Event string
	Scale float64
}

// DerivedSpec is a derived event: per CPU, the sum of its terms.
type DerivedSpec struct {
	Name  string
	Terms []Term
}

type derived struct {
	name    string
	members []int // event indexes
	scales  []float64
	cpus    []int // shared by every member
}

// AddDerived checks d against the opened events and adds it, returning its
// index. Every member must be served, on the same CPUs in the same order,
// since the sum is taken instance by instance. Call it after Open. A config
// with alternatives (`||`) tries them in order and keeps the first that is
// accepted; the error says why the others were not. AddDerived is part of
// setup: call it before fetches start.
func (s *Set) AddDerived(d DerivedSpec) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == unopened {
		return 0, fmt.Errorf("counter: derived %q: the events are not opened yet", d.Name)
	}
	if d.Name == "" {
		return 0, errors.New("counter: a derived event has an empty name")
	}
	for _, x := range s.derived {
		if x.name == d.Name {
			return 0, fmt.Errorf("counter: derived %q is defined twice", d.Name)
		}
	}
	if len(d.Terms) == 0 {
		return 0, fmt.Errorf("counter: derived %q has no member events", d.Name)
	}
	x := derived{name: d.Name}
	for j, t := range d.Terms {
		i, ok := s.byName[t.Event]
		if !ok {
			return 0, fmt.Errorf("counter: derived %q: member %q is not a configured event", d.Name, t.Event)
		}
		if math.IsNaN(t.Scale) || math.IsInf(t.Scale, 0) {
			return 0, fmt.Errorf("counter: derived %q: member %q has scale %v", d.Name, t.Event, t.Scale)
		}
		cpus := s.events[i].cpus
		if len(cpus) == 0 {
			return 0, fmt.Errorf("counter: derived %q: member %q did not open on any CPU", d.Name, t.Event)
		}
		if j == 0 {
			x.cpus = cpus
		} else if !slices.Equal(cpus, x.cpus) {
			return 0, fmt.Errorf("counter: derived %q: member %q counts on %s but %q on %s; members need the same CPUs",
				d.Name, t.Event, cpulist.Describe(cpus), d.Terms[0].Event, cpulist.Describe(x.cpus))
		}
		x.members = append(x.members, i)
		x.scales = append(x.scales, t.Scale)
	}
	s.derived = append(s.derived, x)
	return len(s.derived) - 1, nil
}

// NumDerived is the number of derived events added; it is what
// perfevent.derived.active reports. Like DerivedName and DerivedCPUs it does
// not lock: derived events are added during setup, before fetches start.
func (s *Set) NumDerived() int { return len(s.derived) }

// DerivedName is the name given to AddDerived.
func (s *Set) DerivedName(d int) string { return s.derived[d].name }

// DerivedCPUs are the derived event's instances, those of its members. The
// caller must not modify the slice.
func (s *Set) DerivedCPUs(d int) []int { return s.derived[d].cpus }

// NeedDerived marks the members of derived event d for Read. A member also
// needed directly by the same fetch is still read only once.
func (f *Fetch) NeedDerived(d int) {
	for _, i := range f.s.derived[d].members {
		f.Need(i)
	}
}

// DerivedValue is Σ value × scale over the members, for instance i.
func (f *Fetch) DerivedValue(d, i int) float64 {
	x := &f.s.derived[d]
	sum := 0.0
	for j, ev := range x.members {
		sum += float64(f.s.events[ev].reads[i].value) * x.scales[j]
	}
	return sum
}
