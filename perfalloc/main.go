// Command perfalloc reserves the performance counters away from
// pmdaperfevent, for a command or until it is told to stop.
//
// It takes the same POSIX read lock as PCP's C perfalloc, so it works with
// either agent, and takes the C tool's options with their meaning; like the
// C tool it prints nothing unless something fails. Unlike it, it takes the
// lock before the command starts, fails loudly in every mode, and, with the
// Go agent, waits until the agent reports that it really released the
// counters.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"perfevent/internal/pcpconf"
	"perfevent/internal/release"
	"perfevent/internal/reservation"
)

// Exit statuses of perfalloc's own; a command's status passes through.
const (
	exitOK          = 0
	exitFail        = 1
	exitNotRunnable = 126 // as sh: the command exists but cannot be run
	exitNotFound    = 127 // as sh: no such command
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// ui writes perfalloc's messages: to stderr, or, in the detached child of
// -d, up the report pipe to the parent, which prints them.
type ui struct {
	stderr  io.Writer
	report  io.Writer // non-nil in the daemon child
	verbose bool
}

func (u *ui) say(format string, args ...any) {
	msg := "perfalloc: " + fmt.Sprintf(format, args...)
	if u.report != nil {
		fmt.Fprintf(u.report, "say %s\n", strings.ReplaceAll(msg, "\n", " "))
		return
	}
	fmt.Fprintln(u.stderr, msg)
}

func (u *ui) progress(format string, args ...any) {
	if u.verbose {
		u.say(format, args...)
	}
}

func run(args []string, stdout, stderr io.Writer) int {
	o, err := parseArgs(args)
	if err != nil {
		fmt.Fprintf(stderr, "perfalloc: %v\n", err)
		fmt.Fprintf(stderr, usage, reservation.DefaultLockPath(), defaultTimeout)
		return exitFail
	}
	switch o.mode {
	case modeHelp:
		fmt.Fprintf(stdout, usage, reservation.DefaultLockPath(), defaultTimeout)
		return exitOK
	case modeVersion:
		// The C perfalloc's line, which scripts may parse.
		fmt.Fprintf(stdout, "perfalloc %s\n", release.Version)
		return exitOK
	}
	u := &ui{stderr: stderr, verbose: o.verbose}
	if o.file == "" {
		o.file = reservation.DefaultLockPath()
		if err := pcpconf.Load().Err(); err != nil {
			// The path may be wrong; say which one is used, and go on.
			u.say("warning: %v; using the lock file %s", err, o.file)
		}
	}
	switch o.mode {
	case modeStatus:
		return status(o, stdout, u)
	case modePing:
		return ping(o, stdout, u)
	case modeDaemon:
		if fd := os.Getenv(daemonEnv); fd != "" {
			return daemonChild(o, fd)
		}
		return daemonParent(o, stdout, u)
	case modeCommand:
		return command(o, u)
	}
	return foreground(o, u)
}

var stopSignals = []os.Signal{syscall.SIGINT, syscall.SIGHUP, syscall.SIGTERM}

// reserve takes the lock and explains a failure in terms of what to do.
func reserve(o *options, u *ui) (*reservation.Reservation, error) {
	u.progress("taking a read lock on %s", o.file)
	r, err := reservation.Reserve(o.file)
	if err == nil {
		u.progress("read lock held on %s by pid %d", o.file, os.Getpid())
		return r, nil
	}
	var held *reservation.HeldError
	switch {
	case errors.As(err, &held):
		return nil, fmt.Errorf("%v; try again later", held)
	case errors.Is(err, fs.ErrNotExist):
		if dir := filepath.Dir(o.file); !exists(dir) {
			return nil, fmt.Errorf("lock file %s does not exist, nor does its directory %s: check -f or $PCP_PMDAS_DIR", o.file, dir)
		}
		return nil, fmt.Errorf("lock file %s does not exist: is pmdaperfevent running? (it creates the lock file)", o.file)
	case errors.Is(err, unix.ELOOP):
		return nil, fmt.Errorf("lock file %s is a symbolic link: refusing to follow it (pmdaperfevent creates a regular file)", o.file)
	case errors.Is(err, fs.ErrPermission):
		var st unix.Stat_t
		if unix.Lstat(o.file, &st) == nil {
			if st.Mode&0o004 == 0 && st.Mode&0o040 != 0 {
				return nil, fmt.Errorf("lock file %s: permission denied (mode %04o, group %s): only root and members of group %s may reserve the counters here; ask the administrator to add you to it (pmdaperfevent -lockgroup)", o.file, st.Mode&0o7777, groupName(st.Gid), groupName(st.Gid))
			}
			return nil, fmt.Errorf("lock file %s: permission denied (mode %04o, owner uid %d): pmdaperfevent creates it readable by everyone (0644), so ask the administrator to restore that", o.file, st.Mode&0o7777, st.Uid)
		}
		return nil, fmt.Errorf("lock file %s: permission denied: cannot reach it (check the directories on its path)", o.file)
	}
	return nil, err
}

// groupName is a group's name, or its number if it has none.
func groupName(gid uint32) string {
	id := strconv.FormatUint(uint64(gid), 10)
	if g, err := user.LookupGroupId(id); err == nil {
		return g.Name
	}
	return id
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// untilSignal runs f with a context that ends when one of the stop signals
// arrives on sigs, and returns that signal, if any.
func untilSignal(sigs <-chan os.Signal, f func(ctx context.Context)) os.Signal {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan os.Signal, 1)
	finished := make(chan struct{})
	go func() {
		select {
		case s := <-sigs:
			got <- s
			cancel()
		case <-finished:
			got <- nil
		}
	}()
	f(ctx)
	close(finished)
	return <-got
}

// hold takes the lock and waits for the agent's confirmation. On failure it
// reports, releases whatever it took, and returns a non-zero status; a
// signal during the wait also ends it (status 128+signal).
func hold(o *options, u *ui, sigs <-chan os.Signal) (*reservation.Reservation, int) {
	r, err := reserve(o, u)
	if err != nil {
		u.say("%v", err)
		return nil, exitFail
	}
	var cerr error
	sig := untilSignal(sigs, func(ctx context.Context) { cerr = confirm(ctx, o, u, os.Getpid()) })
	if sig != nil {
		u.progress("got %v while waiting for the agent: releasing the lock", sig)
		r.Release()
		return nil, 128 + int(sig.(syscall.Signal))
	}
	if cerr != nil {
		u.say("%v; releasing the lock", cerr)
		r.Release()
		return nil, exitFail
	}
	return r, exitOK
}

// foreground holds the lock until SIGINT, SIGHUP or SIGTERM, then exits 0.
func foreground(o *options, u *ui) int {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, stopSignals...)
	r, rc := hold(o, u, sigs)
	if r == nil {
		return rc
	}
	u.progress("holding the lock until SIGINT, SIGHUP or SIGTERM")
	sig := <-sigs
	u.progress("got %v: releasing the lock", sig)
	r.Release()
	return exitOK
}

