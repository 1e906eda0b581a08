package counter_test

import (
	"fmt"
	"testing"

	"golang.org/x/sys/unix"

	"perfevent/internal/counter"
	"perfevent/internal/counter/countertest"
	"perfevent/internal/hostfs"
	"perfevent/internal/perf"
)

func benchSet(b *testing.B, events, cpus int) (*counter.Set, *countertest.Opener) {
	all := make([]int, cpus)
	for i := range all {
		all[i] = i
	}
	specs := make([]counter.Spec, events)
	for i := range specs {
		specs[i] = sw(fmt.Sprintf("ev%d", i), uint64(i), all...)
	}
	fake := countertest.New()
	fake.Step(perf.Count{Value: 1000, Enabled: 100, Running: 50})
	s, err := counter.New(specs, counter.Config{Opener: fake})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.Open(); err != nil {
		b.Fatal(err)
	}
	return s, fake
}

// BenchmarkRead is a full fetch of every value and dutycycle. It must not
// allocate.
func BenchmarkRead(b *testing.B) {
	for _, sz := range []struct{ events, cpus int }{{12, 2}, {50, 256}} {
		b.Run(fmt.Sprintf("%dx%d", sz.events, sz.cpus), func(b *testing.B) {
			s, fake := benchSet(b, sz.events, sz.cpus)
			var sink float64
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				f := s.Begin()
				f.NeedAll()
				f.Read()
				for ev := range sz.events {
					for i := range sz.cpus {
						sink += float64(f.Value(ev, i)) + f.Dutycycle(ev, i)
					}
				}
				_ = f.Active()
				f.End()
			}
			b.ReportMetric(float64(fake.OpenNow()), "fds")
			_ = sink
		})
	}
}

// BenchmarkReadOne is a fetch of one event on a big machine: its cost must
// not grow with the number of other events.
func BenchmarkReadOne(b *testing.B) {
	s, _ := benchSet(b, 50, 256)
	b.ReportAllocs()
	for b.Loop() {
		f := s.Begin()
		f.Need(7)
		f.Read()
		f.End()
	}
}

// BenchmarkReopen is one reservation cycle (close and reopen everything).
func BenchmarkReopen(b *testing.B) {
	s, fake := benchSet(b, 50, 256)
	for b.Loop() {
		s.Close()
		s.Reopen()
	}
	b.ReportMetric(float64(fake.OpenNow()), "fds")
}

func TestReadDoesNotAllocate(t *testing.T) {
	s, _ := newSet(t, sw("a", 0, 0, 1), sw("b", 1, 0, 1))
	d, _ := s.AddDerived(counter.DerivedSpec{Name: "d", Terms: []counter.Term{{"a", 1}, {"b", 1}}})
	allocs := testing.AllocsPerRun(100, func() {
		f := s.Begin()
		f.NeedAll()
		f.NeedDerived(d)
		f.Read()
		_ = f.Value(0, 1) + uint64(f.DerivedValue(d, 0)) + uint64(f.Active())
		f.End()
	})
	if allocs != 0 {
		t.Errorf("a fetch allocates %v times", allocs)
	}
}

// BenchmarkNew is New on a large machine: hardware events of their own,
// software events in each CPU's group and five named groups of two, on
// 160 CPUs.
func BenchmarkNew(b *testing.B) {
	ids := make([]int, 160)
	for i := range ids {
		ids[i] = i
	}
	var specs []counter.Spec
	for i := range 10 {
		specs = append(specs, hw(fmt.Sprintf("hw%d", i), uint64(i), ids...))
	}
	for i := range 8 {
		specs = append(specs, sw(fmt.Sprintf("sw%d", i), uint64(i), ids...))
	}
	for g := range 5 {
		for m := range 2 {
			specs = append(specs, counter.Spec{Name: fmt.Sprintf("g%d-%d", g, m), Attr: unix.PerfEventAttr{Type: 4, Config: uint64(g*2 + m)}, CPUs: ids, Group: fmt.Sprintf("r%d", g)})
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := counter.New(specs, counter.Config{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFailureLines is the log's lines for a machine whose events
// fail on most CPUs: 28 events on 160 CPUs, each failing on every one.
func BenchmarkFailureLines(b *testing.B) {
	var sum counter.Summary
	for e := range 28 {
		err := unix.EINVAL
		if e < 10 {
			err = unix.ENOENT
		}
		f := counter.Failure{OpenError: counter.NewOpenError(hostfs.Default(), fmt.Sprintf("event%d", e), 0, err)}
		for cpu := range 160 {
			f.CPUs = append(f.CPUs, cpu)
		}
		sum.Failures = append(sum.Failures, f)
	}
	b.ReportAllocs()
	for b.Loop() {
		if n := len(sum.FailureLines()); n != 28 {
			b.Fatalf("%d lines, want 28", n)
		}
	}
}
