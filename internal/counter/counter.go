// Package counter owns the perf event descriptors of the agent: one per
// event per CPU, opened system-wide. It reads them, scales multiplexed counts,
// keeps the accumulated values that the agent exports, computes dutycycle,
// derived sums and the `active` count, and stops and restarts the counters
// when perfalloc reserves and releases them (see "Reservations" in
// release.go).
//
// It knows nothing about pmcd or the configuration syntax: events arrive as
// resolved perf attributes (see internal/pmu) and leave as numbers indexed by
// event and instance.
//
// # Values
//
// A counter's exported value is an accumulator owned by the agent, as in the
// C pmdaperfevent: on each read the increase of the raw count is scaled by
// Δtime_enabled/Δtime_running and added. It therefore starts near zero when
// the agent starts, and it does not jump when the counters are reopened after
// a reservation: the new descriptor starts from zero and only its own counts
// are added to the frozen value (one that was only disabled carries on from
// its own count).
//
// # Groups
//
// Reading a counter that lives on another CPU makes the kernel interrupt
// that CPU, which dominates the cost of a fetch (tens of µs per read in a
// VM). So the software events of each CPU (attr.Type PERF_TYPE_SOFTWARE)
// form perf groups there of at most maxGroup members each: the first that
// opens leads its group, the others join it in Spec order, and one read() of
// the leader returns every member's value. Software events never wait for a PMU counter, so a group of them
// is scheduled exactly as its members would be alone, and the group's
// time_enabled/time_running are each member's. Every other event (hardware,
// cache, raw, sysfs PMUs) keeps a descriptor of its own, but for msr and
// tracepoints: a hardware group larger than the PMU's counters would never be
// scheduled at all, and groups across PMUs have rules of their own. The
// exception is events given a Spec.Group, such as a ratio's operands: they
// form small groups of their own per CPU, and fall back to descriptors of
// their own when the PMU cannot take them together (ratio_group.go).
//
// # msr and tracepoints in the software group
//
// x86's msr PMU (msr/tsc, msr/aperf, msr/mperf, …) reads a free-running
// register and, like the software PMU, never refuses to schedule an
// event; a tracepoint (PERF_TYPE_TRACEPOINT) counts hits of a kernel
// probe the same way. The kernel files both kinds in the software
// context, so they may sit in a group of software events without moving
// it to another PMU. Their events therefore join their CPU's software
// group (Config.JoinSoftware, where the agent gives PERF_TYPE_TRACEPOINT
// and the type sysfs gives msr), after the software events so that one of
// those leads, and a fetch calls each CPU once rather than once for the
// group and once per msr or tracepoint event. What that changes for such
// an event, and how each case is handled:
//
//   - the kernel refuses it in the group (an older kernel, other rules):
//     it is opened on its own on that CPU, logged once, as before;
//   - a failed group read fails it with the other members: it keeps its
//     last value, shows the read error, leaves Active, and ReadFailed is
//     told once for the group;
//   - it takes the group's times, which are its own as nothing
//     multiplexes: its value is unscaled and its dutycycle 1, as alone;
//   - should such a group ever be seen never running, it is split into
//     descriptors of their own, as a starved named group is.
//
// Grouping changes the number of read() calls, not the descriptors (still
// one per event per CPU) nor what a caller sees: values, scaling,
// dutycycles, Active and instances are per (event, CPU) as before. A fetch
// that needs one software event reads its CPU's group once and updates
// every member it read. A member that fails to open is not served on that
// CPU and the group carries on without it; when the would-be leader fails,
// the next software event leads. A failed group read fails each of its
// members on that CPU.
//
// # Instances
//
// The instances of an event are the CPUs whose descriptor opened at Open, in
// the order the Spec listed them. They do not change afterwards, so indoms
// stay stable across reservations even if a CPU fails to reopen.
//
// # Concurrency and lock order
//
// A fetch runs between Begin and Fetch.End and holds Set.mu throughout, so it
// answers from one consistent state. Close, Reopen and Open may be called from
// another goroutine (the reservation watcher). They take Set.opMu first (it
// serialises them) and then Set.mu only briefly to swap descriptors in or
// out; the slow part, the perf_event_open and close system calls, happens
// outside Set.mu, so a fetch waits at most for a swap. Lock order: opMu, then
// mu. Nothing in this package calls out while holding mu except the Log
// and ReadFailed hooks, which must not call back into the Set.
package counter

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"perfevent/internal/cpulist"
	"perfevent/internal/hostfs"
	"perfevent/internal/logging"
	"perfevent/internal/perf"
)

// Spec is one event to count on a list of CPUs. Attr comes from
// internal/pmu with Type, Config, Ext1, Ext2 and the exclude bits set; the
// Set fills in Size and Read_format and clears the disabled and inherit bits.
type Spec struct {
	Name string
	Attr unix.PerfEventAttr
	CPUs []int // kernel CPU ids
	// Group, if set, opens the event in one perf group per CPU with the
	// other events of the same Group, whatever their type, so that one
	// read() gives counts over the same time (the operands of a ratio).
	// See "Named groups" in ratio_group.go.
	Group string
}

// Source is one open counter: a perf descriptor, or a fake in tests.
type Source interface {
	// Read returns the cumulative count of a counter opened on its own
	// (attr.Read_format perf.ReadFormat).
	Read() (perf.Count, error)
	// ReadGroup reads the group this Source leads (attr.Read_format
	// perf.GroupReadFormat) in one go: the group's cumulative times, and
	// into values each open counter's cumulative value in the order they
	// were opened, the leader first. len(values) is the number of counters
	// in the group. Members of a group are never read on their own.
	ReadGroup(values []uint64) (enabled, running uint64, err error)
	// Enable starts a counter opened with attr.disabled set. Only a
	// group's leader is opened so, and enabled once its members have
	// joined: the kernel does not schedule a member that joins a group
	// already counting on its CPU (see perf.OpenGroupCPU). It also undoes
	// Disable.
	Enable() error
	// Disable stops a counter, and a group's leader its whole group,
	// until Enable: the count and both times stand still meanwhile. Only
	// Release calls it, on events that hold no PMU counter.
	Disable() error
	Close() error
}

