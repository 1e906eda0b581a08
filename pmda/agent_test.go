package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"perfevent/internal/pdu"
	"perfevent/internal/perf"
	"perfevent/internal/pmda/pmcdtest"
	"perfevent/internal/privilege"
	"perfevent/internal/reservation"
	"perfevent/internal/testneed"
	"perfevent/internal/testwait"
	"perfevent/internal/threads"
)

// pmcd is a fake pmcd (pmcdtest) on a real pmdaperfevent process, with
// the files the agent was started with.
type pmcd struct {
	*pmcdtest.Client
	t     *testing.T
	cmd   *exec.Cmd
	flags int32 // of the last RESULT
	dir   string
	conf  string
	lock  string
	log   string
}

func startPMDA(t *testing.T, conf string, args ...string) *pmcd {
	t.Helper()
	needPerf(t)
	return startPMDAIn(t, t.TempDir(), conf, args...)
}

// startPMDAIn starts the agent with its files in dir, which may hold those
// of an earlier agent.
func startPMDAIn(t *testing.T, dir, conf string, args ...string) *pmcd {
	t.Helper()
	needPerf(t)
	bin := agentBinary(t)
	// The agent may give up root: it must still reach its files.
	for d := dir; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o005 != 0o005 {
			os.Chmod(d, 0o755)
		}
	}
	h := &pmcd{t: t, dir: dir, conf: filepath.Join(dir, "perfevent.conf"), lock: filepath.Join(dir, "perflock"), log: filepath.Join(dir, "perfevent.log")}
	if err := os.WriteFile(h.conf, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	if len(args) == 0 {
		args = []string{"-U", "root"}
	}
	h.cmd = exec.Command(bin, append([]string{"-d", "127", "-c", h.conf, "-l", h.log, "--lockfile", h.lock, "--pmids", filepath.Join(dir, "var", "pmids")}, args...)...)
	var err error
	if h.Client, err = pmcdtest.StartCommand(h.cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// How it exited is the business of the tests that stop it; that
		// it does exit is everyone's.
		var exit *exec.ExitError
		if err := h.Close(); err != nil && !errors.As(err, &exit) {
			t.Errorf("when pmcd closed its pipe: %v", err)
		}
		if t.Failed() {
			data, _ := os.ReadFile(h.log)
			t.Logf("agent log:\n%s", data)
		}
	})
	return h
}

// pmid asks the agent for a name's PMID, as pmcd does for dynamic names,
// and returns the agent's error code, if any.
func (h *pmcd) pmid(name string) (pdu.PMID, pdu.Err) {
	h.t.Helper()
	id, err := h.PMID(name)
	if err != nil {
		code, ok := err.(pdu.Err)
		if !ok {
			h.t.Fatalf("PMID of %s: %v", name, err)
		}
		return 0, code
	}
	return id, 0
}

// fetch returns instance → value for one metric, and the set's numval.
func (h *pmcd) fetch(name string) (map[int32]float64, int32) {
	h.t.Helper()
	id, code := h.pmid(name)
	if code != 0 {
		h.t.Fatalf("pmid(%s): %v", name, code)
	}
	r, err := h.Fetch(id)
	if err != nil {
		h.t.Fatal(err)
	}
	h.flags = r.Flags
	return r.Sets[0].Map(), r.Sets[0].NumVal
}

func (h *pmcd) waitLog(t *testing.T, text string) {
	t.Helper()
	if !testwait.Until(testwait.Settle, func() bool {
		data, _ := os.ReadFile(h.log)
		return strings.Contains(string(data), text)
	}) {
		t.Fatalf("the agent log never said %q", text)
	}
}

// SIGUSR1 logs the runtime's figures, which the soak test follows.
func TestSIGUSR1LogsRuntime(t *testing.T) {
	h := startPMDA(t, "[perf]\ncpu-clock\n")
	h.fetch("perfevent.active")
	h.cmd.Process.Signal(syscall.SIGUSR1)
	h.waitLog(t, "GC cycles")
	data, _ := os.ReadFile(h.log)
	var gor, heap, goal, mapped, gcs int
	for _, line := range strings.Split(string(data), "\n") {
		if _, after, ok := strings.Cut(line, "Info: runtime: "); ok {
			if _, err := fmt.Sscanf(after, "%d goroutines, heap %d kB (next GC at %d kB), %d kB mapped, %d GC cycles", &gor, &heap, &goal, &mapped, &gcs); err != nil {
				t.Fatalf("%q: %v", line, err)
			}
		}
	}
	// main, the signal loop's partner that serves pmcd, the lock watcher
	// and the runtime's own: a handful, not one per fetch.
	// The heap is collected when it reaches the goal, before it passes it
	// by much.
	if gor < 2 || gor > 20 || heap <= 0 || mapped < heap || goal <= 0 || heap > 2*goal {
		t.Errorf("goroutines %d, heap %d kB, next GC at %d kB, mapped %d kB", gor, heap, goal, mapped)
	}
	// The agent carries on serving.
	if v, _ := h.fetch("perfevent.active"); v[pdu.InNull] < 1 {
		t.Errorf("active = %v after SIGUSR1", v)
	}
}

