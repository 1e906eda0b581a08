package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
	"golang.org/x/time/rate"

	"perfevent/internal/bpfcount"
	"perfevent/internal/counter"
	"perfevent/internal/logging"
)

// Event is one event counted in every cgroup: a configured event's name
// and its resolved attribute (see internal/pmu).
type Event struct {
	Name string
	Attr unix.PerfEventAttr
}

// Instance is one counted cgroup.
type Instance struct {
	ID   int32
	Path string // relative to the mount, e.g. /system.slice/pmcd.service
}

// Options configure a Tracker.
type Options struct {
	Hierarchy Hierarchy
	Patterns  []string
	Max       int // the most cgroups counted at once; DefaultMax if 0
	// Descriptors bounds the counter descriptors, cgroups × events ×
	// CPUs, and so the cgroups counted; DefaultDescriptors if 0.
	Descriptors int
	Events      []Event
	CPUs        []int // kernel CPU ids to count on
	IDs         *IDs  // instance ids; NewIDs if nil
	// Opener returns what opens the counters of the cgroup whose
	// directory dir is; nil means counter.CgroupOpener (the kernel).
	Opener func(dir *os.File) counter.Opener
	// Rescan is the interval of the periodic rescan; 0 means
	// RescanNotified when inotify works, RescanPolled when it does not.
	Rescan time.Duration
	// NoNotify rescans on the interval alone, without inotify.
	NoNotify bool
	// Log is told, at Info, what is not counted and why, and at Debug each
	// cgroup counted, closed or failing; nil discards.
	Log logging.Logger
	// BPF, if set, counts through its program instead of a counter.Set
	// per cgroup: a cgroup costs a slot in its map and no descriptor. It
	// is the agent's and outlives the Tracker, which adds and removes its
	// cgroups, and detaches its CPUs for perfalloc and attaches them
	// again after (the agent attaches them first).
	BPF *bpfcount.Counter
	// Changed, if set, is told the instances after each change of the
	// counted set. It is called from the Tracker's goroutines (or from
	// Start), never while a fetch holds the Tracker.
	Changed func([]Instance)
}

// member is one counted cgroup.
type member struct {
	id   int32
	path string
	// ino is the cgroup's id, its directory's inode: a cgroup removed and
	// made again under the same path is another cgroup, with another id,
	// which the counters of the first never see. Holding dir keeps the
	// inode from being reused meanwhile on any file system.
	ino uint64
	dir *os.File     // kept open: Reopen after perfalloc needs it; nil with BPF
	set *counter.Set // one spec per Options.Events, in order; nil with BPF
	// With BPF: the cgroup's slot, the slot's sums as last read (per
	// event, per Options.CPUs, or one total for a Totalled event: from
	// Tracker.lastAt), and what they added up to, scaled, since the
	// member was opened.
	bpf  *bpfcount.Counter
	slot int
	last []bpfcount.Reading
	acc  []uint64
	base []uint64  // per event: what the instance had served before set
	vals []uint64  // per event: base + the sum over CPUs as of the last Read
	duty []float64 // per event: the mean dutycycle over its CPUs
	fds  int
}

// Tracker counts the matching cgroups of one hierarchy and follows the
// tree as cgroups come and go.
type Tracker struct {
	o Options

	opMu     sync.Mutex // serialises rescans, Close, Reopen and Stop; taken before mu
	mu       sync.Mutex // guards members and reserved; held by Read
	members  []*member  // ascending by id
	reserved bool
	stopped  bool
	missed   bool // a rescan was skipped while reserved; opMu

	capWhy    string          // what sets o.Max, for the log
	left      map[string]bool // left out for the cap, as logged; opMu
	quiet     map[string]bool // failed to open, as logged; opMu
	truncated bool            // the last scan stopped at maxWalk, as logged; opMu
	notify    int             // inotify's descriptor, or -1
	stopR     int             // a pipe whose write end Stop closes: ends readNotify's poll
	stopW     int
	watched   map[string]uint64 // directories watched, by path: their inodes; opMu
	seen      map[string]uint64 // not opened by a busy rescan, by path: their inodes; opMu
	// closing says that Close waits for opMu: a rescan stops opening
	// cgroups then, so that perfalloc's wait is one open at most.
	closing atomic.Int32
	closes  sync.WaitGroup // rescans closing what they removed
	// logs paces the Info lines about cgroups, which churn would
	// otherwise repeat without end; hushed counts those not logged.
	logs   *rate.Limiter
	hushed int
	now    func() time.Time

	snap     []*member          // the members of the last Read; Read's caller only
	readings []bpfcount.Reading // per CPU, advance's; t.mu
	// lastAt is with BPF where member.last holds each event's readings,
	// and at the end their number.
	lastAt   []int
	wake     chan struct{}
	started  chan struct{} // a rescan started since the last poke
	done     chan struct{}
	finished sync.WaitGroup
}

