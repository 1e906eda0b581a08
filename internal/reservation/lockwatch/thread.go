package lockwatch

import (
	"time"

	"golang.org/x/sys/unix"
)

// watcherSlice is the CPU slice the watcher's thread asks the scheduler
// for; 0 leaves the default.
var watcherSlice = 100 * time.Microsecond

// setSlice asks the scheduler (EEVDF, Linux 6.12 and later) for a slice of
// d for the calling thread, 0 for the default. A short slice lets the
// thread preempt, when it wakes, a task with a longer one: a busy process
// at the same priority no longer runs out its slice (1.4 ms here) before
// the watcher gets the CPU. Its share of the CPU does not change, and it
// needs no privilege; earlier kernels ignore sched_runtime for SCHED_OTHER.
// It says whether the call succeeded.
func setSlice(d time.Duration) bool {
	if watcherSlice <= 0 {
		return false
	}
	attr := unix.SchedAttr{
		Size:    unix.SizeofSchedAttr,
		Policy:  unix.SCHED_NORMAL,
		Flags:   unix.SCHED_FLAG_RESET_ON_FORK,
		Runtime: uint64(d),
	}
	// The thread's nice value is kept, as sched_setattr sets it too; the
	// system call returns 20 - nice.
	if prio, err := unix.Getpriority(unix.PRIO_PROCESS, 0); err == nil {
		attr.Nice = int32(20 - prio)
	}
	return unix.SchedSetAttr(0, &attr, 0) == nil
}

// threadCPUTime is the CPU time the calling thread has used.
func threadCPUTime() time.Duration {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}
