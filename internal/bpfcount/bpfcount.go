package bpfcount

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"perfevent/internal/bpf"
	"perfevent/internal/perf"
)

// Levels is how deep below the root a counted cgroup may be: the program
// looks at the running task's ancestors at levels 0 to Levels-1 (a
// Kubernetes container is at level 4 or 5).
const Levels = 32

// MaxEvents bounds the events: the program keeps one delta per event on
// its 512-byte stack.
const MaxEvents = 16

// MaxSums bounds the kernel memory of the sums, 24 bytes per cgroup and
// event per possible CPU for an event that may be multiplexed, and per
// cgroup and event alone for one that never is (see Totalled): Load
// makes room for fewer cgroups than asked rather than take more (1,024
// cgroups of 2 hardware events on 768 CPUs take 36 MiB, of 2 software
// events 48 KiB).
const MaxSums = 64 << 20

// Totalled says whether an event of type typ is charged to one total per
// cgroup rather than one sum per CPU. The per-CPU sums exist so that a
// multiplexed event is scaled by its own enabled and running times on
// each CPU; a software event or a tracepoint is never multiplexed (its
// running time is its enabled time), so its counts may be added up
// across CPUs as they come. Hardware, raw, cache and PMU types may be
// multiplexed.
func Totalled(typ uint32) bool {
	return typ == unix.PERF_TYPE_SOFTWARE || typ == unix.PERF_TYPE_TRACEPOINT
}

// cgroupSwitches is PERF_COUNT_SW_CGROUP_SWITCHES (Linux 5.13): a software
// event that counts each switch between tasks of different cgroups on a
// CPU, counted before the switch, while the outgoing task is current.
const cgroupSwitches = 11

// license must be GPL-compatible: the kernel lends bpf_perf_event_read_value
// only to such programs. A variable, so that a test can have the kernel
// refuse the program.
var license = "Dual MIT/GPL"

// Options configure Load.
type Options struct {
	// Events are counted on every CPU attached, system-wide, and their
	// deltas charged to the running cgroup at each switch. Their Size and
	// Read_format are set by Load; the rest (type, config, exclude bits)
	// is the caller's.
	Events []unix.PerfEventAttr
	// Cgroups is how many cgroups may be counted at once, within
	// MaxSums (see Room).
	Cgroups int
	// PossibleCPUs sizes the maps for that many CPUs when it is more than
	// the machine's possible CPUs: benchmarks measure a larger machine's
	// memory and reads on this one. 0 is the machine's.
	PossibleCPUs int
}

// Reading is one event's sums in one cgroup on one CPU (or on all, for a
// Totalled event), as the program
// adds them up (struct bpf_perf_event_value's layout): the count, and the
// time the event was enabled and running while the cgroup was charged.
type Reading struct {
	Value, Enabled, Running uint64
}

// Counter is the loaded programs and maps, and the events attached per
// CPU. Its methods may be called from several goroutines.
type Counter struct {
	events []unix.PerfEventAttr
	nCPU   int // possible CPUs: the kernel's CPU ids are below it
	// Per event: whether it is Totalled, and its column among the
	// events of its kind, per CPU or totalled.
	total []bool
	col   []int

	// totSums is the totals, at the end of the counts map (from
	// totalsAt): slot*nTotalled+col → the cgroup's total.
	totSums  []Reading
	totalsAt int
	// totTree is tree for the totals: they are laid out as per-CPU sums
	// of one CPU.
	totTree *tree

	evArr                        []*bpf.Map // per event: cpu → its descriptor
	prev, slotMap, counts, cache *bpf.Map
	onSwitch, onFetch            *bpf.Program

	// sums is the counts map, mapped into this process: the program's
	// sums are read and a new cgroup's cleared without a system call.
	// That matters beyond speed: while a map syscall runs on a CPU the
	// kernel runs no BPF program there (bpf_prog_active), preemption
	// included, and every cgroup switch missed meanwhile is charged to
	// the next cgroup switched out.
	mem  []byte
	sums []Reading
	// gens is the cache map mapped into this process, its entries as
	// u64s: each CPU block's first entry holds the generation of the
	// slots in its second u64.
	cacheMem []byte
	gens     []uint64
	gen      uint64 // the generation, under mu

	mu       sync.Mutex
	slots    *slots
	switches map[int]int // CPU → its cgroup-switches descriptor

	// tree adds the counted cgroups below a cgroup to its value; written
	// under mu and treeMu, read under treeMu.
	treeMu sync.RWMutex
	tree   *tree
}

