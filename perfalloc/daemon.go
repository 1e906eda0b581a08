package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// daemonEnv tells a re-executed perfalloc that it is the detached child of
// -d and which fd carries its report to the parent.
const daemonEnv = "PERFALLOC_DAEMON_REPORT_FD"

// daemonParent starts a detached copy of perfalloc that takes the lock and
// waits for the confirmation, and reports its outcome: the child's pid on
// stdout with --print-pid (the C perfalloc prints nothing) and status 0, or
// the child's error and status 1. A Go program
// cannot fork(2), so the child is a fresh exec of this binary.
//
// The report protocol, one line each: "say MESSAGE" for anything to print
// on stderr, then "ok" or "fail". The child closes the pipe after "ok".
func daemonParent(o *options, stdout io.Writer, u *ui) int {
	// The child runs in /, as daemon(3) would, so a relative lock file
	// path must be made absolute here.
	file, err := filepath.Abs(o.file)
	if err != nil {
		u.say("lock file %s: %v", o.file, err)
		return exitFail
	}
	args := []string{os.Args[0], "-d", "-f", file, "--timeout", o.timeout.String()}
	if o.verbose {
		args = append(args, "--verbose")
	}
	if o.noWait {
		args = append(args, "--no-wait")
	}
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		u.say("%v", err)
		return exitFail
	}
	defer devnull.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		u.say("pipe: %v", err)
		return exitFail
	}
	defer pr.Close()
	// The binary's own path rather than /proc/self/exe, so that ps and
	// pgrep show the child as perfalloc.
	exe, err := os.Executable()
	if err != nil {
		exe = "/proc/self/exe"
	}
	child, err := os.StartProcess(exe, args, &os.ProcAttr{
		Dir:   "/",
		Env:   append(os.Environ(), daemonEnv+"=3"),
		Files: []*os.File{devnull, devnull, devnull, pw},
		Sys:   &syscall.SysProcAttr{Setsid: true},
	})
	pw.Close()
	if err != nil {
		u.say("cannot start the background process: %v", err)
		return exitFail
	}
	u.progress("background process started, pid %d", child.Pid)

	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		verb, msg, _ := strings.Cut(sc.Text(), " ")
		switch verb {
		case "say":
			fmt.Fprintln(u.stderr, msg)
		case "ok":
			if o.printPID {
				fmt.Fprintln(stdout, child.Pid)
			}
			child.Release()
			return exitOK
		case "fail":
			child.Wait()
			return exitFail
		}
	}
	st, err := child.Wait()
	if err != nil {
		u.say("the background process (pid %d) ended without reporting: %v", child.Pid, err)
	} else {
		u.say("the background process (pid %d) ended without reporting: %v", child.Pid, st)
	}
	return exitFail
}

// daemonChild is the detached holder of -d: it reports through fd, then
// holds the lock until a stop signal.
func daemonChild(o *options, fdText string) int {
	os.Unsetenv(daemonEnv) // not for anything we might start
	fd, err := strconv.Atoi(fdText)
	if err != nil || fd < 3 {
		fmt.Fprintf(os.Stderr, "perfalloc: %s=%q: not a file descriptor\n", daemonEnv, fdText)
		return exitFail
	}
	report := os.NewFile(uintptr(fd), "report")
	u := &ui{stderr: io.Discard, report: report, verbose: o.verbose}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, stopSignals...)
	r, rc := hold(o, u, sigs)
	if r == nil {
		fmt.Fprintln(report, "fail")
		return rc
	}
	u.progress("holding the lock in the background until SIGINT, SIGHUP or SIGTERM")
	fmt.Fprintln(report, "ok")
	report.Close()
	<-sigs
	r.Release()
	return exitOK
}