// New prepares a Tracker; Start makes it count.
func New(o Options) *Tracker {
	if o.Max <= 0 {
		o.Max = DefaultMax
	}
	if o.Descriptors <= 0 {
		o.Descriptors = DefaultDescriptors
	}
	capWhy := "max in cgroups.conf"
	if o.BPF != nil {
		if room := o.BPF.Room(); room < o.Max {
			o.Max = room
			capWhy = fmt.Sprintf("the room for cgroups of the BPF map loaded at start-up, within %d MiB of sums", bpfcount.MaxSums>>20)
		}
	} else if per := len(o.Events) * len(o.CPUs); per > 0 && o.Descriptors/per < o.Max {
		o.Max = o.Descriptors / per
		capWhy = fmt.Sprintf("descriptors %d in cgroups.conf for %d events × %d CPUs a cgroup", o.Descriptors, len(o.Events), len(o.CPUs))
	}
	if o.IDs == nil {
		o.IDs = NewIDs()
	}
	if o.Opener == nil {
		o.Opener = func(dir *os.File) counter.Opener { return counter.CgroupOpener{Dir: int(dir.Fd())} }
	}
	o.Log = logging.Or(o.Log)
	var lastAt []int
	if o.BPF != nil {
		lastAt = make([]int, len(o.Events)+1)
		for ev := range o.Events {
			n := len(o.CPUs)
			if o.BPF.Totalled(ev) {
				n = 1
			}
			lastAt[ev+1] = lastAt[ev] + n
		}
	}
	return &Tracker{
		lastAt:   lastAt,
		o:        o,
		notify:   -1,
		capWhy:   capWhy,
		left:     map[string]bool{},
		quiet:    map[string]bool{},
		logs:     rate.NewLimiter(rate.Every(logEvery), logBurst),
		now:      time.Now,
		snap:     make([]*member, 0, o.Max),
		readings: make([]bpfcount.Reading, len(o.CPUs)),
		wake:     make(chan struct{}, 1),
		started:  make(chan struct{}, 1),
		done:     make(chan struct{}),
	}
}

// The Info lines about cgroups: logBurst at once, then one per logEvery;
// the next line logged says how many were not.
const (
	logEvery = time.Minute
	logBurst = 3
)

// infof logs a line about cgroups, unless too many came lately.
func (t *Tracker) infof(format string, args ...any) {
	if !t.logs.AllowN(t.now(), 1) {
		t.hushed++
		return
	}
	if t.hushed > 0 {
		format += fmt.Sprintf(" (%d more lines about cgroups were not logged in the last %v)", t.hushed, logEvery)
		t.hushed = 0
	}
	t.o.Log.Infof(format, args...)
}

// How often a Tracker rescans on its own. With inotify the rescan is a
// safety net for what the watches miss, and an idle agent should not wake
// for it every second (each Go timer tick wakes the runtime's poller, its
// monitor thread and often a worker). The one gap in the watches that a
// busy machine hits is a directory made inside a new one between the
// rescan's read of it and the watch added on it; the rescan settleRescan
// after every event-driven one closes it.
const (
	RescanNotified = 30 * time.Second
	RescanPolled   = time.Second
	settleRescan   = time.Second
	// The rescans that inotify asks for: rescanBurst at once, then one
	// per rescanEvery while the tree keeps changing. A new service
	// appears within milliseconds on a quiet machine; a thousand cgroups
	// made and removed a second cost a rescan every two seconds, not a thousand
	// (each walks the tree, and opens every short-lived cgroup it finds).
	rescanEvery = 2 * time.Second
	rescanBurst = 2
)