// Load creates the maps and loads the two programs. It needs CAP_BPF and
// CAP_PERFMON (or root) and a kernel with cgroup-switches; nothing is
// counted until Attach.
func Load(o Options) (*Counter, error) {
	if len(o.Events) == 0 || len(o.Events) > MaxEvents {
		return nil, fmt.Errorf("bpfcount: %d events, want 1 to %d", len(o.Events), MaxEvents)
	}
	if o.Cgroups < 1 {
		return nil, fmt.Errorf("bpfcount: room for %d cgroups", o.Cgroups)
	}
	nCPU, err := bpf.PossibleCPU()
	if err != nil {
		return nil, fmt.Errorf("bpfcount: possible CPUs: %w", err)
	}
	nCPU = max(nCPU, o.PossibleCPUs)
	n := len(o.Events)
	total, col, nPer, nTot := layout(o.Events)
	o.Cgroups = roomFor(nPer, nTot, o.Cgroups, nCPU)
	c := &Counter{events: slices.Clone(o.Events), nCPU: nCPU, total: total, col: col, slots: newSlots(o.Cgroups), switches: map[int]int{},
		tree: newTree(o.Cgroups, nPer, nCPU), totTree: newTree(o.Cgroups, nTot, 1)}
	for i := range c.events {
		c.events[i].Size = perf.AttrSize
		c.events[i].Read_format = perf.ReadFormat
		c.events[i].Bits &^= unix.PerfBitDisabled | unix.PerfBitInherit
	}
	// The counts map holds the sums per CPU, then the totals.
	c.totalsAt = o.Cgroups * nPer * nCPU
	entries := c.totalsAt + o.Cgroups*nTot
	specs := []struct {
		m    **bpf.Map
		spec bpf.MapSpec
	}{
		{&c.prev, bpf.MapSpec{Name: "pe_prev", Type: bpf.Array, KeySize: 4, ValueSize: readingSize, MaxEntries: uint32(n * nCPU)}},
		{&c.slotMap, bpf.MapSpec{Name: "pe_slots", Type: bpf.Hash, KeySize: 8, ValueSize: 4, MaxEntries: uint32(o.Cgroups)}},
		{&c.counts, bpf.MapSpec{Name: "pe_counts", Type: bpf.Array, KeySize: 4, ValueSize: readingSize, MaxEntries: uint32(entries), Flags: unix.BPF_F_MMAPABLE}},
		{&c.cache, bpf.MapSpec{Name: "pe_cache", Type: bpf.Array, KeySize: 4, ValueSize: cacheEntrySize, MaxEntries: uint32(nCPU * cacheBlock), Flags: unix.BPF_F_MMAPABLE}},
	}
	c.evArr = make([]*bpf.Map, n)
	for ev := range n {
		specs = append(specs, struct {
			m    **bpf.Map
			spec bpf.MapSpec
		}{&c.evArr[ev], bpf.MapSpec{Name: fmt.Sprintf("pe_event%d", ev), Type: bpf.PerfEventArray, KeySize: 4, ValueSize: 4, MaxEntries: uint32(nCPU)}})
	}
	for _, s := range specs {
		if *s.m, err = bpf.NewMap(&s.spec); err != nil {
			c.Close()
			return nil, fmt.Errorf("bpfcount: %w", err)
		}
	}
	size := (entries*readingSize + os.Getpagesize() - 1) &^ (os.Getpagesize() - 1)
	if c.mem, err = unix.Mmap(c.counts.FD(), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
		c.Close()
		return nil, fmt.Errorf("bpfcount: mapping the sums: %w", err)
	}
	all := unsafe.Slice((*Reading)(unsafe.Pointer(&c.mem[0])), entries)
	c.sums, c.totSums = all[:c.totalsAt:c.totalsAt], all[c.totalsAt:]
	size = (nCPU*cacheBlock*cacheEntrySize + os.Getpagesize() - 1) &^ (os.Getpagesize() - 1)
	if c.cacheMem, err = unix.Mmap(c.cache.FD(), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
		c.Close()
		return nil, fmt.Errorf("bpfcount: mapping the cache: %w", err)
	}
	c.gens = unsafe.Slice((*uint64)(unsafe.Pointer(&c.cacheMem[0])), nCPU*cacheBlock*cacheEntrySize/8)
	body := program(c.maps(), nCPU, Levels)
	if c.onSwitch, err = bpf.NewProgram(&bpf.ProgramSpec{Name: "pe_cgrp_switch", Type: bpf.PerfEvent, Instructions: body, License: license}); err != nil {
		c.Close()
		return nil, fmt.Errorf("bpfcount: %w", err)
	}
	// A raw tracepoint program is one that BPF_PROG_TEST_RUN can run on a
	// chosen CPU; it is never attached to a tracepoint.
	if c.onFetch, err = bpf.NewProgram(&bpf.ProgramSpec{Name: "pe_cgrp_fetch", Type: bpf.RawTracepoint, Instructions: body, License: license}); err != nil {
		c.Close()
		return nil, fmt.Errorf("bpfcount: %w", err)
	}
	return c, nil
}

