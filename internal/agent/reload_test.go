package agent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"perfevent/internal/pdu"
	"perfevent/internal/reservation"
	"perfevent/internal/reservation/reservationtest"
	"perfevent/internal/testwait"
)

// waitState waits for the state file to satisfy done.
func (h *tester) waitState(t *testing.T, what string, done func(*reservation.State) bool) *reservation.State {
	t.Helper()
	st, err := reservation.WaitState(t.Context(), reservation.StatePath(h.lock), time.Millisecond, done)
	if err != nil {
		t.Fatalf("the state file never showed %s: %v", what, err)
	}
	return st
}

// A SIGHUP while perfalloc holds the counters opens none: the reload waits
// for the release, then serves the new configuration, and the old
// counters are not reopened on the way.
func TestReloadDuringAReservation(t *testing.T) {
	h := startAgent(t, "0-1", "[perf]\ncpu-clock\n")
	h.fake.AddAll(100, 1, 1)
	if v := h.values(t, "perfevent.hwcounters.cpu_clock.value"); v[0] != 100 || v[1] != 100 {
		t.Fatalf("cpu_clock before the reservation: %v, want 100 on cpu0 and cpu1", v)
	}

	holder := reservationtest.Start(t, h.lock, "read")
	h.waitState(t, "the release", func(s *reservation.State) bool {
		return s.Counters == reservation.CountersReleased && s.HeldBy(holder.PID())
	})
	// cpu-clock holds no PMU counter: its descriptors stay, disabled.
	if n, open := h.fake.CountingNow(), h.fake.OpenNow(); n != 0 || open != 2 {
		t.Fatalf("%d counters counting and %d open while perfalloc holds them, want none counting and 2 kept", n, open)
	}

	os.WriteFile(h.conf, []byte("[perf]\ncpu-clock\ntask-clock\n"), 0o644)
	h.a.Reload()
	h.waitLog(t, "reload of "+h.conf+" deferred: perfalloc holds the counters")
	if n := h.fake.OpenNow(); n != 2 {
		t.Errorf("%d counters open after a reload during the reservation, want the 2 kept", n)
	}
	if _, err := h.c.PMID("perfevent.hwcounters.task_clock.value"); err != pdu.ErrName {
		t.Errorf("task_clock during the reservation: %v, want PM_ERR_NAME until the release", err)
	}
	// The old generation still answers, frozen.
	if v := h.values(t, "perfevent.hwcounters.cpu_clock.value"); v[0] != 100 {
		t.Errorf("cpu_clock during the reservation: %v, want 100 kept", v)
	}

	holder.Release(t)
	h.waitState(t, "the new configuration counting", func(s *reservation.State) bool {
		return s.Counters == reservation.CountersOpen && len(s.Events) == 2
	})
	h.waitLog(t, "reload done: the new configuration is served")
	if n := h.fake.OpenNow(); n != 4 {
		t.Errorf("%d counters open after the release, want 4 (2 events on 2 CPUs)", n)
	}
	h.fake.AddAll(5, 1, 1)
	if v := h.values(t, "perfevent.hwcounters.task_clock.value"); v[0] != 5 || v[1] != 5 {
		t.Errorf("task_clock after the release: %v, want 5 on cpu0 and cpu1", v)
	}
	// cpu-clock carries on from where the reservation froze it.
	if v := h.values(t, "perfevent.hwcounters.cpu_clock.value"); v[0] != 105 {
		t.Errorf("cpu_clock after the release: %v, want 105", v)
	}
	if strings.Contains(h.log.String(), "counters reopened") {
		t.Errorf("the old counters were reopened as well as the new ones built")
	}
	if len(h.fake.all) != 2 {
		t.Errorf("%d generations opened counters, want 2 (start-up and the one reload)", len(h.fake.all))
	}
}

