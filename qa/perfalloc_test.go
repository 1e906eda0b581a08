package qa

// perfalloc against a live agent under a lab pmcd: our perfalloc and C
// perfalloc against our agent, ours against the C agent, and the errors a
// bad lock file must give. The faults in faults_test.go share the helpers
// at the end of this file.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"perfevent/internal/testwait"
)

// CPerfalloc is the C perfalloc as Debian's pcp package installs it.
const CPerfalloc = "/var/lib/pcp/pmdas/perfevent/perfalloc"

// Reservations, from the side of the counters: values freeze and active is
// 0 while our perfalloc holds the lock, and both come back when it lets go.
// --status and --ping describe the live agent meanwhile.

// countingAgain is in the agent's line for the end of a reservation:
// "counters resumed after perfalloc in …" when it only enabled again what
// it had disabled (software events, as here), "counters reopened after
// perfalloc in …" when it reopened some.
const countingAgain = " after perfalloc in "

func TestPerfallocReservation(t *testing.T) {
	l := StartLab(t, Agent{Go: true})
	pa := perfallocBinary(t, l)
	agent := l.AgentPID(t)
	want := activeAll(t, l)

	t.Run("foreground", func(t *testing.T) {
		before := waitValues(t, l, "perfevent.hwcounters.cpu_clock.value")
		h := startHolder(t, l, pa, "-D", "--verbose", "-f", l.Lock)
		h.waitStderr(t, fmt.Sprintf("perfalloc: counters released by pmdaperfevent (pid %d) after ", agent), Settle)
		if got := active(t, l); got != 0 {
			t.Errorf("perfevent.active = %d while perfalloc pid %d holds the lock, want 0", got, h.pid())
		}
		frozen := waitValues(t, l, "perfevent.hwcounters.cpu_clock.value")
		time.Sleep(150 * time.Millisecond)
		again := waitValues(t, l, "perfevent.hwcounters.cpu_clock.value")
		if !slicesEqual(frozen, again) {
			t.Errorf("cpu_clock moved while reserved: %v, then %v 150 ms later", frozen, again)
		}
		if !valuesAtLeast(before, frozen) {
			t.Errorf("cpu_clock: frozen values %v are below the ones before the reservation, %v", frozen, before)
		}
		waitLog(t, l, fmt.Sprintf("counters released for perfalloc (holders %d)", h.pid()), Settle)

		out := l.Run(t, pa, "-f", l.Lock, "--status")
		for _, re := range []string{
			fmt.Sprintf(`(?m)^agent: +pmdaperfevent, pid %d, up `, agent),
			fmt.Sprintf(`(?m)^lock file: +%s$`, regexp.QuoteMeta(l.Lock)),
			`(?m)^counters: +released since `,
			fmt.Sprintf(`(?m)^holders: +%d$`, h.pid()),
			`(?m)^  cpu-clock +released +0$`,
			`(?m)^  cycles +failed +0 +perf_event_open failed on cpu0 for "cycles": .*\(ENOENT\)$`,
		} {
			if !regexp.MustCompile(re).MatchString(out) {
				t.Errorf("perfalloc --status while reserved lacks %s:\n%s", re, out)
			}
		}
		if out := l.Run(t, pa, "-f", l.Lock, "--ping"); out != "OK\n" {
			t.Errorf("perfalloc --ping: %q, want OK", out)
		}

		resumed := logCount(l, countingAgain)
		if code := h.stop(t, syscall.SIGINT); code != 0 {
			t.Errorf("perfalloc -D after SIGINT: exit %d, want 0; stderr:\n%s", code, h.stderr())
		}
		// The agent notices the release on its own time (how soon is
		// for qa/bench). From then on, as with the C agent, the first
		// fetch may still say 0, and the next one counts; ours may be
		// quicker, never slower.
		waitLogCount(t, l, countingAgain, resumed+1)
		first := active(t, l)
		if got := active(t, l); got != want {
			t.Errorf("perfevent.active: %d, then %d after the agent counted again; want %d by the second fetch", first, got, want)
		}
		moving := waitValues(t, l, "perfevent.hwcounters.cpu_clock.value")
		if !valuesGrew(frozen, moving) {
			t.Errorf("cpu_clock after the release: %v, not past the frozen %v", moving, frozen)
		}
		// The agent writes its state file just after its log line.
		waitFor(t, Settle, "perfalloc --status to say the counters are open", func() bool {
			out = l.Run(t, pa, "-f", l.Lock, "--status")
			return regexp.MustCompile(`(?m)^counters: +open since `).MatchString(out)
		})
		for _, re := range []string{`(?m)^holders: +none$`, `(?m)^  cpu-clock +counting +\d+$`} {
			if !regexp.MustCompile(re).MatchString(out) {
				t.Errorf("perfalloc --status after the release lacks %s:\n%s", re, out)
			}
		}
	})

	t.Run("command", func(t *testing.T) {
		// The command runs while the lock is held, and its status is
		// perfalloc's.
		r := l.Exec(Cmd{Args: []string{pa, "-f", l.Lock, "--", "sh", "-c", "pmprobe -v perfevent.active; exit 3"}})
		if code := exitCode(r.Err); code != 3 {
			t.Errorf("exit %d, want the command's 3:\n%s", code, r)
		}
		if got := strings.TrimSpace(r.Stdout); got != "perfevent.active 1 0" {
			t.Errorf("pmprobe inside perfalloc: %q, want perfevent.active 1 0:\n%s", got, r)
		}
		// As quiet as the C perfalloc: nothing went wrong, nothing to say.
		if r.Stderr != "" {
			t.Errorf("stderr %q, want nothing", r.Stderr)
		}
		waitActive(t, l, want)
		r = l.Exec(Cmd{Args: []string{pa, "--verbose", "-f", l.Lock, "--", "true"}})
		confirm := regexp.MustCompile(fmt.Sprintf(`(?m)^perfalloc: counters released by pmdaperfevent \(pid %d\) after \d+\.\d ms$`, agent))
		if r.Err != nil || !confirm.MatchString(r.Stderr) {
			t.Errorf("--verbose: stderr %q, want the confirmation naming the agent's pid %d", r.Stderr, agent)
		}
		waitActive(t, l, want)
	})

	t.Run("daemon", func(t *testing.T) {
		r := l.Exec(Cmd{Args: []string{pa, "-d", "--print-pid", "--verbose", "-f", l.Lock}})
		if r.Err != nil {
			t.Fatalf("perfalloc -d:\n%s", r)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(r.Stdout))
		if err != nil {
			t.Fatalf("perfalloc -d printed %q, want the background pid", r.Stdout)
		}
		t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
		if !strings.Contains(r.Stderr, fmt.Sprintf("counters released by pmdaperfevent (pid %d)", agent)) {
			t.Errorf("perfalloc -d stderr lacks the confirmation:\n%s", r)
		}
		if got := active(t, l); got != 0 {
			t.Errorf("perfevent.active = %d while the -d child %d holds the lock", got, pid)
		}
		syscall.Kill(pid, syscall.SIGINT)
		waitActive(t, l, want)
	})

	t.Run("killed", func(t *testing.T) {
		h := startHolder(t, l, pa, "-D", "--verbose", "-f", l.Lock)
		h.waitStderr(t, "counters released by", Settle)
		if got := active(t, l); got != 0 {
			t.Fatalf("perfevent.active = %d while reserved", got)
		}
		reopened := logCount(l, countingAgain)
		if code := h.stop(t, syscall.SIGKILL); code != 128+int(syscall.SIGKILL) {
			t.Errorf("perfalloc after SIGKILL: status %d", code)
		}
		// The kernel drops a dead process's locks; the agent must notice,
		// once. (A fetch can count before the agent has logged it.)
		waitActive(t, l, want)
		waitValuesMove(t, l, "perfevent.hwcounters.cpu_clock.value")
		waitLogCount(t, l, countingAgain, reopened+1)
	})

	t.Run("c-perfalloc", func(t *testing.T) {
		if _, err := os.Stat(CPerfalloc); err != nil {
			unmet(t, "needs the C perfalloc %s (Debian's pcp package): %v", CPerfalloc, err)
		}
		h := startHolder(t, l, CPerfalloc, "-D", "-f", l.Lock)
		waitActive(t, l, 0)
		waitLog(t, l, fmt.Sprintf("counters released for perfalloc (holders %d)", h.pid()), Settle)
		frozen := waitValues(t, l, "perfevent.hwcounters.cpu_clock.value")
		time.Sleep(150 * time.Millisecond)
		if again := waitValues(t, l, "perfevent.hwcounters.cpu_clock.value"); !slicesEqual(frozen, again) {
			t.Errorf("cpu_clock moved while C perfalloc held the lock: %v, then %v", frozen, again)
		}
		if code := h.stop(t, syscall.SIGINT); code != 0 {
			t.Errorf("C perfalloc -D after SIGINT: exit %d, want 0", code)
		}
		waitActive(t, l, want)
	})
}

