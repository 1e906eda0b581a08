package counter

import (
	"slices"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"perfevent/internal/perf"
)

// There is a slot per event per CPU, thousands at every start of a large
// machine: each byte of it costs kilobytes there.
func TestSlotSize(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the size is set for 64-bit words")
	}
	if got := unsafe.Sizeof(slot{}); got > 88 {
		t.Errorf("a slot takes %d bytes, want at most 88", got)
	}
}

// A slot whose open failed never reads, so it carries no reading: what
// the reads accumulate sits apart, for the served slots only, and a slot
// costs a failing (event, CPU) no more than its descriptor, its error and
// its place.
func TestOnlyServedSlotsHaveReadings(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) == 8 {
		if got := unsafe.Sizeof(slot{}); got > 56 {
			t.Errorf("a slot takes %d bytes, want at most 56", got)
		}
	}
	fake := failOn{"cycles": -1, "page-faults": 1}
	s, err := New([]Spec{
		{Name: "cycles", Attr: unix.PerfEventAttr{Type: unix.PERF_TYPE_HARDWARE}, CPUs: []int{0, 1, 2}},
		{Name: "page-faults", Attr: unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_PAGE_FAULTS}, CPUs: []int{0, 1, 2}},
	}, Config{Opener: fake})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Open(); err != nil {
		t.Fatal(err)
	}
	for i := range s.events {
		ev := &s.events[i]
		if len(ev.reads) != len(ev.inst) {
			t.Errorf("%s: %d readings for %d instances", ev.name, len(ev.reads), len(ev.inst))
		}
		for k := range ev.slots {
			sl := &ev.slots[k]
			j := slices.Index(ev.inst, k)
			switch {
			case j < 0 && sl.rd != nil:
				t.Errorf("%s on cpu%d: not served, but has a reading", ev.name, sl.cpu)
			case j >= 0 && sl.rd != &ev.reads[j]:
				t.Errorf("%s on cpu%d: instance %d, but its reading is not the instance's", ev.name, sl.cpu, j)
			}
		}
	}
	if got := s.CPUs(1); !slices.Equal(got, []int{0, 2}) {
		t.Errorf("page-faults served on %v, want [0 2]", got)
	}
}

// failOn fails an event's opens on one CPU, or on every CPU (-1), and
// opens the rest as sources that count nothing.
type failOn map[string]int

func (f failOn) Open(event string, _ *unix.PerfEventAttr, cpu int, _ Source) (Source, error) {
	if c, ok := f[event]; ok && (c < 0 || c == cpu) {
		return nil, unix.ENOENT
	}
	return nothing{}, nil
}

type nothing struct{}

func (nothing) Read() (perf.Count, error)                  { return perf.Count{}, nil }
func (nothing) ReadGroup([]uint64) (uint64, uint64, error) { return 0, 0, nil }
func (nothing) Enable() error                              { return nil }
func (nothing) Disable() error                             { return nil }
func (nothing) Close() error                               { return nil }

// There is a group per CPU for its software events and for each named
// group, a thousand on a large machine, most of them never opened there
// when a PMU is missing: its flags share one word.
func TestGroupSize(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the size is set for 64-bit words")
	}
	if got := unsafe.Sizeof(group{}); got > 96 {
		t.Errorf("a group takes %d bytes, want at most 96", got)
	}
}
