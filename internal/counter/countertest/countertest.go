// Package countertest provides an in-memory counter.Opener for tests and
// benchmarks of anything built on internal/counter.
//
// The fake models what matters of the kernel: a counter starts at zero when
// opened, counts only while open, and each read returns its cumulative
// {value, enabled, running}. Groups too: a counter opened with
// PERF_FORMAT_GROUP and no leader leads a group, later ones join it on the
// same CPU, and one ReadGroup of the leader returns every member's value
// with the leader's times. A counter opened disabled (attr.disabled), and
// the members of its group, count nothing until Enable; a member may not
// join a group that is already enabled, since the kernel would not
// schedule it, nor one whose group read would exceed the kernel's 16 KiB
// (E2BIG, see [MaxGroup]). Disable stops a counter, and a leader its group,
// until Enable. Tests script the counts, make opens, reads, enables or
// disables of a given (event, CPU) fail, make a descriptor vanish, and
// count opens, closes, reads, enables and disables.
package countertest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"perfevent/internal/counter"
	"perfevent/internal/perf"
)

// MaxGroup is the most counters a group may hold with
// perf.GroupReadFormat, as the kernel enforces it: perf_event_open fails
// with E2BIG when a group's read (nr, two times and one value per counter,
// 8 bytes each) would exceed 16 KiB.
const MaxGroup = (16<<10)/8 - 3

// AnyCPU in FailOpen or FailRead applies the failure to every CPU.
const AnyCPU = -1

type key struct {
	event string
	cpu   int
}

// Opener is a fake counter.Opener. The zero value is not usable; call New.
type Opener struct {
	mu        sync.Mutex
	openErr   map[key]error
	readErr   map[key]error
	enableErr map[key]error
	disErr    map[key]error
	joinErr   map[key]error
	live      map[key]*Counter
	attrs     map[key]unix.PerfEventAttr
	step      perf.Count
	opens     atomic.Int64
	closes    atomic.Int64
	reads     atomic.Int64
	enables   atomic.Int64
	disables  atomic.Int64
	openNow   atomic.Int64
	readsByEv map[key]*atomic.Int64
}

// New returns a fake opener on which every open succeeds.
func New() *Opener {
	return &Opener{
		openErr:   map[key]error{},
		readErr:   map[key]error{},
		enableErr: map[key]error{},
		disErr:    map[key]error{},
		joinErr:   map[key]error{},
		live:      map[key]*Counter{},
		attrs:     map[key]unix.PerfEventAttr{},
		readsByEv: map[key]*atomic.Int64{},
	}
}

// Counter is one open fake counter.
type Counter struct {
	o       *Opener
	k       key
	c       perf.Count
	closed  bool
	gone    bool // vanished: every call fails with EBADF, as on a descriptor closed behind the Set's back
	reads   *atomic.Int64
	enabled bool       // counting unless closed; false when opened disabled
	group   bool       // opened with PERF_FORMAT_GROUP
	leader  *Counter   // a member's leader; nil for a leader or a counter of its own
	members []*Counter // a leader's open counters in open order, itself first
}