// Our perfalloc against the C agent: the lock works, the release cannot
// be confirmed (the C agent writes no state), and perfalloc says so.
func TestPerfallocCAgent(t *testing.T) {
	l := StartLab(t, Agent{Go: false})
	pa := perfallocBinary(t, l)
	want := activeAll(t, l)
	// The C agent polls every 100 ms: give it a second from inside.
	script := `for i in $(seq 40); do v=$(pmprobe -v perfevent.active); case "$v" in *" 1 0") break;; esac; sleep 0.025; done; echo "$v"; exit 5`
	r := l.Exec(Cmd{Args: []string{pa, "-f", l.Lock, "--", "sh", "-c", script}})
	if code := exitCode(r.Err); code != 5 {
		t.Errorf("exit %d, want the command's 5:\n%s", code, r)
	}
	if got := strings.TrimSpace(r.Stdout); got != "perfevent.active 1 0" {
		t.Errorf("the C agent did not release its counters for our perfalloc within 1 s: %q\n%s", got, r)
	}
	// The C perfalloc says nothing here either: the lock is held.
	if r.Stderr != "" {
		t.Errorf("stderr %q, want nothing", r.Stderr)
	}
	waitActive(t, l, want)
	r = l.Exec(Cmd{Args: []string{pa, "--verbose", "-f", l.Lock, "--", "true"}})
	wantMsg := fmt.Sprintf("perfalloc: lock held; no state from the agent at %s, cannot confirm the release (the C pmdaperfevent does not report it)\n", filepath.Join(l.Lock+".d", "state"))
	if !strings.Contains(r.Stderr, wantMsg) {
		t.Errorf("--verbose stderr:\n%q\nwant\n%q", r.Stderr, wantMsg)
	}
	waitActive(t, l, want)

	for _, mode := range []string{"--status", "--ping"} {
		r := l.Exec(Cmd{Args: []string{pa, "-f", l.Lock, mode}})
		if exitCode(r.Err) != 1 || !strings.Contains(r.Stderr, "the agent is not running, or it is the C pmdaperfevent, which writes none") || r.Stdout != "" {
			t.Errorf("perfalloc %s against the C agent: want exit 1 and the reason:\n%s", mode, r)
		}
	}
}

