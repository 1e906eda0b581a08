// Package catalog holds perfevent's metric catalog: for each CPU family,
// the ratios its vendor publishes (TopDown, memory bandwidth, energy,
// frequency, misses per kilo-instruction, IPC), each with the events it
// needs on that family, its unit and where its formula comes from.
//
// The agent serves a family's ratios out of the box: it opens their
// operands even when perfevent.conf does not list them (internal/setup,
// Plan.WithOperands), groups them within the family's counters
// (ratio.GroupFit with Family.Fit) and serves them as perfevent.ratio.*;
// ratios.conf turns groups off and on (ratio.DefsWith).
//
// Most formulas here are linear in their operands over one denominator
// event (or wall-clock time), which is what a ratio is (ratio.Def): Σ wᵢ ×
// Δeventᵢ / Δden × scale. A vendor's metric that is a product of ratios
// (Arm's retiring, Intel's level-2 Branch_Mispredicts and Memory_Bound)
// is a compound ratio (ratio.Compound): the vendor's formula put over one
// denominator, each factor's operands counted in a perf group of their
// own. A metric the catalog does not serve is in Family.Unserved with the
// reason, so that --check and perfevent.conf(5) say so rather than serve
// an approximation under the vendor's name.
//
// To add an event that a newer libpfm4 or the kernel names: write the
// family's operand as "name|fallback", the name first; the first
// alternative configured wins, and the first that resolves is opened.
package catalog

import (
	"path"
	"slices"
	"strings"

	"perfevent/internal/counter"
	"perfevent/internal/ratio"
)

// The catalog's groups: what ratios.conf's "disable GROUP" names.
const (
	IPC       = "ipc"
	TopDown   = "topdown"    // level 1
	TopDownL2 = "topdown_l2" // level 2
	Bandwidth = "bandwidth"
	Energy    = "energy"
	Frequency = "frequency"
	MPKI      = "mpki"
)

// Groups are the catalog's groups in the order the catalog lists them.
var Groups = []string{IPC, TopDown, TopDownL2, Bandwidth, Energy, Frequency, MPKI}

// Family is one CPU family's part of the catalog.
type Family struct {
	Name string // "Intel Skylake-SP"
	// PMUs are the libpfm4 core PMU names that identify the family
	// (pmu.FS.PresentNames).
	PMUs []string
	// Counters is the general-purpose counters a perf group may use on
	// one CPU; Fixed the events that need none of them (fixed counters,
	// PERF_METRICS), as names or globs over the configured names.
	Counters int
	Fixed    []string
	Metrics  []ratio.Def
	Unserved []Unserved
}

// Unserved is a vendor's metric that the agent does not serve on a family,
// and why: so that --check and the manual page say so.
type Unserved struct {
	Name, Group, Formula, Source, Why string
}

// Detect returns the family of the machine whose libpfm4 PMUs are present
// (pmu.FS.PresentNames), or the generic family that every machine gets.
func Detect(present []string) *Family {
	for _, f := range families {
		for _, p := range f.pmus {
			if slices.Contains(present, p) {
				return f.get()
			}
		}
	}
	return generic()
}

// Families are every family of the catalog, the generic one last.
func Families() []*Family {
	var all []*Family
	for _, f := range families {
		all = append(all, f.get())
	}
	return append(all, generic())
}

// Fit is what one CPU's PMU of the family can count in one group; soft
// tells the events that never wait for a counter (software, msr,
// tracepoints), which the agent knows by their type.
func (f *Family) Fit(soft func(counter.Spec) bool) ratio.Fit {
	return ratio.Fit{
		Counters: f.Counters,
		Free: func(sp counter.Spec) bool {
			for _, p := range f.Fixed {
				if ok, _ := path.Match(p, sp.Name); ok || p == sp.Name {
					return true
				}
			}
			return false
		},
		Soft: soft,
	}
}

// Operands are the terms of d that name events, its denominator first (so
// that Intel's slots leads the group of its topdown events): each a list
// of alternatives, "a|b".
func Operands(d ratio.Def) []string {
	var ops []string
	if d.Den != ratio.Elapsed {
		ops = append(ops, d.Den)
	}
	for _, t := range d.Num {
		if !slices.Contains(ops, t) {
			ops = append(ops, t)
		}
	}
	return ops
}

// Alternatives splits a term into its alternatives.
func Alternatives(term string) []string { return strings.Split(term, "|") }