// Opener opens one event on one CPU. The event name is passed along for
// fakes and error messages; the kernel only sees attr. The leader is nil
// for a counter of its own and for the first counter of a group (its
// read_format says which); otherwise it is an open Source that this Opener
// returned for a group on the same CPU, and the new counter joins it. A
// leader comes with attr.disabled set and is enabled by the caller once the
// group is complete. attr is the caller's until Open returns: an Opener that
// keeps it must copy it.
type Opener interface {
	Open(event string, attr *unix.PerfEventAttr, cpu int, leader Source) (Source, error)
}

// KernelOpener opens real perf events with perf_event_open(2): pid -1 (every
// task), the given CPU, close-on-exec; in a group when the read_format asks
// for one.
type KernelOpener struct{}

func (KernelOpener) Open(event string, attr *unix.PerfEventAttr, cpu int, leader Source) (Source, error) {
	return openKernel(event, attr, perf.NoCgroup, cpu, leader)
}

// CgroupOpener opens real perf events like KernelOpener, but counting only
// the tasks of one cgroup (PERF_FLAG_PID_CGROUP). Dir is a descriptor of the
// cgroup's directory; it must stay open while counters are being opened
// (the kernel holds the cgroup itself once they are).
type CgroupOpener struct{ Dir int }

func (o CgroupOpener) Open(event string, attr *unix.PerfEventAttr, cpu int, leader Source) (Source, error) {
	return openKernel(event, attr, o.Dir, cpu, leader)
}

func openKernel(event string, attr *unix.PerfEventAttr, cgroup, cpu int, leader Source) (Source, error) {
	var fd *perf.FD
	var err error
	switch {
	case attr.Read_format&unix.PERF_FORMAT_GROUP == 0:
		if leader != nil {
			return nil, fmt.Errorf("counter: %q on cpu%d: joining a group needs PERF_FORMAT_GROUP in read_format", event, cpu)
		}
		fd, err = perf.OpenCgroupCPU(attr, cgroup, cpu)
	case leader == nil:
		fd, err = perf.OpenGroupCgroupCPU(attr, cgroup, cpu, nil)
	default:
		l, ok := leader.(*perf.FD)
		if !ok {
			return nil, fmt.Errorf("counter: %q on cpu%d: the group leader is a %T, not a descriptor of KernelOpener", event, cpu, leader)
		}
		fd, err = perf.OpenGroupCgroupCPU(attr, cgroup, cpu, l)
	}
	if err != nil {
		return nil, err // not a typed nil inside a Source
	}
	return fd, nil
}

// grouped says which events are read in their CPU's software group; see
// the package comment for why only software, msr and tracepoint events are.
func (s *Set) grouped(attr *unix.PerfEventAttr) bool {
	return attr.Type == unix.PERF_TYPE_SOFTWARE || slices.Contains(s.joinSoftware, attr.Type)
}

// Config holds the optional parts of a Set.
type Config struct {
	// Opener defaults to KernelOpener.
	Opener Opener
	// Log, if set, is told at Warning when reading a descriptor starts
	// failing and when it recovers: once per transition, not once per
	// fetch. It is called with Set.mu held and must not call back into the
	// Set.
	Log logging.Logger
	// CountFirstRead makes the first read after Open count in Active like
	// any other. Without it that read reports 0, as the C agent's first
	// fetch at start-up and after a reservation does; a Set that takes
	// over from another with no reservation between (a reload) sets it,
	// since there a 0 would tell clients that perfalloc had the counters.
	// Reopen after Close reports 0 either way.
	CountFirstRead bool
	// ReadFailed, if set, is called when reading a descriptor starts
	// failing, as Log is; the agent then checks whether a CPU went
	// offline. Called with Set.mu held: it must not block.
	ReadFailed func()
	// JoinSoftware lists the PMU types, besides PERF_TYPE_SOFTWARE, whose
	// events join each CPU's software group (see "msr and tracepoints in
	// the software group" in the package comment): the agent gives
	// PERF_TYPE_TRACEPOINT and the msr PMU's type, as sysfs names it.
	// Empty keeps every other PMU's events on their own descriptors.
	JoinSoftware []uint32
	// FS is where the advice on a refused open reads perf_event_paranoid;
	// the zero value is this machine's.
	FS hostfs.FS
}

// slot is one (event, CPU). There is one per event per CPU, thousands on a
// large machine, so it is kept small: ids in int32, one error field, since
// a slot whose open failed has no descriptor to read, and what its reads
// keep apart (reading), for the served slots only: on a machine that
// lacks an event, or a PMU on some CPUs, most slots never read.
type slot struct {
	src  Source   // nil while closed or when the open failed
	err  error    // why the most recent open failed (openFailed), else why the most recent read failed
	rd   *reading // its instance's in event.reads once Open served it, else nil
	cpu  int32    // kernel CPU id
	grp  int32    // index into Set.groups, or -1 when read on its own
	home int32    // the group New put it in, or -1; grp is -1 while it is split off

	ok         bool // the most recent read since the open succeeded
	served     bool // an instance of its event: it opened at Open
	off        bool // src is open but disabled by Release
	openFailed bool // err is the *OpenError of the most recent open
}

// reading is what the reads of a served slot accumulate.
type reading struct {
	last  perf.Count // previous reading of src; zero right after an open
	value uint64     // the exported accumulator
	duty  float64    // running/enabled since the open, as of the last read
}

// openErr is why the most recent open failed, or nil. The CPUs on which an
// event failed alike share one OpenError, which names one of them.
func (sl *slot) openErr() *OpenError {
	if !sl.openFailed {
		return nil
	}
	return sl.err.(*OpenError)
}

// ownOpenErr is openErr naming the slot's own CPU: a copy when the error
// is shared with another CPU.
func (sl *slot) ownOpenErr() *OpenError {
	e := sl.openErr()
	if e == nil || e.CPU == int(sl.cpu) {
		return e
	}
	own := *e
	own.CPU = int(sl.cpu)
	return &own
}

// readErr is why the most recent read failed, or nil.
func (sl *slot) readErr() error {
	if sl.openFailed {
		return nil
	}
	return sl.err
}

// opened records the outcome of an open: src, or else why it failed. It
// clears the read error, which was the previous descriptor's.
func (sl *slot) opened(src Source, e *OpenError) {
	sl.src = src
	sl.err, sl.openFailed = nil, false
	if e != nil {
		sl.err, sl.openFailed = e, true
	}
}

