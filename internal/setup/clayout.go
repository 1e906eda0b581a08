package setup

import (
	"path/filepath"
	"slices"
	"strings"

	"perfevent/internal/config"
	"perfevent/internal/hostfs"
	"perfevent/internal/names"
	"perfevent/internal/pmu"
)

// CSlot is one PMID cluster of the C agent's numbering: the i-th slot of
// CLayout is cluster i+2, and instance domain i.
type CSlot struct {
	// Key is the metric's name below perfevent, "hwcounters.NAME" (items
	// value and dutycycle) or "derived.NAME" (item value).
	Key string
	// Event is the counter behind a hwcounters slot, nil for derived ones
	// and for events this machine cannot resolve; CPUs are where the C
	// agent counts it.
	Event *pmu.Event
	CPUs  []int
	// Counted says that the C agent counts the event. A [dynamic] PMU's
	// events that the file does not list get a slot too, with no values.
	Counted bool
}

// Opens reports whether the C agent would open ev on at least one of cpus.
type Opens func(ev *pmu.Event, cpus []int) bool

// CLayout is how PCP's C agent numbers the metrics of f on this machine
// (src/pmdas/perfevent, pmda.c setup_metrics; perfinterface.c and
// parse_events.c for the order): its clusters are positions, so switching
// agents keeps a name's PMID only if the Go agent gives it the same one.
//
//   - the chosen PMU section's events in reverse file order, each only if
//     it opens on some CPU;
//   - then every event of every sysfs PMU that has an events directory,
//     PMUs by name (strcmp) and events in directory order, then the nine
//     software events by name: all of them, listed in [dynamic] or not, except
//     a listed one that opens nowhere; an event that several [dynamic] lines
//     start with gets a slot per line;
//   - then the derived sections that have members (cSections), in file
//     order, each if one alternative's members all got a slot and agree on
//     their CPUs.
func CLayout(f *config.File, m Machine, compat bool, opens Opens) []CSlot {
	return PrepareCLayout(f, m, compat).Slots(opens)
}

// A CPrepared is CLayout's reading of sysfs, done before any counter is
// opened: the agent prepares it with its own plan, while each PMU's sysfs
// directory and each tracepoint is read once for both (pmu.FS.Pass), and
// decides the slots once its counters are open.
type CPrepared struct {
	ok      bool
	compat  bool
	section []cEvent // the chosen PMU section's events, in reverse file order
	dynamic []cDynamic
	derived []*config.Section
	hasDyn  bool
}

// cEvent is a resolved event of the PMU section and its CPUs.
type cEvent struct {
	name  string
	event pmu.Event
	cpus  []int
}

// cDynamic is an event of a PMU the C agent's [dynamic] section walks,
// with the [dynamic] lines that start with its name.
type cDynamic struct {
	full   string
	listed int
	event  *pmu.Event // nil: not resolvable here
	cpus   []int
}

// PrepareCLayout resolves what CLayout needs of f on m.
func PrepareCLayout(f *config.File, m Machine, compat bool) *CPrepared {
	c := &CPrepared{compat: compat}
	if f == nil || m.PMU == nil {
		return c
	}
	present := map[string]bool{}
	for _, n := range m.PMU.PresentNames() {
		present[n] = true
	}
	alloc, err := config.NewCPUAllocator(m.Topology)
	if err != nil {
		return c
	}
	c.ok = true
	if section, _ := f.ChoosePMUSection(func(name string) bool { return present[name] }); section != nil {
		c.section = make([]cEvent, 0, len(section.Events))
		for i := len(section.Events) - 1; i >= 0; i-- {
			ev := section.Events[i]
			opts := pmu.Options{RawCode: ev.RawCode, HasRawCode: ev.HasRawCode}
			resolved, err := m.PMU.ResolveWith(ev.Name, opts)
			if err != nil {
				continue
			}
			cpus, err := alloc.CPUs(ev.CPU, ev.Pos)
			if err != nil {
				continue
			}
			c.section = append(c.section, cEvent{name: ev.Name, event: resolved, cpus: cpus})
		}
	}

	var dynamic []string
	dynamic, c.derived, c.hasDyn = cSections(f)
	if c.hasDyn {
		pmus := cPMUs(m.PMU)
		n := 0
		for _, p := range pmus {
			n += len(p.events)
		}
		c.dynamic = make([]cDynamic, 0, n)
		for _, p := range pmus {
			for _, e := range p.events {
				d := cDynamic{full: p.name + "." + e}
				for _, l := range dynamic {
					if strings.HasPrefix(l, d.full) {
						d.listed++
					}
				}
				if r, err := m.PMU.ResolveWith(d.full, pmu.Options{}); err == nil {
					d.event = &r
				}
				d.cpus = m.Topology.Online
				if d.event != nil && d.event.CPUs != nil {
					d.cpus = d.event.CPUs
				}
				c.dynamic = append(c.dynamic, d)
			}
		}
	}
	return c
}