// A lock file that is a symbolic link, unreadable, or missing: a clear
// error naming the file, status 1, and the command never runs (C perfalloc
// runs it silently without a reservation).
func TestPerfallocBadLockFile(t *testing.T) {
	l := StartLab(t, Agent{Go: true})
	pa := perfallocBinary(t, l)
	want := activeAll(t, l)
	dir := filepath.Join(l.Dir, "bad")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(l.Lock, link); err != nil {
		t.Fatal(err)
	}
	locked := filepath.Join(dir, "mode000")
	if err := os.WriteFile(locked, nil, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(locked, 0); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	nodir := filepath.Join(dir, "nodir", "perflock")
	nobody := asNobody(t)

	for _, c := range []struct {
		name string
		pre  []string
		file string
		want string
	}{
		{"symlink", nil, link, "perfalloc: lock file " + link + " is a symbolic link: refusing to follow it"},
		{"mode000-nobody", nobody, locked, "perfalloc: lock file " + locked + ": permission denied (mode 0000, owner uid 0)"},
		{"missing", nil, missing, "perfalloc: lock file " + missing + " does not exist: is pmdaperfevent running?"},
		{"missing-dir", nil, nodir, "perfalloc: lock file " + nodir + " does not exist, nor does its directory " + filepath.Dir(nodir)},
	} {
		t.Run(c.name, func(t *testing.T) {
			ran := filepath.Join(t.TempDir(), "ran")
			for _, args := range [][]string{
				{"-D", "-f", c.file},
				{"-d", "-f", c.file},
				{"-f", c.file, "--", "touch", ran},
			} {
				r := l.Exec(Cmd{Args: append(append(c.pre, pa), args...)})
				if exitCode(r.Err) != 1 || !strings.HasPrefix(r.Stderr, c.want) || r.Stdout != "" {
					t.Errorf("want exit 1 and stderr starting %q:\n%s", c.want, r)
				}
				if _, err := os.Stat(ran); err == nil {
					t.Errorf("the command ran without a reservation:\n%s", r)
				}
			}
			if got := active(t, l); got != want {
				t.Errorf("perfevent.active = %d after a failed perfalloc, want %d", got, want)
			}
		})
	}
}

// asNobody is the start of a command line that runs the rest as the user
// nobody, for what root's privileges would hide.
func asNobody(t testing.TB) []string {
	t.Helper()
	if _, err := exec.LookPath("setpriv"); err != nil {
		unmet(t, "needs setpriv (util-linux) to run perfalloc as nobody")
	}
	if _, err := user.Lookup("nobody"); err != nil {
		unmet(t, "needs the user nobody: %v", err)
	}
	return []string{"setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"}
}

// perfallocBinary is the perfalloc under test: the repository's
// bin/perfalloc, or $PERFEVENT_QA_PERFALLOC.
func perfallocBinary(t testing.TB, l *Lab) string {
	t.Helper()
	bin := os.Getenv("PERFEVENT_QA_PERFALLOC")
	if bin == "" {
		bin = filepath.Join(l.env.Repo, "bin", "perfalloc")
	}
	if _, err := os.Stat(bin); err != nil {
		unmet(t, "needs the perfalloc binary %s (make build)", bin)
	}
	return bin
}

// probe fetches one metric through the lab's pmcd and returns its values
// (pmprobe -v), or why there are none.
func probe(t testing.TB, l *Lab, metric string) ([]string, error) {
	t.Helper()
	r := l.RunErr(t, "pmprobe", "-v", metric)
	if r.Err != nil {
		return nil, fmt.Errorf("%s", r)
	}
	f := strings.Fields(r.Stdout)
	if len(f) < 2 || f[0] != metric {
		return nil, fmt.Errorf("pmprobe -v %s: unexpected output %q", metric, r.Stdout)
	}
	n, err := strconv.Atoi(f[1])
	switch {
	case err != nil:
		return nil, fmt.Errorf("pmprobe -v %s: unexpected output %q", metric, r.Stdout)
	case n < 0:
		return nil, fmt.Errorf("pmprobe -v %s: %s", metric, strings.Join(f[2:], " "))
	case n == 0:
		return nil, fmt.Errorf("pmprobe -v %s: no values", metric)
	case len(f) != 2+n:
		return nil, fmt.Errorf("pmprobe -v %s: %d values announced in %q", metric, n, r.Stdout)
	}
	return f[2:], nil
}

// active is perfevent.active, the number of open counters.
func active(t testing.TB, l *Lab) int {
	t.Helper()
	v, err := probe(t, l, "perfevent.active")
	if err != nil {
		t.Fatalf("%v\n%s", err, l.Logs())
	}
	n, err := strconv.Atoi(v[0])
	if err != nil {
		t.Fatalf("perfevent.active: %q", v)
	}
	return n
}

// activeAll is perfevent.active once the agent has opened what it can,
// which must be something.
func activeAll(t testing.TB, l *Lab) int {
	t.Helper()
	n := active(t, l)
	if n <= 0 {
		t.Fatalf("perfevent.active = %d at the start\n%s", n, l.Logs())
	}
	return n
}

// waitActive polls perfevent.active until it is want (the agents poll the
// lock every 100 ms), for up to Settle.
func waitActive(t testing.TB, l *Lab, want int) {
	t.Helper()
	var got int
	if !testwait.Until(Settle, func() bool { got = active(t, l); return got == want }) {
		t.Fatalf("perfevent.active = %d after %v, want %d\n%s", got, Settle, want, l.Logs())
	}
}

// waitValues returns the values of a metric, waiting briefly for some.
func waitValues(t testing.TB, l *Lab, metric string) []string {
	t.Helper()
	var v []string
	var err error
	if !testwait.Until(Settle, func() bool { v, err = probe(t, l, metric); return err == nil }) {
		t.Fatalf("no values for %s within %v: %v\n%s", metric, Settle, err, l.Logs())
	}
	return v
}

// waitValuesMove waits until two fetches of a counter differ and the later
// one is larger on every CPU.
func waitValuesMove(t testing.TB, l *Lab, metric string) {
	t.Helper()
	prev := waitValues(t, l, metric)
	var last []string
	if !testwait.Until(Settle, func() bool {
		cur := waitValues(t, l, metric)
		last, prev = prev, cur
		return valuesGrew(last, cur)
	}) {
		t.Fatalf("%s does not count: %v, then %v\n%s", metric, last, prev, l.Logs())
	}
}

// valuesGrew reports whether every value of b is larger than the same
// instance's in a (pmprobe lists instances in the same order each time).
func valuesGrew(a, b []string) bool {
	if len(a) != len(b) || len(a) == 0 {
		return false
	}
	for i := range a {
		x, err1 := strconv.ParseUint(a[i], 10, 64)
		y, err2 := strconv.ParseUint(b[i], 10, 64)
		if err1 != nil || err2 != nil || y <= x {
			return false
		}
	}
	return true
}

// valuesAtLeast reports whether no value of b is below the same
// instance's in a.
func valuesAtLeast(a, b []string) bool {
	if len(a) != len(b) || len(a) == 0 {
		return false
	}
	for i := range a {
		x, err1 := strconv.ParseUint(a[i], 10, 64)
		y, err2 := strconv.ParseUint(b[i], 10, 64)
		if err1 != nil || err2 != nil || y < x {
			return false
		}
	}
	return true
}

func slicesEqual(a, b []string) bool {
	return strings.Join(a, " ") == strings.Join(b, " ")
}

// logCount counts the lines of the agent's log that contain s.
func logCount(l *Lab, s string) int {
	data, _ := os.ReadFile(l.AgentLog)
	n := 0
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, s) {
			n++
		}
	}
	return n
}