// command holds the lock while a command runs and returns its status.
func command(o *options, u *ui) int {
	name := o.command[0]
	// Resolve the command before taking the lock: a typo should not make
	// the agent drop its counters even for a moment.
	path, err := exec.LookPath(name)
	if errors.Is(err, exec.ErrDot) {
		err = nil // found via "." in PATH: run it, as a shell would
	}
	if err != nil {
		return cannotRun(u, name, err)
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, stopSignals...)
	r, rc := hold(o, u, sigs)
	if r == nil {
		return rc
	}
	defer r.Release()

	cmd := &exec.Cmd{Path: path, Args: o.command, Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}
	u.progress("running %s", strings.Join(o.command, " "))
	if err := cmd.Start(); err != nil {
		return cannotRun(u, name, err)
	}
	// Pass stop signals on: the command decides what they mean, and we
	// release the lock when it ends. A Ctrl-C on a terminal reaches the
	// command directly as well, so it may see SIGINT twice.
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sigs:
				u.progress("passing %v to pid %d", s, cmd.Process.Pid)
				cmd.Process.Signal(s)
			case <-done:
				return
			}
		}
	}()
	cmd.Wait()
	close(done)
	ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
	status := ws.ExitStatus()
	if ws.Signaled() {
		status = 128 + int(ws.Signal())
	}
	u.progress("%s ended with status %d: releasing the lock", name, status)
	return status
}