// Slots are CLayout's slots, opens telling which events open.
func (c *CPrepared) Slots(opens Opens) []CSlot {
	if c == nil || !c.ok {
		return nil
	}
	slots := make([]CSlot, 0, len(c.section)+len(c.dynamic)+len(c.derived))
	byName := make(map[string]bool, len(c.section)+len(c.dynamic)) // config names that got a slot, for derived members
	for i := range c.section {
		e := &c.section[i]
		if !opens(&e.event, e.cpus) {
			continue
		}
		slots = append(slots, CSlot{Key: "hwcounters." + names.Metric(e.name, c.compat), Event: &e.event, CPUs: e.cpus, Counted: true})
		byName[e.name] = true
	}
	for _, d := range c.dynamic {
		key := "hwcounters." + names.Metric(d.full, c.compat)
		if d.listed == 0 {
			slots = append(slots, CSlot{Key: key, Event: d.event, CPUs: d.cpus})
			byName[d.full] = true
			continue
		}
		if d.event == nil || !opens(d.event, d.cpus) {
			continue
		}
		for range d.listed {
			slots = append(slots, CSlot{Key: key, Event: d.event, CPUs: d.cpus, Counted: true})
		}
		byName[d.full] = true
	}

	for _, s := range c.derived {
		for _, g := range s.Groups {
			ok := true
			for _, t := range g.Terms {
				if !byName[t.Event] || t.CPU != g.Terms[0].CPU {
					ok = false
					break
				}
			}
			if ok {
				slots = append(slots, CSlot{Key: "derived." + names.Metric(s.Name, c.compat)})
				break
			}
		}
	}
	return slots
}

// cSections reads f as the C agent's parser does: the names its dynamic
// events are matched against, the derived sections that get members, and
// whether there is a [dynamic] section at all. Each [dynamic] header
// starts the list again; the lines of a derived section that follows
// [dynamic] (with no PMU section between) go to that list, leaving the
// section without members; so do those of a derived section before any PMU
// section.
func cSections(f *config.File) (dynamic []string, derived []*config.Section, hasDynamic bool) {
	inDynamic, sawPMU := false, false
	for _, s := range f.Sections {
		switch s.Kind {
		case config.PMUSection:
			inDynamic, sawPMU = false, true
		case config.DynamicSection:
			inDynamic, hasDynamic = true, true
			dynamic = dynamic[:0]
			for _, e := range s.Events {
				dynamic = append(dynamic, e.Name)
			}
		case config.DerivedSection:
			switch {
			case inDynamic:
				for _, g := range s.Groups {
					for _, t := range g.Terms {
						dynamic = append(dynamic, t.Event)
					}
				}
			case sawPMU:
				derived = append(derived, s)
			}
		}
	}
	return dynamic, derived, hasDynamic
}

// cPMU is a PMU as the C agent's dynamic events see it.
type cPMU struct {
	name   string
	events []string
}

// cSoftware are the software events the C agent knows without sysfs,
// which lists none for the software PMU.
var cSoftware = []string{
	"alignment-faults", "context-switches", "cpu-clock", "cpu-migrations",
	"emulation-faults", "major-faults", "minor-faults", "page-faults", "task-clock",
}

// cPMUs lists sysfs's PMUs with an events directory, by name, each with
// its events in the order the directory gives them (as readdir does,
// unsorted), then the software PMU. The PMUs are those of PMUNames: in
// the agent's pass, the listing the plan already read.
func cPMUs(fs *pmu.FS) []cPMU {
	dir := fs.PMUDevices()
	var out []cPMU
	names, _ := fs.PMUNames()
	for _, name := range names {
		if strings.HasPrefix(name, ".") {
			continue
		}
		evs := readdir(filepath.Join(dir, name, "events"))
		if evs == nil {
			continue
		}
		p := cPMU{name: name}
		for _, e := range evs {
			if strings.HasPrefix(e, ".") || strings.Contains(e, ".scale") || strings.Contains(e, ".unit") {
				continue
			}
			p.events = append(p.events, e)
		}
		out = append(out, p)
	}
	slices.SortStableFunc(out, func(a, b cPMU) int { return strings.Compare(a.name, b.name) })
	return append(out, cPMU{name: "software", events: cSoftware})
}

// readdir lists a directory in the kernel's order; nil if it cannot.
func readdir(dir string) []string {
	names, err := hostfs.ReadDirNames(dir)
	if err != nil {
		return nil
	}
	return names
}
