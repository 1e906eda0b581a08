package reservation

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Reservation is a user's shared read lock on byte 0 of the lock file, the
// same lock C perfalloc takes, so either tool and either agent interoperate.
// Several reservations (in different processes) may coexist.
type Reservation struct {
	path string
	once sync.Once
	fd   int
}

// HeldError reports that the lock could not be taken because a process holds
// a conflicting (write) lock.
type HeldError struct {
	Path string
	PID  int // from F_GETLK; 0 if unknown
}

func (e *HeldError) Error() string {
	who := "another process"
	if e.PID > 0 {
		who = fmt.Sprintf("process %d", e.PID)
	}
	return fmt.Sprintf("lock file %s: %s holds a write lock on it, so the counters cannot be reserved now", e.Path, who)
}

// Reserve opens path read-only, refusing symbolic links and anything but a
// regular file, and takes a non-blocking read lock on byte 0.
//
// Errors wrap the errno, so callers can test errors.Is(err, fs.ErrNotExist),
// fs.ErrPermission or unix.ELOOP; a conflicting lock is a *HeldError.
//
// The lock lasts until Release or until the process exits. Remember that
// closing any other descriptor of the same file in this process drops it.
func Reserve(path string) (*Reservation, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	// EWOULDBLOCK: O_NONBLOCK met a lease, which the agent takes for
	// microseconds to learn whether anyone has the file open.
	for deadline := time.Now().Add(time.Second); errors.Is(err, unix.EWOULDBLOCK) && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
		fd, err = unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	}
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, fmt.Errorf("lock file %s is a symbolic link, refusing to follow it: %w", path, err)
		}
		return nil, fmt.Errorf("open lock file %s: %w", path, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("lock file %s: fstat: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, fmt.Errorf("lock file %s is not a regular file (it is a %s)", path, fileType(st.Mode))
	}
	lk := unix.Flock_t{Type: unix.F_RDLCK, Whence: io.SeekStart, Start: 0, Len: 1}
	if err := unix.FcntlFlock(uintptr(fd), unix.F_SETLK, &lk); err != nil {
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EACCES) {
			held := &HeldError{Path: path}
			probe := unix.Flock_t{Type: unix.F_RDLCK, Whence: io.SeekStart, Start: 0, Len: 1}
			if unix.FcntlFlock(uintptr(fd), unix.F_GETLK, &probe) == nil && probe.Type != unix.F_UNLCK {
				held.PID = int(probe.Pid)
			}
			unix.Close(fd)
			return nil, held
		}
		unix.Close(fd)
		return nil, fmt.Errorf("lock file %s: F_SETLK read lock: %w", path, err)
	}
	return &Reservation{path: path, fd: fd}, nil
}

// Release drops the lock by closing the descriptor. It is safe to call more
// than once.
func (r *Reservation) Release() error {
	var err error
	r.once.Do(func() {
		if e := unix.Close(r.fd); e != nil {
			err = fmt.Errorf("lock file %s: close: %w", r.path, e)
		}
	})
	return err
}
