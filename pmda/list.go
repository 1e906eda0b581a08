package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
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
			hint := ""
			if near := pmu.NearestNames(pmuName, known); len(near) > 0 {
				hint = " (did you mean " + strings.Join(near, ", ") + "?)"
			}
			fmt.Fprintf(stderr, "%s: --pmu %s: no PMU of that name on this machine%s; its PMUs are %s\n", prog, pmuName, hint, strings.Join(boxRuns(known), ", "))
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

// boxRuns shortens the numbered PMUs of a sorted list, of which a large
// server has hundreds (uncore_cha_0 to uncore_cha_119), to one entry per
// run: uncore_cha_0..119.
func boxRuns(names []string) []string {
	type box struct {
		prefix string
		n      int
	}
	split := func(s string) (box, bool) {
		i := len(s)
		for i > 0 && s[i-1] >= '0' && s[i-1] <= '9' {
			i--
		}
		n, err := strconv.Atoi(s[i:])
		if i == len(s) || i == 0 || err != nil {
			return box{}, false
		}
		return box{s[:i], n}, true
	}
	var out []string
	var run []box
	flush := func() {
		switch len(run) {
		case 0:
		case 1, 2:
			for _, b := range run {
				out = append(out, b.prefix+strconv.Itoa(b.n))
			}
		default:
			out = append(out, fmt.Sprintf("%s%d..%d", run[0].prefix, run[0].n, run[len(run)-1].n))
		}
		run = run[:0]
	}
	// Sorted as strings, uncore_imc_10 comes before uncore_imc_2: order
	// each prefix's numbers first.
	sorted := slices.Clone(names)
	slices.SortStableFunc(sorted, func(a, b string) int {
		ba, oka := split(a)
		bb, okb := split(b)
		if oka && okb && ba.prefix == bb.prefix {
			return ba.n - bb.n
		}
		return strings.Compare(a, b)
	})
	for _, n := range sorted {
		b, ok := split(n)
		if ok && len(run) > 0 && b.prefix == run[0].prefix && b.n == run[len(run)-1].n+1 {
			run = append(run, b)
			continue
		}
		flush()
		if ok {
			run = append(run, b)
			continue
		}
		out = append(out, n)
	}
	flush()
	return out
}