// Start scans the tree once, opening what matches, and then follows it:
// inotify on the directories whose children can match, and a rescan every
// Options.Rescan. Stop ends it.
func (t *Tracker) Start() {
	if !t.o.NoNotify {
		fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
		if err != nil {
			if t.o.Rescan <= 0 {
				t.o.Rescan = RescanPolled
			}
			t.o.Log.Infof("cgroups: inotify: %v; new cgroups are found by the rescan every %v", err, t.o.Rescan)
		} else if p, err := pipe(); err != nil {
			unix.Close(fd)
			t.o.Log.Infof("cgroups: pipe: %v; new cgroups are found by the rescan every %v", err, t.o.Rescan)
		} else {
			t.notify, t.stopR, t.stopW = fd, p[0], p[1]
		}
	}
	if t.o.Rescan <= 0 {
		t.o.Rescan = RescanPolled
		if t.notify >= 0 {
			t.o.Rescan = RescanNotified
		}
	}
	t.rescan()
	t.finished.Add(1)
	go t.loop()
	if t.notify >= 0 {
		t.finished.Add(1)
		go t.readNotify()
	}
}

func (t *Tracker) loop() {
	defer t.finished.Done()
	timer := time.NewTimer(t.o.Rescan)
	defer timer.Stop()
	pace := rate.NewLimiter(rate.Every(rescanEvery), rescanBurst)
	for {
		next := t.o.Rescan
		busy := false
		select {
		case <-t.done:
			return
		case <-timer.C:
		case <-t.wake:
			// A burst of events (systemd starting a unit makes several
			// directories) is one rescan, and rescans keep to the pace
			// however fast cgroups come and go.
			delay := pace.Reserve().Delay()
			busy = delay > 0
			pause := time.NewTimer(max(20*time.Millisecond, delay))
			select {
			case <-t.done:
				pause.Stop()
				return
			case <-pause.C:
			}
			select {
			case <-t.wake:
			default:
			}
			next = min(next, settleRescan)
		}
		select {
		case t.started <- struct{}{}:
		default:
		}
		t.scanTree(busy)
		timer.Reset(next)
	}
}

func pipe() ([2]int, error) {
	var p [2]int
	err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK)
	return p, err
}

// notifyBuffer is readNotify's buffer, on the heap: its pages are touched
// only as reads fill them, where 64 KiB on the stack would grow the
// goroutine's stack to 128 KiB, copied and zeroed, before its first wait.
//
//go:noinline
func notifyBuffer() []byte { return make([]byte, 64<<10) }

