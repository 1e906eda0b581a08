package pmu

import (
	"errors"
	"fmt"
	"strings"
)

// Kind groups listed events the way perf list does.
type Kind string

const (
	KindHardware   Kind = "hardware"   // generic hardware events, any PMU section
	KindCache      Kind = "cache"      // generic cache events, any PMU section
	KindSoftware   Kind = "software"   // software events, any PMU section
	KindTracepoint Kind = "tracepoint" // tracefs events, any PMU section
	KindDynamic    Kind = "dynamic"    // sysfs pmu.event, [dynamic] section only
)

// Listing is one event pmdaperfevent --list-events shows.
type Listing struct {
	Name    string   // what to write in perfevent.conf
	Aliases []string // other accepted spellings
	Kind    Kind
	// Group is the PMU for dynamic events, the subsystem for
	// tracepoints and empty otherwise, so long lists can be shown in
	// sections.
	Group string
	Desc  string  // what it counts, or the sysfs encoding
	Scale float64 // sysfs .scale, 1 otherwise
	Unit  string
	// Err says why a sysfs event cannot be resolved (bad term, bad
	// format file); such events are still listed, as the C agent exports
	// a metric for every sysfs event.
	Err error
}

// ListEvents lists every event name Resolve accepts on this machine, in
// perf list's order: hardware, cache, software, [dynamic] sysfs events
// (PMUs and their events sorted by name, then the synthetic software PMU,
// as the C agent orders them), tracepoints. Whether an event can actually be opened needs
// perf_event_open and is left to the caller. The returned error collects
// non-fatal problems (an unreadable PMU, no tracefs); the listings are
// valid either way.
func (fs *FS) ListEvents() ([]Listing, error) {
	var ls []Listing
	var errs []error
	for _, g := range hardwareEvents {
		ls = append(ls, genericListing(g, KindHardware))
	}
	for _, g := range cacheEvents() {
		ls = append(ls, genericListing(g, KindCache))
	}
	for _, g := range softwareEvents {
		ls = append(ls, genericListing(g, KindSoftware))
	}

	pmus, err := fs.PMUs()
	if err != nil {
		errs = append(errs, err)
	}
	for _, p := range pmus {
		for i := range p.Events {
			pe := &p.Events[i]
			l := Listing{Name: p.Name + "." + pe.Name, Kind: KindDynamic, Group: p.Name, Desc: pe.Text, Scale: pe.Scale, Unit: pe.Unit}
			if _, err := p.Encode(pe, nil); err != nil && !needsParams(pe) {
				l.Err = err
			}
			ls = append(ls, l)
		}
	}
	// The C agent appends its synthetic software PMU after the sorted
	// sysfs ones; keeping its order keeps its metric order.
	for _, name := range dynamicSoftware {
		g, _ := genericNamed(name)
		ls = append(ls, Listing{Name: "software." + name, Kind: KindDynamic, Group: "software", Desc: g.Desc, Scale: 1})
	}

	tps, err := fs.Tracepoints()
	if err != nil {
		errs = append(errs, err)
	}
	for _, tp := range tps {
		sub, _, _ := strings.Cut(tp, ":")
		ls = append(ls, Listing{Name: tp, Kind: KindTracepoint, Group: sub, Scale: 1})
	}
	return ls, errors.Join(errs...)
}

func needsParams(pe *PMUEvent) bool {
	for _, t := range pe.Terms {
		if t.Param {
			return true
		}
	}
	return false
}

func genericListing(g genericEvent, k Kind) Listing {
	l := Listing{Name: g.Name, Kind: k, Desc: g.Desc, Scale: 1}
	l.Aliases = append(l.Aliases, g.Aliases...)
	l.Aliases = append(l.Aliases, g.Const)
	return l
}

// String renders a listing as one line of --list-events output.
func (l Listing) String() string {
	var b strings.Builder
	b.WriteString(l.Name)
	if len(l.Aliases) > 0 {
		b.WriteString(" OR ")
		b.WriteString(strings.Join(l.Aliases, " OR "))
	}
	fmt.Fprintf(&b, " [%s", l.Kind)
	if l.Desc != "" {
		b.WriteString(": ")
		b.WriteString(l.Desc)
	}
	if l.Scale != 1 && l.Scale != 0 || l.Unit != "" {
		fmt.Fprintf(&b, "; scale %g %s", l.Scale, l.Unit)
	}
	b.WriteString("]")
	if l.Err != nil {
		fmt.Fprintf(&b, " (unusable: %v)", l.Err)
	}
	return b.String()
}
