package lockwatch

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"perfevent/internal/reservation"
	"perfevent/internal/reservation/reservationtest"
	"perfevent/internal/testexec"
)

// POSIX locks belong to processes, and F_GETLK hides the caller's own, so
// every lock in these tests is taken by the test binary re-executed as a
// helper process: a plain holder (reservationtest), or one of the roles
// below for the watcher's finer cases.
func TestMain(m *testing.M) {
	// The holders' read lock is Reserve's, perfalloc's way to take it.
	reservationtest.Main(map[string]reservationtest.Lock{
		"read": func(path string) error { _, err := reservation.Reserve(path); return err },
	})
	switch mode := testexec.Role(); mode {
	case "":
		os.Exit(m.Run())
	case "spin":
		helperSpin()
	case "open":
		helperOpen(os.Getenv("RESERVATION_TEST_LOCK"))
	case "fork":
		helperFork(os.Getenv("RESERVATION_TEST_LOCK"))
	case "inherited":
		helperLockOnCommand(3)
	default:
		if kind, ok := strings.CutPrefix(mode, "attack-"); ok {
			helperAttack(kind, os.Getenv("RESERVATION_TEST_LOCK"))
		}
		if kind, ok := strings.CutPrefix(mode, "bench-"); ok {
			helperBench(kind, os.Getenv("RESERVATION_TEST_LOCK"))
		}
	}
	os.Exit(3)
}

// Status is the reservation as the watcher reports it.
type Status = reservation.Status

// helperCommand is the test binary run again as the helper in mode, on the
// lock file at path. Its stderr is the test's.
func helperCommand(mode, path string) *exec.Cmd {
	return testexec.Helper(mode, "RESERVATION_TEST_LOCK="+path)
}

// holder is a helper holding a read (or write) lock.
type holder struct {
	*reservationtest.Holder
	cmd *exec.Cmd
}

// startHolder starts a helper that holds a read (or write) lock on path and
// returns once the lock is held.
func startHolder(t testing.TB, path string, write bool) holder {
	t.Helper()
	mode := "read"
	if write {
		mode = "write"
	}
	h := reservationtest.Start(t, path, mode)
	return holder{h, h.Cmd}
}

func (h holder) pid() int { return h.PID() }

// release ends the helper normally: it closes the fd by exiting.
func (h holder) release(t testing.TB) { t.Helper(); h.Release(t) }

// Byte 0 read-locked and unlocked, as the helpers do it.
var (
	helperReadLock = unix.Flock_t{Type: unix.F_RDLCK, Start: 0, Len: 1}
	helperUnlock   = unix.Flock_t{Type: unix.F_UNLCK, Start: 0, Len: 1}
)

// helperFail reports err to the test and ends the helper.
func helperFail(err error) {
	fmt.Println("error:", err)
	os.Exit(2)
}

// helperOpenFile opens the lock file read-only, as perfalloc does.
func helperOpenFile(path string) int {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		helperFail(err)
	}
	return fd
}