// readNotify turns inotify events into rescans. Which directory changed
// does not matter: a rescan of the levels that can match is cheap. Once
// it has asked for a rescan it reads no more until that rescan starts:
// under churn the events of a second cost one read, not thousands of
// wake-ups. (Should the kernel's queue overflow meanwhile, the overflow
// is an event too, and the rescan adds whatever watches are missing.)
// It waits in poll(2) on its own thread rather than in the runtime's
// poller: an event arriving while no one reads would wake the poller,
// and with it the scheduler, for nothing, a thousand times a second.
func (t *Tracker) readNotify() {
	defer t.finished.Done()
	buf := notifyBuffer()
	for {
		fds := []unix.PollFd{{Fd: int32(t.notify), Events: unix.POLLIN}, {Fd: int32(t.stopR), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, -1); err != nil && err != unix.EINTR {
			return
		}
		if fds[1].Revents != 0 {
			return // Stop closed the pipe
		}
		if fds[0].Revents == 0 {
			continue
		}
		for range 16 { // drained (EAGAIN), or what came meanwhile waits
			if _, err := unix.Read(t.notify, buf); err != nil {
				break
			}
		}
		t.poke()
		select {
		case <-t.started:
		case <-t.done:
			return
		}
	}
}

func (t *Tracker) poke() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

const watchMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_ONLYDIR

// rescan brings the counted set in line with the tree.
func (t *Tracker) rescan() { t.scanTree(false) }

// scanTree is rescan. busy says that the tree keeps changing: a cgroup
// is opened only if the previous rescan saw it too (the same inode), so
// that the many that live less than the pace of rescans cost a directory
// entry each, not an open and a close; the settle rescan a second after
// the last event, not busy, opens the rest.
func (t *Tracker) scanTree(busy bool) {
	var removed []*member
	t.opMu.Lock()
	defer func() {
		if len(removed) == 0 {
			t.opMu.Unlock()
			return
		}
		// Closing takes the kernel an IPI per CPU and event: perfalloc's
		// Close waits for it while it releases the other counters. (No
		// rescan removes anything while reserved, so Close's Wait never
		// meets an Add.)
		t.closes.Add(1)
		t.opMu.Unlock()
		for _, m := range removed {
			m.close()
		}
		t.closes.Done()
	}()
	if t.stopped || t.reserved {
		t.missed = t.reserved // Resume asks for the rescan, Reopen makes it
		return
	}
	t.missed = false
	yield := func() bool { return t.closing.Load() > 0 }
	matched, dirs, truncated := scan(t.o.Hierarchy.Mount, t.o.Patterns, yield)
	if yield() {
		t.missed = true // perfalloc waits: Reopen finishes the job
		return
	}
	if truncated != t.truncated {
		t.truncated = truncated
		if truncated {
			t.infof("cgroups: the patterns reach more than %d directories; only the first %d (by depth, then name) are looked at", maxWalk, maxWalk)
		}
	}
	if t.notify >= 0 {
		// A directory is watched once; a removed one's watch goes with
		// it, and one made again under its path has another inode.
		now := make(map[string]uint64, len(dirs))
		for _, d := range dirs {
			now[d.path] = d.ino
			if w, ok := t.watched[d.path]; !ok || w != d.ino || d.ino == 0 {
				unix.InotifyAddWatch(t.notify, filepath.Join(t.o.Hierarchy.Mount, d.path), watchMask)
			}
		}
		t.watched = now
	}
	t.mu.Lock()
	members := slices.Clone(t.members)
	t.mu.Unlock()
	counted := make(map[string]*member, len(members))
	isCounted := make(map[string]bool, len(members))
	for _, m := range members {
		counted[m.path] = m
		isCounted[m.path] = true
	}
	inos := make(map[string]uint64, len(matched))
	for _, m := range matched {
		inos[m.path] = m.ino
	}
	chosen, left := choose(matched, isCounted, t.o.Max)
	t.logLeft(left)
	t.forgetFailures(matched)

	// A counted path whose directory is another cgroup now was removed
	// and made again: its counters count the dead one, so it is opened
	// anew, and its instance continues from the old one's values.
	want := make(map[string]bool, len(chosen))
	var added []*member
	replaced := map[*member]bool{}
	seen := t.seen
	t.seen = map[string]uint64{}
	for _, p := range chosen {
		want[p] = true
		old := counted[p]
		if old != nil && !t.recreated(old, inos[p]) {
			continue
		}
		if busy && (inos[p] == 0 || seen[p] != inos[p]) {
			t.seen[p] = inos[p] // a re-created one keeps its old member meanwhile
			continue
		}
		if yield() {
			t.missed = true
			break
		}
		if old != nil {
			replaced[old] = true
		}
		if m := t.open(p, old); m != nil {
			added = append(added, m)
		}
	}
	t.mu.Lock()
	kept := t.members[:0:0]
	for _, m := range t.members {
		if want[m.path] && !replaced[m] {
			kept = append(kept, m)
		} else {
			removed = append(removed, m)
		}
	}
	kept = append(kept, added...)
	slices.SortFunc(kept, func(a, b *member) int { return int(a.id - b.id) })
	t.members = kept
	last := make([]map[valueKey]uint64, len(removed))
	for i, m := range removed {
		last[i] = t.values(m)
	}
	t.mu.Unlock()
	for i, m := range removed {
		if replaced[m] {
			t.o.Log.Debugf("cgroups: %s was removed and made again; its instance continues on the new cgroup", m.path)
		} else {
			t.o.Log.Debugf("cgroups: %s is gone or no longer matches; closing its %d descriptors", m.path, m.fds)
		}
		t.o.IDs.release(m.path, last[i])
	}
	if len(added) > 0 || len(removed) > 0 {
		t.changed()
	}
}

// recreated says whether m's path names another cgroup than m's now (or
// none: then the scan that found it raced with its removal), from the
// inode the scan read (ino), or else the path's.
func (t *Tracker) recreated(m *member, ino uint64) bool {
	if ino != 0 {
		return ino != m.ino
	}
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(t.o.Hierarchy.Mount, m.path), &st); err != nil {
		return true
	}
	return st.Ino != m.ino
}