// pmcd's pipes are switched to non-blocking mode, so that waiting for
// pmcd is the poller's business and costs no wake-ups (internal/pmda/conn.go).
func TestPipesArePolled(t *testing.T) {
	h := startPMDA(t, "[perf]\ncpu-clock\n")
	h.fetch("perfevent.active")
	for _, fd := range []string{"0", "1"} {
		info, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(h.cmd.Process.Pid), "fdinfo", fd))
		if err != nil {
			t.Fatal(err)
		}
		var flags int
		for _, line := range strings.Split(string(info), "\n") {
			if v, ok := strings.CutPrefix(line, "flags:"); ok {
				fmt.Sscanf(strings.TrimSpace(v), "%o", &flags)
			}
		}
		if flags&unix.O_NONBLOCK == 0 {
			t.Errorf("fd %s flags %#o lack O_NONBLOCK", fd, flags)
		}
	}
	// A reply larger than the pipe's 64 KiB buffer (the write meets
	// EAGAIN until pmcd reads) still arrives whole: 8000 sets are over
	// 128 KiB with one CPU online, and grow with each CPU.
	id, _ := h.pmid("perfevent.hwcounters.cpu_clock.value")
	pmids := make([]pdu.PMID, 8000)
	for i := range pmids {
		pmids[i] = id
	}
	var b pdu.Builder
	var res pdu.Result
	p, err := h.Ask(b.Fetch(0, 0, pmids), pdu.TypeResult)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Result(&res); err != nil || p.Header().Len < 128<<10 || len(res.Sets) != len(pmids) {
		t.Fatalf("RESULT of %d bytes with %d sets, %v; want %d sets in more than 128 KiB", p.Header().Len, len(res.Sets), err, len(pmids))
	}
}

// reserve does what perfalloc does (this test process is not the agent):
// a read lock on byte 0 of the lock file. It waits for the state file to
// show the release, and returns that state and a function that unlocks.
func (h *pmcd) reserve(t *testing.T) (*reservation.State, func()) {
	t.Helper()
	f, err := os.Open(h.lock)
	if err != nil {
		t.Fatal(err)
	}
	lk := unix.Flock_t{Type: unix.F_RDLCK, Start: 0, Len: 1}
	if err := unix.FcntlFlock(f.Fd(), unix.F_SETLK, &lk); err != nil {
		f.Close()
		t.Fatal(err)
	}
	unlock := func() { f.Close() } // closing drops the lock
	t.Cleanup(unlock)
	// Bounded, so that a release the state file never shows fails this
	// test, not the whole package at go test's timeout.
	ctx, cancel := context.WithTimeout(t.Context(), testwait.Settle)
	defer cancel()
	st, err := reservation.WaitState(ctx, reservation.StatePath(h.lock), 10*time.Millisecond, func(s *reservation.State) bool {
		return s.Counters == reservation.CountersReleased && s.HeldBy(os.Getpid())
	})
	if err != nil {
		t.Fatalf("the state file did not show the release within %v: %v; last read %+v", testwait.Settle, err, st)
	}
	return st, unlock
}

func TestReloadKeepsPMIDs(t *testing.T) {
	h := startPMDA(t, "[perf]\ncpu-clock\npage-faults\n")
	clock, _ := h.pmid("perfevent.hwcounters.cpu_clock.value")
	faults, _ := h.pmid("perfevent.hwcounters.page_faults.value")
	if _, code := h.pmid("perfevent.hwcounters.task_clock.value"); code != pdu.ErrName {
		t.Fatalf("task_clock before the reload: %v, want PM_ERR_NAME", code)
	}

	// A new first line, one line gone: in the C agent every PMID would move.
	os.WriteFile(h.conf, []byte("[perf]\ntask-clock\ncpu-clock\n"), 0o644)
	h.cmd.Process.Signal(syscall.SIGHUP)
	h.waitLog(t, "reload done")

	if id, _ := h.pmid("perfevent.hwcounters.cpu_clock.value"); id != clock {
		t.Errorf("cpu_clock moved from %v to %v", clock, id)
	}
	task, code := h.pmid("perfevent.hwcounters.task_clock.value")
	if code != 0 || task == clock || task == faults {
		t.Errorf("task_clock = %v, %v; want a new PMID", task, code)
	}
	if _, code := h.pmid("perfevent.hwcounters.page_faults.value"); code != pdu.ErrName {
		t.Errorf("page_faults after the reload: %v, want PM_ERR_NAME", code)
	}
	v, n := h.fetch("perfevent.hwcounters.task_clock.value")
	if n <= 0 || len(v) == 0 {
		t.Errorf("task_clock after reload: numval %d, %v", n, v)
	}
	// The names changed: the first RESULT after the reload says so.
	if h.flags&pdu.StateNamesChange == 0 {
		t.Errorf("RESULT flags %#x lack PMCD_NAMES_CHANGE", h.flags)
	}

	// A reload of an unreadable file keeps the old configuration.
	os.Remove(h.conf)
	h.cmd.Process.Signal(syscall.SIGHUP)
	h.waitLog(t, "still serving the previous configuration")
	if _, code := h.pmid("perfevent.hwcounters.task_clock.value"); code != 0 {
		t.Errorf("task_clock after a failed reload: %v", code)
	}
}

// counting fetches perfevent.active past the first fetch, which reports 0
// as the C agent's does, and fails unless some counter is read.
func (h *pmcd) counting(t *testing.T) map[int32]float64 {
	t.Helper()
	h.fetch("perfevent.active")
	active, _ := h.fetch("perfevent.active")
	if active[pdu.InNull] < 1 {
		t.Fatalf("active = %v on the second fetch", active)
	}
	return active
}

// perfevent.active is 0 only around a reservation: a SIGHUP reload with no
// perfalloc about must not look like one to pmie or pmlogger.
func TestReloadKeepsActive(t *testing.T) {
	h := startPMDA(t, "[perf]\ncpu-clock\n")
	before := h.counting(t)
	os.WriteFile(h.conf, []byte("[perf]\ncpu-clock\ntask-clock\n"), 0o644)
	h.cmd.Process.Signal(syscall.SIGHUP)
	h.waitLog(t, "reload done")
	if after, _ := h.fetch("perfevent.active"); after[pdu.InNull] <= before[pdu.InNull] {
		t.Errorf("active = %v on the first fetch after the reload, want more than the %v before", after, before)
	}
}

