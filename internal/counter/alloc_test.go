package counter_test

import (
	"math"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"

	"perfevent/internal/counter"
	"perfevent/internal/counter/countertest"
	"perfevent/internal/perf"
)

// allocSpecs are events of every kind New arranges, on cpus CPUs: two of
// their own, software events and an msr-like event in each CPU's software
// group, and a named group of two.
func allocSpecs(cpus int) ([]counter.Spec, counter.Config) {
	ids := make([]int, cpus)
	for i := range ids {
		ids[i] = i
	}
	const msr = 17
	specs := []counter.Spec{
		hw("cycles", 0, ids...),
		hw("instructions", 1, ids...),
		sw("cpu-clock", 0, ids...),
		sw("page-faults", 2, ids...),
		{Name: "msr/tsc/", Attr: unix.PerfEventAttr{Type: msr}, CPUs: ids},
		{Name: "a", Attr: unix.PerfEventAttr{Type: unix.PERF_TYPE_HARDWARE, Config: 4}, CPUs: ids, Group: "r"},
		{Name: "b", Attr: unix.PerfEventAttr{Type: unix.PERF_TYPE_HARDWARE, Config: 5}, CPUs: ids, Group: "r"},
	}
	return specs, counter.Config{Opener: countertest.New(), JoinSoftware: []uint32{msr}}
}

// New sizes what it makes once: a larger machine makes larger arrays, not
// more of them, so its objects do not grow with the CPUs (a map of the
// groups' keys grows by a table per thousand or so).
func TestNewAllocsDoNotGrowWithCPUs(t *testing.T) {
	allocs := func(cpus int) float64 {
		specs, cfg := allocSpecs(cpus)
		return testing.AllocsPerRun(5, func() {
			if _, err := counter.New(specs, cfg); err != nil {
				t.Fatal(err)
			}
		})
	}
	small, large := allocs(2), allocs(768)
	if large > small+8 {
		t.Errorf("New makes %v objects for 768 CPUs, %v for 2: want at most 8 more", large, small)
	}
}

// nullSource counts nothing; nullOpener opens one for every event and CPU
// without allocating, so that only the Set's own objects are counted.
type nullSource struct{}

func (nullSource) Read() (perf.Count, error)                  { return perf.Count{}, nil }
func (nullSource) ReadGroup([]uint64) (uint64, uint64, error) { return 0, 0, nil }
func (nullSource) Enable() error                              { return nil }
func (nullSource) Disable() error                             { return nil }
func (nullSource) Close() error                               { return nil }

type nullOpener struct{}

func (nullOpener) Open(string, *unix.PerfEventAttr, int, counter.Source) (counter.Source, error) {
	return nullSource{}, nil
}

// Open's record of what it opened is sized once too; in particular a
// group's leader, opened disabled, is not given a copy of its attr each.
func TestOpenAllocsDoNotGrowWithCPUs(t *testing.T) {
	allocs := func(cpus int) float64 {
		specs, cfg := allocSpecs(cpus)
		cfg.Opener = nullOpener{}
		return testing.AllocsPerRun(5, func() {
			s, err := counter.New(specs, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Open(); err != nil {
				t.Fatal(err)
			}
		})
	}
	small, large := allocs(2), allocs(768)
	if large > small+8 {
		t.Errorf("New and Open make %v objects for 768 CPUs, %v for 2: want at most 8 more", large, small)
	}
}

// An event the machine lacks fails on every CPU; the failures' OpenErrors
// are allocated in blocks, not one by one.
func TestFailedOpensAllocateInBlocks(t *testing.T) {
	allocs := func(cpus int) float64 {
		specs, cfg := allocSpecs(cpus)
		fake := countertest.New()
		fake.FailOpen("cycles", countertest.AnyCPU, unix.ENOENT)
		fake.FailOpen("instructions", countertest.AnyCPU, unix.ENOENT)
		cfg.Opener = failingOpener{fake}
		return testing.AllocsPerRun(5, func() {
			s, err := counter.New(specs, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if sum, err := s.Open(); err != nil || sum.Failed != 2*cpus {
				t.Fatalf("Open: %d failures, %v; want cycles and instructions on each of %d CPUs", sum.Failed, err, cpus)
			}
		})
	}
	small, large := allocs(2), allocs(768)
	if large > small+16 {
		t.Errorf("New and Open with 2 events failing make %v objects for 768 CPUs, %v for 2: want at most 16 more", large, small)
	}
}

// failingOpener fails what its fake would, and opens the rest as
// nullOpener does, allocating nothing.
type failingOpener struct{ fake *countertest.Opener }

func (o failingOpener) Open(event string, attr *unix.PerfEventAttr, cpu int, leader counter.Source) (counter.Source, error) {
	if event == "cycles" || event == "instructions" {
		return o.fake.Open(event, attr, cpu, leader)
	}
	return nullSource{}, nil
}

// noneOpener fails every open as a machine without the event does,
// allocating nothing.
type noneOpener struct{}

func (noneOpener) Open(string, *unix.PerfEventAttr, int, counter.Source) (counter.Source, error) {
	return nil, unix.ENOENT
}

// An (event, CPU) that fails to open costs its slot and its CPU in the
// Summary, and little else: no reading, no room among its group's open
// members, no OpenError of its own when its event failed alike on another
// CPU. A 160-CPU machine without a PMU has thousands.
func TestFailedOpenBytesPerCPU(t *testing.T) {
	bytes := func(cpus int) uint64 {
		specs, cfg := allocSpecs(cpus)
		cfg.Opener = noneOpener{}
		least := uint64(math.MaxUint64)
		for range 3 {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			s, err := counter.New(specs, cfg)
			if err != nil {
				t.Fatal(err)
			}
			sum, err := s.Open()
			runtime.ReadMemStats(&after)
			if err != nil || sum.Failed != len(specs)*cpus {
				t.Fatalf("Open: %d failures, %v; want every event on each of %d CPUs", sum.Failed, err, cpus)
			}
			least = min(least, after.TotalAlloc-before.TotalAlloc)
		}
		return least
	}
	const small, large = 64, 576
	per := float64(bytes(large)-bytes(small)) / float64(7*(large-small))
	t.Logf("%.0f bytes per failing (event, CPU)", per)
	if per > 144 {
		t.Errorf("New and Open take %.0f bytes per failing (event, CPU), want at most 144", per)
	}
}