// Open implements counter.Opener. Like the kernel, it refuses a leader that
// is not an open group leader of this Opener on the same CPU, and a member
// without PERF_FORMAT_GROUP.
func (o *Opener) Open(event string, attr *unix.PerfEventAttr, cpu int, leader counter.Source) (counter.Source, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	k := key{event, cpu}
	o.attrs[k] = *attr
	if err := o.failure(o.openErr, k); err != nil {
		return nil, err
	}
	if c := o.live[k]; c != nil {
		return nil, fmt.Errorf("countertest: %q on cpu%d opened twice without a close", event, cpu)
	}
	group := attr.Read_format&unix.PERF_FORMAT_GROUP != 0
	var l *Counter
	if leader != nil {
		if err := o.failure(o.joinErr, k); err != nil {
			return nil, err
		}
		var ok bool
		l, ok = leader.(*Counter)
		switch {
		case !ok || l.o != o:
			return nil, fmt.Errorf("countertest: %q on cpu%d: the leader %T is not a counter of this Opener", event, cpu, leader)
		case !group:
			return nil, fmt.Errorf("countertest: %q on cpu%d joins a group without PERF_FORMAT_GROUP", event, cpu)
		case !l.group || l.leader != nil:
			return nil, fmt.Errorf("countertest: %q on cpu%d: %q does not lead a group", event, cpu, l.k.event)
		case l.closed:
			return nil, fmt.Errorf("countertest: %q on cpu%d: the leader %q is closed", event, cpu, l.k.event)
		case l.k.cpu != cpu:
			return nil, fmt.Errorf("countertest: %q on cpu%d cannot join %q on cpu%d", event, cpu, l.k.event, l.k.cpu)
		case l.enabled:
			return nil, fmt.Errorf("countertest: %q on cpu%d joins the group of %q after it was enabled; the kernel would not schedule it", event, cpu, l.k.event)
		case len(l.members) >= MaxGroup:
			return nil, unix.E2BIG
		}
	}
	r := o.readsByEv[k]
	if r == nil {
		r = new(atomic.Int64)
		o.readsByEv[k] = r
	}
	c := &Counter{o: o, k: k, reads: r, group: group, leader: l, enabled: attr.Bits&unix.PerfBitDisabled == 0}
	switch {
	case l != nil:
		l.members = append(l.members, c)
	case group:
		c.members = []*Counter{c}
	}
	o.live[k] = c
	o.opens.Add(1)
	o.openNow.Add(1)
	return c, nil
}

func (o *Opener) failure(m map[key]error, k key) error {
	if len(m) == 0 {
		return nil // the common case, kept cheap for benchmarks
	}
	if err := m[k]; err != nil {
		return err
	}
	return m[key{k.event, AnyCPU}]
}

// Read implements counter.Source.
func (c *Counter) Read() (perf.Count, error) {
	o := c.o
	o.mu.Lock()
	defer o.mu.Unlock()
	if c.closed {
		return perf.Count{}, errors.New("countertest: read after close")
	}
	if c.group {
		return perf.Count{}, fmt.Errorf("countertest: Read of %q on cpu%d, a group counter; read its leader with ReadGroup", c.k.event, c.k.cpu)
	}
	o.reads.Add(1)
	c.reads.Add(1)
	if c.gone {
		return perf.Count{}, unix.EBADF
	}
	if err := o.failure(o.readErr, c.k); err != nil {
		return perf.Count{}, err
	}
	if c.counting() {
		c.c.Value += o.step.Value
		c.c.Enabled += o.step.Enabled
		c.c.Running += o.step.Running
	}
	return c.c, nil
}

// counting: open, and enabled along with its leader. Called with o.mu held.
func (c *Counter) counting() bool {
	if c.closed || !c.enabled {
		return false
	}
	return c.leader == nil || c.leader.closed || c.leader.enabled
}

// Enable implements counter.Source.
func (c *Counter) Enable() error {
	return c.setEnabled(true, "Enable", c.o.enableErr, &c.o.enables)
}

// Disable implements counter.Source: the counter, and if it leads a group
// every member, counts nothing until Enable.
func (c *Counter) Disable() error {
	return c.setEnabled(false, "Disable", c.o.disErr, &c.o.disables)
}

// setEnabled is Enable and Disable: op names it in the error after a
// close, fails holds the failures the test scripted for it, and n counts
// the calls that succeed.
func (c *Counter) setEnabled(on bool, op string, fails map[key]error, n *atomic.Int64) error {
	o := c.o
	o.mu.Lock()
	defer o.mu.Unlock()
	if c.closed {
		return fmt.Errorf("countertest: %s of %q on cpu%d after close", op, c.k.event, c.k.cpu)
	}
	if c.gone {
		return unix.EBADF
	}
	if err := o.failure(fails, c.k); err != nil {
		return err
	}
	n.Add(1)
	c.enabled = on
	return nil
}