func TestPerfallocLockReleasesCounters(t *testing.T) {
	h := startPMDA(t, "[perf]\ncpu-clock\n")
	active := h.counting(t)
	kept := countPerfFDs(t, h.cmd.Process.Pid)

	st, unlock := h.reserve(t)
	if st.PID != h.cmd.Process.Pid || len(st.Events) != 1 || st.Events[0].Name != "cpu-clock" || st.Events[0].State != reservation.EventReleased {
		t.Errorf("state %+v", st)
	}
	frozen, _ := h.fetch("perfevent.hwcounters.cpu_clock.value")
	active, _ = h.fetch("perfevent.active")
	time.Sleep(20 * time.Millisecond)
	again, _ := h.fetch("perfevent.hwcounters.cpu_clock.value")
	if active[pdu.InNull] != 0 || frozen[0] != again[0] {
		t.Errorf("while reserved: active %v, cpu_clock %v then %v; want 0 and frozen", active, frozen, again)
	}
	// cpu-clock holds no PMU counter: its descriptors are disabled, not
	// closed (internal/counter's kernel tests show they stop counting).
	h.waitLog(t, "descriptors disabled, 0 closed")
	if fds := countPerfFDs(t, h.cmd.Process.Pid); fds != kept {
		t.Errorf("%d perf descriptors open while reserved, want the %d kept", fds, kept)
	}

	unlock()
	if _, err := reservation.WaitState(t.Context(), reservation.StatePath(h.lock), 10*time.Millisecond, func(s *reservation.State) bool {
		return s.Counters == reservation.CountersOpen
	}); err != nil {
		t.Fatalf("the state file never showed the counters back: %v", err)
	}
	h.fetch("perfevent.active")
	active, _ = h.fetch("perfevent.active")
	moved, _ := h.fetch("perfevent.hwcounters.cpu_clock.value")
	if active[pdu.InNull] < 1 || moved[0] <= frozen[0] {
		t.Errorf("after release: active %v, cpu_clock %v (frozen at %v)", active, moved, frozen)
	}
}

