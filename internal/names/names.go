// Package names turns configured event names into perfevent metric names.
//
// It sits below both the planner (internal/setup), which must know a line's
// metric name to report clashes before anything is opened, and the metric
// table (internal/metrics), which serves those names to pmcd; neither needs
// the other for this.
package names

import "strings"

// Metric turns a configured event name into the part of the metric name
// below perfevent.hwcounters (or perfevent.derived).
//
// By default every character outside [A-Za-z0-9_.] becomes '_', which is the
// C agent's rule since PCP 3.10.8: "cpu-clock" gives "cpu_clock", and the '.'
// of a [dynamic] "software.page-faults" adds a namespace level. With compat
// (pmdaperfevent -C) only ':' becomes '-', which restores the older names.
func Metric(event string, compat bool) string {
	if compat {
		return strings.ReplaceAll(event, ":", "-")
	}
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '.':
			return r
		}
		return '_'
	}, event)
}

// Valid rejects names that would break the PMNS: empty components (from
// "a..b" or a leading or trailing dot).
func Valid(name string) bool {
	for _, part := range strings.Split(name, ".") {
		if part == "" {
			return false
		}
	}
	return true
}
