package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"perfevent/internal/counter"
	"perfevent/internal/pmu"
)

// errTracepointProbe marks the tracepoints of an unfiltered listing.
var errTracepointProbe = errors.New("tracepoints are probed with --match or --pmu")

func listEvents(fs *pmu.FS, pmuName, pattern string, probe bool, stdout, stderr io.Writer) int {
	ls, err := fs.ListEvents()
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", prog, err)
	}
	if pmuName != "" {
		known := fs.KnownPMUs()
		if !slices.ContainsFunc(known, func(k string) bool { return strings.EqualFold(k, pmuName) }) {
			fmt.Fprintf(stderr, "%s: --pmu %s: no PMU of that name on this machine; its PMUs are %s\n", prog, pmuName, strings.Join(known, ", "))
			return 1
		}
	}
	ls, err = pmu.FilterListings(ls, pmuName, pattern)
	if err != nil {
		fmt.Fprintf(stderr, "%s: --match: %v\n", prog, err)
		return 1
	}
	if len(ls) == 0 {
		switch {
		case pattern != "" && pmuName != "":
			fmt.Fprintf(stderr, "%s: nothing matched %q among the events of PMU %s\n", prog, pattern, pmuName)
		case pattern != "":
			fmt.Fprintf(stderr, "%s: nothing matched %q among this machine's events\n", prog, pattern)
		default:
			fmt.Fprintf(stderr, "%s: nothing matched: PMU %s has no events to list\n", prog, pmuName)
		}
		return 1
	}
	if probe {
		// Opening a tracepoint costs the kernel about 10 ms, and there
		// are thousands: an unfiltered listing leaves them unprobed.
		if pmuName == "" && pattern == "" {
			for i := range ls {
				if ls[i].Kind == pmu.KindTracepoint {
					ls[i].Probe = pmu.ProbeResult{State: pmu.Skipped, Err: errTracepointProbe}
				}
			}
		}
		fs.Probe(ls, counter.KernelOpener{})
	}
	var kind pmu.Kind
	group := ""
	for _, l := range ls {
		if l.Kind != kind || l.Group != group {
			kind, group = l.Kind, l.Group
			title := string(kind)
			if group != "" {
				title += " " + group
			}
			if c := fs.CatalogOf(kind, group); c != "" {
				title += " (from " + c + ")"
			}
			fmt.Fprintf(stdout, "\n# %s\n", title)
		}
		fmt.Fprintln(stdout, l.String())
	}
	return 0
}