// ref names one (event, CPU) slot by indexes.
type ref struct{ ev, k int32 }

func mkref(ev, k int) ref { return ref{int32(ev), int32(k)} }

// maxGroup is the most events in one group. The kernel refuses a group
// whose read would exceed 16 KiB (E2BIG, at about 2,045 members with
// perf.GroupReadFormat); a quarter of that keeps each read() to 4 KiB, one
// page, and costs a CPU with thousands of software events only a few reads.
const maxGroup = 512

// group is software events of one CPU (at most maxGroup), read with one
// read() of their leader. Its slots keep their own Sources for closing and status.
type group struct {
	cpu     int
	refs    []ref  // every software slot of the CPU, in Spec order
	open    []ref  // the members open now, in open order: the leader first
	readErr error  // why the most recent read failed, to log once
	name    string // a Spec.Group; "" for the software events of the CPU
	read    bool   // read by the current fetch
	mixed   bool   // a group of software events that msr or tracepoint events joined
	split   bool   // a named group that never ran: its members open on their own
	starved bool   // split is due: seen never running, not yet reopened
}

type event struct {
	name   string
	attr   unix.PerfEventAttr // as handed to the Opener
	slots  []slot             // one per Spec CPU
	inst   []int              // indexes into slots of the served CPUs
	cpus   []int              // the served CPU ids, parallel to inst
	reads  []reading          // the served slots' readings, parallel to inst
	needed bool               // marked in the current fetch
}

type state int

const (
	unopened state = iota
	open
	closed
	released // by Release: some descriptors disabled, the others closed
)

// stopped says whether the counters are stopped for a reservation.
func (st state) stopped() bool { return st == closed || st == released }

// Set is every configured event on every one of its CPUs.
type Set struct {
	fs           hostfs.FS // Config.FS
	opener       Opener
	log          logging.Logger
	onReadFail   func()
	byName       map[string]int
	joinSoftware []uint32 // Config.JoinSoftware

	opMu sync.Mutex // serialises Open, Close and Reopen; taken before mu

	mu      sync.Mutex // guards everything below; held by a fetch
	events  []event
	groups  []group // fixed by New, but for their open members
	derived []derived
	state   state
	fresh   bool     // no read has completed since the last open
	counted bool     // Config.CountFirstRead
	muted   bool     // this fetch did the first read after an open
	nOK     int      // slots whose most recent read succeeded
	needed  []int    // events marked in this fetch, to clear them cheaply
	read    []int    // groups read in this fetch, to clear them cheaply
	vals    []uint64 // ReadGroup's buffer, for the largest group: groups are read one at a time, under mu
	fetch   Fetch

	splitDue bool // a group starved; End starts splitStarved
	splitWG  sync.WaitGroup
	carried  map[carryKey]uint64 // values of CPUs not served now; see Carry
}

// New checks the specs and prepares a Set; nothing is opened yet.
// Event names must be unique and non-empty, CPU ids non-negative and not
// repeated within an event. An event with no CPUs is accepted and never
// served, like the C agent's events whose CPU option matched nothing.
func New(specs []Spec, cfg Config) (*Set, error) {
	s := &Set{
		fs:         cfg.FS,
		opener:     cfg.Opener,
		log:        cfg.Log,
		onReadFail: cfg.ReadFailed,
		counted:    cfg.CountFirstRead,
		byName:     make(map[string]int, len(specs)),
		events:     make([]event, len(specs)),
		needed:     make([]int, 0, len(specs)),
	}
	if s.opener == nil {
		s.opener = KernelOpener{}
	}
	s.joinSoftware = cfg.JoinSoftware
	s.fetch.s = s
	nSlots := 0
	for i, sp := range specs {
		if sp.Name == "" {
			return nil, fmt.Errorf("counter: event #%d has an empty name", i+1)
		}
		if j, dup := s.byName[sp.Name]; dup {
			return nil, fmt.Errorf("counter: event %q is listed twice (#%d and #%d)", sp.Name, j+1, i+1)
		}
		s.byName[sp.Name] = i
		if err := checkCPUs(sp.Name, sp.CPUs); err != nil {
			return nil, err
		}
		nSlots += len(sp.CPUs)
	}
	// One array holds every event's slots, and the groups' members and
	// read buffers are sized before they are filled: a large machine has
	// thousands of each, which growing them one by one would copy over
	// and over at every start.
	slots := make([]slot, nSlots)
	for i, sp := range specs {
		ev := &s.events[i]
		ev.name = sp.Name
		ev.attr = sp.Attr
		ev.attr.Size = perf.AttrSize
		ev.attr.Read_format = perf.ReadFormat
		if s.grouped(&ev.attr) || sp.Group != "" {
			ev.attr.Read_format = perf.GroupReadFormat
		}
		// Open enabled (but for a group's leader, see openAll): Release
		// disables what it keeps explicitly, and inherit means nothing
		// for pid -1.
		ev.attr.Bits &^= unix.PerfBitDisabled | unix.PerfBitInherit
		n := len(sp.CPUs)
		ev.slots, slots = slots[:n:n], slots[n:]
		for k, cpu := range sp.CPUs {
			ev.slots[k].cpu = int32(cpu)
			ev.slots[k].grp = -1
			ev.slots[k].home = -1
		}
	}
	s.makeGroups(specs)
	s.read = make([]int, 0, len(s.groups))
	return s, nil
}

// checkCPUs checks an event's CPU ids: non-negative, of int32's range
// (a slot keeps them so), and none listed twice. The usual list is
// ascending, which says all of that without a set of the ids.
func checkCPUs(event string, cpus []int) error {
	ascending := true
	for k, cpu := range cpus {
		if cpu < 0 || cpu > math.MaxInt32 || k > 0 && cpu <= cpus[k-1] {
			ascending = false
			break
		}
	}
	if ascending {
		return nil
	}
	seen := make(map[int]bool, len(cpus))
	for _, cpu := range cpus {
		if cpu < 0 {
			return fmt.Errorf("counter: event %q: CPU id %d is negative", event, cpu)
		}
		if cpu > math.MaxInt32 {
			return fmt.Errorf("counter: event %q: CPU id %d is out of range", event, cpu)
		}
		if seen[cpu] {
			return fmt.Errorf("counter: event %q: CPU %d is listed twice", event, cpu)
		}
		seen[cpu] = true
	}
	return nil
}

