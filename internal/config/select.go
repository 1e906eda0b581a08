package config

import (
	"fmt"
	"strings"
)

// ChoosePMUSection picks the PMU section to use, as the C agent does: the
// first PMU section, in file order, that names a PMU present on this machine.
// present reports whether a PMU of that name exists; the caller decides what
// counts (our agent treats "perf", the generic perf_event PMU, as always
// present). [dynamic] and derived sections are not PMU sections: they always
// apply, whatever is chosen here.
//
// The returned lines explain the decision, one per PMU section, e.g.
// "perfevent.conf:3: [skl] chosen: PMU skl is present". chosen is nil when no
// section matches; the last line then says so.
func (f *File) ChoosePMUSection(present func(pmu string) bool) (chosen *Section, why []string) {
	for _, s := range f.PMUSections() {
		if chosen != nil {
			why = append(why, fmt.Sprintf("%s: %s not used: %s at line %d comes first",
				s.Pos, s.Header(), chosen.Header(), chosen.Pos.Line))
			continue
		}
		for _, name := range s.PMUs {
			if present(name) {
				chosen = s
				why = append(why, fmt.Sprintf("%s: %s chosen: PMU %s is present", s.Pos, s.Header(), name))
				break
			}
		}
		if chosen == nil {
			why = append(why, fmt.Sprintf("%s: %s skipped: no PMU named %s on this machine",
				s.Pos, s.Header(), orList(s.PMUs)))
		}
	}
	if chosen == nil {
		why = append(why, fmt.Sprintf("%s: no PMU section names a PMU of this machine; only [dynamic] and derived sections apply", f.Path))
	}
	return chosen, why
}

// ChooseGroup picks the alternative group of a derived section to use: the
// first whose members are all available with matching CPUs.
//
// cpus reports whether the agent has set up the named base event and, if so,
// the CPUs it counts on. A group is usable when every member is available,
// the members' own CPU options agree (the C agent's "Mismatch in cpu
// configuration" check), and every member counts on the same number of CPUs:
// the derived value of instance i sums each member's instance i.
//
// When no group is usable the error, positioned at the section header, says
// what each group lacks.
func (s *Section) ChooseGroup(cpus func(event string) ([]int, bool)) (*Group, error) {
	if s.Kind != DerivedSection {
		return nil, errorf(s.Pos, "%s is not a derived section", s.Header())
	}
	var reasons []string
	for i := range s.Groups {
		g := &s.Groups[i]
		reason := groupProblem(g, cpus)
		if reason == "" {
			return g, nil
		}
		reasons = append(reasons, fmt.Sprintf("the group at line %d %s", g.Pos.Line, reason))
	}
	if len(reasons) == 0 {
		return nil, errorf(s.Pos, "%s has no members", s.Header())
	}
	return nil, errorf(s.Pos, "derived metric %s is unavailable: %s", s.Name, strings.Join(reasons, "; "))
}

// groupProblem returns why g cannot be used, or "".
func groupProblem(g *Group, cpus func(string) ([]int, bool)) string {
	var missing []string
	for _, t := range g.Terms {
		if _, ok := cpus(t.Event); !ok {
			missing = append(missing, t.Event)
		}
	}
	if len(missing) > 0 {
		return "lacks " + strings.Join(missing, ", ")
	}
	first := g.Terms[0]
	for _, t := range g.Terms[1:] {
		if !sameCPUs(t.CPU, first.CPU) {
			return fmt.Sprintf("mixes CPU options: %s has %s but %s has %s",
				first.Event, first.CPU.describe(), t.Event, t.CPU.describe())
		}
	}
	n, _ := cpus(first.Event)
	for _, t := range g.Terms[1:] {
		if m, _ := cpus(t.Event); len(m) != len(n) {
			return fmt.Sprintf("mixes CPU counts: %s counts on %d CPUs but %s on %d",
				first.Event, len(n), t.Event, len(m))
		}
	}
	return ""
}

// orList renders names as "a", "a or b", "a, b or c".
func orList(names []string) string {
	switch len(names) {
	case 0:
		return ""
	case 1:
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