// A SIGHUP while perfalloc holds the counters must not open any: the
// reload waits for the release, then opens the new configuration.
func TestReloadWaitsForTheReservation(t *testing.T) {
	h := startPMDA(t, "[perf]\ncpu-clock\n")
	h.fetch("perfevent.active")
	kept := countPerfFDs(t, h.cmd.Process.Pid) // disabled, not closed, during the reservation
	_, unlock := h.reserve(t)

	os.WriteFile(h.conf, []byte("[perf]\ntask-clock\ncpu-clock\n"), 0o644)
	h.cmd.Process.Signal(syscall.SIGHUP)
	h.waitLog(t, "reload of "+h.conf+" deferred")
	for range 10 { // the old agent opened the new counters for a moment
		if fds := countPerfFDs(t, h.cmd.Process.Pid); fds != kept {
			t.Fatalf("%d perf descriptors open during the reservation, want the %d kept", fds, kept)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, code := h.pmid("perfevent.hwcounters.task_clock.value"); code != pdu.ErrName {
		t.Errorf("task_clock during the reservation: %v, want PM_ERR_NAME until the reload", code)
	}

	unlock()
	h.waitLog(t, "reload done")
	var v map[int32]float64
	var n int32
	if !testwait.Until(testwait.Settle, func() bool {
		v, n = h.fetch("perfevent.hwcounters.task_clock.value")
		return n > 0 && v[0] > 0
	}) {
		t.Errorf("task_clock after the release: numval %d, %v", n, v)
	}
	if log, _ := os.ReadFile(h.log); strings.Contains(string(log), "counters reopened") {
		t.Errorf("the old counters were reopened as well as the new ones built:\n%s", log)
	}
	if _, err := reservation.WaitState(t.Context(), reservation.StatePath(h.lock), 10*time.Millisecond, func(s *reservation.State) bool {
		return s.Counters == reservation.CountersOpen && len(s.Events) == 2
	}); err != nil {
		t.Errorf("the state file never showed the new configuration counting: %v", err)
	}
}

func countPerfFDs(t *testing.T, pid int) int {
	t.Helper()
	dir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if target, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && strings.Contains(target, "perf_event") {
			n++
		}
	}
	return n
}

// TestRunsAsUserWithPerfmonOnly: after start-up the agent is an ordinary
// user with one capability, and still does everything that needs it:
// reopening counters after a reservation, reloading its configuration with
// a new metric, and keeping the state file and PMID map up to date.
func TestRunsAsUserWithPerfmonOnly(t *testing.T) {
	nobody := testneed.User(t, "nobody")
	h := startPMDA(t, "[perf]\ncpu-clock\n", "-U", "nobody")
	h.waitLog(t, "running as nobody (uid "+nobody.Uid)
	st, err := privilege.ReadStatus(h.cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(nobody.Uid)
	c := privilege.CounterCapability()
	if !st.Only(uid, c) || !st.NoNewPrivs {
		t.Errorf("/proc/%d/status: uids %v CapEff %#x CapPrm %#x CapInh %#x NoNewPrivs %v; want uid %d and only %s",
			h.cmd.Process.Pid, st.UIDs, st.CapEff, st.CapPrm, st.CapInh, st.NoNewPrivs, uid, privilege.Name(c))
	}

	// A reservation and its release: the counters reopen without root.
	_, unlock := h.reserve(t)
	unlock()
	if _, err := reservation.WaitState(t.Context(), reservation.StatePath(h.lock), 10*time.Millisecond, func(s *reservation.State) bool {
		return s.Counters == reservation.CountersOpen && len(s.Events) == 1 && s.Events[0].State == reservation.EventCounting
	}); err != nil {
		t.Fatalf("the counters did not come back: %v", err)
	}
	if n, want := countPerfFDs(t, h.cmd.Process.Pid), len(onlineCPUs(t)); n != want {
		t.Errorf("%d perf descriptors after the release, want %d (cpu-clock on each online CPU)", n, want)
	}

	// The lock file deleted: as nobody the agent cannot make it again in a
	// directory of root's, and says what to do; once root puts it back,
	// the agent adopts it and reservations work again.
	os.Remove(h.lock)
	h.waitLog(t, "lock file "+h.lock+" was deleted, and the agent (uid "+nobody.Uid+") cannot create it in "+h.dir+": perfalloc cannot reserve the counters until the agent restarts, or root puts the file back: install -m 0644 /dev/null "+h.lock)
	if err := os.WriteFile(h.lock, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// "was replaced", or "was deleted" if the agent looked between the
	// removal and root's new file.
	h.waitLog(t, ": watching the new file")
	_, unlock = h.reserve(t)
	unlock()

	// A reload that adds a metric: opened and numbered without root.
	os.WriteFile(h.conf, []byte("[perf]\ncpu-clock\npage-faults\n"), 0o644)
	h.cmd.Process.Signal(syscall.SIGHUP)
	h.waitLog(t, "reload done")
	if _, code := h.pmid("perfevent.hwcounters.page_faults.value"); code != 0 {
		t.Errorf("page_faults after a reload as nobody: %v", code)
	}
	data, _ := os.ReadFile(filepath.Join(h.dir, "var", "pmids"))
	if !strings.Contains(string(data), " hwcounters.page_faults\n") {
		t.Errorf("the PMID map was not updated as nobody:\n%s", data)
	}
}

// TestFlappingReservationIsPaced: a loop of open, lock, close on the lock
// file makes the agent log its releases a few times at once and then at
// most every 100 ms, each line told after quiet ones counting them
// (cpu-clock is enabled again at once each time; a reopen would be paced
// the same way); a counter this machine cannot count is reported once, not
// at every cycle; and the counters count afterwards.
//
// Each lock is held until the agent has seen it, and dropped until it has
// seen that, so that every cycle is one the agent's pace must reckon with;
// a 2 ms hold, the test of old, was seen about once in forty, which the
// log's own cap on repeats (pmda.RepeatBurst a minute) kept within bounds
// with no pace at all. The loop ends at the first release told after quiet
// ones, and that line must count exactly the cycles that were not told:
// without the pace none is quiet and the loop runs out.
// An agent that pmcd starts under a real-time policy (pmcd run by chrt, or
// with a real-time unit) drops to its user and serves like any other. The
// privilege drop's all-thread calls wait for every thread; boosting them
// onto the caller's CPU would leave the lock watcher, at a lower real-time
// priority than the caller, waiting for ever behind the caller's yields.
func TestRealTimeAgentDropsAndServes(t *testing.T) {
	needPerf(t)
	nobody := testneed.User(t, "nobody")
	chrt, err := exec.LookPath("chrt")
	if err != nil {
		t.Skip("needs chrt (util-linux) to start the agent under SCHED_FIFO")
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	conf := filepath.Join(dir, "perfevent.conf")
	if err := os.WriteFile(conf, []byte("[perf]\ncpu-clock\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(dir, "perfevent.log")
	cmd := exec.Command(chrt, "-f", "10", agentBinary(t), "-d", "127", "-c", conf, "-l", log,
		"--lockfile", filepath.Join(dir, "perflock"), "--pmids", filepath.Join(dir, "var", "pmids"), "-U", "nobody")
	c, err := pmcdtest.StartCommand(cmd)
	if err != nil {
		data, _ := os.ReadFile(log)
		t.Fatalf("the agent under SCHED_FIFO 10 never sent its CREDS: %v\nagent log:\n%s", err, data)
	}
	defer func() {
		if err := c.Close(); err != nil {
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				t.Errorf("when pmcd closed its pipe: %v", err)
			}
		}
	}()
	pid := cmd.Process.Pid
	var a unix.SchedAttr
	if p, err := unix.SchedGetAttr(pid, 0); err != nil || p.Policy != unix.SCHED_FIFO || p.Priority != 10 {
		if err == nil {
			a = *p
		}
		t.Fatalf("agent %d: policy %d priority %d (%v); want SCHED_FIFO 10 from chrt", pid, a.Policy, a.Priority, err)
	}
	st, err := privilege.ReadStatus(pid)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(nobody.Uid)
	if !st.Only(uid, privilege.CounterCapability()) {
		t.Errorf("/proc/%d/status: uids %v CapEff %#x; want uid %d and only %s", pid, st.UIDs, st.CapEff, uid, privilege.Name(privilege.CounterCapability()))
	}
	id, err := c.PMID("perfevent.hwcounters.cpu_clock.value")
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Fetch(id)
	if err != nil {
		t.Fatal(err)
	}
	if n := r.Sets[0].NumVal; int(n) != len(onlineCPUs(t)) {
		t.Errorf("cpu_clock has %d values; want one for each of the %d online CPUs", n, len(onlineCPUs(t)))
	}
}

// Every thread of a running agent lets the kernel put its timed wake-ups
// off by timerSlack, the runtime's own threads included, but the lock
// watcher's: a real-time thread has no slack, and one that could not be
// made real-time keeps the kernel's default.
func TestThreadsTakeTheTimerSlack(t *testing.T) {
	testneed.User(t, "nobody")
	h := startPMDA(t, "[perf]\ncpu-clock\n", "-U", "nobody")
	h.fetch("perfevent.hwcounters.cpu_clock.value")
	pid := h.cmd.Process.Pid
	ents, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "task"))
	if err != nil {
		t.Fatal(err)
	}
	slack := map[int]time.Duration{}
	realTime, other := 0, 0
	for _, e := range ents {
		tid, _ := strconv.Atoi(e.Name())
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "timerslack_ns"))
		if err != nil {
			continue // the thread ended
		}
		ns, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		slack[tid] = time.Duration(ns)
		a, err := unix.SchedGetAttr(tid, 0)
		switch {
		case err == nil && a.Policy == unix.SCHED_FIFO:
			realTime++
			if ns != 0 {
				t.Errorf("real-time thread %d has slack %v", tid, time.Duration(ns))
			}
		case time.Duration(ns) == threads.DefaultTimerSlack:
			other++
		case time.Duration(ns) != timerSlack:
			t.Errorf("thread %d has slack %v, want %v", tid, time.Duration(ns), timerSlack)
		}
	}
	if realTime+other != 1 || len(slack) < 3 {
		t.Errorf("%d real-time threads and %d with the default slack, want the lock watcher's alone; slack by thread: %v", realTime, other, slack)
	}
}

func TestFlappingReservationIsPaced(t *testing.T) {
	h := startPMDA(t, "[perf]\ncpu-clock\ncycles\n")
	h.fetch("perfevent.active")
	before, _ := os.ReadFile(h.log)
	scalar := func(name string) float64 {
		v, _ := h.fetch(name)
		return v[pdu.InNull]
	}
	base := scalar("perfevent.reservation.count")
	// The release line of a cycle is written before the agent looks at
	// the lock again, so it is in the log once the unlock has been seen.
	released := func() []string {
		data, _ := os.ReadFile(h.log)
		var lines []string
		for _, l := range strings.Split(string(data[len(before):]), "\n") {
			if strings.Contains(l, "counters released for perfalloc") {
				lines = append(lines, l)
			}
		}
		return lines
	}
	cycle := func(n int) {
		f, err := os.Open(h.lock)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		lk := unix.Flock_t{Type: unix.F_RDLCK, Start: 0, Len: 1}
		if err := unix.FcntlFlock(f.Fd(), unix.F_SETLK, &lk); err != nil {
			t.Fatal(err)
		}
		testwait.Eventually(t, testwait.Settle, fmt.Sprintf("the agent to count lock cycle %d in perfevent.reservation.count", n), func() bool {
			return scalar("perfevent.reservation.count") >= base+float64(n)
		})
		f.Close()
		testwait.Eventually(t, testwait.Settle, fmt.Sprintf("perfevent.reservation.held 0 after lock cycle %d", n), func() bool {
			return scalar("perfevent.reservation.held") == 0
		})
	}
	// A cycle takes milliseconds: past the burst of 3 the pace's tokens,
	// one per 100 ms, run out within a few. The bound is for an agent that
	// never goes quiet.
	const maxCycles = 200
	untoldCount := regexp.MustCompile(`\((\d+) reservations? since the last one logged\)$`)
	start := time.Now()
	var told []string
	quiet, cycles := 0, 0
	for {
		if cycles == maxCycles {
			t.Fatalf("%d lock cycles seen in %v, every one told (%d release lines); want quiet ones past the burst of 3 at once and one per 100 ms",
				cycles, time.Since(start).Round(time.Millisecond), len(told))
		}
		cycles++
		cycle(cycles)
		lines := released()
		if len(lines) == len(told) {
			quiet++
			continue
		}
		if len(lines) != len(told)+1 {
			t.Fatalf("lock cycle %d added %d release lines:\n%s", cycles, len(lines)-len(told), strings.Join(lines[len(told):], "\n"))
		}
		told = lines
		line := lines[len(lines)-1]
		m := untoldCount.FindStringSubmatch(line)
		if quiet == 0 {
			if m != nil {
				t.Fatalf("lock cycle %d, after one that was told, is told as %q", cycles, line)
			}
			continue
		}
		if m == nil || m[1] != strconv.Itoa(quiet) {
			t.Fatalf("lock cycle %d, after %d not told, is told as %q; want it to count them", cycles, quiet, line)
		}
		break
	}
	// The loop may run long when the test waits for a CPU; the pace is per
	// 100 ms of the time it really took.
	took := time.Since(start)
	most := 3 + int(took/(100*time.Millisecond)) + 1
	t.Logf("%d lock cycles in %v, %d release lines", cycles, took.Round(time.Millisecond), len(told))
	if len(told) > most {
		t.Errorf("%d lock cycles in %v gave %d release lines; want at most %d (3 at once, then one per 100 ms)", cycles, took.Round(time.Millisecond), len(told), most)
	}
	testwait.Eventually(t, testwait.Settle, "perfevent.active above 0 after the last lock cycle", func() bool {
		return scalar("perfevent.active") != 0
	})
	after, _ := os.ReadFile(h.log)
	added := string(after[len(before):])
	if n := strings.Count(added, "Warning:"); n > 0 {
		t.Errorf("%d warnings during the flapping; the failures were reported at start-up:\n%s", n, added)
	}
	if v, n := h.fetch("perfevent.hwcounters.cpu_clock.value"); n <= 0 || len(v) == 0 {
		t.Errorf("after the flapping cpu_clock has no values: %v %d", v, n)
	}
}

// A FIFO named by -c used to hang the root agent before it said a word to
// pmcd, and it outlived pmcd's pipe. Now the config is refused at once,
// the agent serves version and active, and closing the pipe ends it.
func TestFIFOConfigNeitherHangsNorOutlivesThePipe(t *testing.T) {
	needPerf(t)
	dir := t.TempDir()
	fifo := filepath.Join(dir, "perfevent.conf")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(dir, "perfevent.log")
	cmd := exec.Command(agentBinary(t), "-c", fifo, "-l", log, "-U", "root",
		"--lockfile", filepath.Join(dir, "perflock"), "--pmids", filepath.Join(dir, "pmids"))
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	time.Sleep(500 * time.Millisecond) // as pmcd might, before its CREDS
	start := time.Now()
	in.Close()
	// A bound for a failure, not a timing assertion: on a busy machine
	// the agent may wait for a CPU long after it saw the pipe close.
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("exit: %v", err)
		}
		t.Logf("the agent exited %v after the pipe closed", time.Since(start).Round(time.Millisecond))
	case <-time.After(testwait.Settle):
		cmd.Process.Kill()
		t.Fatalf("the agent still runs %v after pmcd closed its pipe", testwait.Settle)
	}
	data, _ := os.ReadFile(log)
	if want := fifo + " is a FIFO, not a regular file"; !strings.Contains(string(data), want) {
		t.Errorf("the log does not say %q:\n%s", want, data)
	}
}