// ReadGroup implements counter.Source: one read of the leader, counted once
// in Reads and once in ReadsOf of every member. A read failure scripted for
// any member fails the whole read, as only the leader is read.
func (c *Counter) ReadGroup(values []uint64) (enabled, running uint64, err error) {
	o := c.o
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case c.closed:
		return 0, 0, errors.New("countertest: read after close")
	case !c.group || c.leader != nil:
		return 0, 0, fmt.Errorf("countertest: ReadGroup of %q on cpu%d, which does not lead a group", c.k.event, c.k.cpu)
	case len(values) != len(c.members):
		return 0, 0, fmt.Errorf("countertest: ReadGroup of %q on cpu%d with room for %d values; the group has %d", c.k.event, c.k.cpu, len(values), len(c.members))
	}
	o.reads.Add(1)
	for _, m := range c.members {
		m.reads.Add(1)
	}
	if c.gone {
		return 0, 0, unix.EBADF
	}
	for _, m := range c.members {
		if err := o.failure(o.readErr, m.k); err != nil {
			return 0, 0, err
		}
	}
	for j, m := range c.members {
		if m.counting() {
			m.c.Value += o.step.Value
			m.c.Enabled += o.step.Enabled
			m.c.Running += o.step.Running
		}
		values[j] = m.c.Value
	}
	return c.c.Enabled, c.c.Running, nil
}

// Close implements counter.Source. Closing a leader before its members is
// an error (the kernel would turn them into counters of their own), but
// the leader is closed all the same.
func (c *Counter) Close() error {
	o := c.o
	o.mu.Lock()
	defer o.mu.Unlock()
	if c.closed {
		return errors.New("countertest: closed twice")
	}
	if c.gone {
		return unix.EBADF // Vanish did what a close would
	}
	c.closed = true
	c.detach()
	o.closes.Add(1)
	if len(c.members) > 1 {
		return fmt.Errorf("countertest: group leader %q on cpu%d closed while %d of its members are open", c.k.event, c.k.cpu, len(c.members)-1)
	}
	return nil
}

// detach takes c out of the open counters and its group. Called with o.mu
// held.
func (c *Counter) detach() {
	o := c.o
	delete(o.live, c.k)
	o.openNow.Add(-1)
	if l := c.leader; l != nil {
		l.members = slices.DeleteFunc(l.members, func(m *Counter) bool { return m == c })
	}
}

// Vanish makes the open counter for (event, cpu) disappear as a descriptor
// closed behind its owner's back does: it no longer counts or shows in
// OpenNow, and every further call on it, Close included, fails with EBADF.
// It reports false when no such counter is open.
func (o *Opener) Vanish(event string, cpu int) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	c := o.live[key{event, cpu}]
	if c == nil {
		return false
	}
	c.gone = true
	c.detach()
	return true
}

// Group lists the events of the open group that (event, cpu) belongs to, in
// the order a group read returns them, the leader first; nil when it is not
// open in a group.
func (o *Opener) Group(event string, cpu int) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	c := o.live[key{event, cpu}]
	if c == nil || !c.group {
		return nil
	}
	if c.leader != nil {
		c = c.leader
	}
	names := make([]string, len(c.members))
	for j, m := range c.members {
		names[j] = m.k.event
	}
	return names
}

// FailOpen makes opening event on cpu (or AnyCPU) return err; nil clears it.
func (o *Opener) FailOpen(event string, cpu int, err error) {
	o.set(o.openErr, key{event, cpu}, err)
}