// readValues reads every event of m now, without touching what the last
// Read keeps for Len and At (a fetch in flight may still use it); t.mu
// held.
func (t *Tracker) readValues(m *member) map[valueKey]uint64 {
	out := t.values(m)
	if m.bpf != nil {
		for ev, e := range t.o.Events {
			t.advance(m, ev)
			k := valueKey{e.Name, e.Attr}
			out[k] = max(out[k], m.base[ev]+m.acc[ev])
		}
		return out
	}
	f := m.set.Begin()
	defer f.End()
	for ev := range t.o.Events {
		f.Need(ev)
	}
	f.Read()
	for ev, e := range t.o.Events {
		sum := m.base[ev]
		for i := range len(m.set.CPUs(ev)) {
			sum += f.Value(ev, i)
		}
		k := valueKey{e.Name, e.Attr}
		out[k] = max(out[k], sum)
	}
	return out
}

// values is m's instance's values by event, as last served; t.mu held.
func (t *Tracker) values(m *member) map[valueKey]uint64 {
	out := make(map[valueKey]uint64, len(t.o.Events))
	for i, e := range t.o.Events {
		out[valueKey{e.Name, e.Attr}] = m.vals[i]
	}
	return out
}

// Carry makes the instances of t continue the values of old's, the
// Tracker it replaces (a reload or a CPU hotplug rebuild): each cgroup
// path counted by both starts from what old counted for the same event,
// read once more now so that nothing counted since the last fetch is
// lost, not from zero. Call it before t is read; old may be stopped after.
func (t *Tracker) Carry(old *Tracker) {
	if old == nil || old == t {
		return
	}
	prev := map[string]map[valueKey]uint64{}
	old.sync()
	old.mu.Lock()
	for _, m := range old.members {
		prev[m.path] = old.readValues(m)
	}
	old.mu.Unlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, m := range t.members {
		v, ok := prev[m.path]
		if !ok {
			continue
		}
		for i, e := range t.o.Events {
			if c := v[valueKey{e.Name, e.Attr}]; c > m.base[i] {
				m.vals[i] += c - m.base[i]
				m.base[i] = c
			}
		}
	}
}

func (t *Tracker) changed() {
	if t.o.Changed != nil {
		t.o.Changed(t.Instances())
	}
}

// logLeft logs each cgroup left out for the cap once, until it is counted
// or gone, within the pace of infof.
func (t *Tracker) logLeft(left []string) {
	now := make(map[string]bool, len(left))
	var fresh []string
	for _, p := range left {
		now[p] = true
		if !t.left[p] {
			fresh = append(fresh, p)
		}
	}
	t.left = now
	if len(fresh) == 0 {
		return
	}
	const show = 10
	list := fmt.Sprint(fresh[:min(show, len(fresh))])
	if len(fresh) > show {
		list += fmt.Sprintf(" and %d more", len(fresh)-show)
	}
	t.infof("cgroups: %d matching cgroups not counted, the cap of %d cgroups (%s) being taken by cgroups of the same or earlier patterns: %s", len(fresh), t.o.Max, t.capWhy, list)
}

// forgetFailures forgets the failures logged for cgroups that no longer
// match, so that churn does not grow t.quiet.
func (t *Tracker) forgetFailures(matched []match) {
	if len(t.quiet) == 0 {
		return
	}
	now := make(map[string]bool, len(matched))
	for _, m := range matched {
		now[m.path] = true
	}
	for p := range t.quiet {
		if !now[p] {
			delete(t.quiet, p)
		}
	}
}

