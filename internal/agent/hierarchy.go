package agent

import (
	"errors"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"perfevent/internal/cgroup"
	"perfevent/internal/metrics"
)

// hierarchyEvery is how often the agent looks again at /proc/cgroups,
// whose changes nothing signals: a v1 hierarchy unmounted lets go of
// perf_event only once its cgroups are gone, minutes later perhaps. A
// mount or an unmount is seen at once (mountinfo's poll).
const hierarchyEvery = 30 * time.Second

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
type hierarchyWatch struct {
	info *os.File // /proc/self/mountinfo, polled
	stop [2]int   // a pipe: closing stop[1] ends the watch
	done chan struct{}
}

func (a *Agent) watchHierarchy() {
	info, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		a.log.Warningf("cgroups: %v; a change of the cgroup hierarchy is noticed only at a reload", err)
		return
	}
	w := &hierarchyWatch{info: info, done: make(chan struct{})}
	if err := unix.Pipe2(w.stop[:], unix.O_CLOEXEC); err != nil {
		info.Close()
		a.log.Warningf("cgroups: %v; a change of the cgroup hierarchy is noticed only at a reload", err)
		return
	}
	a.hier = w
	go w.run(a)
}

func (w *hierarchyWatch) run(a *Agent) {
	defer close(w.done)
	defer unix.Close(w.stop[0])
	defer w.info.Close()
	io.ReadAll(w.info) // arms the poll: it reports mounts made after a read
	fds := []unix.PollFd{{Fd: int32(w.info.Fd()), Events: unix.POLLPRI}, {Fd: int32(w.stop[0]), Events: unix.POLLIN}}
	for {
		fds[0].Revents, fds[1].Revents = 0, 0
		_, err := unix.Poll(fds, int(hierarchyEvery/time.Millisecond))
		if err != nil && !errors.Is(err, unix.EINTR) {
			a.log.Warningf("cgroups: polling /proc/self/mountinfo: %v; a change of the cgroup hierarchy is noticed only at a reload", err)
			return
		}
		if fds[1].Revents != 0 {
			return
		}
		if fds[0].Revents != 0 {
			w.info.Seek(0, io.SeekStart)
			io.ReadAll(w.info) // rearms the poll
		}
		a.checkHierarchy()
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
	if mode == g.cgMode {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.reserved {
		a.reloadDue = true
		a.log.Infof("cgroups: perfevent.cgroup.mode is now %q (was %q); the counters follow when perfalloc releases them", mode, g.cgMode)
		return
	}
	a.log.Infof("cgroups: perfevent.cgroup.mode is now %q (was %q); rebuilding the counters", mode, g.cgMode)
	a.pace()
	a.reloadLocked(false)
}

// hierarchy finds the hierarchy that owns perf_event: a.locate, which
// tests set, else this machine's.
func (a *Agent) hierarchy() (cgroup.Hierarchy, error) {
	if a.locate != nil {
		return a.locate()
	}
	return cgroup.LocateSystem()
}