// A reload of a file that cannot be read keeps the previous generation,
// counters and all; a file with a bad line is served without that line,
// which the log names by file and line.
func TestReloadFailureKeepsServing(t *testing.T) {
	h := startAgent(t, "0-1", "[perf]\ncpu-clock\n")
	h.fake.AddAll(10, 1, 1)
	h.values(t, "perfevent.hwcounters.cpu_clock.value")

	if err := os.Remove(h.conf); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(h.conf, 0o755); err != nil {
		t.Fatal(err)
	}
	h.a.Reload()
	h.waitLog(t, "reload: "+h.conf+" is a directory, not a regular file; still serving the previous configuration")
	h.fake.AddAll(1, 1, 1)
	if v := h.values(t, "perfevent.hwcounters.cpu_clock.value"); v[0] != 11 || v[1] != 11 {
		t.Errorf("cpu_clock after a failed reload: %v, want 11: the old counters, still counting", v)
	}
	if n := h.fake.OpenNow(); n != 2 {
		t.Errorf("%d counters open after a failed reload, want the old generation's 2", n)
	}

	os.Remove(h.conf)
	os.WriteFile(h.conf, []byte("[perf]\ncpu-clock\nno-such-event\npage-faults\n"), 0o644)
	h.a.Reload()
	h.waitLog(t, "reload done")
	if !strings.Contains(h.log.String(), "Warning: "+h.conf+":3: event \"no-such-event\"") {
		t.Errorf("the log does not name %s:3 for the bad line", h.conf)
	}
	h.fake.AddAll(2, 1, 1)
	if v := h.values(t, "perfevent.hwcounters.page_faults.value"); v[0] != 2 {
		t.Errorf("page_faults, the line after the bad one: %v, want 2", v)
	}
	if v := h.values(t, "perfevent.hwcounters.cpu_clock.value"); v[0] != 13 {
		t.Errorf("cpu_clock after the reload: %v, want 13 (carried on)", v)
	}
}

// A reload whose reading never ends (here sysfs has a FIFO where a NUMA
// node's CPU list should be) holds no lock meanwhile: a reservation is
// confirmed while it is stuck. It is abandoned after its bound, with a
// line that says so, the previous configuration still served; and Close
// does not wait for it.
func TestStuckReloadBlocksNothing(t *testing.T) {
	const bound = 300 * time.Millisecond
	h := startAgentWith(t, "0-1", "[perf]\ncpu-clock\n", func(a *Agent) { a.reloadBound = bound; a.log.SetDebug(true) })
	node := filepath.Join(h.dir, "sys", "devices", "system", "node", "node0")
	if err := os.MkdirAll(node, 0o755); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(node, "cpulist")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Lets the abandoned reading go: it sees an empty list.
		if fd, err := syscall.Open(fifo, syscall.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			syscall.Close(fd)
		}
	})
	reloaded := make(chan struct{})
	go func() {
		h.a.Reload()
		close(reloaded)
	}()
	h.waitLog(t, "reloading "+h.conf)

	holder := reservationtest.Start(t, h.lock, "read")
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if _, err := reservation.WaitState(ctx, reservation.StatePath(h.lock), time.Millisecond, func(s *reservation.State) bool {
		return s.Counters == reservation.CountersReleased && s.HeldBy(holder.PID())
	}); err != nil {
		t.Fatalf("the reservation was not confirmed while a reload was stuck: %v", err)
	}
	holder.Release(t)

	select {
	case <-reloaded:
	case <-time.After(testwait.Settle):
		t.Fatalf("Reload still runs %v after it started; its bound is %v", testwait.Settle, bound)
	}
	h.waitLog(t, "did not finish within 300ms; reload abandoned, still serving the previous configuration")
	h.fake.AddAll(5, 1, 1)
	if v := h.values(t, "perfevent.hwcounters.cpu_clock.value"); len(v) != 2 {
		t.Errorf("cpu_clock after the abandoned reload: %v, want values on 2 CPUs", v)
	}

	// Stuck again, and the agent closed meanwhile.
	go h.a.Reload()
	h.waitLog(t, "reloading "+h.conf)
	closed := make(chan struct{})
	go func() {
		h.a.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(testwait.Settle):
		t.Fatalf("Close still waits %v after it was called, behind a stuck reload", testwait.Settle)
	}
}
