package privilege

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// boostNice is the nice value every thread of the process has during
// Drop's all-thread calls.
//
// Each call stops the world, signals every thread and spins in sched_yield
// until each has run it. On a busy machine the time goes to waiting for a
// CPU: the calling thread, whose yields push its virtual deadline back
// (EEVDF), waits behind every busy process at its priority after each
// round, and each woken thread waits too. As root, Drop can lift all of
// them above the competing load for the few milliseconds the calls take;
// the yields then hand the CPU to the woken threads, which are ahead of
// everything else. Measured in BENCHMARKS.md (issue #12): with six busy
// processes on two CPUs the median drop went from about 50 ms to 4.
const boostNice = -20

// boostThreads sets every thread of the process to boostNice and returns
// what puts each back to the nice value it had; a thread started during
// the drop gets the calling thread's. Both halves are best effort: a
// thread left unchanged only keeps the wait it had, and putting a thread
// back raises its nice value, which its own user may do after the drop.
func boostThreads() (restore func()) {
	prio, err := unix.Getpriority(unix.PRIO_PROCESS, 0)
	if err != nil {
		return func() {}
	}
	callerNice := 20 - prio // the system call returns 20 - nice
	// A thread the runtime starts while the first pass runs may come from
	// one not yet lifted, and so start at the old priority. A thread
	// that holds a processor must run before the world can stop: one left
	// behind held up the first call for 305 ms in a trace. Scanning until
	// a pass finds no new thread leaves only threads started by lifted
	// ones, which inherit the boost.
	orig := map[int]int{}
	for pass := 0; pass < 4; pass++ {
		found := false
		for _, tid := range threadIDs() {
			if _, seen := orig[tid]; seen {
				continue
			}
			p, err := unix.Getpriority(unix.PRIO_PROCESS, tid)
			if err != nil {
				continue
			}
			found = true
			orig[tid] = 20 - p
			if 20-p > boostNice {
				unix.Setpriority(unix.PRIO_PROCESS, tid, boostNice)
			}
		}
		if !found {
			break
		}
	}
	return func() {
		for _, tid := range threadIDs() {
			n, ok := orig[tid]
			if !ok {
				n = callerNice
			}
			if p, err := unix.Getpriority(unix.PRIO_PROCESS, tid); err == nil && 20-p != n {
				unix.Setpriority(unix.PRIO_PROCESS, tid, n)
			}
		}
	}
}

// threadIDs are the ids of the process's threads.
func threadIDs() []int {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil
	}
	tids := make([]int, 0, len(ents))
	for _, e := range ents {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids
}