// A FIFO put in the config's place before a SIGHUP must not block the
// reload, nor the reservation and signals that come after it.
func TestReloadOfAFIFOBlocksNothing(t *testing.T) {
	h := startPMDA(t, "[perf]\ncpu-clock\n")
	if err := os.Remove(h.conf); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(h.conf, 0o644); err != nil {
		t.Fatal(err)
	}
	h.cmd.Process.Signal(syscall.SIGHUP)
	h.waitLog(t, "reload: "+h.conf+" is a FIFO, not a regular file; still serving the previous configuration")
	if _, release := h.reserve(t); release != nil {
		release()
	}
	if vals, _ := h.fetch("perfevent.hwcounters.cpu_clock.value"); len(vals) == 0 {
		t.Error("cpu_clock is no longer served after the refused reload")
	}
	h.cmd.Process.Signal(syscall.SIGTERM)
	h.waitLog(t, "caught terminated, exiting")
}

// stop ends the agent as pmcd does, by closing its pipe.
func (h *pmcd) stop() {
	h.t.Helper()
	if err := h.Close(); err != nil {
		h.t.Errorf("the agent exited with %v", err)
	}
}

// A PMID map that cannot be used costs the archives' numbers for one run,
// not every metric.
func TestUnusableMapStillServes(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "var", "pmids"), 0o755); err != nil { // a directory where the map should be
		t.Fatal(err)
	}
	h := startPMDAIn(t, dir, "[perf]\ncpu-clock\n")
	h.waitLog(t, "the PMID map "+filepath.Join(dir, "var", "pmids")+" cannot be used: metrics get fresh PMIDs for this run")
	if vals, _ := h.fetch("perfevent.hwcounters.cpu_clock.value"); len(vals) == 0 {
		t.Error("cpu_clock is not served")
	}
}