// open opens the counters of one cgroup. A cgroup that vanished meanwhile
// (ENOENT, ENODEV) is dropped quietly: a Debug line, or Info once for any
// other reason.
func (t *Tracker) open(path string, prev *member) *member {
	full := filepath.Join(t.o.Hierarchy.Mount, path)
	fd, err := unix.Open(full, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.openFailed(path, err)
		return nil
	}
	dir := os.NewFile(uintptr(fd), full)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		dir.Close()
		t.openFailed(path, err)
		return nil
	}
	var set *counter.Set
	var fds int
	slot := -1
	if t.o.BPF != nil {
		// A cgroup2 id is never reused while the system runs: nothing
		// needs holding, and the descriptors stay as they are.
		dir.Close()
		dir = nil
		if d := len(components(path)); d >= bpfcount.Levels {
			t.openFailed(path, fmt.Errorf("it is %d levels below the root, and the BPF program looks %d deep", d, bpfcount.Levels-1))
			return nil
		}
		if slot, err = t.o.BPF.Add(st.Ino, path); err != nil {
			t.openFailed(path, err)
			return nil
		}
	} else if set, fds = t.openSet(path, dir); set == nil {
		return nil
	}
	delete(t.quiet, path)
	n := len(t.o.Events)
	t.o.Log.Debugf("cgroups: counting %s on %d descriptors", path, fds)
	id, last := t.o.IDs.acquire(path)
	if prev != nil {
		t.mu.Lock()
		for k, v := range t.values(prev) {
			last[k] = max(last[k], v)
		}
		t.mu.Unlock()
	}
	m := &member{id: id, path: path, ino: st.Ino, dir: dir, set: set, base: make([]uint64, n), vals: make([]uint64, n), duty: make([]float64, n), fds: fds}
	if slot >= 0 {
		m.bpf, m.slot = t.o.BPF, slot
		m.last = make([]bpfcount.Reading, t.lastAt[n])
		m.acc = make([]uint64, n)
		// The slot may hold what another generation's member counted:
		// this one counts from here.
		for ev := range n {
			if m.bpf.Totalled(ev) {
				m.last[t.lastAt[ev]] = m.bpf.Total(slot, ev)
				continue
			}
			m.bpf.ReadCPUs(slot, ev, t.o.CPUs, m.last[t.lastAt[ev]:t.lastAt[ev+1]])
		}
	}
	for i, e := range t.o.Events {
		m.base[i] = last[valueKey{e.Name, e.Attr}]
		m.vals[i] = m.base[i]
	}
	return m
}

// openSet opens the perf counters of the cgroup whose directory is dir.
func (t *Tracker) openSet(path string, dir *os.File) (*counter.Set, int) {
	specs := make([]counter.Spec, len(t.o.Events))
	for i, e := range t.o.Events {
		specs[i] = counter.Spec{Name: e.Name, Attr: e.Attr, CPUs: t.o.CPUs}
	}
	set, err := counter.New(specs, counter.Config{Opener: t.o.Opener(dir), Log: logging.AsDebug(t.o.Log), CountFirstRead: true})
	if err != nil {
		dir.Close()
		t.openFailed(path, err)
		return nil, 0
	}
	sum, err := set.Open()
	if err == nil && sum.FDs == 0 && len(sum.Failures) > 0 {
		err = sum.Failures[0].OpenError
	}
	if err != nil {
		set.Close()
		dir.Close()
		t.openFailed(path, err)
		return nil, 0
	}
	return set, sum.FDs
}

// advance adds to m what its slot counted of event ev since the last
// look, each CPU's increase scaled by its enabled/running as
// internal/counter scales a multiplexed counter, and returns the mean
// dutycycle over the CPUs; t.mu held. A Totalled event is never
// multiplexed: its total's increase is added as it is, and its
// dutycycle is 1 once the cgroup has run.
func (t *Tracker) advance(m *member, ev int) (duty float64) {
	if m.bpf.Totalled(ev) {
		r, l := m.bpf.Total(m.slot, ev), &m.last[t.lastAt[ev]]
		if r.Value >= l.Value && r.Enabled >= l.Enabled && r.Running >= l.Running {
			m.acc[ev] += counter.Scale(r.Value-l.Value, r.Enabled-l.Enabled, r.Running-l.Running)
		}
		*l = r
		if r.Enabled == 0 {
			return 0
		}
		return 1
	}
	nc := len(t.o.CPUs)
	m.bpf.ReadCPUs(m.slot, ev, t.o.CPUs, t.readings)
	last := m.last[t.lastAt[ev]:t.lastAt[ev+1]]
	for i, r := range t.readings {
		// At 768 CPUs this runs for every CPU of every cgroup and event
		// at each fetch: most CPUs did not run the cgroup since the last
		// (nothing to add), and most events are never multiplexed (a
		// dutycycle of 1 needs no division).
		if l := &last[i]; r != *l {
			if r.Value >= l.Value && r.Enabled >= l.Enabled && r.Running >= l.Running {
				m.acc[ev] += counter.Scale(r.Value-l.Value, r.Enabled-l.Enabled, r.Running-l.Running)
			}
			*l = r
		}
		switch {
		case r.Enabled == 0:
		case r.Running == r.Enabled:
			duty++
		default:
			duty += float64(r.Running) / float64(r.Enabled)
		}
	}
	if nc > 0 {
		duty /= float64(nc)
	}
	return duty
}