// makeGroups puts the slots that are read in groups into s.groups: the
// events of a Spec.Group on each CPU, and each CPU's software events, msr
// and tracepoint events after the software ones, so that a software event
// leads the group when one opens, and one that the kernel refuses leaves
// the others grouped (openAll). A group holds at most maxGroup members;
// more start another group of the same CPU. It walks the slots twice,
// first to count the members, then to place them.
func (s *Set) makeGroups(specs []Spec) {
	type groupKey struct{ cpu, name int32 } // name: 1 + index into names, 0 for the software group
	var names []string
	name := make([]int32, len(specs))
	for i, sp := range specs {
		if sp.Group == "" {
			continue
		}
		j := slices.Index(names, sp.Group)
		if j < 0 {
			j = len(names)
			names = append(names, sp.Group)
		}
		name[i] = int32(j + 1)
	}
	// each calls f with every grouped slot, in the order they join.
	each := func(f func(groupKey, ref)) {
		for i := range s.events {
			ev := &s.events[i]
			if name[i] == 0 && ev.attr.Type != unix.PERF_TYPE_SOFTWARE {
				continue
			}
			for k := range ev.slots {
				f(groupKey{ev.slots[k].cpu, name[i]}, mkref(i, k))
			}
		}
		for i := range s.events {
			ev := &s.events[i]
			if name[i] != 0 || ev.attr.Type == unix.PERF_TYPE_SOFTWARE || !s.grouped(&ev.attr) {
				continue
			}
			for k := range ev.slots {
				f(groupKey{ev.slots[k].cpu, 0}, mkref(i, k))
			}
		}
	}
	type keyState struct {
		left int // members still to place
		g    int // index into s.groups of its last group, or -1
	}
	// At most one key per CPU for the software group and for each name.
	hint, total, top := 0, 0, int32(-1)
	for i := range s.events {
		ev := &s.events[i]
		hint = max(hint, len(ev.slots))
		total += len(ev.slots)
		for k := range ev.slots {
			top = max(top, ev.slots[k].cpu)
		}
	}
	hint = min(hint*(len(names)+1), total)
	keys := newKeyIndex(int(top)+1, len(names)+1, total, hint)
	states := make([]keyState, 0, hint)
	members, nGroups := 0, 0
	each(func(key groupKey, _ ref) {
		j := keys.find(key.cpu, key.name)
		if j < 0 {
			j = len(states)
			keys.set(key.cpu, key.name, j)
			states = append(states, keyState{g: -1})
		}
		if states[j].left%maxGroup == 0 {
			nGroups++
		}
		states[j].left++
		members++
	})
	if members == 0 {
		return
	}
	s.groups = make([]group, 0, nGroups)
	refs := make([]ref, members)
	largest := 0
	each(func(key groupKey, r ref) {
		ks := &states[keys.find(key.cpu, key.name)]
		g := ks.g
		if g < 0 || len(s.groups[g].refs) == maxGroup {
			g = len(s.groups)
			ks.g = g
			n := min(ks.left, maxGroup)
			grp := group{cpu: int(key.cpu), refs: refs[:0:n]}
			if key.name > 0 {
				grp.name = names[key.name-1]
			}
			refs = refs[n:]
			largest = max(largest, n)
			s.groups = append(s.groups, grp)
		}
		ks.left--
		s.groups[g].refs = append(s.groups[g].refs, r)
		if key.name == 0 && s.events[r.ev].attr.Type != unix.PERF_TYPE_SOFTWARE {
			s.groups[g].mixed = true
		}
		s.events[r.ev].slots[r.k].grp = int32(g)
		s.events[r.ev].slots[r.k].home = int32(g)
	})
	s.vals = make([]uint64, largest)
}

// keyIndex finds makeGroups' keys, a CPU and a name (0 for the software
// group): in a table by name and CPU id, as the kernel's CPU ids are dense
// (below nr_cpu_ids), or in a map when they are far sparser than the
// slots, which only a made-up Spec has. A map of thousands of keys, looked
// up twice for each grouped slot, was most of New's time on a large
// machine.
type keyIndex struct {
	table  []int32 // 1 + index into the states by name*cpus + cpu; 0: none yet
	cpus   int
	sparse map[[2]int32]int
}

func newKeyIndex(cpus, names, slots, hint int) keyIndex {
	if cpus*names <= 4*slots+1024 {
		return keyIndex{table: make([]int32, cpus*names), cpus: cpus}
	}
	return keyIndex{sparse: make(map[[2]int32]int, hint)}
}

// find is the key's index into the states, or -1.
func (x *keyIndex) find(cpu, name int32) int {
	if x.table == nil {
		if j, ok := x.sparse[[2]int32{cpu, name}]; ok {
			return j
		}
		return -1
	}
	return int(x.table[int(name)*x.cpus+int(cpu)]) - 1
}

func (x *keyIndex) set(cpu, name int32, j int) {
	if x.table == nil {
		x.sparse[[2]int32{cpu, name}] = j
		return
	}
	x.table[int(name)*x.cpus+int(cpu)] = int32(j + 1)
}

// Summary describes the outcome of Open or Reopen, for the log.
type Summary struct {
	Events int // events configured
	Served int // events with at least one open CPU
	FDs    int // descriptors open now
	Failed int // (event, CPU) opens that failed
	// Failures are those failed opens, in event order: an event's CPUs,
	// in its Spec order, in one Failure for each run of them that failed
	// alike. An event the machine lacks is one Failure, however many CPUs.
	Failures []Failure
}

// Failure is CPUs on which an event failed to open for one cause.
type Failure struct {
	*OpenError       // the cause, as one of the CPUs met it (its CPU)
	CPUs       []int // in the event's Spec order
}

// String is one line for the log, e.g.
// "14 of 16 events served on 28 descriptors; 4 opens failed".
func (m Summary) String() string {
	line := fmt.Sprintf("%d of %d events served on %d descriptors", m.Served, m.Events, m.FDs)
	if m.Failed > 0 {
		line += fmt.Sprintf("; %d opens failed", m.Failed)
	}
	return line
}