// waitLog waits until the agent's log has a line containing s and returns
// that line.
func waitLog(t testing.TB, l *Lab, s string, timeout time.Duration) string {
	t.Helper()
	var found string
	if !testwait.Until(timeout, func() bool {
		data, _ := os.ReadFile(l.AgentLog)
		for _, line := range strings.Split(string(data), "\n") {
			if strings.Contains(line, s) {
				found = line
				return true
			}
		}
		return false
	}) {
		t.Fatalf("the agent's log has no line with %q within %v\n%s", s, timeout, l.Logs())
	}
	return found
}

// exitCode is a command's exit status from Result.Err: 0 for nil, 128+N
// for a signal, -1 when it did not run.
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return -1
}

// holder is a perfalloc (or anything else) running in the background in
// the lab's client environment, with its stderr in a file.
type holder struct {
	cmd  *exec.Cmd
	errf string
	done chan struct{}
}

func startHolder(t testing.TB, l *Lab, name string, args ...string) *holder {
	t.Helper()
	errf := filepath.Join(t.TempDir(), "stderr")
	f, err := os.Create(errf)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(name, args...)
	cmd.Env = l.Environ()
	cmd.Stderr = f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	h := &holder{cmd: cmd, errf: errf, done: make(chan struct{})}
	go func() { cmd.Wait(); close(h.done) }()
	t.Cleanup(func() {
		select {
		case <-h.done:
		default:
			cmd.Process.Kill()
			<-h.done
		}
	})
	return h
}

