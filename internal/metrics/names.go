// Package metrics holds perfevent's metric table: the C agent's metric
// names, PMIDs that stay put across restarts and config edits, the per-CPU
// instance domains, help text and labels.
//
// It knows the shape of perfevent's namespace but nothing about perf
// syscalls or the wire format.
package metrics

import (
	"strconv"
	"strings"
)

// Domain is perfevent's PMDA domain number (PERFEVENT in stdpmid).
const Domain = 127

// Clusters 0 and 1 are fixed by the C agent and by the shipped pmns:
// perfevent.version is 127.0.0, perfevent.active 127.0.1 and
// perfevent.derived.active 127.1.0.
const (
	ClusterStatic  = 0
	ClusterDerived = 1
	firstDynamic   = 2
	maxCluster     = 1<<12 - 1
)

// Items within a counter's cluster, as in the C agent.
const (
	ItemValue     = 0
	ItemDutycycle = 1
)

// Items within a ratio's cluster: perfevent.ratio.NAME, per CPU, and
// perfevent.ratio.all.NAME, the whole machine.
const (
	ItemRatioCPU = 0
	ItemRatioAll = 1
)

// MetricName turns a configured event name into the part of the metric name
// below perfevent.hwcounters (or perfevent.derived).
//
// By default every character outside [A-Za-z0-9_.] becomes '_', which is the
// C agent's rule since PCP 3.10.8: "cpu-clock" gives "cpu_clock", and the '.'
// of a [dynamic] "software.page-faults" adds a namespace level. With compat
// (pmdaperfevent -C) only ':' becomes '-', which restores the older names.
func MetricName(event string, compat bool) string {
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

// InstanceName is the external instance name of a per-CPU value.
func InstanceName(cpu int) string { return "cpu" + strconv.Itoa(cpu) }