// pmcd.conf's -U changes from pcp to root: root adopts the map and the
// state directory that the agent made as pcp, and every PMID stays.
func TestUserChangeKeepsPMIDsAndState(t *testing.T) {
	pcp := testneed.User(t, "pcp")
	dir := t.TempDir()
	h := startPMDAIn(t, dir, "[perf]\ncpu-clock\n", "-U", "pcp")
	h.waitLog(t, "running as pcp (uid "+pcp.Uid)
	os.WriteFile(h.conf, []byte("[perf]\ncpu-clock\npage-faults\n"), 0o644)
	h.cmd.Process.Signal(syscall.SIGHUP)
	h.waitLog(t, "reload done") // the map is now written by pcp
	clock, _ := h.pmid("perfevent.hwcounters.cpu_clock.value")
	faults, _ := h.pmid("perfevent.hwcounters.page_faults.value")
	h.stop()
	for _, path := range []string{filepath.Join(dir, "var", "pmids"), reservation.StateDir(h.lock)} {
		if st, err := os.Stat(path); err != nil || st.Sys().(*syscall.Stat_t).Uid == 0 {
			t.Fatalf("%s after the run as pcp: %v, want it owned by pcp", path, err)
		}
	}

	h = startPMDAIn(t, dir, "[perf]\ncpu-clock\npage-faults\n", "-U", "root")
	if id, code := h.pmid("perfevent.hwcounters.cpu_clock.value"); id != clock || code != 0 {
		t.Errorf("cpu_clock as root: %v %v, want %v", id, code, clock)
	}
	if id, code := h.pmid("perfevent.hwcounters.page_faults.value"); id != faults || code != 0 {
		t.Errorf("page_faults as root: %v %v, want %v", id, code, faults)
	}
	st, release := h.reserve(t) // the state file confirms the release
	release()
	if st.Counters != reservation.CountersReleased {
		t.Errorf("state %+v", st)
	}
	data, _ := os.ReadFile(h.log)
	if strings.Contains(string(data), "Warning") || strings.Contains(string(data), "Error") {
		t.Errorf("the agent complained after the change of -U:\n%s", data)
	}
}

