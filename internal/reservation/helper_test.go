package reservation

import (
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"perfevent/internal/reservation/reservationtest"
)

// POSIX locks belong to processes, and F_GETLK hides the caller's own, so
// every lock in these tests is taken by the test binary re-executed as a
// holder (reservationtest).
func TestMain(m *testing.M) {
	// The holders' read lock is Reserve's, perfalloc's way to take it.
	reservationtest.Main(map[string]reservationtest.Lock{
		"read": func(path string) error { _, err := Reserve(path); return err },
		// Only an open, kept for the life of the holder.
		"open": func(path string) error { _, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0); return err },
	})
	os.Exit(m.Run())
}

// A failure deadline, not a timing assertion.
const patience = 5 * time.Second

// holder is a helper holding a read (or write) lock.
type holder struct{ *reservationtest.Holder }

// startHolder starts a helper that holds a read (or write) lock on path and
// returns once the lock is held.
func startHolder(t testing.TB, path string, write bool) holder {
	t.Helper()
	mode := "read"
	if write {
		mode = "write"
	}
	return holder{reservationtest.Start(t, path, mode)}
}

func (h holder) pid() int { return h.PID() }

// release ends the helper normally: it closes the fd by exiting.
func (h holder) release(t testing.TB) { t.Helper(); h.Release(t) }
