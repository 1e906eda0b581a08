package privilege

import (
	"unsafe"

	"golang.org/x/sys/unix"

	"perfevent/internal/threads"
)

// boostNice is the nice value every thread of the process has during
// Drop's all-thread calls.
//
// Each call stops the world, signals every thread and spins in sched_yield
// until each has run it. On a busy machine the time goes to waiting for a
// CPU: the calling thread, whose yields push its virtual deadline back
// (EEVDF), waits behind every busy process at its priority after each
// round, and each woken thread waits too, on whichever CPU it last ran.
// As root, Drop can lift all of them above the competing load and put
// them on the caller's CPU for the few milliseconds the calls take: the
// yields then hand the CPU straight to the woken threads. The nice value
// counts against load in the agent's own scheduling group (its session's
// autogroup, or its cgroup), where it takes the drop's tail from seconds
// to tens of milliseconds with eight busy processes beside it. Against
// load in other groups, as pmcd's agent usually sees, it does nothing, but
// the common CPU still does: the group's weight on a CPU follows its load
// there, so a thread woken on a CPU where the group has little else waits
// behind the other groups.
const boostNice = -20

// boostThreads sets every thread of the process to boostNice, on the CPU
// the caller runs on, and returns what puts each back to the nice value
// and CPU mask it had; a thread started during the drop gets the caller's.
// Both halves are best effort: a thread left unchanged only keeps the wait
// it had, and putting a thread back raises its nice value and widens its
// mask, which its own user may do after the drop.
func boostThreads() (restore func()) {
	if realtime() {
		return func() {}
	}
	prio, err := unix.Getpriority(unix.PRIO_PROCESS, 0)
	if err != nil {
		return func() {}
	}
	callerNice := 20 - prio // the system call returns 20 - nice
	var callerMask unix.CPUSet
	pin := -1
	if unix.SchedGetaffinity(0, &callerMask) == nil {
		pin = currentCPU()
	}
	// A thread the runtime starts while the first pass runs may come from
	// one not yet lifted, and so start at the old priority. A thread
	// that holds a processor must run before the world can stop: one left
	// behind held up the first call for 305 ms in a trace. Each lists the
	// threads until a pass finds none new, which leaves only threads
	// started by lifted ones, which inherit the boost and the mask.
	type saved struct {
		nice    int
		mask    unix.CPUSet
		hasMask bool
	}
	// By thread id; a slice, as a process has a handful of threads.
	type thread struct {
		tid int
		saved
	}
	orig := make([]thread, 0, 8)
	find := func(tid int) (saved, bool) {
		for _, t := range orig {
			if t.tid == tid {
				return t.saved, true
			}
		}
		return saved{}, false
	}
	tasks := threads.Open()
	tasks.Each(func(tid, pass int) bool {
		p, err := unix.Getpriority(unix.PRIO_PROCESS, tid)
		if err != nil {
			return true // it has ended
		}
		s := saved{nice: 20 - p}
		if s.nice > boostNice {
			unix.Setpriority(unix.PRIO_PROCESS, tid, boostNice)
		}
		if pin >= 0 && unix.SchedGetaffinity(tid, &s.mask) == nil {
			s.hasMask = true
			var one unix.CPUSet
			one.Set(pin)
			unix.SchedSetaffinity(tid, &one)
		}
		if pass > 0 {
			// Started during the boost, perhaps from a lifted
			// thread: what it has now is the boost's.
			s = saved{nice: callerNice, mask: callerMask, hasMask: pin >= 0}
		}
		orig = append(orig, thread{tid, s})
		return true
	})
	caller := saved{nice: callerNice, mask: callerMask, hasMask: pin >= 0}
	return func() {
		defer tasks.Close()
		// Each thread puts itself back, in two more all-thread calls:
		// while one runs, the runtime starts no thread, and a thread it
		// starts later comes from one already put back. Scanning
		// /proc/self/task instead missed a thread being cloned from one
		// still lifted, in 3 drops of 40. The calls are quick, as every
		// thread is still lifted and on one CPU.
		err := allThreads(unix.SYS_SETPRIORITY, unix.PRIO_PROCESS, 0, uintptr(callerNice))
		if err == nil && pin >= 0 {
			err = allThreads(unix.SYS_SCHED_SETAFFINITY, 0, unsafe.Sizeof(callerMask), uintptr(unsafe.Pointer(&callerMask)))
		}
		// A thread that had other values than the caller gets its own
		// back; so do all, if the calls failed (a cgo build). Usually
		// none had: the runtime's threads inherit the caller's, and the
		// listing of the threads that tells which are still ours is
		// spared.
		own := err != nil
		for _, t := range orig {
			own = own || t.saved != caller
		}
		if !own {
			return
		}
		for _, tid := range tasks.List() {
			s, ok := find(tid)
			if !ok {
				s = caller
			}
			if p, err := unix.Getpriority(unix.PRIO_PROCESS, tid); err == nil && 20-p != s.nice {
				unix.Setpriority(unix.PRIO_PROCESS, tid, s.nice)
			}
			var m unix.CPUSet
			if s.hasMask && unix.SchedGetaffinity(tid, &m) == nil && m != s.mask {
				unix.SchedSetaffinity(tid, &s.mask)
			}
		}
	}
}

// realtime says whether the calling thread runs under a real-time policy
// (the agent started by chrt, or by a pmcd that runs so). Nice values mean
// nothing there, and pinning every thread to the caller's CPU would be a
// trap: a thread of a lower real-time priority than the caller's (the lock
// watcher takes SCHED_FIFO 1) never gets that CPU while the caller spins in
// sched_yield waiting for it, and the drop would never end.
func realtime() bool {
	a, err := unix.SchedGetAttr(0, 0)
	return err == nil && (a.Policy == unix.SCHED_FIFO || a.Policy == unix.SCHED_RR)
}

// currentCPU is the CPU the calling thread runs on, or -1.
func currentCPU() int {
	var cpu, node uint32
	if _, _, e := unix.RawSyscall(unix.SYS_GETCPU, uintptr(unsafe.Pointer(&cpu)), uintptr(unsafe.Pointer(&node)), 0); e != 0 {
		return -1
	}
	return int(cpu)
}