// layout says of each event whether it is Totalled and its column among
// the events of its kind, and counts the events of each kind.
func layout(events []unix.PerfEventAttr) (total []bool, col []int, nPer, nTot int) {
	for _, e := range events {
		t := Totalled(e.Type)
		total = append(total, t)
		if t {
			col = append(col, nTot)
			nTot++
		} else {
			col = append(col, nPer)
			nPer++
		}
	}
	return total, col, nPer, nTot
}

// maps is the descriptors of c's maps, for the program.
func (c *Counter) maps() maps {
	m := maps{prev: c.prev.FD(), slots: c.slotMap.FD(), counts: c.counts.FD(), cache: c.cache.FD(), totalsAt: c.totalsAt, total: c.total}
	for _, a := range c.evArr {
		m.events = append(m.events, a.FD())
	}
	return m
}

// Events is the number of events.
func (c *Counter) Events() int { return len(c.events) }

// Counts says whether c counts events, in that order: a reload that
// configures other events needs another Counter, which only root can load.
func (c *Counter) Counts(events []unix.PerfEventAttr) bool {
	if len(events) != len(c.events) {
		return false
	}
	for i, e := range events {
		e.Size = perf.AttrSize
		e.Read_format = perf.ReadFormat
		e.Bits &^= unix.PerfBitDisabled | unix.PerfBitInherit
		if e != c.events[i] {
			return false
		}
	}
	return true
}

// RoomFor is the Room a Counter of events loaded for cgroups would have.
func RoomFor(events []unix.PerfEventAttr, cgroups int) int {
	nCPU, err := bpf.PossibleCPU()
	if err != nil {
		return cgroups
	}
	_, _, nPer, nTot := layout(events)
	return roomFor(nPer, nTot, cgroups, nCPU)
}

// roomFor is how many cgroups of nPer events summed per CPU and nTot
// totalled fit in MaxSums, up to cgroups.
func roomFor(nPer, nTot, cgroups, nCPU int) int {
	return max(1, min(cgroups, MaxSums/((nPer*nCPU+nTot)*readingSize)))
}

// Room is the number of cgroups that may be counted at once: as many as
// Load was asked for, within MaxSums.
func (c *Counter) Room() int { return c.slots.max }