// FailureLines groups the failures by event and cause, one line each, so a
// 256-CPU machine without a PMU logs one line per event rather than 256:
// `perf_event_open failed for "cycles" on cpus 0-255: not supported on this
// machine (e.g. a VM without a hardware PMU) (ENOENT)`.
func (m Summary) FailureLines() []string {
	type key struct {
		event, advice string
		errno         unix.Errno
	}
	// A cause that comes back after another, on a later CPU of the same
	// event, joins its first line; mostly each key is one Failure.
	order := make([]key, 0, len(m.Failures))
	runs := make(map[key][]int, len(m.Failures)) // indexes into m.Failures
	for i, f := range m.Failures {
		k := key{f.Event, f.Advice, f.Errno}
		run, seen := runs[k]
		if !seen {
			order = append(order, k)
		}
		runs[k] = append(run, i)
	}
	lines := make([]string, 0, len(order))
	var cpus []int
	var b []byte // each line is written here, then copied once
	for _, k := range order {
		cpus = cpus[:0]
		for _, i := range runs[k] {
			cpus = append(cpus, m.Failures[i].CPUs...)
		}
		b = strconv.AppendQuote(append(b[:0], "perf_event_open failed for "...), k.event)
		b = AppendCause(append(append(append(b, " on "...), cpulist.Describe(cpus)...), ": "...), k.advice, k.errno)
		lines = append(lines, string(b))
	}
	return lines
}

// Open opens every event on every one of its CPUs. A failure on one CPU
// drops that CPU only; an event is served if at least one CPU opened. The
// served CPUs become the event's instances for the life of the Set. Whether
// serving nothing at all is fatal is for the caller to decide (the C agent
// refuses to start). If the counters are reserved at start-up, call Close
// right after Open: the instances still need one successful open to exist.
func (s *Set) Open() (Summary, error) {
	s.opMu.Lock()
	defer s.opMu.Unlock()
	s.mu.Lock()
	st := s.state
	s.mu.Unlock()
	if st != unopened {
		return Summary{}, errors.New("counter: Open called twice; use Reopen after Close")
	}
	o := s.openAll(false)
	s.mu.Lock()
	defer s.mu.Unlock()
	// The served slots' readings are one array, as the slots are.
	served := 0
	for i := range s.events {
		for k := range s.events[i].slots {
			if o.srcs[i][k] != nil {
				served++
			}
		}
	}
	reads := make([]reading, served)
	for i := range s.events {
		ev := &s.events[i]
		n := 0
		for k := range ev.slots {
			if o.srcs[i][k] != nil {
				n++
			}
		}
		if n == 0 {
			continue
		}
		ev.inst, ev.cpus = make([]int, 0, n), make([]int, 0, n)
		ev.reads, reads = reads[:n:n], reads[n:]
		for k := range ev.slots {
			if o.srcs[i][k] != nil {
				ev.slots[k].served = true
				ev.slots[k].rd = &ev.reads[len(ev.inst)]
				ev.inst = append(ev.inst, k)
				ev.cpus = append(ev.cpus, int(ev.slots[k].cpu))
			}
		}
	}
	s.install(o, true)
	s.fresh = !s.counted
	return s.summary(), nil
}

// opened is what openAll opened, to be installed under mu. A group's
// members in open order are its refs that joined: whichever opened first
// led it, and the others joined in the order of its refs.
type opened struct {
	srcs  [][]Source     // per event, per slot
	errs  [][]*OpenError // per event, per slot
	tried []bool         // per group: openAll opened it (it had no open member)
	solo  [][]bool       // per event, per slot: opened on its own, out of its named group
	// attr is where an attr that differs from its event's is made for
	// the Opener, one for every open rather than a copy on the heap each.
	attr *unix.PerfEventAttr
	// last is each event's latest OpenError, which its next failure for
	// the same reason shares: an event the machine lacks fails on every
	// CPU, and one OpenError rather than one per CPU keeps that cheap.
	last   []*OpenError
	advice readAdvice // what the failures so far read of the system
}

// joined says whether openAll opened r in its group, rather than on its
// own or not at all.
func (o *opened) joined(r ref) bool { return o.srcs[r.ev][r.k] != nil && !o.solo[r.ev][r.k] }

// openError is NewOpenError for ev, or the event's latest OpenError when
// this failure is alike: the same bare errno, whose advice names no CPU.
func (o *opened) openError(fs hostfs.FS, ev int, event string, cpu int, err error) *OpenError {
	if e := o.last[ev]; e != nil && e.Kind != CPUOffline {
		if errno, ok := err.(unix.Errno); ok && e.Err == error(errno) {
			return e
		}
	}
	e := new(OpenError)
	e.set(fs, event, cpu, err, &o.advice)
	o.last[ev] = e
	return e
}

