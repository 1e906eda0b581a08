// Package reservation lets users reserve the performance counters away from
// the agent, the way PCP's perfalloc and pmdaperfevent have always done it:
// a user process holds a POSIX read lock on byte 0 of a lock file, and the
// agent, which checks with F_GETLK, releases its counters while any such
// lock exists.
//
// The package has three parts:
//
//   - the lock file: [Open] (agent side: create safely, keep one fd for
//     F_GETLK, recreate if the file is deleted or replaced) and [Reserve]
//     (user side: take the shared read lock);
//   - the [Watcher]: inotify hints plus an F_GETLK poll that always runs,
//     every 100 ms while a lock could appear unannounced and every second
//     while nobody else has the file open, calling back on every change of
//     the reservation;
//   - the state file beside the lock file ([StateFile], [ReadState],
//     [WaitState]), in which the agent reports what it did, so that
//     perfalloc can confirm that the counters really were released.
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
// invisible. This package therefore talks to inotify directly through
// golang.org/x/sys/unix. The hints only make the agent react sooner; the
// poll is what guarantees that a change is seen.
//
// # Why the poll may slow down while nobody has the file open
//
// A record lock needs an open descriptor of the file, and every open of it
// is an IN_OPEN event to the Watcher. So while no other process has an open
// file description of the lock file, nobody can take a lock without first
// announcing it, and the hint's follow-up checks see the lock: the poll
// then runs every [Options].IdlePoll (1 s) instead of every Poll (100 ms),
// which is most of the agent's idle CPU. It runs at Poll whenever that
// reasoning does not hold: inotify off or failed, a reservation held,
// another open description known, or the count in doubt.
//
// The Watcher learns "nobody" from the kernel: a write lease (F_SETLEASE)
// is granted only if no other open file description of the file exists, in
// any process, so it takes one and gives it back at once. From there it
// counts IN_OPEN (+1) and IN_CLOSE_WRITE/IN_CLOSE_NOWRITE (−1) of the file
// it has open. A lease is not a /proc/PID/fd scan: it counts exactly what
// inotify counts (open file descriptions, so a descriptor shared by fork,
// exec or SCM_RIGHTS is one, opened once and closed once), costs one
// system call, and needs no access to other processes, which even root
// lacks for some (on our test VM, pid 1). The probe runs at Watch, after
// the file is recreated, at most once per IdlePoll while the count is in
// doubt, and whenever a close brings the count back to 0. A probe that
// events overtook is discarded.
//
// The count is in doubt (Poll again) when inotify's queue overflowed, when
// a close arrives for an open never counted, and after the lock file was
// deleted or replaced: our own open of the new file comes before the watch
// on it, and the old file's events are told apart by watch generation.
//
// What the slow poll still has to catch, within IdlePoll:
//
//   - inotify merges an event into an identical one still queued, so two
//     opens close together can look like one; if one of the two closes, the
//     count reads 0 while the other still has the file open and could lock
//     later without a new open. The confirming probe after that close
//     catches this, except when probes are refused (below).
//   - a descriptor of the agent's own file taken from it by another process
//     (pidfd_getfd, ptrace); the agent never passes it on itself.
//
// Leases are only for the file's owner or CAP_LEASE. An agent that drops
// root after creating the lock file can still probe at start (it is root
// then) but not later, so from then on it trusts the event count, and once
// the count is in doubt it polls at Poll for good, as before. A process
// that has the file open and forks a child that locks later keeps the
// count at 1 (the description is shared, no close is reported until the
// last holder closes it), so the child's lock is seen at Poll.
//
// The probe holds the lease for microseconds; a process opening the file
// in that moment waits until it is given back, or, with O_NONBLOCK, gets
// EWOULDBLOCK, which [Reserve] retries.
package reservation
