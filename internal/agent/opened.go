package agent

import (
	"fmt"
	"strings"

	"perfevent/internal/config"
	"perfevent/internal/counter"
	"perfevent/internal/cpulist"
	"perfevent/internal/pmu"
	"perfevent/internal/setup"
)

// opened is the supervisor's record of what opening a plan gave, kept
// beside the plan, which it never changes: the log and --check print the
// plan's notes, then these.
type opened struct {
	// counters are the plan's counters that count on at least one CPU,
	// in plan order, each with the CPUs it counts on.
	counters []setup.Counter
	// derived are the plan's derived metrics that the open counters
	// allow, in the order of their counter.Set indexes.
	derived []setup.Derived
	// notes say, one per counter, what it resolved to and where it
	// counts or why it cannot (errno and advice), then what became of
	// each derived section.
	notes []setup.Note
	// unsupported are the events that opened nowhere only because this
	// machine does not support them: a derived section lacking only those
	// is expected here (a hardware metric on a VM), not a mistake.
	unsupported map[string]bool
}

// recordOpen is what set.Open did with the plan's counters. A counter that
// opened nowhere is not kept. Not being supported on this machine is
// normal on a VM and noted as Info; any other failure is a Problem.
func recordOpen(p *setup.Plan, set *counter.Set, sum counter.Summary) *opened {
	o := &opened{unsupported: map[string]bool{}}
	// The failures come event by event: each event's are a run of them.
	byEvent := make(map[string][]counter.Failure, len(sum.Failures))
	for i := 0; i < len(sum.Failures); {
		j := i + 1
		for j < len(sum.Failures) && sum.Failures[j].Event == sum.Failures[i].Event {
			j++
		}
		ev, run := sum.Failures[i].Event, sum.Failures[i:j:j]
		if prev, ok := byEvent[ev]; ok {
			run = append(prev, run...) // a copy: neither has room
		}
		byEvent[ev] = run
		i = j
	}
	// Sized once: a Counter is a few hundred bytes.
	o.counters, o.notes = make([]setup.Counter, 0, len(p.Counters)), make([]setup.Note, 0, len(p.Counters)+len(p.Derived))
	var cpus []int // one buffer for every event's failed CPUs: Describe keeps none
	// Each note is written into one buffer, then copied once into its
	// string: joined piece by piece, a note of a few hundred bytes was
	// copied whole at each of up to five steps, at every start, for each
	// counter.
	var text []byte
	for _, c := range p.Counters {
		ev, _ := set.Lookup(c.Event.Name)
		served := set.CPUs(ev)
		text = text[:0]
		if c.For != "" {
			text = append(text, "catalog: "...)
		}
		text = append(append(append(text, c.Event.Name...), ": "...), c.Describe()...)
		if c.For != "" {
			text = append(append(append(text, " ("...), c.For...), ')')
		}
		fails := byEvent[c.Event.Name]
		if len(fails) == 0 {
			text = append(append(text, ", on "...), cpulist.Describe(served)...)
			o.notes = append(o.notes, setup.Note{Pos: c.Pos, Severity: setup.Info, Text: string(text)})
			o.counters = append(o.counters, c)
			continue
		}
		cpus = cpus[:0]
		for _, f := range fails {
			cpus = append(cpus, f.CPUs...)
		}
		text = counter.AppendCause(append(append(append(text, "; cannot count on "...), cpulist.Describe(cpus)...), ": "...), fails[0].Advice, fails[0].Errno)
		if len(served) > 0 {
			text = append(append(text, "; counting on "...), cpulist.Describe(served)...)
		} else {
			text = append(text, "; skipped"...)
		}
		sev := setup.Problem
		if allUnsupported(fails) || c.For != "" {
			sev = setup.Info
			if len(served) == 0 {
				o.unsupported[c.Event.Name] = true
			}
		}
		o.notes = append(o.notes, setup.Note{Pos: c.Pos, Severity: sev, Text: string(text)})
		if len(served) > 0 {
			c.CPUs = served
			o.counters = append(o.counters, c)
		}
	}
	return o
}

func allUnsupported(fails []counter.Failure) bool {
	for _, f := range fails {
		if f.Kind != counter.Unsupported {
			return false
		}
	}
	return true
}

// derive adds to set the plan's derived metrics that its open counters
// allow: for each section, the first alternative group whose members are
// all served on the same CPUs. A section with no usable group is skipped
// with a note naming what each group lacks. fs gives perf_scale members
// their kernel scale.
func (o *opened) derive(p *setup.Plan, set *counter.Set, fs *pmu.FS) {
	cpus := func(event string) ([]int, bool) {
		ev, ok := set.Lookup(event)
		if !ok || len(set.CPUs(ev)) == 0 {
			return nil, false
		}
		return set.CPUs(ev), true
	}
	for _, d := range p.Derived {
		s := d.Section
		g, err := s.ChooseGroup(cpus)
		if err != nil {
			sev := setup.Problem
			if o.membersUnsupported(s) {
				sev = setup.Info
			}
			o.notes = append(o.notes, setup.Note{Pos: s.Pos, Severity: sev, Text: strings.TrimPrefix(err.Error(), s.Pos.String()+": ") + "; section skipped"})
			continue
		}
		spec := counter.DerivedSpec{Name: s.Name}
		var parts []string
		for _, t := range g.Terms {
			scale, how := t.Scale, ""
			if t.PerfScale {
				sysScale, unit, found := 1.0, "", false
				if c, ok := o.counter(t.Event); ok {
					sysScale, unit, found = fs.ScaleFor(c.Event)
				}
				if !found {
					o.problem(t.Pos, "%s: perf_scale: no sysfs .scale file describes this event; using 1", t.Event)
					sysScale = 1
				}
				scale *= sysScale
				how = " (perf_scale)"
				if unit != "" {
					how = " (perf_scale, " + unit + ")"
				}
			}
			parts = append(parts, fmt.Sprintf("%s × %g%s", t.Event, scale, how))
			spec.Terms = append(spec.Terms, counter.Term{Event: t.Event, Scale: scale})
		}
		if _, err := set.AddDerived(spec); err != nil {
			o.problem(s.Pos, "%s: %s; section skipped", s.Header(), strings.TrimPrefix(err.Error(), "counter: "))
			continue
		}
		o.notes = append(o.notes, setup.Note{Pos: s.Pos, Severity: setup.Info,
			Text: fmt.Sprintf("%s: perfevent.derived.%s.value = %s (group at line %d)", s.Header(), d.Metric, strings.Join(parts, " + "), g.Pos.Line)})
		o.derived = append(o.derived, d)
	}
}

// membersUnsupported reports whether a derived section is unusable only
// because members are not supported on this machine (a hardware derived
// metric on a VM): expected here, not a mistake in the config. Every group
// must lack a member, and every member it lacks must be one of those.
func (o *opened) membersUnsupported(s *config.Section) bool {
	for _, g := range s.Groups {
		missing := 0
		for _, t := range g.Terms {
			if _, ok := o.counter(t.Event); ok {
				continue
			}
			if !o.unsupported[t.Event] {
				return false
			}
			missing++
		}
		if missing == 0 {
			return false
		}
	}
	return true
}

func (o *opened) counter(event string) (setup.Counter, bool) {
	for _, c := range o.counters {
		if c.Event.Name == event {
			return c, true
		}
	}
	return setup.Counter{}, false
}

func (o *opened) problem(pos config.Pos, format string, args ...any) {
	o.notes = append(o.notes, setup.Note{Pos: pos, Severity: setup.Problem, Text: fmt.Sprintf(format, args...)})
}