// sync has the BPF program charge what each CPU's running cgroup has
// counted so far, before a read.
func (t *Tracker) sync() {
	if t.o.BPF == nil {
		return
	}
	if err := t.o.BPF.Sync(); err != nil {
		t.o.Log.Debugf("cgroups: %v", err)
	}
}

func (t *Tracker) openFailed(path string, err error) {
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENODEV) {
		t.o.Log.Debugf("cgroups: %s vanished while being opened: %v", path, err)
		return
	}
	if !t.quiet[path] {
		t.quiet[path] = true
		t.infof("cgroups: %s cannot be counted: %v", path, err)
	}
}

func (m *member) close() {
	if m.set != nil {
		m.set.Close()
	}
	if m.dir != nil {
		m.dir.Close()
	}
	if m.bpf != nil {
		m.bpf.Remove(m.ino)
	}
}

// Instances lists the counted cgroups by id.
func (t *Tracker) Instances() []Instance {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Instance, len(t.members))
	for i, m := range t.members {
		out[i] = Instance{ID: m.id, Path: m.path}
	}
	return out
}

// Stats reports the counted cgroups and their open counter descriptors
// (each cgroup holds one more, its directory).
func (t *Tracker) Stats() (cgroups, fds int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.reserved {
		return len(t.members), 0
	}
	if t.o.BPF != nil {
		return len(t.members), t.o.BPF.FDs()
	}
	for _, m := range t.members {
		fds += m.fds
	}
	return len(t.members), fds
}

// Close stops every counter for perfalloc (counter.Set.Release: closed if
// it holds a PMU counter, disabled if not); the cgroups stay instances
// with their values frozen, and no new ones are opened until Reopen.
func (t *Tracker) Close() {
	t.closing.Add(1)
	t.opMu.Lock()
	t.closing.Add(-1)
	defer t.opMu.Unlock()
	t.mu.Lock()
	t.reserved = true
	members := slices.Clone(t.members)
	t.mu.Unlock()
	if t.o.BPF != nil {
		// The events may hold PMU counters, and perfalloc wants them
		// all: what the cgroups counted up to now is charged first.
		t.sync()
		for _, cpu := range t.o.CPUs {
			t.o.BPF.Detach(cpu)
		}
	}
	// One batch, so that each CPU's disables are made on it, at once.
	perf, _ := perfSets(members)
	counter.ReleaseAll(perf)
	// Not under opMu: the rescan that holds a count closes after it.
	t.opMu.Unlock()
	t.closes.Wait()
	t.opMu.Lock()
}

// perfSets are the counter.Sets of the members counted with perf
// counters, and those members.
func perfSets(members []*member) ([]*counter.Set, []*member) {
	var sets []*counter.Set
	var of []*member
	for _, m := range members {
		if m.set != nil {
			sets = append(sets, m.set)
			of = append(of, m)
		}
	}
	return sets, of
}

// Resume starts again, after perfalloc, what Close disabled (one ioctl
// per group leader, see counter.Set.Resume), and says whether anything is
// left for Reopen: counters Close had to close (those that hold a PMU
// counter), or a rescan skipped during the reservation. Resume alone
// costs nothing worth pacing; Reopen opens descriptors and walks the
// tree, so a caller paces it as it paces its own reopens: a user who
// takes and drops the lock in a loop must not make the agent do either
// on every cycle.
func (t *Tracker) Resume() (reopen bool) {
	t.opMu.Lock()
	defer t.opMu.Unlock()
	t.mu.Lock()
	members := slices.Clone(t.members)
	t.mu.Unlock()
	reopen = t.o.BPF != nil // Reopen attaches the CPUs again
	perf, of := perfSets(members)
	res, errs := counter.ResumeAll(perf)
	for i, r := range res {
		if i < len(errs) && errs[i] != nil {
			t.o.Log.Debugf("cgroups: %s: %v", of[i].path, errs[i])
		}
		reopen = reopen || r.Reopen > 0
	}
	t.mu.Lock()
	t.reserved = false
	t.mu.Unlock()
	reopen = reopen || t.missed
	t.missed = false
	return reopen
}

