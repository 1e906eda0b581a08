package agent

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"perfevent/internal/catalog"
	"perfevent/internal/config"
	"perfevent/internal/counter"
	"perfevent/internal/metrics"
	"perfevent/internal/setup"
)

// Check is pmdaperfevent --check: it explains what the configuration means
// on this machine, one note a line in file order, then a summary line, and
// returns the number of problems. It opens the counters and builds the
// table as the agent would, then closes them. Only a configuration that
// cannot be read at all is an error.
func Check(o Options, w io.Writer) (problems int, err error) {
	files := holdFiles(&o)
	defer files.Close()
	o.CLayout = "" // the C agent's numbering is the agent's concern, not the check's
	c, err := count(&o, files, counter.Config{})
	if err != nil {
		return 0, err
	}
	plan := c.plan
	notes := c.notes()
	// The table too, with the PMIDs of a fresh map (the real one is the
	// agent's): whatever it refuses, the agent would not serve.
	_, src, err := buildTable(&o, c, metrics.NewClusters(), nil, nil)
	c.set.Close()
	if err != nil {
		notes = append(notes, setup.Note{Severity: setup.Problem, Text: "the metric table: " + err.Error()})
	} else {
		for _, e := range src.Skipped() {
			notes = append(notes, setup.Note{Severity: setup.Problem, Text: e.Error() + "; not served"})
		}
	}

	if !o.NoCatalog {
		notes = append(notes, catalogNotes(c.family)...)
	}
	notes = append(notes, cNotes(&o, plan.Config, c.src)...)
	cg := planCgroups(o.Config, c.cgroups, c.opened.counters)
	notes = append(notes, cg.notes...)
	notes = append(notes, hierarchyNote(o.fs().FS, cg)...)
	for _, n := range sortedNotes(notes) {
		mark := "  "
		if n.Severity == setup.Problem {
			mark = "! "
		}
		fmt.Fprintln(w, mark+n.String())
	}
	lines, sections := 0, 0
	if f := plan.Config; f != nil {
		if plan.Section != nil {
			lines += len(plan.Section.Events)
		}
		lines += len(f.DynamicEvents())
		sections = len(f.DerivedSections())
	}
	warnings, problems := 0, 0
	for _, n := range notes {
		if n.Severity == setup.Problem {
			problems++
		} else if strings.HasPrefix(n.Text, "warning: ") {
			warnings++
		}
	}
	// Problems, what is skipped and warnings apart: a machine that cannot
	// count half the file is not a wrong file, but it should not read as
	// if everything were served either.
	skipped := fmt.Sprintf("%d of %s skipped", max(lines-c.sum.Served, 0), plural(lines, "event line"))
	if sections > 0 {
		skipped += fmt.Sprintf(", %d of %s", max(sections-len(c.opened.derived), 0), plural(sections, "derived section"))
	}
	fmt.Fprintf(w, "\n%s: %s served on %s, %s; %s, %s, %s\n", o.Config,
		plural(c.sum.Served, "event"), plural(c.sum.FDs, "counter"), plural(len(c.opened.derived), "derived metric"),
		plural(problems, "problem"), skipped, plural(warnings, "warning"))
	return problems, nil
}

// sortedNotes orders notes by line, keeping the order of notes about the
// same line (what the line resolved to, then whether it opened); notes
// about the whole file come last.
func sortedNotes(notes []setup.Note) []setup.Note {
	out := slices.Clone(notes)
	key := func(n setup.Note) int {
		if n.Pos.Line == 0 {
			return math.MaxInt
		}
		return n.Pos.Line
	}
	slices.SortStableFunc(out, func(a, b setup.Note) int { return cmp.Compare(key(a), key(b)) })
	return out
}

// cNotes are --check's notes about what the C agent would make of the file:
// with --c-compatible, problems; without, only the warning about a file
// with no events, which neither agent can count anything from. src is what
// f was parsed from.
func cNotes(o *Options, f *config.File, src []byte) []setup.Note {
	if f == nil {
		return nil
	}
	names, _ := o.fs().PMUNames()
	present := func(name string) bool { return name == "software" || slices.Contains(names, name) }
	var notes []setup.Note
	for _, e := range config.CCompat(f, src, present) {
		n := setup.Note{Pos: e.Pos, Severity: setup.Problem, Text: e.Msg}
		if e.Pos.Line == 0 {
			n.Pos = config.Pos{}
			if !o.CCompatible {
				n.Severity, n.Text = setup.Info, "warning: "+e.Msg
			}
		} else if !o.CCompatible {
			continue
		}
		notes = append(notes, n)
	}
	return notes
}

// catalogNotes say which family of the metric catalog this machine is and
// what its vendor defines that the agent does not serve, and why.
func catalogNotes(f *catalog.Family) []setup.Note {
	notes := []setup.Note{{Severity: setup.Info, Text: fmt.Sprintf("catalog: this machine is %s, %d general-purpose counters a perf group", f.Name, f.Counters)}}
	for _, u := range f.Unserved {
		text := fmt.Sprintf("catalog %s: perfevent.ratio.%s not served on %s: %s", u.Group, u.Name, f.Name, u.Why)
		if u.Formula != "" {
			text += "; " + u.Formula
		}
		if u.Source != "" {
			text += "; source: " + u.Source
		}
		notes = append(notes, setup.Note{Severity: setup.Info, Text: text})
	}
	return notes
}