// AttachOnly makes cpus the CPUs counted: those attached and not listed
// are detached, those listed and not attached are attached. It returns
// the first error and attaches what it can.
func (c *Counter) AttachOnly(cpus []int) error {
	for _, cpu := range c.Attached() {
		if !slices.Contains(cpus, cpu) {
			c.Detach(cpu)
		}
	}
	var first error
	for _, cpu := range cpus {
		if err := c.Attach(cpu); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// CPUs is the number of possible CPUs, the length of a Read's per-event
// list.
func (c *Counter) CPUs() int { return c.nCPU }

// Attach starts counting on cpu: each event opened system-wide there and
// put in the program's array, and a cgroup-switches event that runs the
// program at each switch. It needs CAP_PERFMON, not CAP_BPF.
func (c *Counter) Attach(cpu int) error {
	if cpu < 0 || cpu >= c.nCPU {
		return fmt.Errorf("bpfcount: cpu%d is not below the %d possible CPUs", cpu, c.nCPU)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.switches[cpu]; ok {
		return nil
	}
	n := len(c.events)
	// A previous reading on this CPU is of events since closed: cleared,
	// the first reading of the new ones starts the interval.
	for ev := range n {
		if err := c.prev.Update(uint32(cpu*n+ev), make([]byte, readingSize), bpf.UpdateAny); err != nil {
			return fmt.Errorf("bpfcount: cpu%d: clearing its previous readings: %w", cpu, err)
		}
	}
	for ev := range n {
		fd, err := unix.PerfEventOpen(&c.events[ev], -1, cpu, -1, unix.PERF_FLAG_FD_CLOEXEC)
		if err != nil {
			c.clear(cpu)
			return fmt.Errorf("bpfcount: cpu%d: event %d: %w", cpu, ev, err)
		}
		// The array holds the event from here on; this descriptor is not
		// needed (the array lets go of it when its entry is deleted).
		err = c.evArr[ev].Update(uint32(cpu), uint32(fd), bpf.UpdateAny)
		unix.Close(fd)
		if err != nil {
			c.clear(cpu)
			return fmt.Errorf("bpfcount: cpu%d: event %d into the array: %w", cpu, ev, err)
		}
	}
	attr := unix.PerfEventAttr{
		Type:        unix.PERF_TYPE_SOFTWARE,
		Config:      cgroupSwitches,
		Size:        perf.AttrSize,
		Sample:      1, // every switch runs the program
		Bits:        unix.PerfBitDisabled,
		Read_format: perf.ReadFormat,
	}
	fd, err := unix.PerfEventOpen(&attr, -1, cpu, -1, unix.PERF_FLAG_FD_CLOEXEC)
	if err != nil {
		c.clear(cpu)
		return fmt.Errorf("bpfcount: cpu%d: cgroup-switches: %w", cpu, err)
	}
	if err := unix.IoctlSetInt(fd, unix.PERF_EVENT_IOC_SET_BPF, c.onSwitch.FD()); err != nil {
		unix.Close(fd)
		c.clear(cpu)
		return fmt.Errorf("bpfcount: cpu%d: attaching the program to cgroup-switches: %w", cpu, err)
	}
	if err := unix.IoctlSetInt(fd, unix.PERF_EVENT_IOC_ENABLE, 0); err != nil {
		unix.Close(fd)
		c.clear(cpu)
		return fmt.Errorf("bpfcount: cpu%d: enabling cgroup-switches: %w", cpu, err)
	}
	c.switches[cpu] = fd
	return nil
}

// Detach stops counting on cpu (going offline, or perfalloc wants the
// PMU): what its running cgroup counted since its last switch is lost.
func (c *Counter) Detach(cpu int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if fd, ok := c.switches[cpu]; ok {
		unix.Close(fd)
		delete(c.switches, cpu)
	}
	c.clear(cpu)
}

// clear closes cpu's events; c.mu held.
func (c *Counter) clear(cpu int) {
	for _, a := range c.evArr {
		a.Delete(uint32(cpu))
	}
}

// Attached lists the CPUs counting now.
func (c *Counter) Attached() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]int, 0, len(c.switches))
	for cpu := range c.switches {
		out = append(out, cpu)
	}
	slices.Sort(out)
	return out
}

// Add starts charging the cgroup whose id (its directory's inode on the
// cgroup2 file system) is id and whose path below the mount is path, and
// returns its slot for Read. Its value is what its tasks count and what
// the counted cgroups below it count, by their paths: a new cgroup's
// starts from its counted descendants' sums, and one added already (by
// the Tracker of the previous generation) keeps its slot and sums until
// each Add has had its Remove, so a reader counts from the value as it
// first reads it.
func (c *Counter) Add(id uint64, path string) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	slot, added, fresh, err := c.slots.add(id)
	if err != nil || !added {
		return slot, err
	}
	if !fresh {
		nPer, nTot := c.tree.nEvents, c.totTree.nEvents
		clear(c.sums[index(slot, 0, 0, nPer, c.nCPU):index(slot+1, 0, 0, nPer, c.nCPU)])
		clear(c.totSums[index(slot, 0, 0, nTot, 1):index(slot+1, 0, 0, nTot, 1)])
	}
	// Into the tree first: from the moment the program charges the slot,
	// its ancestors' values include it.
	c.treeMu.Lock()
	c.tree.add(slot, path)
	c.totTree.add(slot, path)
	c.treeMu.Unlock()
	if err := c.slotMap.Update(id, uint32(slot), bpf.UpdateNoExist); err != nil {
		c.slots.remove(id)
		c.treeMu.Lock()
		c.tree.remove(slot, c.sums)
		c.totTree.remove(slot, c.totSums)
		c.treeMu.Unlock()
		return 0, fmt.Errorf("bpfcount: cgroup id %d into the map: %w", id, err)
	}
	c.bump()
	return slot, nil
}

// bump raises the generation of the slots after a change of the hash
// map, on every CPU, so that the program walks each cgroup's levels
// again instead of trusting its cache; c.mu held. It writes through the
// mapping, not a system call: while a map syscall runs on a CPU, no
// program runs there.
func (c *Counter) bump() {
	c.gen++
	for cpu := range c.nCPU {
		atomic.StoreUint64(&c.gens[(cpu*cacheBlock*cacheEntrySize+cacheGen)/8], c.gen)
	}
}