// The agent gives the user it runs as only what it made itself: what
// --pmids names (a FIFO, or a hard link to a file of root's) stays root's.
func TestPMIDsTargetIsNotGivenAway(t *testing.T) {
	testneed.User(t, "nobody")
	for _, kind := range []string{"fifo", "hard link"} {
		dir := t.TempDir()
		os.MkdirAll(filepath.Join(dir, "var"), 0o755)
		pmids := filepath.Join(dir, "var", "pmids")
		target := pmids
		switch kind {
		case "fifo":
			if err := syscall.Mkfifo(pmids, 0o600); err != nil {
				t.Fatal(err)
			}
		case "hard link":
			target = filepath.Join(dir, "root-file")
			os.WriteFile(target, []byte("root's\n"), 0o600)
			if err := os.Link(target, pmids); err != nil {
				t.Fatal(err)
			}
		}
		h := startPMDAIn(t, dir, "[perf]\ncpu-clock\n", "-U", "nobody")
		h.waitLog(t, "running as nobody")
		h.stop()
		if st, err := os.Stat(target); err != nil || st.Sys().(*syscall.Stat_t).Uid != 0 {
			t.Errorf("%s: %s now belongs to uid %d, want root", kind, target, st.Sys().(*syscall.Stat_t).Uid)
		}
	}
}

// The lock file in a directory anyone may write (-lockfile /tmp/x), and a
// user plants x.d as a link to a directory of theirs: the agent refuses
// it, says that the lock file's directory is unsafe, and never writes
// there, neither as root nor after dropping to its user.
func TestRefusedStateDirIsNeverWritten(t *testing.T) {
	nobody := testneed.User(t, "nobody")
	uid, _ := strconv.Atoi(nobody.Uid)
	dir := t.TempDir()
	os.Chmod(dir, 0o1777)
	target := t.TempDir()
	os.Chmod(target, 0o755)
	os.WriteFile(filepath.Join(target, "state"), []byte("theirs\n"), 0o644)
	os.Chown(filepath.Join(target, "state"), uid, uid)
	os.Chown(target, uid, uid)
	if err := os.Symlink(target, filepath.Join(dir, "perflock.d")); err != nil {
		t.Fatal(err)
	}
	h := startPMDAIn(t, dir, "[perf]\ncpu-clock\n", "-U", "nobody")
	h.waitLog(t, "state directory "+filepath.Join(dir, "perflock.d")+" is not a directory (a symlink or file is in the way)")
	h.waitLog(t, "running as nobody")
	f, _ := os.Open(h.lock) // a reservation, which would rewrite the state
	lk := unix.Flock_t{Type: unix.F_RDLCK, Start: 0, Len: 1}
	unix.FcntlFlock(f.Fd(), unix.F_SETLK, &lk)
	h.waitLog(t, "counters released for perfalloc")
	f.Close()
	h.waitLog(t, "counters resumed after perfalloc")
	h.stop()
	if data, err := os.ReadFile(filepath.Join(target, "state")); string(data) != "theirs\n" {
		t.Errorf("the link's target now holds %q, %v", data, err)
	}
	if entries, _ := os.ReadDir(target); len(entries) != 1 {
		t.Errorf("the agent wrote into the link's target: %v", entries)
	}
	log, _ := os.ReadFile(h.log)
	if want := "lock file directory " + dir + " is writable by group or others"; !strings.Contains(string(log), want) {
		t.Errorf("the log lacks %q", want)
	}
}

// The lock file's directory deleted and made again by root. As root the
// agent makes the lock file and its state directory again at once; as its
// user it cannot, and says what root must do; once root has, the state
// directory is adopted and perfalloc's confirmation works again, without a
// restart.
func TestLockDirectoryComesBack(t *testing.T) {
	nobody := testneed.User(t, "nobody")
	for _, as := range []string{"root", "nobody"} {
		dir := t.TempDir()
		lockDir := filepath.Join(dir, "perfevent")
		os.Mkdir(lockDir, 0o755)
		h := startPMDAIn(t, dir, "[perf]\ncpu-clock\n", "-U", as, "--lockfile", filepath.Join(lockDir, "perflock"))
		h.lock = filepath.Join(lockDir, "perflock")
		t.Cleanup(func() {
			// Before the agent is stopped: what it has open tells an
			// agent still on the deleted files from one that never saw
			// the lock.
			if t.Failed() {
				t.Logf("as %s:\n%s", as, filesOf(h, lockDir))
			}
		})
		h.fetch("perfevent.active")
		// Gone at once, as by rm -r (which the agent, making the lock file
		// again as soon as it is deleted, can race with).
		if err := os.Rename(lockDir, lockDir+".gone"); err != nil {
			t.Fatal(err)
		}
		os.RemoveAll(lockDir + ".gone")
		os.Mkdir(lockDir, 0o755)
		if as == "nobody" {
			os.WriteFile(h.lock, nil, 0o644) // what the agent's message asks root to do
			h.waitLog(t, "watching the new file")
			f, _ := os.Open(h.lock)
			lk := unix.Flock_t{Type: unix.F_RDLCK, Start: 0, Len: 1}
			unix.FcntlFlock(f.Fd(), unix.F_SETLK, &lk)
			// Seen: the warning below may be older, from a rebuild (a
			// CPU that came back online since the start does that).
			h.waitLog(t, "counters released for perfalloc")
			h.waitLog(t, "state directory "+reservation.StateDir(h.lock)+" is missing, and the agent (uid "+nobody.Uid+") cannot make it in "+lockDir+
				": perfalloc cannot confirm releases until the agent restarts, or root makes it: install -d -o "+nobody.Uid+" -g "+nobody.Gid+" -m 0755 "+reservation.StateDir(h.lock))
			f.Close()
			h.waitLog(t, "counters resumed after perfalloc")
			uid, _ := strconv.Atoi(nobody.Uid)
			gid, _ := strconv.Atoi(nobody.Gid)
			os.Mkdir(reservation.StateDir(h.lock), 0o755)
			os.Chown(reservation.StateDir(h.lock), uid, gid)
		} else {
			h.waitLog(t, "created it again")
		}
		_, release := h.reserve(t) // fails unless the state directory is back
		release()
		h.stop()
	}
}

