package reservation

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"perfevent/internal/emulator"
)

// POSIX locks belong to processes, and F_GETLK hides the caller's own, so
// every lock in these tests is taken by the test binary re-executed as a
// helper process.
const helperEnv = "RESERVATION_TEST_HELPER"

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "":
		os.Exit(m.Run())
	case "read":
		helperHold(os.Getenv("RESERVATION_TEST_LOCK"), false)
	case "write":
		helperHold(os.Getenv("RESERVATION_TEST_LOCK"), true)
	case "bench":
		helperBench(os.Getenv("RESERVATION_TEST_LOCK"))
	case "open":
		helperOpen(os.Getenv("RESERVATION_TEST_LOCK"))
	case "fork":
		helperFork(os.Getenv("RESERVATION_TEST_LOCK"))
	case "inherited":
		helperLockOnCommand(3)
	}
	os.Exit(3)
}

// helperCommand is the test binary run again as the helper in mode, on the
// lock file at path. Its stderr is the test's.
func helperCommand(mode, path string) *exec.Cmd {
	cmd := emulator.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, "RESERVATION_TEST_LOCK="+path)
	cmd.Stderr = os.Stderr
	return cmd
}

// helperHold takes the lock, says "locked", and releases it when stdin ends.
func helperHold(path string, write bool) {
	if write {
		fd, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err == nil {
			lk := unix.Flock_t{Type: unix.F_WRLCK, Start: 0, Len: 1}
			err = unix.FcntlFlock(uintptr(fd), unix.F_SETLK, &lk)
		}
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(2)
		}
	} else if _, err := Reserve(path); err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	fmt.Println("locked")
	io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

type holder struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
}

// startHolder starts a helper that holds a read (or write) lock on path and
// returns once the lock is held.
func startHolder(t testing.TB, path string, write bool) *holder {
	t.Helper()
	mode := "read"
	if write {
		mode = "write"
	}
	cmd := helperCommand(mode, path)
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
	h := &holder{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout)}
	t.Cleanup(func() { h.kill() })
	line, err := h.out.ReadString('\n')
	if strings.TrimSpace(line) != "locked" {
		t.Fatalf("helper did not lock %s: %q %v", path, line, err)
	}
	return h
}

func (h *holder) pid() int { return h.cmd.Process.Pid }

// release ends the helper normally: it closes the fd by exiting.
func (h *holder) release(t testing.TB) {
	t.Helper()
	h.stdin.Close()
	if err := h.cmd.Wait(); err != nil {
		t.Fatalf("helper: %v", err)
	}
}

func (h *holder) kill() {
	if h.cmd.ProcessState == nil {
		h.cmd.Process.Kill()
		h.cmd.Wait()
	}
}