// FailJoin makes opening event on cpu (or AnyCPU) into a group return
// err, as the kernel refuses a member the PMU cannot schedule with the
// others (EINVAL, ENOSPC); opening it on its own still works. nil clears it.
func (o *Opener) FailJoin(event string, cpu int, err error) {
	o.set(o.joinErr, key{event, cpu}, err)
}

// FailEnable makes enabling event on cpu (or AnyCPU) return err; nil clears
// it.
func (o *Opener) FailEnable(event string, cpu int, err error) {
	o.set(o.enableErr, key{event, cpu}, err)
}

// FailDisable makes disabling event on cpu (or AnyCPU) return err; nil
// clears it.
func (o *Opener) FailDisable(event string, cpu int, err error) {
	o.set(o.disErr, key{event, cpu}, err)
}

// FailRead makes reading event on cpu (or AnyCPU) return err; nil clears it.
func (o *Opener) FailRead(event string, cpu int, err error) {
	o.set(o.readErr, key{event, cpu}, err)
}

func (o *Opener) set(m map[key]error, k key, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err == nil {
		delete(m, k)
	} else {
		m[k] = err
	}
}

// Add adds to the cumulative count of the open counter for (event, cpu).
// It reports false, changing nothing, when that counter is not open or not
// enabled: such a counter does not count.
func (o *Opener) Add(event string, cpu int, value, enabled, running uint64) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	c := o.live[key{event, cpu}]
	if c == nil || !c.counting() {
		return false
	}
	c.c.Value += value
	c.c.Enabled += enabled
	c.c.Running += running
	return true
}

// Set replaces the cumulative count of the open counter for (event, cpu),
// e.g. to put it near a wrap. It reports false when the counter is not open.
func (o *Opener) Set(event string, cpu int, c perf.Count) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	l := o.live[key{event, cpu}]
	if l == nil {
		return false
	}
	l.c = c
	return true
}

// AddAll adds the same amounts to every counting counter.
func (o *Opener) AddAll(value, enabled, running uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, c := range o.live {
		if !c.counting() {
			continue
		}
		c.c.Value += value
		c.c.Enabled += enabled
		c.c.Running += running
	}
}

// Step makes every successful read first add step to its counter, so a
// benchmark sees counts move without scripting each fetch.
func (o *Opener) Step(step perf.Count) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.step = step
}

// Attr is the attribute last passed to Open for (event, cpu).
func (o *Opener) Attr(event string, cpu int) (unix.PerfEventAttr, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	a, ok := o.attrs[key{event, cpu}]
	return a, ok
}

// Opens, Closes and Reads count successful opens, closes and every read
// attempt since New. A group read is one read, as it is one read() system
// call.
func (o *Opener) Opens() int  { return int(o.opens.Load()) }
func (o *Opener) Closes() int { return int(o.closes.Load()) }
func (o *Opener) Reads() int  { return int(o.reads.Load()) }

// ReadsOf counts read attempts of (event, cpu) across all its opens,
// including each read of a group it was a member of.
func (o *Opener) ReadsOf(event string, cpu int) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	if r := o.readsByEv[key{event, cpu}]; r != nil {
		return int(r.Load())
	}
	return 0
}

// Enables and Disables count successful Enable and Disable calls since New.
func (o *Opener) Enables() int  { return int(o.enables.Load()) }
func (o *Opener) Disables() int { return int(o.disables.Load()) }

// OpenNow is the number of counters open at the moment, counting or not.
func (o *Opener) OpenNow() int { return int(o.openNow.Load()) }

// CountingNow is the number of open counters that count: enabled, and in a
// group whose leader is enabled.
func (o *Opener) CountingNow() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, c := range o.live {
		if c.counting() {
			n++
		}
	}
	return n
}

// Enabled reports whether the open counter for (event, cpu) counts, and
// whether it is open at all.
func (o *Opener) Enabled(event string, cpu int) (counting, open bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	c := o.live[key{event, cpu}]
	if c == nil {
		return false, false
	}
	return c.counting(), true
}
