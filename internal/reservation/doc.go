// Package reservation lets users reserve the performance counters away from
// the agent, the way PCP's perfalloc and pmdaperfevent have always done it:
// a user process holds a POSIX read lock on byte 0 of a lock file, and the
// agent, which checks with F_GETLK, releases its counters while any such
// lock exists.
//
// The package is the protocol that the agent and perfalloc share:
//
//   - the lock file: [Open] (agent side: create safely, keep one fd for
//     F_GETLK, recreate if the file is deleted or replaced) and [Reserve]
//     (user side: take the shared read lock);
//   - the holders, named from a bounded read of /proc/locks;
//   - the state file beside the lock file ([StateFile], [ReadState],
//     [WaitState]), in which the agent reports what it did, so that
//     perfalloc can confirm that the counters really were released.
//
// The agent's watcher of the lock file, which perfalloc does not need, is
// package lockwatch: inotify hints plus an F_GETLK poll, calling back on
// every change of the reservation.
//
// # Traps of POSIX record locks
//
// POSIX (fcntl) locks belong to a process, not to a file descriptor. Two
// consequences shape this package:
//
//   - F_GETLK never reports the caller's own locks. A process can therefore
//     not observe a reservation it holds itself; tests use helper processes.
//   - Closing ANY descriptor of a file drops ALL of the process's locks on
//     that file, even locks taken through another descriptor. A process that
//     holds a reservation must never open and close the lock file elsewhere
//     (os.ReadFile, a second Open, a stat helper that opens...).
//
// The agent holds no locks, but it still opens the lock file exactly once
// and keeps that descriptor for its lifetime: every open of the file is an
// inotify IN_OPEN hint to its own watcher, and the descriptors are plain
// ints, not *os.File, so that no finalizer can ever close one behind our
// back.
//
// # Why raw inotify and not fsnotify
//
// perfalloc only opens the lock file and locks it; it never writes, creates
// or renames it. The kernel reports no event at all for taking or dropping a
// record lock, so the only filesystem hints are IN_OPEN and IN_CLOSE. The
// fsnotify module (v1.10.1) keeps its open/close operations unexported
// (xUnportableOpen, withOps), so through its public API a perfalloc run is
// invisible. Package inotify therefore talks to inotify directly through
// golang.org/x/sys/unix. The hints only make the agent react sooner; the
// poll is what guarantees that a change is seen.
package reservation