// cannotRun reports a command that could not be started with a shell's
// statuses: 127 when it does not exist, 126 when it cannot be executed.
func cannotRun(u *ui, name string, err error) int {
	switch {
	case errors.Is(err, exec.ErrNotFound):
		u.say("%s: command not found", name)
		return exitNotFound
	case errors.Is(err, fs.ErrNotExist):
		u.say("%s: no such file or directory", name)
		return exitNotFound
	case errors.Is(err, fs.ErrPermission):
		u.say("%s: permission denied", name)
		return exitNotRunnable
	case errors.Is(err, unix.ENOEXEC):
		u.say("%s: cannot execute: not an executable format", name)
		return exitNotRunnable
	}
	u.say("%s: cannot execute: %v", name, err)
	return exitNotRunnable
}

// confirm waits until the agent's state file shows the counters released
// with pid among the holders. It returns nil when that happened, when it was
// not asked to wait, and when nobody can confirm (no state file, or its
// writer is gone): the lock is held either way, which is all the C
// perfalloc ever does, so those cases are reported only with --verbose. It
// returns an error only when a live agent did not release the counters in
// time.
func confirm(ctx context.Context, o *options, u *ui, pid int) error {
	if o.noWait {
		u.progress("not waiting for the agent to confirm (--no-wait)")
		return nil
	}
	start := time.Now()
	path := reservation.StatePath(o.file)
	s, err := reservation.ReadState(path)
	if errors.Is(err, fs.ErrNotExist) {
		u.progress("lock held; no state from the agent at %s, cannot confirm the release (the C pmdaperfevent does not report it)", path)
		return nil
	}
	if err != nil {
		u.progress("lock held; cannot confirm the release: %v", err)
		return nil
	}
	if err := s.Alive(); err != nil {
		u.progress("lock held; cannot confirm the release: %v (state file %s)", err, path)
		return nil
	}
	u.progress("waiting up to %v for %s (pid %d) to confirm in %s", o.timeout, agentName(s), s.PID, path)
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	released := func(s *reservation.State) bool {
		return s.Counters == reservation.CountersReleased && s.HeldBy(pid)
	}
	s, err = reservation.WaitState(ctx, path, 0, func(s *reservation.State) bool {
		return released(s) || s.Alive() != nil
	})
	if s != nil && released(s) {
		u.progress("counters released by %s (pid %d) after %.1f ms", agentName(s), s.PID, float64(time.Since(start).Microseconds())/1000)
		return nil
	}
	if s != nil {
		if aerr := s.Alive(); aerr != nil {
			u.progress("lock held; cannot confirm the release: %v", aerr)
			return nil
		}
	}
	if errors.Is(err, context.DeadlineExceeded) && s != nil {
		return fmt.Errorf("%s (pid %d) is running but did not release the counters within %v (%s: counters %s, holders %v)", agentName(s), s.PID, o.timeout, path, s.Counters, s.Holders)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("the agent did not confirm the release within %v: %s became unreadable", o.timeout, path)
	}
	return nil // cancelled by a signal; the caller knows
}

func agentName(s *reservation.State) string {
	if s.Program != "" {
		return s.Program
	}
	return "the agent"
}