// openAll opens the served slots (onlyServed) or all slots, without
// touching the Set's state, so that it can run outside mu. The slot layout
// and the served flags it reads are fixed once Open has run, and the
// descriptors change only under opMu, which the caller holds. Each group is
// opened leader first; whichever member opens first leads. What Release
// kept is left alone: a slot with a descriptor, and a group with an open
// member (one cannot join a group that has been enabled).
func (s *Set) openAll(onlyServed bool) opened {
	o := s.newOpened()
	try := func(r ref, leader Source) Source {
		ev := &s.events[r.ev]
		sl := &ev.slots[r.k]
		if onlyServed && !sl.served || sl.src != nil {
			return nil
		}
		attr := &ev.attr
		if sl.home >= 0 && leader == nil {
			// A leader waits, disabled, for its members; see Source.Enable.
			*o.attr = ev.attr
			o.attr.Bits |= unix.PerfBitDisabled
			attr = o.attr
		}
		src, err := s.opener.Open(ev.name, attr, int(sl.cpu), leader)
		if err != nil {
			o.errs[r.ev][r.k] = o.openError(s.fs, int(r.ev), ev.name, int(sl.cpu), err)
			return nil
		}
		o.srcs[r.ev][r.k] = src
		return src
	}
	for g := range s.groups {
		if len(s.groups[g].open) > 0 {
			continue
		}
		o.tried[g] = true
		if s.groups[g].split {
			for _, r := range s.groups[g].refs {
				if s.events[r.ev].slots[r.k].src == nil {
					s.openSolo(&o, r, onlyServed)
				}
			}
			continue
		}
		var leader Source
		for _, r := range s.groups[g].refs {
			if s.events[r.ev].slots[r.k].src != nil {
				continue // kept on its own through a Release
			}
			src := try(r, leader)
			if joinErr := o.errs[r.ev][r.k]; src == nil && leader != nil && s.mayGoSolo(&s.groups[g], r, joinErr) {
				// openSolo clears the slot's error when it opens, so
				// the reason the join failed is kept for the log.
				s.openSolo(&o, r, onlyServed)
				if o.srcs[r.ev][r.k] != nil && s.log != nil {
					if s.groups[g].name != "" {
						s.log.Warningf("%q does not fit in the group %s on cpu%d (%v); it is counted on its own, so its ratios mix intervals", s.events[r.ev].name, s.groups[g].name, s.groups[g].cpu, joinErr.Errno)
					} else {
						s.log.Warningf("%q cannot join the software events' group on cpu%d (%v); it is read on its own", s.events[r.ev].name, s.groups[g].cpu, joinErr.Err)
					}
				}
				continue
			}
			if src != nil && leader == nil {
				leader = src
			}
		}
		if leader == nil {
			continue
		}
		if err := leader.Enable(); err != nil {
			// A group that cannot start counts nothing: close it,
			// leader last, and let each member show why.
			refs := s.groups[g].refs
			for j := len(refs) - 1; j >= 0; j-- {
				r := refs[j]
				if !o.joined(r) {
					continue
				}
				ev := &s.events[r.ev]
				o.srcs[r.ev][r.k].Close() // its error adds nothing to err
				o.srcs[r.ev][r.k] = nil
				o.errs[r.ev][r.k] = o.openError(s.fs, int(r.ev), ev.name, s.groups[g].cpu,
					fmt.Errorf("enabling the group of software events on cpu%d: %w", s.groups[g].cpu, err))
			}
		}
	}
	for i := range s.events {
		for k := range s.events[i].slots {
			if s.events[i].slots[k].home < 0 {
				try(mkref(i, k), nil)
			}
		}
	}
	return o
}

// mayGoSolo says whether r, which failed to join g with joinErr, is worth
// opening on its own: a named group's member that the PMU cannot schedule
// with the others, or an msr or tracepoint event the kernel would not put
// in the software group for any reason (an older kernel, another PMU's rules).
// A software event that fails to join would fail on its own too.
func (s *Set) mayGoSolo(g *group, r ref, joinErr *OpenError) bool {
	if g.name != "" {
		return doesNotFit(joinErr)
	}
	return s.events[r.ev].attr.Type != unix.PERF_TYPE_SOFTWARE
}

// install puts freshly opened sources in place; mute says that the next
// read is the first since the counters were (re)started, for Active.
// Called with mu held.
func (s *Set) install(o opened, mute bool) {
	srcs, errs := o.srcs, o.errs
	// The groups' open members, in one array: on a machine that lacks a
	// PMU, or some CPUs, most groups have none.
	n := 0
	for g := range s.groups {
		if o.tried[g] {
			for _, r := range s.groups[g].refs {
				if o.joined(r) {
					n++
				}
			}
		}
	}
	joined := make([]ref, 0, n)
	for g := range s.groups {
		if o.tried[g] {
			start := len(joined)
			for _, r := range s.groups[g].refs {
				if o.joined(r) {
					joined = append(joined, r)
				}
			}
			s.groups[g].open = nil
			if len(joined) > start {
				s.groups[g].open = joined[start:len(joined):len(joined)]
			}
			s.groups[g].readErr = nil
		}
	}
	for i := range s.events {
		ev := &s.events[i]
		for k := range ev.slots {
			sl := &ev.slots[k]
			if srcs[i][k] == nil && errs[i][k] == nil {
				continue // not attempted: a CPU that was never served
			}
			sl.opened(srcs[i][k], errs[i][k])
			sl.grp = sl.home
			if o.solo[i][k] {
				sl.grp = -1
			}
			if sl.rd != nil {
				sl.rd.last = perf.Count{}
			}
			if sl.ok {
				sl.ok = false
				s.nOK--
			}
		}
	}
	s.state = open
	if mute {
		s.fresh = true
	}
}

func (s *Set) summary() Summary {
	m := Summary{Events: len(s.events)}
	failed := 0
	for i := range s.events {
		ev := &s.events[i]
		if len(ev.inst) > 0 {
			m.Served++
		}
		for k := range ev.slots {
			sl := &ev.slots[k]
			if sl.src != nil {
				m.FDs++
			}
			if sl.openFailed {
				failed++
			}
		}
	}
	if failed == 0 {
		return m
	}
	m.Failed = failed
	// Every Failure's CPUs are a part of one array.
	cpus := make([]int, 0, failed)
	for i := range s.events {
		var cause *OpenError
		for k := range s.events[i].slots {
			sl := &s.events[i].slots[k]
			e := sl.openErr()
			if e == nil {
				cause = nil
				continue
			}
			if e != cause {
				cause = e
				m.Failures = append(m.Failures, Failure{OpenError: e})
			}
			cpus = append(cpus, int(sl.cpu))
			f := &m.Failures[len(m.Failures)-1]
			f.CPUs = cpus[len(cpus)-len(f.CPUs)-1 : len(cpus) : len(cpus)]
		}
	}
	return m
}