// Remove undoes one Add of id; after the last the cgroup is no longer
// charged, its slot is free, and its nearest counted ancestor keeps what
// it counted (the tasks left in it are charged to that ancestor).
func (c *Counter) Remove(id uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	slot, gone, ok := c.slots.remove(id)
	if !ok {
		return fmt.Errorf("bpfcount: cgroup id %d is not counted", id)
	}
	if !gone {
		return nil
	}
	// Out of the map first, so that the program charges the ancestor
	// from now on, and then its sums to the ancestor.
	err := c.slotMap.Delete(id)
	c.bump()
	c.treeMu.Lock()
	c.tree.remove(slot, c.sums)
	c.totTree.remove(slot, c.totSums)
	c.treeMu.Unlock()
	if err != nil && !errors.Is(err, bpf.ErrKeyNotExist) {
		return fmt.Errorf("bpfcount: cgroup id %d out of the map: %w", id, err)
	}
	return nil
}

// Counted is the number of cgroups added and not removed.
func (c *Counter) Counted() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.slots.byID)
}

// Sync charges what each attached CPU counted since its last cgroup
// switch to the cgroup running there now, so that a Read after it is
// current: the fetch program runs on each CPU (an IPI to the others).
func (c *Counter) Sync() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for cpu := range c.switches {
		if err := c.onFetch.RunOnCPU(cpu); err != nil {
			errs = append(errs, err) // it names the CPU
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("bpfcount: charging the running cgroups: %w", errors.Join(errs...))
	}
	return nil
}

// Totalled says whether event ev is charged to one total per cgroup,
// which Total reads, rather than per CPU (see the function Totalled).
func (c *Counter) Totalled(ev int) bool { return c.total[ev] }

// Read is slot's sums of event ev on cpu, as of the last Sync (and the
// switches since): its cgroup's and those of the counted cgroups below
// it, as a perf cgroup event counts. A Totalled event has no sums per
// CPU: Read of one is zero (Total reads it). It makes no system call
// and allocates nothing.
func (c *Counter) Read(slot, ev, cpu int) Reading {
	if c.total[ev] {
		return Reading{}
	}
	c.treeMu.RLock()
	defer c.treeMu.RUnlock()
	return c.tree.sum(c.sums, slot, c.col[ev], cpu)
}

// ReadCPUs is Read of slot's event ev on each of cpus, into out (as long
// as cpus), under one lock.
func (c *Counter) ReadCPUs(slot, ev int, cpus []int, out []Reading) {
	if c.total[ev] {
		clear(out)
		return
	}
	c.treeMu.RLock()
	defer c.treeMu.RUnlock()
	c.tree.sumCPUs(c.sums, slot, c.col[ev], cpus, out)
}

// Total is slot's sums of event ev over every CPU, as Read adds them up:
// for a Totalled event, read from its one total without a loop over the
// CPUs.
func (c *Counter) Total(slot, ev int) Reading {
	c.treeMu.RLock()
	defer c.treeMu.RUnlock()
	if c.total[ev] {
		return c.totTree.sum(c.totSums, slot, c.col[ev], 0)
	}
	var s Reading
	for cpu := range c.nCPU {
		r := c.tree.sum(c.sums, slot, c.col[ev], cpu)
		s.Value += r.Value
		s.Enabled += r.Enabled
		s.Running += r.Running
	}
	return s
}

// FDs is the number of descriptors held: the maps, the programs and one
// cgroup-switches event per attached CPU, however many cgroups are
// counted.
func (c *Counter) FDs() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return 6 + len(c.evArr) + len(c.switches)
}

// Close detaches every CPU and releases the programs and maps.
func (c *Counter) Close() {
	c.mu.Lock()
	for cpu, fd := range c.switches {
		unix.Close(fd)
		delete(c.switches, cpu)
	}
	c.mu.Unlock()
	if c.mem != nil {
		unix.Munmap(c.mem)
		c.mem, c.sums, c.totSums = nil, nil, nil
	}
	if c.cacheMem != nil {
		unix.Munmap(c.cacheMem)
		c.cacheMem, c.gens = nil, nil
	}
	for _, p := range []*bpf.Program{c.onSwitch, c.onFetch} {
		if p != nil {
			p.Close()
		}
	}
	for _, m := range append([]*bpf.Map{c.prev, c.slotMap, c.counts, c.cache}, c.evArr...) {
		if m != nil {
			m.Close()
		}
	}
}
