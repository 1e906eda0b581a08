package agent

import (
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
// CPUs takes its turn in the same pacing.
func TestReopensArePaced(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	h := startAgentWith(t, "0-1", "[perf]\ncpu-clock\n", func(a *Agent) {
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
	if n := strings.Count(h.log.String(), "counters reopened after perfalloc"); n != reopenBurst+4 {
		t.Errorf("%d reopens logged, want %d", n, reopenBurst+4)
	}
	if n := h.fake.OpenNow(); n != 2 {
		t.Errorf("%d counters open after the last release, want 2", n)
	}

	// As the hotplug watcher calls it (which the fixture's unchanged
	// online list leaves quiet): the rebuild waits its turn.
	h.a.cpusChanged([]int{0})
	if s := clock.took(); !slices.Equal(s, []time.Duration{minReopen}) {
		t.Errorf("the rebuild for a CPU going offline waited %v, want %v", s, minReopen)
	}
	h.waitLog(t, "CPUs online now: 0; rebuilding the counters")
}
