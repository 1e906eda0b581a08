package main

import (
	"bufio"
	"bytes"
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

	"golang.org/x/sys/unix"

	"perfevent/internal/emulator"
	"perfevent/internal/release"
	"perfevent/internal/reservation"
	"perfevent/internal/reservation/lockwatch"
	"perfevent/internal/reservation/reservationtest"
	"perfevent/internal/testexec"
	"perfevent/internal/testneed"
	"perfevent/internal/testwait"
)

// binary is perfalloc built once for all CLI tests, in a directory every
// user may enter (the permission test runs it as nobody).
var binary string

func TestMain(m *testing.M) {
	reservationtest.Main(nil)
	os.Exit(buildAndRun(m))
}

func buildAndRun(m *testing.M) int {
	dir, err := os.MkdirTemp("", "perfalloc-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	binary = filepath.Join(dir, "perfalloc")
	if err := testexec.Build(".", binary); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	// Orphans of -d come back to us, so the tests can reap them.
	unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	return m.Run()
}

type result struct {
	stdout, stderr string
	rc             int
}

func perfalloc(t testing.TB, env []string, args ...string) result {
	t.Helper()
	cmd, lim := child(t, binary, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	ended(t, cmd, lim, out.String(), errb.String())
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return result{out.String(), errb.String(), cmd.ProcessState.ExitCode()}
}

// childBound is how long a process a test starts may run. Every one here
// ends within a second when all is well, and within a few under qemu-user;
// the bound is for one that would not end at all, which must fail the test
// that started it, and say what it ran, rather than hang the whole binary
// until go test's timeout. reportMargin is what is kept of the test's
// deadline to kill and report in, when that comes sooner.
//
// Under qemu-user (make cross) that does happen now and then, and it is
// the emulator's: perfalloc forks to run its command, and the emulator's
// copy of itself in the child sometimes deadlocks before the exec (both
// its threads waiting on a futex, every signal blocked), so perfalloc
// waits for an exec that never comes. Any command is hit, "false" as well
// as "kill -KILL $$". The same fork in the test binary, which is emulated
// too, would hang in Start, before a bound applies; only go test's
// timeout ends that.
const (
	childBound   = 60 * time.Second
	reportMargin = 2 * time.Second
)

// bound is the limit child put on one process.
type bound struct {
	ctx context.Context
	d   time.Duration
	why string
}

// child is exec.Command for a process that test t waits for, bounded by
// childBound or, sooner, by the test's deadline less reportMargin. It runs
// in a process group of its own, killed whole on expiry: the command
// perfalloc runs, and a grandchild holding our pipes, go too.
func child(t testing.TB, name string, args ...string) (*exec.Cmd, bound) {
	t.Helper()
	b := bound{d: childBound, why: "the bound of a child"}
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if dl, ok := d.Deadline(); ok {
			if left := time.Until(dl) - reportMargin; left > 0 && left < b.d {
				b.d, b.why = left, fmt.Sprintf("%v before the test's deadline", reportMargin)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.d)
	t.Cleanup(cancel)
	b.ctx = ctx
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return unix.Kill(-cmd.Process.Pid, unix.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second // for pipes a survivor outside the group holds
	return cmd, b
}

// ended fails t if cmd, started by child within b, had to be killed,
// naming the command, its arguments and what it printed before.
func ended(t testing.TB, cmd *exec.Cmd, b bound, stdout, stderr string) {
	t.Helper()
	if b.ctx.Err() == nil {
		return
	}
	t.Fatalf("%q was still running after %v (%s), so its process group was killed; stdout so far %q, stderr so far %q",
		cmd.Args, b.d.Round(time.Millisecond), b.why, stdout, stderr)
}

// lockFile creates a lock file as the agent would and returns its path.
func lockFile(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "perflock")
	lf, err := reservation.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	lf.Close()
	return path
}

func noState(path string) string {
	return "perfalloc: lock held; no state from the agent at " + reservation.StatePath(path) + ", cannot confirm the release (the C pmdaperfevent does not report it)\n"
}

// -v is the C perfalloc's version option: it prints one line and exits at
// once, even with a usable lock file, where taking the lock would hold the
// counters until a signal.
func TestVersion(t *testing.T) {
	lock := lockFile(t)
	for _, args := range [][]string{{"-v", "-f", lock}, {"--version"}, {"-Dv"}} {
		cmd, lim := child(t, binary, args...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		ended(t, cmd, lim, out.String(), errb.String())
		if err != nil || out.String() != "perfalloc "+release.Version+"\n" || errb.String() != "" {
			t.Errorf("%q: %v, stdout %q, stderr %q", args, err, out.String(), errb.String())
		}
	}
	if st := reserved(t, lock); st.Reserved {
		t.Errorf("perfalloc -v took the lock: %+v", st)
	}
}

func TestHelp(t *testing.T) {
	for _, arg := range []string{"-h", "--help"} {
		r := perfalloc(t, []string{"PCP_PMDAS_DIR=/opt/pmdas"}, arg)
		if r.rc != 0 || r.stderr != "" || !strings.HasPrefix(r.stdout, "Usage: perfalloc [options] [command [argument ...]]\n") ||
			!strings.Contains(r.stdout, "(default /opt/pmdas/perfevent/perflock)") {
			t.Errorf("%s: %+v", arg, r)
		}
	}
}

func TestBadOption(t *testing.T) {
	for arg, want := range map[string]string{"-x": "perfalloc: unknown option -x\n", "--bogus": "perfalloc: unknown option --bogus\n"} {
		r := perfalloc(t, nil, arg)
		if r.rc != 1 || r.stdout != "" || !strings.HasPrefix(r.stderr, want+"Usage: perfalloc") {
			t.Errorf("%s: %+v", arg, r)
		}
	}
}

func TestLockFileErrors(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "perflock")
	r := perfalloc(t, nil, "-f", missing)
	if want := "perfalloc: lock file " + missing + " does not exist: is pmdaperfevent running? (it creates the lock file)\n"; r.rc != 1 || r.stderr != want {
		t.Errorf("missing file: %+v\nwant %q", r, want)
	}
	r = perfalloc(t, []string{"PCP_PMDAS_DIR=" + dir})
	if want := "perfalloc: lock file " + dir + "/perfevent/perflock does not exist, nor does its directory " + dir + "/perfevent: check -f or $PCP_PMDAS_DIR\n"; r.rc != 1 || r.stderr != want {
		t.Errorf("default path in a missing directory: %+v\nwant %q", r, want)
	}
	// An unreadable pcp.conf may give the wrong default: say so.
	r = perfalloc(t, []string{"PCP_CONF=" + dir, "PCP_PMDAS_DIR=" + dir})
	if want := "perfalloc: warning: " + dir + ": is a directory after 0 settings; the environment and defaults stand in for the rest; using the lock file " + dir + "/perfevent/perflock\n"; r.rc != 1 || !strings.HasPrefix(r.stderr, want) {
		t.Errorf("unreadable pcp.conf: %+v\nwant %q first", r, want)
	}
	t.Run("daemon", func(t *testing.T) {
		skipDaemon(t)
		r := perfalloc(t, nil, "-d", "-f", missing)
		if r.rc != 1 || r.stdout != "" || !strings.Contains(r.stderr, "does not exist: is pmdaperfevent running?") {
			t.Errorf("-d with a missing file: %+v", r)
		}
	})

	link := filepath.Join(dir, "link")
	os.Symlink(lockFile(t), link)
	r = perfalloc(t, nil, "-f", link, "true")
	if want := "perfalloc: lock file " + link + " is a symbolic link: refusing to follow it (pmdaperfevent creates a regular file)\n"; r.rc != 1 || r.stderr != want {
		t.Errorf("symlink: %+v\nwant %q", r, want)
	}

	// A write lock (which neither agent takes) cannot be shared.
	held := lockFile(t)
	h := reservationtest.Start(t, held, "write")
	r = perfalloc(t, nil, "-f", held, "true")
	if want := fmt.Sprintf("perfalloc: lock file %s: process %d holds a write lock on it, so the counters cannot be reserved now; try again later\n", held, h.PID()); r.rc != 1 || r.stderr != want {
		t.Errorf("write-locked: %+v\nwant %q", r, want)
	}
}

func TestLockFileAsNobody(t *testing.T) {
	testneed.Root(t, "to run perfalloc as nobody")
	dir := t.TempDir()
	path := filepath.Join(dir, "perflock")
	os.WriteFile(path, nil, 0)
	os.Chmod(path, 0)
	asNobody := func() (string, int) {
		cmd, lim := child(t, binary, "-f", path, "true")
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: 65534, Gid: 65534}
		out, _ := cmd.CombinedOutput()
		ended(t, cmd, lim, string(out), "")
		return string(out), cmd.ProcessState.ExitCode()
	}
	// t.TempDir's parent is private: nobody cannot even look.
	want := "perfalloc: lock file " + path + ": permission denied: cannot reach it (check the directories on its path)\n"
	if out, rc := asNobody(); rc != 1 || out != want {
		t.Errorf("unreachable: rc %d %q\nwant %q", rc, out, want)
	}
	os.Chmod(filepath.Dir(dir), 0o755)
	os.Chmod(dir, 0o755)
	want = "perfalloc: lock file " + path + ": permission denied (mode 0000, owner uid 0): pmdaperfevent creates it readable by everyone (0644), so ask the administrator to restore that\n"
	if out, rc := asNobody(); rc != 1 || out != want {
		t.Errorf("mode 0000: rc %d %q\nwant %q", rc, out, want)
	}
	// The agent's mode: any user may reserve the counters.
	os.Chmod(path, reservation.LockMode)
	if out, rc := asNobody(); rc != 0 || out != "" {
		t.Errorf("mode 0644: rc %d %q", rc, out)
	}
}

func TestCommandStatus(t *testing.T) {
	lock := lockFile(t)
	for _, tc := range []struct {
		args []string
		rc   int
	}{
		{[]string{"sh", "-c", "exit 7"}, 7},
		{[]string{"false"}, 1},
		{[]string{"sh", "-c", "kill -KILL $$"}, 128 + 9},
	} {
		r := perfalloc(t, nil, append([]string{"-f", lock}, tc.args...)...)
		if r.rc != tc.rc || r.stderr != "" || r.stdout != "" {
			t.Errorf("%q: %+v, want rc %d", tc.args, r, tc.rc)
		}
	}
}

func TestCommandCannotRun(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "perflock") // resolved before the lock is taken
	r := perfalloc(t, nil, "-f", missing, "no-such-command-perfalloc")
	if r.rc != 127 || r.stderr != "perfalloc: no-such-command-perfalloc: command not found\n" {
		t.Errorf("not found: %+v", r)
	}
	r = perfalloc(t, nil, "-f", missing, filepath.Join(dir, "nothing"))
	if r.rc != 127 || r.stderr != "perfalloc: "+filepath.Join(dir, "nothing")+": no such file or directory\n" {
		t.Errorf("no such path: %+v", r)
	}
	script := filepath.Join(dir, "script")
	os.WriteFile(script, []byte("#!/bin/sh\n"), 0o644)
	r = perfalloc(t, nil, "-f", missing, script)
	if r.rc != 126 || r.stderr != "perfalloc: "+script+": permission denied\n" {
		t.Errorf("not executable: %+v", r)
	}
}

// The C perfalloc started the command before its child took the lock. Ours
// must hold it already when the command starts: the command looks for it
// in /proc/locks from its own process.
func TestCommandRunsUnderTheLock(t *testing.T) {
	lock := lockFile(t)
	cmd, lim := child(t, binary, "-f", lock, "cat", "/proc/locks")
	out, err := cmd.Output()
	ended(t, cmd, lim, string(out), "")
	if err != nil {
		t.Fatal(err)
	}
	locks, err := reservation.ParseProcLocks(bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(lock, &st); err != nil {
		t.Fatal(err)
	}
	holders := reservation.HoldersOf(locks, st.Dev, st.Ino)
	if len(holders) != 1 || holders[0] != cmd.Process.Pid {
		t.Errorf("holders of %s (device %d:%d, inode %d) while the command ran: %v, want perfalloc's pid %d; /proc/locks then:\n%s",
			lock, unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino, holders, cmd.Process.Pid, out)
	}
}

func startPerfalloc(t *testing.T, args ...string) (cmd *exec.Cmd, stdout, stderr *bufio.Reader) {
	t.Helper()
	// A test reads these pipes until it sees what it waits for: the
	// bound's kill closes them, and the test fails on the early EOF.
	cmd, _ = child(t, binary, args...)
	outPipe, _ := cmd.StdoutPipe()
	errPipe, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd, bufio.NewReader(outPipe), bufio.NewReader(errPipe)
}

func TestSignalForwarded(t *testing.T) {
	lock := lockFile(t)
	cmd, out, _ := startPerfalloc(t, "--no-wait", "-f", lock, "sh", "-c", "echo ready; exec sleep 10")
	if line, _ := out.ReadString('\n'); line != "ready\n" {
		t.Fatalf("command: %q", line)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()
	if rc := cmd.ProcessState.ExitCode(); rc != 128+15 {
		t.Errorf("exit status %d, want 143 (the command died of the forwarded SIGTERM)", rc)
	}
}

func reserved(t *testing.T, lock string) reservation.Status {
	t.Helper()
	lf, err := reservation.Open(lock)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	st, err := lf.Check()
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// waitFree waits until nobody holds the lock.
func waitFree(t *testing.T, lock string) {
	t.Helper()
	testwait.Eventually(t, testwait.Settle, "nobody to hold "+lock, func() bool { return !reserved(t, lock).Reserved })
}

func TestForegroundReleasesOnSignal(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGHUP, syscall.SIGTERM} {
		lock := lockFile(t)
		cmd, _, stderr := startPerfalloc(t, "--verbose", "-f", lock)
		for {
			line, err := stderr.ReadString('\n')
			if err != nil {
				t.Fatalf("perfalloc --verbose ended before holding the lock: %v", err)
			}
			if strings.HasPrefix(line, "perfalloc: holding the lock") {
				break
			}
		}
		if st := reserved(t, lock); !st.Reserved || len(st.Holders) != 1 || st.Holders[0] != cmd.Process.Pid {
			t.Fatalf("holding: %+v", st)
		}
		cmd.Process.Signal(sig)
		cmd.Wait()
		if rc := cmd.ProcessState.ExitCode(); rc != 0 {
			t.Errorf("%v: exit status %d, want 0", sig, rc)
		}
		waitFree(t, lock)
	}
}

// stopDaemon ends a background perfalloc and checks that it released the
// lock and exited 0.
func stopDaemon(t *testing.T, pid int, lock string) {
	t.Helper()
	unix.Kill(pid, syscall.SIGTERM)
	var ws unix.WaitStatus
	if _, err := unix.Wait4(pid, &ws, 0, nil); err != nil || ws.ExitStatus() != 0 {
		t.Errorf("background process: %v, status %v", err, ws)
	}
	waitFree(t, lock)
}

// skipDaemon skips a test of -d where perfalloc cannot start itself
// again: it does so from os.Executable, and under qemu-user that is a
// foreign binary, which the host kernel cannot execute.
func skipDaemon(t *testing.T) {
	t.Helper()
	emulator.Skip(t, "perfalloc -d re-executes itself, a foreign binary to the host kernel")
}

func TestDaemon(t *testing.T) {
	skipDaemon(t)
	lock := lockFile(t)
	// As the C perfalloc -d: silent, so that cron mails nothing.
	r := perfalloc(t, nil, "-d", "-f", lock)
	st := reserved(t, lock)
	if len(st.Holders) == 1 {
		t.Cleanup(func() { unix.Kill(st.Holders[0], syscall.SIGKILL) })
	}
	if r.rc != 0 || r.stdout != "" || r.stderr != "" || !st.Reserved || len(st.Holders) != 1 {
		t.Fatalf("-d: %+v; lock %+v", r, st)
	}
	stopDaemon(t, st.Holders[0], lock)

	r = perfalloc(t, nil, "-d", "--print-pid", "--verbose", "-f", lock)
	pid, err := strconv.Atoi(strings.TrimSpace(r.stdout))
	if err == nil && pid > 0 {
		// Whatever fails below, the background perfalloc must not outlive
		// the test.
		t.Cleanup(func() { unix.Kill(pid, syscall.SIGKILL) })
	}
	if r.rc != 0 || err != nil || !strings.Contains(r.stderr, noState(lock)) {
		t.Fatalf("-d --print-pid --verbose: %+v", r)
	}
	if st := reserved(t, lock); !st.Reserved || len(st.Holders) != 1 || st.Holders[0] != pid {
		t.Errorf("after -d: %+v, want held by %d", st, pid)
	}
	if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); string(comm) != "perfalloc\n" {
		t.Errorf("the background process is called %q", comm)
	}
	stopDaemon(t, pid, lock)

	// With a command the C perfalloc ignores -d, and so does this one.
	r = perfalloc(t, nil, "-d", "-f", lock, "sh", "-c", "exit 4")
	if r.rc != 4 || r.stdout != "" || r.stderr != "" {
		t.Errorf("-d with a command: %+v, want the command's status 4", r)
	}
}

// fakeAgent does what the agent does with the reservation package: watch
// the lock and report in the state file.
func fakeAgent(t testing.TB, lock string, watch bool) *reservation.StateFile {
	t.Helper()
	emulator.SkipOwnStartTime(t)
	lf, err := reservation.Open(lock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lf.Close() })
	sf, err := reservation.NewStateFile(reservation.StatePath(lock), reservation.State{
		Program: "fakeagent", Config: "/etc/fake.conf", LockFile: lock, Counters: reservation.CountersOpen,
		Events: []reservation.EventState{{Name: "perf:cpu_clock", State: reservation.EventCounting, CPUs: 2}},
	}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sf.Close() })
	if !watch {
		return sf
	}
	w, err := lockwatch.Watch(lf, lockwatch.Options{}, func(st reservation.Status) {
		sf.Update(func(s *reservation.State) {
			s.Counters, s.Events[0].State = reservation.CountersOpen, reservation.EventCounting
			if st.Reserved {
				s.Counters, s.Events[0].State = reservation.CountersReleased, reservation.EventReleased
			}
			s.Holders, s.Since = st.Holders, st.Since
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return sf
}

var confirmed = regexp.MustCompile(`(?m)^perfalloc: counters released by fakeagent \(pid (\d+)\) after (\d+\.\d) ms$`)

func TestConfirmation(t *testing.T) {
	lock := lockFile(t)
	fakeAgent(t, lock, true)
	r := perfalloc(t, nil, "--verbose", "-f", lock, "sh", "-c", "exit 3")
	m := confirmed.FindStringSubmatch(r.stderr)
	if r.rc != 3 || m == nil || m[1] != strconv.Itoa(os.Getpid()) {
		t.Errorf("command mode: %+v", r)
	}
	// Confirmed, and quiet about it unless asked.
	if r := perfalloc(t, nil, "-f", lock, "sh", "-c", "exit 3"); r.rc != 3 || r.stderr != "" || r.stdout != "" {
		t.Errorf("command mode without --verbose: %+v", r)
	}

	// -d confirms in the child, for the child's pid, before the parent
	// reports success.
	r = perfalloc(t, nil, "-d", "--print-pid", "--verbose", "-f", lock)
	pid, _ := strconv.Atoi(strings.TrimSpace(r.stdout))
	if pid > 0 {
		t.Cleanup(func() { unix.Kill(pid, syscall.SIGKILL) })
	}
	if r.rc != 0 || pid == 0 || !confirmed.MatchString(r.stderr) {
		t.Errorf("-d: %+v", r)
	}
	if s, err := reservation.ReadState(reservation.StatePath(lock)); err != nil || !s.HeldBy(pid) || s.Counters != reservation.CountersReleased {
		t.Errorf("state after -d: %+v %v", s, err)
	}
	// A second user joins while the first holds the lock: the counters are
	// already released, but the confirmation waits for its own pid.
	if r := perfalloc(t, nil, "--verbose", "-f", lock, "true"); r.rc != 0 || !confirmed.MatchString(r.stderr) {
		t.Errorf("second holder: %+v", r)
	}
	// Never kill(0, ...): that would be the test's whole process group.
	if pid > 0 {
		unix.Kill(pid, syscall.SIGTERM)
		unix.Wait4(pid, nil, 0, nil)
	}
	waitFree(t, lock)
}

func TestConfirmationTimeout(t *testing.T) {
	lock := lockFile(t)
	fakeAgent(t, lock, false) // alive, but never releases
	marker := filepath.Join(t.TempDir(), "ran")
	r := perfalloc(t, nil, "--timeout", "50ms", "-f", lock, "touch", marker)
	want := fmt.Sprintf("perfalloc: fakeagent (pid %d) is running but did not release the counters within 50ms (%s: counters open, holders []); releasing the lock\n", os.Getpid(), reservation.StatePath(lock))
	if r.rc != 1 || r.stderr != want {
		t.Errorf("got %+v\nwant %q", r, want)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the command ran without a confirmed release")
	}
	waitFree(t, lock)

	// -d fails the same way, in the parent, before detaching anything.
	r = perfalloc(t, nil, "-d", "--timeout", "50ms", "-f", lock)
	if r.rc != 1 || r.stdout != "" || r.stderr != want {
		t.Errorf("-d: got %+v\nwant %q", r, want)
	}
	waitFree(t, lock)

	// --no-wait does not ask, nor does --timeout 0.
	for _, wait := range [][]string{{"--no-wait"}, {"--timeout", "0"}} {
		if r := perfalloc(t, nil, append(wait, "-f", lock, "true")...); r.rc != 0 || r.stderr != "" {
			t.Errorf("%q: %+v", wait, r)
		}
	}
}

func deadPID(t *testing.T) int {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

func TestConfirmationDeadAgent(t *testing.T) {
	lock := lockFile(t)
	pid := deadPID(t)
	reservation.WriteState(reservation.StatePath(lock), &reservation.State{Program: "fakeagent", PID: pid, Written: time.Now()})
	// The lock is held, which is all the C perfalloc does: no failure.
	if r := perfalloc(t, nil, "-f", lock, "true"); r.rc != 0 || r.stderr != "" {
		t.Errorf("got %+v, want silence", r)
	}
	r := perfalloc(t, nil, "--verbose", "-f", lock, "true")
	want := fmt.Sprintf("perfalloc: lock held; cannot confirm the release: fakeagent (pid %d) is not running (state file %s)\n", pid, reservation.StatePath(lock))
	if r.rc != 0 || !strings.Contains(r.stderr, want) {
		t.Errorf("--verbose: got %+v\nwant %q", r, want)
	}
}

func TestStatusAndPing(t *testing.T) {
	lock := lockFile(t)
	state := reservation.StatePath(lock)
	r := perfalloc(t, nil, "--status", "-f", lock)
	noFile := "no state file " + state + ": the agent is not running, or it is the C pmdaperfevent, which writes none\n"
	if r.rc != 1 || r.stdout != "" || r.stderr != "perfalloc: "+noFile {
		t.Errorf("--status without state: %+v", r)
	}
	r = perfalloc(t, nil, "--ping", "-f", lock)
	if r.rc != 1 || r.stdout != "" || r.stderr != "perfalloc: not OK: "+noFile {
		t.Errorf("--ping without state: %+v", r)
	}

	emulator.SkipOwnStartTime(t)
	ticks, _ := reservation.ProcessStartTicks(os.Getpid())
	now := time.Now()
	s := &reservation.State{
		Generation: 12, Written: now, RefreshSeconds: 10, Program: "fakeagent", PID: os.Getpid(), StartTicks: ticks,
		Started: now.Add(-90 * time.Second), Config: "/etc/fake.conf", LockFile: lock,
		Counters: reservation.CountersReleased, Since: now.Add(-3 * time.Second), Holders: []int{111, 222},
		Events: []reservation.EventState{
			{Name: "perf:cpu_clock", State: reservation.EventReleased, CPUs: 2},
			{Name: "hw:cycles", State: reservation.EventFailed, Error: "no such device"},
		},
	}
	reservation.WriteState(state, s)
	r = perfalloc(t, nil, "--status", "-f", lock)
	for _, line := range []string{
		fmt.Sprintf("agent:      fakeagent, pid %d, up 1m30s\n", os.Getpid()),
		"config:     /etc/fake.conf\n",
		"lock file:  " + lock + "\n",
		"counters:   released since ",
		"holders:    111 222\n",
		"state:      generation 12, written ",
		"events: 2\n",
		"  NAME            STATE     CPUS  ERROR\n",
		"  perf:cpu_clock  released  2\n",
		"  hw:cycles       failed    0     no such device\n",
	} {
		if !strings.Contains(r.stdout, line) {
			t.Errorf("--status lacks %q:\n%s", line, r.stdout)
		}
	}
	if r.rc != 0 || r.stderr != "" {
		t.Errorf("--status: %+v", r)
	}
	if r := perfalloc(t, nil, "--ping", "-f", lock); r.rc != 0 || r.stdout != "OK\n" || r.stderr != "" {
		t.Errorf("--ping: %+v", r)
	}

	// Alive but silent for a minute: stuck.
	s.Written = now.Add(-time.Minute)
	reservation.WriteState(state, s)
	r = perfalloc(t, nil, "--ping", "-f", lock)
	if !strings.HasPrefix(r.stderr, fmt.Sprintf("perfalloc: not OK: fakeagent (pid %d) may be stuck: state generation 12 was written 1m0", os.Getpid())) || r.rc != 1 {
		t.Errorf("--ping with a stale state: %+v", r)
	}
	r = perfalloc(t, nil, "--status", "-f", lock)
	if r.rc != 1 || !strings.Contains(r.stdout, "holders:    111 222\n") || !strings.HasPrefix(r.stderr, "perfalloc: warning: fakeagent") {
		t.Errorf("--status with a stale state: %+v", r)
	}

	s.PID, s.StartTicks = deadPID(t), 0
	reservation.WriteState(state, s)
	r = perfalloc(t, nil, "--status", "-f", lock)
	if want := fmt.Sprintf("perfalloc: fakeagent (pid %d) is not running (state file %s)\n", s.PID, state); r.rc != 1 || r.stdout != "" || r.stderr != want {
		t.Errorf("--status, dead agent: %+v\nwant %q", r, want)
	}
}

// A lock file the administrator gave to a group (pmdaperfevent -lockgroup,
// -lockmode 0640): a user outside the group cannot reserve the counters and
// is told why; a member can.
func TestLockFileForAGroup(t *testing.T) {
	testneed.Root(t, "to run perfalloc as nobody with and without a group")
	// A gid no group has: nobody is not a member unless the test says so.
	gid := 4242
	for ; gid < 5000; gid++ {
		if _, err := user.LookupGroupId(strconv.Itoa(gid)); err != nil {
			break
		}
	}
	dir := t.TempDir()
	os.Chmod(filepath.Dir(dir), 0o755)
	os.Chmod(dir, 0o755)
	path := filepath.Join(dir, "perflock")
	lf, err := reservation.OpenAccess(path, reservation.Access{Mode: 0o640, GID: gid, Group: true})
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil || st.Mode&0o7777 != 0o640 || int(st.Gid) != gid || st.Uid != 0 {
		t.Fatalf("lock file: mode %04o uid %d gid %d (%v), want 0640 root:%d", st.Mode&0o7777, st.Uid, st.Gid, err, gid)
	}
	as := func(groups ...uint32) (string, int) {
		cmd, lim := child(t, binary, "-f", path, "true")
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: 65534, Gid: 65534, Groups: groups}
		out, _ := cmd.CombinedOutput()
		ended(t, cmd, lim, string(out), "")
		return string(out), cmd.ProcessState.ExitCode()
	}
	g := strconv.Itoa(gid)
	want := "perfalloc: lock file " + path + ": permission denied (mode 0640, group " + g + "): only root and members of group " + g + " may reserve the counters here; ask the administrator to add you to it (pmdaperfevent -lockgroup)\n"
	if out, rc := as(); rc != 1 || out != want {
		t.Errorf("nobody outside the group: rc %d %q\nwant rc 1 %q", rc, out, want)
	}
	if out, rc := as(uint32(gid)); rc != 0 || out != "" {
		t.Errorf("nobody in the group: rc %d %q, want rc 0 and silence", rc, out)
	}
}
