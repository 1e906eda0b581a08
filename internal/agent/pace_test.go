package agent

import (
	"fmt"
	"perfevent/internal/pmda"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"perfevent/internal/reservation"
)

// fakeClock is the pace's clock: a sleep only moves it on.
type fakeClock struct {
	mu     sync.Mutex
	t      time.Time
	sleeps []time.Duration
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) sleep(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sleeps = append(c.sleeps, d)
	c.t = c.t.Add(d)
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// took returns the sleeps since the last call.
func (c *fakeClock) took() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.sleeps
	c.sleeps = nil
	return s
}

// A lock taken and dropped in a loop reopens the counters reopenBurst times
// at once, then once per minReopen; a rebuild after a change of the online
// CPUs takes its turn in the same pacing. cycles, a hardware event, is what
// is reopened (cpu-clock is only disabled and enabled again).
func TestReopensArePaced(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	h := startAgentOn(t, "skylake", "0-1", "[perf]\ncpu-clock\ncycles\n", func(a *Agent) {
		a.now, a.sleep = clock.now, clock.sleep
		a.o.LockFile = "" // the test alone says when the lock is held
	})
	cycle := func() {
		h.a.reservationChanged(reservation.Status{Reserved: true, Holders: []int{1}})
		h.a.reservationChanged(reservation.Status{Reserved: false})
	}
	for i := range reopenBurst {
		cycle()
		if s := clock.took(); len(s) != 0 {
			t.Fatalf("reopen %d of the burst waited %v", i+1, s)
		}
	}
	cycle()
	if s := clock.took(); !slices.Equal(s, []time.Duration{minReopen}) {
		t.Errorf("the reopen after the burst waited %v, want %v", s, minReopen)
	}
	// 250 ms of quiet earn two and a half reopens.
	clock.advance(250 * time.Millisecond)
	cycle()
	cycle()
	if s := clock.took(); len(s) != 0 {
		t.Errorf("two reopens after 250 ms of quiet waited %v", s)
	}
	cycle()
	if s := clock.took(); !slices.Equal(s, []time.Duration{minReopen / 2}) {
		t.Errorf("the third reopen after 250 ms waited %v, want %v", s, minReopen/2)
	}
	// Each is logged, up to what the log takes of one message a minute.
	if n, want := strings.Count(h.log.String(), "counters reopened after perfalloc"), min(reopenBurst+4, pmda.RepeatBurst); n != want {
		t.Errorf("%d reopens logged, want %d", n, want)
	}
	if n := h.fake.OpenNow(); n != 4 {
		t.Errorf("%d counters open after the last release, want 4", n)
	}

	// As the hotplug watcher calls it (which the fixture's unchanged
	// online list leaves quiet): the rebuild waits its turn.
	h.a.cpusChanged([]int{0})
	if s := clock.took(); !slices.Equal(s, []time.Duration{minReopen}) {
		t.Errorf("the rebuild for a CPU going offline waited %v, want %v", s, minReopen)
	}
	h.waitLog(t, "CPUs online now: 0; rebuilding the counters")
}

// Software counters are enabled again at once, however often the lock is
// taken and dropped: one ioctl per CPU is not worth pacing. Their log lines
// are: beyond reopenBurst in a row, the reservations are counted, not told.
func TestSoftwareResumesAreNotPaced(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	h := startAgentWith(t, "0-1", "[perf]\ncpu-clock\n", func(a *Agent) {
		a.now, a.sleep = clock.now, clock.sleep
		a.o.LockFile = ""
	})
	h.fake.AddAll(10, 1, 1)
	h.values(t, "perfevent.hwcounters.cpu_clock.value")
	const cycles = 10
	for range cycles {
		h.a.reservationChanged(reservation.Status{Reserved: true, Holders: []int{1}})
		if n := h.fake.CountingNow(); n != 0 {
			t.Fatalf("%d counters counting while reserved", n)
		}
		h.a.reservationChanged(reservation.Status{Reserved: false})
	}
	if s := clock.took(); len(s) != 0 {
		t.Errorf("software resumes waited %v", s)
	}
	if n := h.fake.all[0].Opens(); n != 2 {
		t.Errorf("%d opens after %d reservations, want the 2 of the start", n, cycles)
	}
	log := h.log.String()
	if r, e := strings.Count(log, "counters released for perfalloc"), strings.Count(log, "counters resumed after perfalloc in"); r != reopenBurst || e != reopenBurst {
		t.Errorf("%d release and %d resume lines for %d reservations in no time, want %d of each", r, e, cycles, reopenBurst)
	}
	if !strings.Contains(log, "counters released for perfalloc (holders 1) in ") || !strings.Contains(log, ": 2 descriptors disabled, 0 closed") {
		t.Errorf("the release line does not say what was done:\n%s", log)
	}
	clock.advance(time.Second)
	h.a.reservationChanged(reservation.Status{Reserved: true, Holders: []int{1}})
	h.a.reservationChanged(reservation.Status{Reserved: false})
	if !strings.Contains(h.log.String(), fmt.Sprintf("2 descriptors disabled, 0 closed (%d reservations since the last one logged)", cycles-reopenBurst)) {
		t.Errorf("the next line told does not count the %d untold:\n%s", cycles-reopenBurst, h.log)
	}
	// The values carry on from the frozen ones.
	h.fake.AddAll(5, 1, 1)
	h.values(t, "perfevent.hwcounters.cpu_clock.value")
	if v := h.values(t, "perfevent.hwcounters.cpu_clock.value"); v[0] != 15 || v[1] != 15 {
		t.Errorf("cpu_clock after the reservations: %v, want 15 on both CPUs", v)
	}
}
