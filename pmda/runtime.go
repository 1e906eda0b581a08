// The agent keeps the GOMAXPROCS it starts with: it needs no more threads
// than the CPUs it had then, and no update to follow a container's CPU
// limit, so the runtime starts no goroutine for that and sysmon does not
// read the cgroup's limit and the affinity mask again every second.

//go:debug updatemaxprocs=0

package main

import (
	"runtime"
	"time"

	"perfevent/internal/pmda"
)

// timerSlack is how long the kernel may put off a timed wake-up of the
// agent's threads to coincide with another. The runtime's monitor thread
// sleeps 20 µs at a time while the program is busy, and for a millisecond
// after it last found work, and every wake-up is a switch of context:
// with the kernel's default slack of 50 µs it woke about 80 times in a
// start and took a tenth of its CPU. With a millisecond it wakes less than
// half as often in a start, for the same work. No timer of the agent needs
// finer: the shortest it sets are tens of milliseconds, and the lock
// watcher's thread, whose checks are timed finer, keeps the kernel's
// default (or none, as a real-time thread).
const timerSlack = time.Millisecond

// logRuntime writes one line about the Go runtime (SIGUSR1). It lets a
// soak test, or an administrator who suspects a leak, tell a heap that
// grows from one that is only settling, without a debugger: RSS alone also
// moves with the garbage collector and the scavenger. Between collections
// the heap only grows, so its lowest value over a run of these lines tracks
// the live heap.
//
// The figures come from runtime.ReadMemStats rather than runtime/metrics:
// linking runtime/metrics costs every start the building of its table of
// descriptions, for a line that is rarely asked for.
func logRuntime(log *pmda.Logger) {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	log.Infof("runtime: %d goroutines, heap %d kB (next GC at %d kB), %d kB mapped, %d GC cycles",
		runtime.NumGoroutine(), m.HeapAlloc>>10, m.NextGC>>10, m.Sys>>10, m.NumGC)
}
