package catalog

import (
	"fmt"
	"strings"
)

//go:generate go run ./genman ../../man/perfevent.conf.5

// The markers around the section of perfevent.conf(5) that ManSection
// writes.
const (
	ManBegin = `.\" BEGIN CATALOG: generated from internal/catalog by go generate; do not edit`
	ManEnd   = `.\" END CATALOG`
)

// ManSection is perfevent.conf(5)'s list of the catalog: every family,
// every metric with its formula and source, and what is not served.
func ManSection() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	w(".SS The metric catalog")
	w("With no edits, the agent serves the ratios its vendor publishes for the CPU it")
	w("runs on, opening the events they need that \\fBperfevent.conf\\fR does not list")
	w("(\\fBpmdaperfevent \\-\\-check\\fR names them, and \\fB\\-\\-no\\-catalog\\fR turns it all off).")
	w("The operands of one ratio share a perf group when they fit the family's counters;")
	w("those that do not are counted apart, each multiplexed and scaled (\\fB\\-\\-check\\fR says which).")
	w("\\fBratios.conf\\fR turns groups off and on, in order: \\fBdisable\\fR \\fIgroup\\fR,")
	w("\\fBenable\\fR \\fIgroup\\fR, where \\fIgroup\\fR is one of \\fB%s\\fR, or \\fBcatalog\\fR for all.", strings.Join(Groups, "\\fR, \\fB"))
	for _, f := range Families() {
		w(".TP")
		w(".B %s", roff(f.Name))
		if len(f.PMUs) > 0 {
			w("libpfm4 PMU %s; %d general-purpose counters a group.", roff(strings.Join(f.PMUs, ", ")), f.Counters)
		} else {
			w("Any other CPU; %d general-purpose counters a group.", f.Counters)
		}
		for _, d := range f.Metrics {
			w(".br")
			w("\\fB%s\\fR (%s) = %s. %s", roff(d.Name), d.Group, roff(d.Formula()), roff(d.Source))
		}
		for _, u := range f.Unserved {
			w(".br")
			w("Not served: \\fB%s\\fR (%s): %s.", roff(u.Name), u.Group, roff(u.Why))
		}
	}
	return b.String()
}

// roff escapes text for a man page line.
func roff(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	s = strings.ReplaceAll(s, "-", `\-`)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}