// Reopen reopens the counters after perfalloc (after Resume, or straight
// after Close) and has the Tracker's goroutine rescan for what changed
// meanwhile: the caller holds up the next perfalloc for as long as it
// runs, and a rescan yields to perfalloc only on that goroutine.
func (t *Tracker) Reopen() {
	t.opMu.Lock()
	t.mu.Lock()
	t.reserved = false
	members := slices.Clone(t.members)
	t.mu.Unlock()
	if t.o.BPF != nil {
		if err := t.o.BPF.AttachOnly(t.o.CPUs); err != nil {
			t.infof("cgroups: after perfalloc: %v", err)
		}
	}
	fds := make([]int, len(members))
	for i, m := range members {
		fds[i] = m.fds
		if m.set == nil {
			continue
		}
		if sum, err := m.set.Reopen(); err == nil {
			fds[i] = sum.FDs
		}
	}
	t.mu.Lock()
	for i, m := range members {
		m.fds = fds[i]
	}
	t.mu.Unlock()
	t.missed = true // until the rescan asked for below has run
	t.opMu.Unlock()
	t.poke()
}

// Stop ends discovery and closes every descriptor. The Tracker serves no
// further Read.
func (t *Tracker) Stop() {
	t.opMu.Lock()
	if t.stopped {
		t.opMu.Unlock()
		return
	}
	t.stopped = true
	close(t.done)
	if t.notify >= 0 {
		unix.Close(t.stopW)
	}
	t.mu.Lock()
	members := t.members
	t.members = nil
	last := make([]map[valueKey]uint64, len(members))
	for i, m := range members {
		last[i] = t.values(m)
	}
	t.mu.Unlock()
	t.opMu.Unlock()
	t.finished.Wait()
	if t.notify >= 0 {
		unix.Close(t.notify)
		unix.Close(t.stopR)
	}
	for i, m := range members {
		t.o.IDs.release(m.path, last[i])
		m.close()
	}
}

// Read reads the events marked in need (indexes into Options.Events) of
// every counted cgroup once, and keeps their sums over CPUs for Len and At
// until the next Read. It allocates nothing. Call it from one goroutine
// (the fetch's).
func (t *Tracker) Read(need []bool) {
	t.sync()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.snap = t.snap[:0]
	for _, m := range t.members {
		if m.bpf != nil {
			for ev, n := range need {
				if n {
					m.duty[ev] = t.advance(m, ev)
					m.vals[ev] = m.base[ev] + m.acc[ev]
				}
			}
			if len(t.snap) < cap(t.snap) {
				t.snap = append(t.snap, m)
			}
			continue
		}
		f := m.set.Begin()
		for ev, n := range need {
			if n {
				f.Need(ev)
			}
		}
		f.Read()
		for ev, n := range need {
			if !n {
				continue
			}
			sum := m.base[ev]
			var duty float64
			k := len(m.set.CPUs(ev))
			for i := range k {
				sum += f.Value(ev, i)
				duty += f.Dutycycle(ev, i)
			}
			if k > 0 {
				duty /= float64(k)
			}
			m.vals[ev], m.duty[ev] = sum, duty
		}
		f.End()
		if len(t.snap) < cap(t.snap) {
			t.snap = append(t.snap, m)
		}
	}
}

// Counted is the number of cgroups counted now.
func (t *Tracker) Counted() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.members)
}

// Len is the number of cgroups in the last Read.
func (t *Tracker) Len() int { return len(t.snap) }

// At is cgroup i of the last Read: its instance id, and event ev's value
// summed over CPUs and mean dutycycle.
func (t *Tracker) At(i, ev int) (id int32, value uint64, duty float64) {
	m := t.snap[i]
	return m.id, m.vals[ev], m.duty[ev]
}
