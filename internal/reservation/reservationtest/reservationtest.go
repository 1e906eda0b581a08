// Package reservationtest starts child processes that hold a lock on a lock
// file, for the tests of anything that must see someone else's reservation.
// POSIX record locks belong to processes, and F_GETLK does not report the
// caller's own, so the lock is taken by the test binary run again as a
// holder: call Main first thing in TestMain, then Start from the tests.
package reservationtest

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"perfevent/internal/testexec"
)

// role is the testexec role of a holder; env tells it what to hold:
// "MODE:PATH".
const (
	role = "lock-holder"
	env  = "PERFEVENT_TEST_LOCK_HOLDER"
)

// A Lock takes a lock on the file at path, for the life of the process.
type Lock func(path string) error

// ReadLock takes what perfalloc takes: a read lock on byte 0.
func ReadLock(path string) error { return lockByte0(path, unix.O_RDONLY, unix.F_RDLCK) }

// WriteLock takes a write lock on byte 0, which neither agent nor perfalloc
// takes and which no reservation may share.
func WriteLock(path string) error { return lockByte0(path, unix.O_RDWR, unix.F_WRLCK) }

func lockByte0(path string, flags int, typ int16) error {
	fd, err := unix.Open(path, flags|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	lk := unix.Flock_t{Type: typ, Whence: io.SeekStart, Start: 0, Len: 1}
	return unix.FcntlFlock(uintptr(fd), unix.F_SETLK, &lk)
}

// Main returns at once unless this process was started by Start. Then it
// takes the lock of the mode Start named, "read" and "write" (ReadLock,
// WriteLock) or one of extra, says "locked" and holds the lock until its
// stdin ends, and exits.
func Main(extra map[string]Lock) {
	if testexec.Role() != role {
		return
	}
	mode, path, _ := strings.Cut(os.Getenv(env), ":")
	lock := extra[mode]
	if lock == nil {
		lock = map[string]Lock{"read": ReadLock, "write": WriteLock}[mode]
	}
	if lock == nil {
		fmt.Printf("error: no lock mode %q\n", mode)
		os.Exit(2)
	}
	if err := lock(path); err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	fmt.Println("locked")
	io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

// Holder is a child process holding a lock.
type Holder struct {
	// Cmd is the running holder, for tests that kill it themselves: the
	// kernel drops the lock with the process.
	Cmd   *exec.Cmd
	stdin io.WriteCloser
}

// Start runs the test binary as a holder of mode's lock on path and returns
// once the lock is held. The holder is killed when the test ends, if it has
// not been released before.
func Start(t testing.TB, path, mode string) *Holder {
	t.Helper()
	cmd := testexec.Helper(role, env+"="+mode+":"+path)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &Holder{Cmd: cmd, stdin: stdin}
	t.Cleanup(h.Kill)
	if line, err := bufio.NewReader(stdout).ReadString('\n'); line != "locked\n" {
		t.Fatalf("the holder did not take a %s lock on %s: %q %v", mode, path, line, err)
	}
	return h
}

// PID is the holder's process id, as /proc/locks and F_GETLK name it.
func (h *Holder) PID() int { return h.Cmd.Process.Pid }

// Release ends the holder normally: its descriptor closes as it exits.
func (h *Holder) Release(t testing.TB) {
	t.Helper()
	h.stdin.Close()
	if err := h.Cmd.Wait(); err != nil {
		t.Fatalf("lock holder: %v", err)
	}
}

// Kill ends the holder at once, if it still runs.
func (h *Holder) Kill() {
	if h.Cmd.ProcessState == nil {
		h.Cmd.Process.Kill()
		h.Cmd.Wait()
	}
}