// filesOf describes, for a failure message, the files in dir and below
// (owner, mode, inode) with the state file's content, and the agent's open
// descriptors: its lock file's and state directory's, "(deleted)" when it
// still has the old ones.
func filesOf(h *pmcd, dir string) string {
	var b strings.Builder
	filepath.WalkDir(dir, func(path string, _ os.DirEntry, err error) error {
		var st unix.Stat_t
		if err == nil {
			err = unix.Lstat(path, &st)
		}
		if err != nil {
			fmt.Fprintf(&b, "  %s: %v\n", path, err)
			return nil
		}
		fmt.Fprintf(&b, "  %s: uid %d gid %d mode %#o inode %d\n", path, st.Uid, st.Gid, st.Mode, st.Ino)
		return nil
	})
	if data, err := os.ReadFile(reservation.StatePath(h.lock)); err == nil {
		fmt.Fprintf(&b, "  state file: %s\n", bytes.TrimSpace(data))
	}
	fds := filepath.Join("/proc", strconv.Itoa(h.cmd.Process.Pid), "fd")
	entries, err := os.ReadDir(fds)
	if err != nil {
		fmt.Fprintf(&b, "  the agent's descriptors: %v\n", err)
	}
	for _, e := range entries {
		if target, err := os.Readlink(filepath.Join(fds, e.Name())); err == nil && strings.HasPrefix(target, dir) {
			fmt.Fprintf(&b, "  the agent's fd %s: %s\n", e.Name(), target)
		}
	}
	return b.String()
}

// An agent run by hand beside the one pmcd runs, with the same lock file,
// leaves the live agent's log and state file alone when it exits, so that
// perfalloc --ping still finds the live agent.
func TestSecondAgentLeavesTheLiveOneAlone(t *testing.T) {
	h := startPMDA(t, "[perf]\ncpu-clock\n")
	h.fetch("perfevent.active")
	state := reservation.StatePath(h.lock)
	// Where an absolute default log would be: PCP_LOG_DIR/pmcd.
	logDir := filepath.Join(h.dir, "log")
	live := filepath.Join(logDir, "pmcd", "perfevent.log")
	os.MkdirAll(filepath.Dir(live), 0o755)
	os.WriteFile(live, []byte("the live agent's log\n"), 0o644)

	cwd := t.TempDir()
	cmd := exec.Command(agentBinary(t), "-U", "root", "-c", h.conf, "--lockfile", h.lock, "--pmids", filepath.Join(cwd, "pmids"))
	cmd.Dir = cwd
	cmd.Env = append(os.Environ(), "PCP_LOG_DIR="+logDir)
	cmd.Stdin = strings.NewReader("") // no pmcd: it exits at once
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("second agent: %v\n%s", err, out)
	}
	if data, err := os.ReadFile(live); string(data) != "the live agent's log\n" {
		t.Errorf("%s after the second agent: %q, %v", live, data, err)
	}
	if _, err := os.Stat(live + ".prev"); err == nil {
		t.Errorf("the second agent renamed %s", live)
	}
	data, err := os.ReadFile(filepath.Join(cwd, "perfevent.log"))
	if err != nil {
		t.Fatalf("the second agent's log is not in its working directory: %v", err)
	}
	if !strings.Contains(string(data), "belongs to pmdaperfevent (pid "+strconv.Itoa(h.cmd.Process.Pid)+"), which runs") {
		t.Errorf("the second agent's log does not say whose state file it left alone:\n%s", data)
	}
	s, err := reservation.ReadState(state)
	if err != nil || s.PID != h.cmd.Process.Pid || s.Alive() != nil {
		t.Errorf("state file after the second agent: %+v, %v; want the live agent's (pid %d)", s, err, h.cmd.Process.Pid)
	}
}

// Events that could not be opened at start-up are not listed again after
// perfalloc: cpu-clock is enabled again, nothing is reopened, and the
// failure stays the one line of the start-up. (internal/agent's
// TestReopenCountsKnownFailures shows the count on a reopen.)
func TestKnownFailuresAreNotRepeated(t *testing.T) {
	needPerf(t)
	attr := unix.PerfEventAttr{Type: unix.PERF_TYPE_HARDWARE, Config: unix.PERF_COUNT_HW_CPU_CYCLES,
		Size: perf.AttrSize, Read_format: perf.ReadFormat}
	if fd, err := perf.OpenCPU(&attr, onlineCPUs(t)[0]); err == nil {
		fd.Close()
		t.Skip("needs a machine without a hardware PMU (a VM), where cycles cannot be opened")
	}
	h := startPMDA(t, "[perf]\ncpu-clock\ncycles\n")
	h.fetch("perfevent.active")
	for range 2 {
		_, unlock := h.reserve(t)
		unlock()
		// The same pid reserves next: wait for this release to be seen.
		if _, err := reservation.WaitState(t.Context(), reservation.StatePath(h.lock), 10*time.Millisecond, func(s *reservation.State) bool {
			return s.Counters == reservation.CountersOpen
		}); err != nil {
			t.Fatalf("the state file never showed the reopen: %v", err)
		}
	}
	var log string
	testwait.Until(testwait.Settle, func() bool {
		data, _ := os.ReadFile(h.log)
		log = string(data)
		return strings.Count(log, "counters resumed after perfalloc") >= 2
	})
	if n := strings.Count(log, "counters resumed after perfalloc"); n != 2 {
		t.Errorf("%d resume lines, want 2:\n%s", n, log)
	}
	failures := 0
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, ": cycles: ") && strings.Contains(l, "cannot count") {
			failures++
		}
	}
	if failures != 1 {
		t.Errorf("cycles's failure is logged %d times, want once, at start-up:\n%s", failures, log)
	}
}
