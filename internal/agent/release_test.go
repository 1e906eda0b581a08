package agent

import (
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"perfevent/internal/counter"
	"perfevent/internal/counter/countertest"
	"perfevent/internal/reservation"
	"perfevent/internal/reservation/reservationtest"
)

// Under perfalloc the software counters are disabled and the hardware ones
// closed; the state file and the fetch tell the same story for both, and
// both carry on from their frozen values afterwards.
func TestReservationDisablesSoftwareClosesHardware(t *testing.T) {
	h := startAgentOn(t, "skylake", "0-1", "[perf]\ncpu-clock\ncycles\n", nil)
	fake := h.fake.all[0]
	fake.AddAll(100, 1, 1)
	h.values(t, "perfevent.active")
	if v := h.values(t, "perfevent.hwcounters.cycles.value"); v[0] != 100 {
		t.Fatalf("cycles before the reservation: %v, want 100", v)
	}

	holder := reservationtest.Start(t, h.lock, "read")
	st := h.waitState(t, "the release", func(s *reservation.State) bool {
		return s.Counters == reservation.CountersReleased && s.HeldBy(holder.PID())
	})
	for _, e := range st.Events {
		if e.State != reservation.EventReleased || e.CPUs != 0 {
			t.Errorf("state file during the reservation: %+v, want released on no CPU", e)
		}
	}
	for cpu := range 2 {
		if counting, open := fake.Enabled("cpu-clock", cpu); counting || !open {
			t.Errorf("cpu-clock on cpu%d during the reservation: counting %v, open %v; want open and disabled", cpu, counting, open)
		}
		if _, open := fake.Enabled("cycles", cpu); open {
			t.Errorf("cycles on cpu%d is open during the reservation", cpu)
		}
	}
	if v := h.values(t, "perfevent.active"); v[-1] != 0 {
		t.Errorf("active during the reservation: %v, want 0", v)
	}
	if v := h.values(t, "perfevent.hwcounters.cpu_clock.value"); v[0] != 100 || v[1] != 100 {
		t.Errorf("cpu_clock during the reservation: %v, want 100 kept", v)
	}

	holder.Release(t)
	h.waitState(t, "the counters back", func(s *reservation.State) bool {
		return s.Counters == reservation.CountersOpen && s.Events[0].CPUs == 2 && s.Events[1].CPUs == 2
	})
	h.waitLog(t, "counters reopened after perfalloc in ")
	h.waitLog(t, ": 2 of 2 events served on 4 descriptors (2 of them enabled again, not reopened)")
	fake.AddAll(5, 1, 1)
	h.values(t, "perfevent.active")
	if v := h.values(t, "perfevent.active"); v[-1] != 4 {
		t.Errorf("active after the reservation: %v, want 4", v)
	}
	for _, name := range []string{"cpu_clock", "cycles"} {
		if v := h.values(t, "perfevent.hwcounters."+name+".value"); v[0] != 105 || v[1] != 105 {
			t.Errorf("%s after the reservation: %v, want 105 on both CPUs", name, v)
		}
	}
}

// Events that could not be opened at start-up are not listed again at every
// reopen after perfalloc: one Info line counts them.
func TestReopenCountsKnownFailures(t *testing.T) {
	h := startAgentOn(t, "skylake", "0-1", "[perf]\ncpu-clock\ncycles\ninstructions\n", func(a *Agent) {
		next := a.o.NewOpener
		a.o.NewOpener = func() counter.Opener {
			o := next().(*countertest.Opener)
			o.FailOpen("instructions", countertest.AnyCPU, unix.ENOENT)
			return o
		}
		a.o.LockFile = ""
	})
	for range 2 {
		h.a.reservationChanged(reservation.Status{Reserved: true, Holders: []int{1}})
		h.a.reservationChanged(reservation.Status{Reserved: false})
	}
	log := h.log.String()
	if n := strings.Count(log, "still failing as logged before: 1 event\n"); n != 2 {
		t.Errorf("%d reopen lines count the known failure, want 2:\n%s", n, log)
	}
	if n := strings.Count(log, ": instructions: "); n != 1 {
		t.Errorf("instructions's failure is named %d times, want once, at start-up:\n%s", n, log)
	}
}

// A descriptor that vanished during the reservation cannot be enabled
// again: the log says so and that it is reopened, and its value carries on.
func TestResumeReopensAVanishedDescriptor(t *testing.T) {
	h := startAgentWith(t, "0-1", "[perf]\ncpu-clock\n", func(a *Agent) { a.o.LockFile = "" })
	fake := h.fake.all[0]
	fake.AddAll(10, 1, 1)
	h.values(t, "perfevent.hwcounters.cpu_clock.value")
	h.a.reservationChanged(reservation.Status{Reserved: true, Holders: []int{1}})
	if !fake.Vanish("cpu-clock", 1) {
		t.Fatal("cpu-clock on cpu1 is not open during the reservation")
	}
	h.a.reservationChanged(reservation.Status{Reserved: false})
	h.waitLog(t, `Warning: resuming counters after perfalloc: counter: enabling "cpu-clock" on cpu1 after the reservation failed, so it is reopened instead: bad file descriptor`)
	h.waitLog(t, "counters reopened after perfalloc in ")
	h.waitLog(t, ": 1 of 1 events served on 2 descriptors (1 of them enabled again, not reopened)")
	fake.AddAll(5, 1, 1)
	h.values(t, "perfevent.hwcounters.cpu_clock.value")
	if v := h.values(t, "perfevent.hwcounters.cpu_clock.value"); v[0] != 15 || v[1] != 15 {
		t.Errorf("cpu_clock after the reservation: %v, want 15 on both CPUs", v)
	}
}
