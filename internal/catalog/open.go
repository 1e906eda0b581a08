package catalog

import (
	"slices"

	"perfevent/internal/ratio"
	"perfevent/internal/setup"
)

// Open is plan with the events of the ratios of defs every operand of
// which is usable here (setup.Plan.Usable), each event once; a ratio with
// an operand that is not gets an Info note and none of its events, so a
// machine never counts events for a ratio it cannot serve. It returns the
// names of those ratios too; plan is left as it was.
func Open(plan *setup.Plan, defs []ratio.Def) (_ *setup.Plan, unusable []string) {
	// Sized once, for a note per ratio at most and an operand for each of
	// a ratio's terms.
	ops := make([]setup.Operand, 0, 2*len(defs))
	notes := make([]setup.Note, 0, len(defs))
	at := make(map[string]int, 2*len(defs))
	for _, d := range defs {
		usable := true
		terms := Operands(d)
		for _, term := range terms {
			if ok, why := plan.Usable(term); !ok {
				notes = append(notes, setup.Note{Severity: setup.Info,
					Text: "catalog " + d.Group + ": perfevent.ratio." + d.Name + ": its operand " + term + " is not usable here: " + why + "; none of its events opened"})
				usable = false
				break
			}
		}
		if !usable {
			unusable = append(unusable, d.Name)
			continue
		}
		for _, term := range terms {
			i, ok := at[term]
			if !ok {
				i = len(ops)
				at[term] = i
				ops = append(ops, setup.Operand{Term: term})
			}
			if !slices.Contains(ops[i].For, d.Name) {
				ops[i].For = append(ops[i].For, d.Name)
			}
		}
	}
	return plan.WithOperands(ops, notes...), unusable
}
