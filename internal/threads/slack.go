package threads

import (
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultTimerSlack is the kernel's timer slack for a thread whose
// parents never changed it.
const DefaultTimerSlack = 50 * time.Microsecond

// SetTimerSlack lets the kernel put off each timed wake-up of every thread
// by up to d, to coincide with another wake-up: the calling thread's by
// prctl, the others' through /proc/<tid>/timerslack_ns, which takes
// CAP_SYS_NICE (without it they keep theirs). A thread started later
// takes the slack of the thread that starts it; one under a real-time
// policy has none, whatever this sets. It returns how many threads took
// d, the caller included, and the caller's error.
func SetTimerSlack(d time.Duration) (int, error) {
	if err := SetOwnTimerSlack(d); err != nil {
		return 0, err
	}
	n, self := 1, unix.Gettid()
	t := Open()
	defer t.Close()
	var value [20]byte
	v := strconv.AppendInt(value[:0], int64(d), 10)
	t.Each(func(tid, _ int) bool {
		if tid == self {
			return true
		}
		switch err := setTimerSlackOf(tid, v); err {
		case nil:
			n++
		case unix.EACCES, unix.EPERM:
			return false // so for every other thread too
		}
		return true
	})
	return n, nil
}

// setTimerSlackOf writes value, the slack in ns, for thread tid.
func setTimerSlackOf(tid int, value []byte) error {
	var path [32]byte
	p := strconv.AppendInt(append(path[:0], "/proc/"...), int64(tid), 10)
	fd, err := unix.Open(string(append(p, "/timerslack_ns"...)), unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err // the thread ended, or no access
	}
	defer unix.Close(fd)
	_, err = unix.Write(fd, value)
	return err
}

// SetOwnTimerSlack sets the calling thread's timer slack to d, or to
// DefaultTimerSlack for d <= 0; threads it starts later take it too.
func SetOwnTimerSlack(d time.Duration) error {
	if d <= 0 {
		d = DefaultTimerSlack
	}
	return unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(d), 0, 0, 0)
}
