// Package lockwatch is the agent's watcher of the lock file (package
// reservation has the lock file and the state file, which perfalloc
// shares): inotify hints plus an F_GETLK poll that always runs, every
// millisecond for 100 ms after someone opens the file, every 4 ms while
// someone else has it open without a lock (10 ms once that has lasted
// 10 s without an open or a change), every millisecond while a holder
// that locks without opening is about and for the first 10 s of a
// reservation, every 100 ms while a reservation is held longer or the
// hints cannot be trusted, and once a minute while nobody else has the
// file open, calling back on every change of the reservation.
//
// The schedule of checks is a function of what the Watcher knows after a
// check and of the time (next, in schedule.go); the Watcher's loop reads the
// clock and the kernel, and hands both to it.
//
// # Why the poll may slow down while nobody has the file open
//
// A record lock needs an open descriptor of the file, and every open of it
// is an IN_OPEN event to the Watcher. So while no other process has an open
// file description of the lock file, nobody can take a lock without first
// announcing it, and the checks that follow the open see the lock: the
// poll then runs only every [Options].IdlePoll (a minute), as a safety net,
// once a probe (below) confirmed the count; while the count of 0 rests on
// events alone (probes refused) or the lock file could not be repaired, it
// runs every second. A Go timer is not free when idle: each tick wakes
// the runtime's poller, its monitor thread and often a worker, which is
// why a 1 s tick was most of an idle agent's wake-ups (BENCHMARKS.md).
// It runs at Poll (100 ms) whenever that reasoning does
// not hold: inotify off or failed, a reservation held (its end is usually
// a close, which is a hint), or the count in doubt; and at OpenPoll (4 ms)
// while another open description is known, since its owner may lock at
// any moment and taking a lock makes no inotify event. After 10 s without
// an open or a change of the reservation that slows to 10 ms: a tool that
// keeps the file open for hours costs 100 checks a second, not 250.
//
// After an IN_OPEN the Watcher checks at once, 250 µs later, and then every
// millisecond for 100 ms: the lock usually follows the open within
// microseconds, but on a busy machine the opener can lose its CPU in
// between. Both C perfalloc and ours open and then lock, so their
// reservations are seen within a millisecond of the lock, plus however
// long the agent waits for a CPU; both end them with a close, a hint too.
//
// A holder may also keep the file open and lock and unlock through that
// descriptor, which makes no event at all. When a check that no hint
// asked for, and not one of the dense checks after an open, finds that
// the reservation started or ended, such a holder is about: from then on
// the Watcher checks every millisecond while anybody else has the file
// open, reserved or not (every 10 ms once 10 s pass without an open or a
// change), and forgets it when the count of users is back to 0. Its first
// lock after its open is seen at OpenPoll. Its first unlock may come
// before the Watcher has learnt about it, when its lock followed its open
// as perfalloc's does; so every reservation is checked every millisecond
// for its first 10 s, and only then at Poll (the reservations so checked
// are drawn from the bucket of silent changes). An unlock through a kept
// descriptor after that waits for Poll until the Watcher has seen one.
//
// # How the Watcher waits
//
// It runs on a goroutine locked to its own OS thread, which sleeps in
// ppoll on the inotify descriptor and an eventfd (for Close, and for the
// end of a naming, below), with the time to the next check as the
// timeout. An event or the timeout wakes that one thread, which reads
// the events, checks and calls back; the runtime's timers would round the
// 250 µs up to a millisecond and hand
// each wake-up from the poller's thread to another, and on a busy machine
// every hand-off is a wait for a CPU. The thread is real-time
// (SCHED_FIFO at the lowest priority) when the agent may make it one, as
// root at start-up: on a busy machine its wait for a CPU, not the
// schedule, was most of a reaction, and a real-time thread preempts every
// ordinary one when it wakes. Its CPU is bounded by what follows (what a
// user can make it do), and the kernel keeps 5 % of each CPU for ordinary
// threads. Without the privilege it asks for a 100 µs slice instead
// (sched_setattr's sched_runtime, honoured by EEVDF since Linux 6.12), so
// that when it wakes it may preempt a busy process of the same priority
// instead of waiting for that process's slice to run out. The callback,
// which disables or closes the agent's counters, runs on that thread. While
// nobody has the file open the thread sleeps for IdlePoll at a time: no
// other wake-up.
//
// The Watcher learns "nobody" from the kernel: a write lease (F_SETLEASE)
// is granted only if no other open file description of the file exists, in
// any process, so it takes one and gives it back at once. From there it
// counts IN_OPEN (+1) and IN_CLOSE_WRITE/IN_CLOSE_NOWRITE (−1) of the file
// it has open. A lease is not a /proc/PID/fd scan: it counts exactly what
// inotify counts (open file descriptions, so a descriptor shared by fork,
// exec or SCM_RIGHTS is one, opened once and closed once), costs one
// system call, and needs no access to other processes, which even root
// lacks for some (on our test VM, pid 1). The probe runs at Start, after
// the file is recreated, at most once a second while the count is in
// doubt, and whenever a close brings the count back to 0. A probe that
// events overtook is discarded.
//
// The count is in doubt (Poll again) when inotify's queue overflowed, when
// a close arrives for an open never counted, and after the lock file was
// deleted or replaced: our own open of the new file comes before the watch
// on it, and the old file's events are told apart by watch generation.
//
// A deleted, renamed or replaced lock file is an event of its directory or
// of the file (IN_DELETE, IN_MOVED_*, IN_CREATE, IN_DELETE_SELF,
// IN_MOVE_SELF, IN_ATTRIB for its mode), which makes the next check run
// Ensure at once; no timer is needed for that. What the slow poll still
// has to catch, within IdlePoll:
//
//   - inotify merges an event into an identical one still queued, so two
//     opens close together can look like one; if one of the two closes, the
//     count reads 0 while the other still has the file open and could lock
//     later without a new open. The confirming probe after that close
//     catches this, except when probes are refused (below).
//   - a descriptor of the agent's own file taken from it by another process
//     (pidfd_getfd, ptrace); the agent never passes it on itself.
//   - the lock file's directory itself renamed or replaced: the watches
//     follow the old inodes, so only Ensure's Lstat of the path sees it.
//
// Leases are only for the file's owner or CAP_LEASE. An agent that drops
// root after creating the lock file can still probe at start (it is root
// then) but not later, so from then on it trusts the event count, and once
// the count is in doubt it polls at Poll for good, as before, apart from
// the dense checks after each open. A process that has the file open and
// forks a child that locks later keeps the count at 1 (the description is
// shared, no close is reported until the last holder closes it), so the
// child's lock is seen at OpenPoll.
//
// # What a user can make the Watcher do
//
// Any local user can open and lock the file, so the Watcher's work must
// not grow with what they do. Whether the counters are reserved is one
// F_GETLK; /proc/locks, which any user can make megabytes long with locks
// on a file of their own, is read only to name the holders, when a
// reservation starts or a hint says they may have changed, at most
// 256 KiB of it, and never again before 50 times the last read's CPU time has
// passed. The read runs on a goroutine of its own, never on the
// watcher's thread: to list the locks the kernel takes its file-lock rwsem
// for writing, which first waits for an RCU grace period, so a read that
// costs 0.1 ms of CPU takes 4-12 ms whenever the previous one is more than
// a few milliseconds old, and a check held up behind it would see an
// unlock that much later.
// The checks go on meanwhile with F_GETLK's holder; the names replace it
// when the read is done, unless that reservation has ended by then.
// Checks that hints ask for come at most one per millisecond, from
// a bucket of 200 that refills at 50 a second, and then one per OpenPoll;
// the inotify queue is read at the same pace. A flood of events (more than
// 128 in one read, at more than 32,000 a second) stops the watch on closes
// until opens pause for a
// second: identical events still queued merge, so a loop of opens is then
// one event per read, and the count of users is given up for that time
// (Poll, and the dense checks after each open). attack_test.go measures the
// cost of each attack; RELIABILITY.md has the figures.
//
// The probe holds the lease for microseconds; a process opening the file
// in that moment waits until it is given back, or, with O_NONBLOCK, gets
// EWOULDBLOCK, which [reservation.Reserve] retries.
package lockwatch
