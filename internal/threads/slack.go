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
	n := 1
	self := unix.Gettid()
	t := Open()
	defer t.Close()
	var path [32]byte
	var value [20]byte
	v := strconv.AppendInt(value[:0], int64(d), 10)
	for _, tid := range t.List() {
		if tid == self {
			continue
		}
		p := strconv.AppendInt(append(path[:0], "/proc/"...), int64(tid), 10)
		p = append(p, "/timerslack_ns"...)
		fd, err := unix.Open(string(p), unix.O_WRONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			if err == unix.EACCES || err == unix.EPERM {
				break // so for every other thread too
			}
			continue // the thread ended
		}
		if _, err := unix.Write(fd, v); err == nil {
			n++
		} else if err == unix.EPERM {
			unix.Close(fd)
			break
		}
		unix.Close(fd)
	}
	return n, nil
}

// SetOwnTimerSlack sets the calling thread's timer slack to d, or to
// DefaultTimerSlack for d <= 0; threads it starts later take it too.
func SetOwnTimerSlack(d time.Duration) error {
	if d <= 0 {
		d = DefaultTimerSlack
	}
	return unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(d), 0, 0, 0)
}
