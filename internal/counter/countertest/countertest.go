// Package countertest provides an in-memory counter.Opener for tests and
// benchmarks of anything built on internal/counter.
//
// The fake models what matters of the kernel: a counter starts at zero when
// opened, counts only while open, and each read returns its cumulative
// {value, enabled, running}. Tests script the counts, make opens or reads of
// a given (event, CPU) fail, and count opens, closes and reads.
package countertest

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"perfevent/internal/counter"
	"perfevent/internal/perf"
)

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
	live      map[key]*Counter
	attrs     map[key]unix.PerfEventAttr
	step      perf.Count
	opens     atomic.Int64
	closes    atomic.Int64
	reads     atomic.Int64
	openNow   atomic.Int64
	readsByEv map[key]*atomic.Int64
}

// New returns a fake opener on which every open succeeds.
func New() *Opener {
	return &Opener{
		openErr:   map[key]error{},
		readErr:   map[key]error{},
		live:      map[key]*Counter{},
		attrs:     map[key]unix.PerfEventAttr{},
		readsByEv: map[key]*atomic.Int64{},
	}
}

// Counter is one open fake counter.
type Counter struct {
	o      *Opener
	k      key
	c      perf.Count
	closed bool
	reads  *atomic.Int64
}

// Open implements counter.Opener.
func (o *Opener) Open(event string, attr *unix.PerfEventAttr, cpu int) (counter.Source, error) {
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
	r := o.readsByEv[k]
	if r == nil {
		r = new(atomic.Int64)
		o.readsByEv[k] = r
	}
	c := &Counter{o: o, k: k, reads: r}
	o.live[k] = c
	o.opens.Add(1)
	o.openNow.Add(1)
	return c, nil
}

func (o *Opener) failure(m map[key]error, k key) error {
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
	o.reads.Add(1)
	c.reads.Add(1)
	if err := o.failure(o.readErr, c.k); err != nil {
		return perf.Count{}, err
	}
	c.c.Value += o.step.Value
	c.c.Enabled += o.step.Enabled
	c.c.Running += o.step.Running
	return c.c, nil
}

// Close implements counter.Source.
func (c *Counter) Close() error {
	o := c.o
	o.mu.Lock()
	defer o.mu.Unlock()
	if c.closed {
		return errors.New("countertest: closed twice")
	}
	c.closed = true
	delete(o.live, c.k)
	o.closes.Add(1)
	o.openNow.Add(-1)
	return nil
}

// FailOpen makes opening event on cpu (or AnyCPU) return err; nil clears it.
func (o *Opener) FailOpen(event string, cpu int, err error) {
	o.set(o.openErr, key{event, cpu}, err)
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
// It reports false, changing nothing, when that counter is not open: a
// closed counter does not count.
func (o *Opener) Add(event string, cpu int, value, enabled, running uint64) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	c := o.live[key{event, cpu}]
	if c == nil {
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

// AddAll adds the same amounts to every open counter.
func (o *Opener) AddAll(value, enabled, running uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, c := range o.live {
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
// attempt since New.
func (o *Opener) Opens() int  { return int(o.opens.Load()) }
func (o *Opener) Closes() int { return int(o.closes.Load()) }
func (o *Opener) Reads() int  { return int(o.reads.Load()) }

// ReadsOf counts read attempts of (event, cpu) across all its opens.
func (o *Opener) ReadsOf(event string, cpu int) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	if r := o.readsByEv[key{event, cpu}]; r != nil {
		return int(r.Load())
	}
	return 0
}

// OpenNow is the number of counters open at the moment.
func (o *Opener) OpenNow() int { return int(o.openNow.Load()) }
