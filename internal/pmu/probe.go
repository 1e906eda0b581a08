package pmu

import (
	"fmt"

	"golang.org/x/sys/unix"

	"perfevent/internal/counter"
	"perfevent/internal/hostfs"
	"perfevent/internal/perf"
)

// ProbeState says what opening a listed event here gave.
type ProbeState int

const (
	NotProbed  ProbeState = iota // --no-probe, or Probe not called
	Opened                       // perf_event_open accepted it
	OpenFailed                   // perf_event_open refused it; Err is a *counter.OpenError
	Skipped                      // not tried; Err says why (it needs parameters, it does not resolve)
)

// ProbeResult is the outcome of probing one listing.
type ProbeResult struct {
	State ProbeState
	Err   error
}

// Probe tries each listing the way the agent would open it: resolved by
// its listed name, on the first CPU of its PMU's cpumask (CPU 0 for PMUs
// that count on every CPU), opened disabled and closed at once, so that
// --list-events can say which events this machine, kernel and user can
// really count and, through counter.NewOpenError, what to do about those
// it cannot. Listings that already carry Err, or a probe result, are left
// alone.
//
// The first open of a tracepoint patches the kernel's text (over 10ms on
// a VM), and the kernel does that one at a time, so probing every
// tracepoint takes a minute or so whatever the concurrency; callers
// filter first.
func (fs *FS) Probe(ls []Listing, o counter.Opener) {
	for i := range ls {
		if ls[i].Err == nil && ls[i].Probe.State == NotProbed {
			ls[i].Probe = fs.probe(&ls[i], o)
		}
	}
}

func (fs *FS) probe(l *Listing, o counter.Opener) ProbeResult {
	if l.NeedsParams {
		return ProbeResult{State: Skipped, Err: fmt.Errorf("needs parameters")}
	}
	ev, err := fs.Resolve(l.Name)
	if err != nil {
		return ProbeResult{State: Skipped, Err: err}
	}
	return probeOne(fs.FS, o, ev)
}

func probeOne(host hostfs.FS, o counter.Opener, ev Event) ProbeResult {
	cpu := 0
	if len(ev.CPUs) > 0 {
		cpu = ev.CPUs[0]
	}
	attr := ev.Attr
	attr.Size = perf.AttrSize
	attr.Read_format = perf.ReadFormat
	attr.Bits |= unix.PerfBitDisabled
	src, err := o.Open(ev.Name, &attr, cpu, nil)
	if err != nil {
		return ProbeResult{State: OpenFailed, Err: counter.NewOpenError(host, ev.Name, cpu, err)}
	}
	src.Close()
	return ProbeResult{State: Opened}
}

// mark renders a probe result for --list-events, or "" when there was no
// probe.
func (r ProbeResult) mark() string {
	switch r.State {
	case Opened:
		return "[ok]"
	case OpenFailed:
		if oe, ok := r.Err.(*counter.OpenError); ok {
			return "[cannot open: " + string(counter.AppendCause(nil, oe.Advice, oe.Errno)) + "]"
		}
		return fmt.Sprintf("[cannot open: %v]", r.Err)
	case Skipped:
		return fmt.Sprintf("[not probed: %v]", r.Err)
	}
	return ""
}
