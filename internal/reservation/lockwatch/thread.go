package lockwatch

import (
	"time"

	"golang.org/x/sys/unix"

	"perfevent/internal/threads"
)

// realtime says whether the watcher's thread asks for SCHED_FIFO: tests
// of the fallback turn it off.
var realtime = true

// watcherSlice is the CPU slice the watcher's thread asks the scheduler
// for when it may not be real-time; 0 leaves the default.
var watcherSlice = 100 * time.Microsecond

// setScheduling asks the scheduler to run the calling thread as soon as it
// wakes, and says whether it changed anything. On a busy machine the wait
// for a CPU, not the schedule of checks, is most of a reaction: with one
// busy process per CPU and other load, the watcher's 1 ms checks woke
// 5-60 ms late at the 99th percentile. A real-time thread (SCHED_FIFO at
// the lowest priority) preempts every ordinary one at once; the watcher
// may be one because the CPU it takes is bounded (one F_GETLK a check,
// hinted checks from a bucket, a callback per change that closes or
// enables counters, their reopens paced by the agent), and the kernel
// keeps 5 % of each CPU for ordinary threads whatever real-time ones do.
// It needs CAP_SYS_NICE (the agent starts as root, and the thread keeps
// its policy when the agent drops root) or an RLIMIT_RTPRIO; without it
// the thread asks for a short slice instead (setSlice). Children do not
// inherit either.
func setScheduling() bool {
	// The checks keep to the ppoll's timeouts: the thread takes the
	// kernel's default timer slack back from the agent's longer one (a
	// real-time thread has none).
	threads.SetOwnTimerSlack(threads.DefaultTimerSlack)
	if a, err := unix.SchedGetAttr(0, 0); err == nil && (a.Policy == unix.SCHED_FIFO || a.Policy == unix.SCHED_RR) {
		// The whole agent runs real-time (started by chrt, or by a pmcd
		// run so): the lowest priority would put the watcher below its
		// own process's other threads.
		return false
	}
	if realtime {
		attr := unix.SchedAttr{
			Size:     unix.SizeofSchedAttr,
			Policy:   unix.SCHED_FIFO,
			Flags:    unix.SCHED_FLAG_RESET_ON_FORK,
			Priority: 1,
		}
		if unix.SchedSetAttr(0, &attr, 0) == nil {
			return true
		}
	}
	return setSlice(watcherSlice)
}

// setSlice asks the scheduler (EEVDF, Linux 6.12 and later) for a slice of
// d for the calling thread, 0 for the default. A short slice lets the
// thread preempt, when it wakes, a task with a longer one: a busy process
// at the same priority no longer runs out its slice (1.4 ms here) before
// the watcher gets the CPU. Its share of the CPU does not change, and it
// needs no privilege; earlier kernels ignore sched_runtime for SCHED_OTHER.
// It says whether the call succeeded.
func setSlice(d time.Duration) bool {
	if d <= 0 {
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
