package agent

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"perfevent/internal/cgroup"
	"perfevent/internal/metrics"
)

// hierarchyEvery is how often the agent looks again at /proc/cgroups,
// whose changes nothing signals: a v1 hierarchy unmounted lets go of
// perf_event only once its cgroups are gone, minutes later perhaps. A
// mount or an unmount is seen at once: poll on mountinfo reports
// POLLPRI after each.
const hierarchyEvery = 30 * time.Second

// hierarchySettle is the least time between two looks prompted by mounts.
const hierarchySettle = time.Second

// followedMode is the generation's perfevent.cgroup.mode, or "" when it
// counts nothing per cgroup by choice (no cgroups.conf events), which no
// change of hierarchy alters.
func followedMode(cg *metrics.Cgroups) string {
	if cg == nil || cg.Mode == nil {
		return ""
	}
	if m := cg.Mode(); !strings.HasPrefix(m, "off:") {
		return m
	}
	return ""
}

// hierarchyWatch follows the hierarchy that owns the perf_event
// controller, and rebuilds the generation, as a reload does, when it is
// not the one the per-cgroup counters were opened on: perf_event moved to
// a v1 hierarchy mounted since, back to v2, or to one unmounted.
//
// mountinfo is polled on a descriptor of its own, not an os.File: the
// runtime's poller would register an os.File with epoll, and each of its
// wake-ups would take the mount event that this poll waits for (the
// kernel reports a mount to the first poll after it only).
type hierarchyWatch struct {
	info int // mountinfo, at path
	path string
	stop [2]int // a pipe: closing stop[1] ends the watch
	done chan struct{}
}

// followHierarchy starts the hierarchy watch once a generation counts per
// cgroup (cgMode), and not while the agent closes; a.mu is held. Until
// then no change of hierarchy alters what is served, and the watch, a
// thread waiting in poll(2) for the agent's life, would cost a thread and
// its wake-ups for nothing.
func (a *Agent) followHierarchy(g *generation) {
	if g.cgMode != "" && a.hier == nil && !a.closing.Load() {
		a.watchHierarchy()
	}
}

func (a *Agent) watchHierarchy() {
	path := a.fs.MountinfoFile()
	info, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		a.log.Warningf("cgroups: %s: %v; a change of the cgroup hierarchy is noticed only at a reload", path, err)
		return
	}
	w := &hierarchyWatch{info: info, path: path, done: make(chan struct{})}
	if err := unix.Pipe2(w.stop[:], unix.O_CLOEXEC); err != nil {
		unix.Close(info)
		a.log.Warningf("cgroups: %v; a change of the cgroup hierarchy is noticed only at a reload", err)
		return
	}
	a.hier = w
	go w.run(a)
}

func (w *hierarchyWatch) run(a *Agent) {
	defer close(w.done)
	defer unix.Close(w.stop[0])
	defer unix.Close(w.info)
	fds := []unix.PollFd{{Fd: int32(w.info), Events: unix.POLLPRI}, {Fd: int32(w.stop[0]), Events: unix.POLLIN}}
	for {
		fds[0].Revents, fds[1].Revents = 0, 0
		_, err := unix.Poll(fds, int(hierarchyEvery/time.Millisecond))
		if err != nil && !errors.Is(err, unix.EINTR) {
			a.log.Warningf("cgroups: polling %s: %v; a change of the cgroup hierarchy is noticed only at a reload", w.path, err)
			return
		}
		if fds[1].Revents != 0 {
			return
		}
		a.log.Debugf("cgroups: looking at the hierarchy again (mountinfo poll %#x)", fds[0].Revents)
		a.checkHierarchy()
		if fds[0].Revents != 0 {
			// A machine starting containers mounts many times a second:
			// one look a second is enough. A mount meanwhile is reported
			// by the next poll.
			rest := fds[1:]
			if _, err := unix.Poll(rest, int(hierarchySettle/time.Millisecond)); err == nil && rest[0].Revents != 0 {
				return
			}
		}
	}
}

func (w *hierarchyWatch) close() {
	unix.Close(w.stop[1])
	<-w.done
}

// checkHierarchy rebuilds the generation if the hierarchy that owns
// perf_event is no longer the one it counts on. Like a CPU going offline,
// it waits while perfalloc holds the counters and takes its turn in the
// reopen pacing.
func (a *Agent) checkHierarchy() {
	g := a.gen.Load()
	if g == nil || g.cgMode == "" {
		return
	}
	mode := cgroup.Mode(a.hierarchy())
	a.log.Debugf("cgroups: perfevent.cgroup.mode would be %q", mode)
	if mode == g.cgMode {
		a.probeAgain(g)
		return
	}
	a.rebuildFor(fmt.Sprintf("cgroups: perfevent.cgroup.mode is now %q (was %q)", mode, g.cgMode))
}

// probeAgain rebuilds g's generation once the cgroups below the root have
// the perf_event controller, if g counts nothing for want of it: writing
// the root's cgroup.subtree_control, as the Warning says to, changes
// nothing that mountinfo or /proc/cgroups would show.
func (a *Agent) probeAgain(g *generation) {
	if !g.cgUnreached {
		return
	}
	h, err := a.hierarchy()
	if err != nil {
		return
	}
	cpus, _ := a.fs.FS.OnlineCPUs()
	if a.unreached(h, cpus) == "" {
		a.rebuildFor(fmt.Sprintf("cgroups: the cgroups below the root of the %s have the perf_event controller now", h))
	}
}

// hierarchy finds the hierarchy that owns perf_event: a.locate, which
// tests set, else this machine's.
func (a *Agent) hierarchy() (cgroup.Hierarchy, error) {
	if a.locate != nil {
		return a.locate()
	}
	return cgroup.LocateOn(a.fs.FS)
}
