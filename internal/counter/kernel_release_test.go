package counter_test

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"perfevent/internal/counter"
	"perfevent/internal/testneed"
)

// TestKernelReleaseStopsCounting: on the real kernel a reservation keeps
// the descriptors of software, msr and tracepoint events but stops them:
// cpu-clock, which counts wall-clock time, and msr/tsc, which ticks at a
// fixed rate, gain during a reservation of 100 ms only what they counted
// just before the Release and just after the Resume, and count on at full
// speed afterwards.
func TestKernelReleaseStopsCounting(t *testing.T) {
	needKernelPerf(t)
	cpus := onlineCPUs(t)
	specs := withSchedSwitch(t, countingSpecs(t, cpus), cpus)
	s, sum := openKernelSet(t, specs)
	readAll(t, s, specs)
	fds := perfFDs(t)

	start := time.Now()
	v1 := readAll(t, s, specs)
	rel, err := s.Release()
	counted := time.Since(start)
	if err != nil || rel.Disabled != sum.FDs || rel.Closed != 0 {
		t.Fatalf("Release = %+v, %v; want all %d descriptors disabled, none closed", rel, err, sum.FDs)
	}
	if n := perfFDs(t); n != fds {
		t.Errorf("%d perf descriptors open while released, want the %d kept", n, fds)
	}
	busyEveryCPU(t, cpus)
	time.Sleep(100 * time.Millisecond)
	start = time.Now()
	if res, err := s.Resume(); err != nil || res.Enabled != sum.FDs || res.Reopen != 0 {
		t.Fatalf("Resume = %+v, %v; want all %d enabled and nothing to reopen", res, err, sum.FDs)
	}
	v2 := readAll(t, s, specs)
	w2 := window{start, time.Now()}
	counted += w2.end.Sub(start)
	for i, cpu := range s.CPUs(0) {
		if d := v2[0][i] - v1[0][i]; v2[0][i] < v1[0][i] || d > uint64(counted+2*time.Millisecond) {
			t.Errorf("cpu-clock on cpu%d gained %v across a reservation of 100 ms; it may count only the %v around it", cpu, time.Duration(d), counted)
		}
	}
	for ev, sp := range specs {
		for i, cpu := range s.CPUs(ev) {
			if v2[ev][i] < v1[ev][i] {
				t.Errorf("%s cpu%d went back from %d to %d across the reservation", sp.Name, cpu, v1[ev][i], v2[ev][i])
			}
		}
	}

	busyEveryCPU(t, cpus)
	time.Sleep(50 * time.Millisecond)
	v3, w3 := readTimed(t, s, specs)
	checkCounting(t, s, specs, v2, v3, w2, w3, sum.FDs)
	// msr/tsc, in the software group, ticks at a fixed rate: across the
	// reservation it may gain only what that rate makes of the time
	// around it. The rate is taken over the least time between the
	// readings, which errs on the high side.
	elapsed := w3.start.Sub(w2.end)
	if ev, ok := s.Lookup("msr/tsc"); ok {
		for i, cpu := range s.CPUs(ev) {
			rate := float64(v3[ev][i]-v2[ev][i]) / float64(elapsed)
			if gain := float64(v2[ev][i] - v1[ev][i]); gain > 2*rate*float64(counted+time.Millisecond) {
				t.Errorf("msr/tsc on cpu%d gained %.0f across a reservation of 100 ms; at its rate of %.0f per ns it may gain about %.0f", cpu, gain, rate, rate*float64(counted))
			}
		}
	}
}

// BenchmarkKernelReservation is one perfalloc cycle of the default
// configuration on a VM (the seven software events and msr/tsc where it
// exists, on every online CPU): Release and Resume, which disable and
// enable each CPU's group, against Close and Reopen, which close every
// descriptor and open it again.
func BenchmarkKernelReservation(b *testing.B) {
	testneed.SystemWide(b)
	t := &testing.T{}
	cpus := onlineCPUs(t)
	specs := countingSpecs(t, cpus)
	for _, bc := range []struct {
		name       string
		stop, back func(*counter.Set) error
	}{
		{"release-resume", func(s *counter.Set) error { _, err := s.Release(); return err },
			func(s *counter.Set) error { _, err := s.Resume(); return err }},
		{"close-reopen", (*counter.Set).Close,
			func(s *counter.Set) error { _, err := s.Reopen(); return err }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s, sum := openKernelSet(b, specs)
			for b.Loop() {
				if err := bc.stop(s); err != nil {
					b.Fatal(err)
				}
				if err := bc.back(s); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(sum.FDs), "fds")
		})
	}
}

// openKernelSet opens specs on the kernel and closes them when the test
// ends; every event must open. msr/tsc, where countingSpecs has it, joins
// the software group as the agent has it (Config.JoinSoftware).
func openKernelSet(tb testing.TB, specs []counter.Spec) (*counter.Set, counter.Summary) {
	tb.Helper()
	var join []uint32
	for _, sp := range specs {
		if sp.Name == "msr/tsc" {
			join = append(join, sp.Attr.Type)
		}
	}
	s, err := counter.New(specs, counter.Config{JoinSoftware: join})
	if err != nil {
		tb.Fatal(err)
	}
	sum, err := s.Open()
	if err != nil || len(sum.Failures) > 0 {
		tb.Fatalf("Open: %v %v", err, sum.FailureLines())
	}
	tb.Cleanup(func() { s.Close() })
	return s, sum
}

// withSchedSwitch adds the sched:sched_switch tracepoint on cpus to specs,
// where tracefs has it.
func withSchedSwitch(t *testing.T, specs []counter.Spec, cpus []int) []counter.Spec {
	if id, ok := schedSwitchID(t); ok {
		specs = append(specs, counter.Spec{Name: "sched:sched_switch", Attr: unix.PerfEventAttr{Type: unix.PERF_TYPE_TRACEPOINT, Config: id}, CPUs: cpus})
	}
	return specs
}
