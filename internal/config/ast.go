package config

import (
	"fmt"
	"strconv"
	"strings"
)

// Pos is where an item was written: the file name given to Parse and a
// 1-based line number.
type Pos struct {
	File string
	Line int
}

func (p Pos) String() string {
	if p.File == "" {
		return "line " + strconv.Itoa(p.Line)
	}
	return p.File + ":" + strconv.Itoa(p.Line)
}

// File is a parsed perfevent.conf. Sections are in file order; sections and
// lines that had errors are left out.
type File struct {
	Path     string
	Sections []*Section
}

// SectionKind tells the three kinds of section apart.
type SectionKind int

const (
	// PMUSection lists events for machines with one of the named PMUs.
	PMUSection SectionKind = iota
	// DynamicSection lists <pmu>.<event> events from sysfs.
	DynamicSection
	// DerivedSection defines one derived metric as a sum of other events.
	DerivedSection
)

func (k SectionKind) String() string {
	switch k {
	case PMUSection:
		return "PMU"
	case DynamicSection:
		return "dynamic"
	case DerivedSection:
		return "derived"
	}
	return "SectionKind(" + strconv.Itoa(int(k)) + ")"
}

// Section is one [header] and the lines under it.
type Section struct {
	Pos  Pos
	Kind SectionKind
	// PMUs holds the names in a PMU section's header, in order.
	PMUs []string
	// Name is a derived section's metric name: the header without
	// ":derived". Empty for other kinds.
	Name string
	// Events holds the events of a PMU or dynamic section, in file order.
	Events []Event
	// Groups holds a derived section's alternative groups, in file order;
	// each has at least one member.
	Groups []Group
}

// Header renders the section header as written, e.g. "[nhm_ex nhm]", for
// messages.
func (s *Section) Header() string {
	switch s.Kind {
	case DynamicSection:
		return "[dynamic]"
	case DerivedSection:
		return "[" + s.Name + ":derived]"
	}
	names := make([]string, len(s.PMUs))
	for i, n := range s.PMUs {
		if n == "" || strings.ContainsAny(n, " \t,\"]#") {
			n = strconv.Quote(n)
		}
		names[i] = n
	}
	return "[" + strings.Join(names, " ") + "]"
}

// Event is one event line of a PMU or dynamic section.
type Event struct {
	Pos  Pos
	Name string
	CPU  CPUOption
	// RawCode is the perf config of a RAW:<name> event; HasRawCode is set
	// exactly for those events.
	RawCode    uint64
	HasRawCode bool
	// Params holds hv_24x7/hv_gpci parameters (chip:N …) in line order; only
	// [dynamic] events have them, and each name appears at most once.
	Params []Param
}

// Param looks up a parameter by name.
func (e *Event) Param(name string) (int, bool) {
	for _, p := range e.Params {
		if p.Name == name {
			return p.Value, true
		}
	}
	return 0, false
}

// Param is an hv_24x7 or hv_gpci event parameter such as chip:1. The kernel
// describes these events with "name=?" terms that the value fills in.
type Param struct {
	Name  string
	Value int
}

func (p Param) String() string { return p.Name + ":" + strconv.Itoa(p.Value) }

// paramNames are the parameters the C agent understands, in its order.
var paramNames = []string{
	"chip", "domain", "core", "lpar",
	"phys_processor_idx", "partition_id", "hw_chip_id", "sibling_part_id",
}

// Group is one alternative of a derived section: the events to sum.
type Group struct {
	Pos   Pos // the first member's line
	Terms []Term
}

// Term is one member of a derived sum: Event × Scale, where PerfScale asks
// for the scale to come from the kernel's sysfs .scale file instead.
type Term struct {
	Pos   Pos
	Event string
	// CPU is the option written on the member line. The C agent uses it
	// only to check that all members of a group agree.
	CPU       CPUOption
	Scale     float64 // 1 unless given
	PerfScale bool
}

// CPUKind says which CPUs an event counts on.
type CPUKind int

const (
	// CPUDefault means no option was written. PMU sections and derived
	// members treat it as CPUAll; a [dynamic] event uses its PMU's cpumask
	// when the PMU has one (uncore PMUs count once per package).
	CPUDefault CPUKind = iota
	CPUAll
	CPURoundRobin
	CPUNode
	CPUNodeRoundRobin
	CPUIndex
)

// CPUOption is an event's CPU option. Index is meaningful for CPUIndex only:
// it indexes the list of online CPUs.
type CPUOption struct {
	Kind  CPUKind
	Index int
}

// String renders the option as written in the file; "" for CPUDefault.
func (o CPUOption) String() string {
	switch o.Kind {
	case CPUDefault:
		return ""
	case CPUAll:
		return "cpu"
	case CPURoundRobin:
		return "cpu_rr"
	case CPUNode:
		return "node"
	case CPUNodeRoundRobin:
		return "node_rr"
	case CPUIndex:
		return strconv.Itoa(o.Index)
	}
	return fmt.Sprintf("CPUKind(%d)", int(o.Kind))
}

// describe is String for messages, naming the default.
func (o CPUOption) describe() string {
	if o.Kind == CPUDefault {
		return "cpu (the default)"
	}
	return o.String()
}

// sameCPUs reports whether two options select the same CPUs, treating the
// default as "cpu" the way PMU sections and derived members do.
func sameCPUs(a, b CPUOption) bool {
	if a.Kind == CPUDefault {
		a.Kind = CPUAll
	}
	if b.Kind == CPUDefault {
		b.Kind = CPUAll
	}
	return a == b
}

// PMUSections returns the PMU sections in file order.
func (f *File) PMUSections() []*Section { return f.sectionsOf(PMUSection) }

// DerivedSections returns the derived sections in file order.
func (f *File) DerivedSections() []*Section { return f.sectionsOf(DerivedSection) }

// DynamicEvents returns the events of every [dynamic] section, in file order.
func (f *File) DynamicEvents() []Event {
	var evs []Event
	for _, s := range f.sectionsOf(DynamicSection) {
		evs = append(evs, s.Events...)
	}
	return evs
}

func (f *File) sectionsOf(k SectionKind) []*Section {
	var out []*Section
	for _, s := range f.Sections {
		if s.Kind == k {
			out = append(out, s)
		}
	}
	return out
}
