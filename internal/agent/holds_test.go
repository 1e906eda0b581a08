package agent

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"perfevent/internal/reservation"
	"perfevent/internal/reservation/reservationtest"
	"perfevent/internal/testwait"
)

// fetchOne fetches a metric by name: its values by instance, strings as
// they are.
func (h *tester) fetchOne(t *testing.T, name string) map[int32]string {
	t.Helper()
	out := map[int32]string{}
	for _, v := range h.fetchSet(t, name).Values {
		out[v.Inst] = v.String()
	}
	return out
}

// perfevent.reservation.* names the holder of perfalloc's lock and counts
// the reservation and its time.
func TestReservationMetrics(t *testing.T) {
	h := startAgent(t, "0-1", "[perf]\ncpu-clock\n")
	for name, want := range map[string]float64{"held": 0, "holders": 0, "count": 0, "seconds": 0, "total": 0, "expired": 0, "max_hold": 0} {
		if v := h.values(t, "perfevent.reservation."+name); len(v) != 1 || v[-1] != want {
			t.Errorf("perfevent.reservation.%s before any reservation: %v, want %v", name, v, want)
		}
	}
	if v := h.values(t, "perfevent.reservation.holder.pid"); len(v) != 0 {
		t.Errorf("holder.pid before any reservation: %v, want no values", v)
	}

	holder := reservationtest.Start(t, h.lock, "read")
	pid := holder.PID()
	h.waitState(t, "the release", func(s *reservation.State) bool {
		return s.Counters == reservation.CountersReleased && s.HeldBy(pid)
	})
	comm, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	if err != nil {
		t.Fatal(err)
	}
	id := int32(pid)
	for name, want := range map[string]string{
		"held": "1", "holders": "1", "count": "1", "expired": "0",
		"holder.pid": strconv.Itoa(pid), "holder.uid": strconv.Itoa(os.Getuid()), "holder.command": strings.TrimSpace(string(comm)),
	} {
		inst := int32(-1)
		if strings.HasPrefix(name, "holder.") {
			inst = id
		}
		if v := h.fetchOne(t, "perfevent.reservation."+name); len(v) != 1 || v[inst] != want {
			t.Errorf("perfevent.reservation.%s during the reservation: %v, want %s on instance %d", name, v, want, inst)
		}
	}
	if v := h.values(t, "perfevent.reservation.seconds"); v[-1] < 0 || v[-1] > 60 {
		t.Errorf("seconds held: %v", v)
	}

	holder.Release(t)
	h.waitState(t, "the counters back", func(s *reservation.State) bool { return s.Counters == reservation.CountersOpen })
	for name, want := range map[string]float64{"held": 0, "holders": 0, "count": 1, "seconds": 0} {
		if v := h.values(t, "perfevent.reservation."+name); v[-1] != want {
			t.Errorf("perfevent.reservation.%s after the release: %v, want %v", name, v, want)
		}
	}
	if v := h.values(t, "perfevent.reservation.total"); v[-1] <= 0 {
		t.Errorf("total seconds held after one reservation: %v, want more than 0", v)
	}
	if v := h.values(t, "perfevent.reservation.holder.command"); len(v) != 0 {
		t.Errorf("holder.command after the release: %v, want no values", v)
	}
}

// With a maximum hold, a reservation held past it has counting resumed,
// with a Warning that names the holder; the holder's release later changes
// nothing, and the next reservation stops counting again.
func TestMaxHoldResumesCounting(t *testing.T) {
	const maxHold = 50 * time.Millisecond
	h := startAgentWith(t, "0-1", "[perf]\ncpu-clock\n", func(a *Agent) {
		a.o.MaxHold = maxHold
		a.holds.r.MaxHold = maxHold
	})
	h.fake.AddAll(100, 1, 1)
	h.values(t, "perfevent.hwcounters.cpu_clock.value")

	holder := reservationtest.Start(t, h.lock, "read")
	h.waitLog(t, "perfalloc's reservation by pid "+strconv.Itoa(holder.PID())+" (uid ")
	h.waitLog(t, "has lasted the maximum hold of 50ms: counting resumes although the lock is still held")
	h.waitState(t, "counting while the lock is held", func(s *reservation.State) bool {
		return s.Counters == reservation.CountersOpen && s.HeldBy(holder.PID())
	})
	if n := h.fake.CountingNow(); n != 2 {
		t.Errorf("%d counters counting past the maximum hold, want 2", n)
	}
	h.fake.AddAll(5, 1, 1)
	if v := h.values(t, "perfevent.hwcounters.cpu_clock.value"); v[0] != 105 {
		t.Errorf("cpu_clock past the maximum hold: %v, want 105", v)
	}
	for name, want := range map[string]float64{"held": 1, "expired": 1, "count": 1, "max_hold": maxHold.Seconds()} {
		if v := h.values(t, "perfevent.reservation."+name); v[-1] != want {
			t.Errorf("perfevent.reservation.%s past the maximum hold: %v, want %v", name, v, want)
		}
	}

	holder.Release(t)
	h.waitLog(t, "perfalloc's lock, held past the maximum hold, is let go")
	if n := h.fake.CountingNow(); n != 2 {
		t.Errorf("%d counters counting after the release, want 2", n)
	}
	if n := strings.Count(h.log.String(), "counters resumed after perfalloc"); n != 1 {
		t.Errorf("counters resumed %d times, want once (at the maximum hold, not again at the release)", n)
	}

	// The next reservation stops counting as any does (and is ended
	// by the maximum hold too).
	again := reservationtest.Start(t, h.lock, "read")
	testwait.Eventually(t, testwait.Settle, "the second reservation to release the counters", func() bool {
		return strings.Count(h.log.String(), "counters released for perfalloc") == 2
	})
	again.Release(t)
}