// Close closes every descriptor, those Release kept disabled too. Values
// and dutycycles freeze at their last read, and Active reports 0 until the
// counters are reopened and read twice. When Close returns, every
// descriptor is closed. Closing a closed Set does nothing.
func (s *Set) Close() error {
	s.opMu.Lock()
	defer s.opMu.Unlock()
	type closing struct {
		src Source
		ev  int
		cpu int
	}
	var todo, leaders []closing
	s.mu.Lock()
	if s.state != open && s.state != released {
		s.mu.Unlock()
		return nil
	}
	for i := range s.events {
		ev := &s.events[i]
		for k := range ev.slots {
			sl := &ev.slots[k]
			if sl.src != nil {
				// A leader closed before its members would leave them
				// behind as counters of their own, so leaders go last.
				if sl.grp >= 0 && s.groups[sl.grp].open[0] == mkref(i, k) {
					leaders = append(leaders, closing{sl.src, i, int(sl.cpu)})
				} else {
					todo = append(todo, closing{sl.src, i, int(sl.cpu)})
				}
				sl.src = nil
			}
			sl.ok = false
			sl.off = false
		}
	}
	todo = append(todo, leaders...)
	for g := range s.groups {
		s.groups[g].open = nil
	}
	s.nOK = 0
	s.state = closed
	s.mu.Unlock()

	var errs []error
	for _, c := range todo {
		if err := c.src.Close(); err != nil {
			errs = append(errs, fmt.Errorf("counter: closing %q on cpu%d: %w", s.events[c.ev].name, c.cpu, err))
		}
	}
	return errors.Join(errs...)
}

// Reopen brings the counters back after a Close or a Release: it enables
// what Release kept (Resume, whose failures, each handled by a reopen, go
// to Config.Log) and opens every served instance that has no
// descriptor, as after a Resume that left some to reopen. Each value
// continues from where it froze; the counts made while closed are lost, as
// with the C agent. A CPU that fails to reopen keeps its frozen value and
// its error shows in Status. Reopening an open Set with nothing to reopen
// does nothing.
func (s *Set) Reopen() (Summary, error) {
	s.opMu.Lock()
	defer s.opMu.Unlock()
	s.mu.Lock()
	st := s.state
	s.mu.Unlock()
	switch st {
	case unopened:
		return Summary{}, errors.New("counter: Reopen before Open")
	case released:
		if _, errs := s.resume(); s.log != nil {
			for _, err := range errs {
				s.log.Warningf("%v", err)
			}
		}
	}
	// After a Resume, what is left to open joins counters that may have
	// been read already: Active is not muted again.
	mute := st == closed
	o := s.openAll(true)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.install(o, mute)
	return s.summary(), nil
}

// Reserved reports whether the counters are stopped by Close or Release.
// Like Status, Open, Close and Reopen it takes the lock a fetch holds: do
// not call it between Begin and End (use Fetch.Reserved there).
func (s *Set) Reserved() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state.stopped()
}

// NumEvents is the number of configured events, served or not. Event
// indexes run from 0 in Spec order.
func (s *Set) NumEvents() int { return len(s.events) }

// Name is the event's Spec name.
func (s *Set) Name(ev int) string { return s.events[ev].name }

// Lookup finds an event by name.
func (s *Set) Lookup(name string) (int, bool) {
	i, ok := s.byName[name]
	return i, ok
}

// CPUs are the event's instances: the CPU ids that opened at Open, in Spec
// order. Empty means the event is not served. Fixed once Open has returned;
// the caller must not modify the slice.
func (s *Set) CPUs(ev int) []int { return s.events[ev].cpus }

// CPUStatus is the state of one (event, CPU), for status reports.
type CPUStatus struct {
	CPU    int
	Served bool // an instance of the event
	Open   bool // a descriptor is open now
	// Disabled says that the descriptor open now was stopped by Release
	// rather than closed: it does not count.
	Disabled bool
	OpenErr  *OpenError // why the most recent open failed, if it did
	ReadErr  error      // why the most recent read failed, if it did
}

// Status lists every CPU of the event's Spec. It allocates; it is meant for
// status files and --check, not for the fetch path, and must not be called
// between Begin and End.
func (s *Set) Status(ev int) []CPUStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := &s.events[ev]
	out := make([]CPUStatus, len(e.slots))
	for k := range e.slots {
		sl := &e.slots[k]
		out[k] = CPUStatus{
			CPU:      int(sl.cpu),
			Served:   sl.served,
			Open:     sl.src != nil,
			Disabled: sl.off,
			OpenErr:  sl.ownOpenErr(),
			ReadErr:  sl.readErr(),
		}
	}
	return out
}

// Counting is what Status says of an event in short, without allocating:
// how many of its CPUs count now (open, not disabled by Release), and the
// error of the first CPU that has one, its open's or its read's. Like
// Status, it must not be called between Begin and End.
func (s *Set) Counting(ev int) (cpus int, why error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.events[ev].slots {
		sl := &s.events[ev].slots[k]
		if sl.src != nil && !sl.off {
			cpus++
		}
		if why == nil && sl.err != nil {
			why = sl.err
			if sl.openFailed {
				why = sl.ownOpenErr()
			}
		}
	}
	return cpus, why
}

// Fetch is the view of the Set during one fetch, from Begin to End. The
// metrics layer marks the events the requested metrics touch, reads them
// once with Read, then takes the values:
//
//	f := set.Begin()
//	defer f.End()
//	f.Need(ev)          // for every event (or f.NeedDerived(d)) the PDU asks for
//	f.Read()
//	v := f.Value(ev, i) // as often as needed; no further system calls
//
// A Fetch must not be used after End.
type Fetch struct {
	s *Set
}

// Begin starts a fetch and locks the Set until End. It never waits for
// perf_event_open or close calls, only for another fetch or a swap.
func (s *Set) Begin() *Fetch {
	s.mu.Lock()
	for _, i := range s.needed {
		s.events[i].needed = false
	}
	s.needed = s.needed[:0]
	for _, g := range s.read {
		s.groups[g].read = false
	}
	s.read = s.read[:0]
	s.muted = false
	return &s.fetch
}

// End finishes the fetch and unlocks the Set. If the fetch found a named
// group that never runs, End starts splitting it up in the background
// (see splitStarved): the fetch itself never opens or closes anything.
func (f *Fetch) End() {
	s := f.s
	due := s.splitDue
	s.splitDue = false
	if due {
		s.splitWG.Add(1)
	}
	s.mu.Unlock()
	if due {
		go s.splitStarved()
	}
}

// Need marks an event to be read by this fetch's Read.
func (f *Fetch) Need(ev int) {
	s := f.s
	if !s.events[ev].needed {
		s.events[ev].needed = true
		s.needed = append(s.needed, ev)
	}
}

// NeedAll marks every event. Use it when the fetch asks for `active` and
// the C agent's meaning is wanted: the count of descriptors read now.
func (f *Fetch) NeedAll() {
	for i := range f.s.events {
		f.Need(i)
	}
}