func (h *holder) pid() int { return h.cmd.Process.Pid }

func (h *holder) stderr() string {
	data, _ := os.ReadFile(h.errf)
	return string(data)
}

// waitStderr waits until the holder's stderr contains s.
func (h *holder) waitStderr(t testing.TB, s string, timeout time.Duration) {
	t.Helper()
	if !testwait.Until(timeout, func() bool {
		if strings.Contains(h.stderr(), s) {
			return true
		}
		select {
		case <-h.done:
			t.Fatalf("%s exited (%v) without saying %q; stderr:\n%s", h.cmd.Path, h.cmd.ProcessState, s, h.stderr())
		default:
		}
		return false
	}) {
		t.Fatalf("%s did not say %q within %v; stderr:\n%s", h.cmd.Path, s, timeout, h.stderr())
	}
}

// stop signals the holder, waits for it and returns its exit status
// (128+N after signal N).
func (h *holder) stop(t testing.TB, sig syscall.Signal) int {
	t.Helper()
	h.cmd.Process.Signal(sig)
	select {
	case <-h.done:
	case <-time.After(Settle):
		t.Fatalf("%s pid %d still runs %v after %v", h.cmd.Path, h.pid(), Settle, sig)
	}
	ws := h.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// What scripts written for the C tools do, under a lab pmcd: check the
// version, reserve from cron with -d (which must print nothing, or cron
// mails it), run a command with -d still on the line, and reload the agent
// with SIGHUP, which a pmie rule on perfevent.active == 0 must not see as
// a reservation.
func TestPerfallocScripts(t *testing.T) {
	l := StartLab(t, Agent{Go: true})
	pa := perfallocBinary(t, l)
	want := activeAll(t, l)

	ctx, cancel := context.WithTimeout(t.Context(), Settle)
	defer cancel()
	v := exec.CommandContext(ctx, pa, "-v", "-f", l.Lock)
	v.Env = l.Environ()
	var vout, verr strings.Builder
	v.Stdout, v.Stderr = &vout, &verr
	if err := v.Run(); ctx.Err() != nil {
		t.Fatalf("perfalloc -v still ran after %v: it took the lock instead of printing the version", Settle)
	} else if err != nil || !regexp.MustCompile(`^perfalloc \d+\.\d+\.\d+\n$`).MatchString(vout.String()) || verr.String() != "" {
		t.Errorf("perfalloc -v: %v, stdout %q, stderr %q", err, vout.String(), verr.String())
	}
	if got := active(t, l); got != want {
		t.Errorf("perfevent.active = %d after perfalloc -v, want %d", got, want)
	}

	r := l.Exec(Cmd{Args: []string{pa, "-d", "-f", l.Lock}})
	if r.Err != nil || r.Stdout != "" || r.Stderr != "" {
		t.Fatalf("perfalloc -d, as from cron: want silence and status 0:\n%s", r)
	}
	out := l.Run(t, pa, "-f", l.Lock, "--status")
	m := regexp.MustCompile(`(?m)^holders: +(\d+)$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("perfalloc --status after -d names no single holder:\n%s", out)
	}
	pid, _ := strconv.Atoi(m[1])
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	if got := active(t, l); got != 0 {
		t.Errorf("perfevent.active = %d while perfalloc -d (pid %d) holds the counters", got, pid)
	}
	syscall.Kill(pid, syscall.SIGTERM)
	waitActive(t, l, want)

	r = l.Exec(Cmd{Args: []string{pa, "-d", "-f", l.Lock, "--", "sh", "-c", "exit 4"}})
	if code := exitCode(r.Err); code != 4 || r.Stdout != "" || r.Stderr != "" {
		t.Errorf("perfalloc -d with a command: exit %d, want the command's 4 and silence:\n%s", code, r)
	}
	waitActive(t, l, want)

	reloads := logCount(l, "reload done")
	syscall.Kill(l.AgentPID(t), syscall.SIGHUP)
	if !testwait.Until(Settle, func() bool { return logCount(l, "reload done") != reloads }) {
		t.Fatalf("no reload within %v of SIGHUP\n%s", Settle, l.Logs())
	}
	if got := active(t, l); got != want {
		t.Errorf("perfevent.active = %d on the first fetch after a SIGHUP reload, want %d: no perfalloc ran", got, want)
	}
}