// Read reads each marked event's open descriptors once, however many
// metrics of the fetch use them: one read() per descriptor of its own, and
// one per group, whichever of its members are marked, which updates every
// member. While the Set is closed it reads nothing and the values stay
// frozen.
func (f *Fetch) Read() {
	s := f.s
	if s.state != open {
		return
	}
	read := false
	for _, i := range s.needed {
		ev := &s.events[i]
		for _, k := range ev.inst {
			sl := &ev.slots[k]
			if sl.src == nil {
				continue
			}
			read = true
			if sl.grp < 0 {
				s.readSlot(ev, sl)
				continue
			}
			if g := &s.groups[sl.grp]; !g.read {
				g.read = true
				s.read = append(s.read, int(sl.grp))
				s.readGroup(g)
			}
		}
	}
	if read && s.fresh {
		// The C agent reports active=0 for the fetch that first reads
		// after the counters were (re-)enabled; consumers such as
		// SUPReMM rely on seeing that 0 around a reservation.
		s.fresh = false
		s.muted = true
	}
}

func (s *Set) readSlot(ev *event, sl *slot) {
	c, err := sl.src.Read()
	if err != nil {
		if sl.readErr() == nil {
			s.tellReadFailed("reading %q on cpu%d failed, keeping its last value: %v", ev.name, sl.cpu, err)
		}
		s.readFailed(sl, err)
		return
	}
	if sl.readErr() != nil && s.log != nil {
		s.log.Warningf("reading %q on cpu%d works again", ev.name, sl.cpu)
	}
	s.readOK(sl, c)
}

// readGroup reads a CPU's group with one read() of its leader and updates
// each open member, all with the group's times. A failure is logged once
// for the group, not once per member.
func (s *Set) readGroup(g *group) {
	lead := g.open[0]
	vals := s.vals[:len(g.open)]
	enabled, running, err := s.events[lead.ev].slots[lead.k].src.ReadGroup(vals)
	if err != nil {
		if g.readErr == nil {
			if len(g.open) == 1 {
				s.tellReadFailed("reading %s on cpu%d failed, keeping its last value: %v", s.memberNames(g), g.cpu, err)
			} else {
				s.tellReadFailed("reading the group %s on cpu%d failed, keeping their last values: %v", s.memberNames(g), g.cpu, err)
			}
		}
		g.readErr = err
		for _, r := range g.open {
			s.readFailed(&s.events[r.ev].slots[r.k], err)
		}
		return
	}
	if g.readErr != nil {
		if s.log != nil {
			s.log.Warningf("reading %s on cpu%d works again", s.memberNames(g), g.cpu)
		}
		g.readErr = nil
	}
	if (g.name != "" || g.mixed) && !g.starved && running == 0 && enabled >= starveAfter {
		s.starve(g, enabled)
	}
	for j, r := range g.open {
		s.readOK(&s.events[r.ev].slots[r.k], perf.Count{Value: vals[j], Enabled: enabled, Running: running})
	}
}

// tellReadFailed reports a read that started failing.
func (s *Set) tellReadFailed(format string, args ...any) {
	if s.log != nil {
		s.log.Warningf(format, args...)
	}
	if s.onReadFail != nil {
		s.onReadFail()
	}
}

// memberNames lists a group's open members for the log, e.g. `"a", "b"`.
func (s *Set) memberNames(g *group) string {
	names := make([]string, len(g.open))
	for j, r := range g.open {
		names[j] = fmt.Sprintf("%q", s.events[r.ev].name)
	}
	return strings.Join(names, ", ")
}

func (s *Set) readFailed(sl *slot, err error) {
	if sl.ok {
		sl.ok = false
		s.nOK--
	}
	sl.err, sl.openFailed = err, false
}

// readOK accounts a successful reading c of sl's descriptor.
func (s *Set) readOK(sl *slot, c perf.Count) {
	sl.err, sl.openFailed = nil, false
	if !sl.ok {
		sl.ok = true
		s.nOK++
	}
	// Only a served slot is ever open, so it has its reading.
	rd := sl.rd
	// Unsigned differences are right even if a raw count wrapped.
	rd.value += Scale(c.Value-rd.last.Value, c.Enabled-rd.last.Enabled, c.Running-rd.last.Running)
	rd.last = c
	if c.Enabled != 0 {
		rd.duty = float64(c.Running) / float64(c.Enabled)
	} else {
		rd.duty = 0
	}
}

// Scale extrapolates a count made while the event was on the PMU for
// running of the enabled nanoseconds: raw × enabled / running, exactly, in
// 128-bit arithmetic. It returns raw unchanged when no scaling applies or the
// times make no sense (running is 0 or exceeds enabled), as the C agent does.
func Scale(raw, enabled, running uint64) uint64 {
	if running == 0 || running >= enabled {
		return raw
	}
	hi, lo := bits.Mul64(raw, enabled)
	if hi >= running {
		return raw // the result would not fit in 64 bits
	}
	q, _ := bits.Div64(hi, lo, running)
	return q
}

// Value is the accumulated value of instance i (an index into CPUs(ev)).
func (f *Fetch) Value(ev, i int) uint64 {
	return f.s.events[ev].reads[i].value
}

// Dutycycle is time_running/time_enabled of instance i since its last
// open, as of its last successful read; 0 before any time was enabled.
func (f *Fetch) Dutycycle(ev, i int) float64 {
	return f.s.events[ev].reads[i].duty
}

// Active is the number of open descriptors whose most recent read
// succeeded. A descriptor is one (event, CPU) instance, grouped or not: a
// group read that succeeds counts each of its members, so the number is the
// C agent's "events × CPUs read". It is 0 while the counters are closed for
// a reservation, and 0 from every open until the fetch after the one that
// first reads: exactly when the C agent reports 0. Unlike the C agent,
// which reads every counter on every fetch, a descriptor counts from its
// last read, whenever that was (a group member also when its group was read
// for another member); call NeedAll first to get the C meaning of "read by
// this fetch".
func (f *Fetch) Active() int {
	s := f.s
	if s.state != open || s.fresh || s.muted {
		return 0
	}
	return s.nOK
}

// Reserved reports whether the counters are stopped for a reservation.
func (f *Fetch) Reserved() bool { return f.s.state.stopped() }
