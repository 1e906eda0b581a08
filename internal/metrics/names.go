// Package metrics holds perfevent's metric table: the C agent's metric
// names, PMIDs that stay put across restarts and config edits, the per-CPU
// instance domains, help text and labels.
//
// It knows the shape of perfevent's namespace and, through internal/pmda
// and internal/pdu, how values, descriptors and labels go on the wire, but
// nothing about perf syscalls: counters reach it as internal/counter values.
package metrics

import "strconv"

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
// perfevent.ratio.all.NAME, the whole machine; then its cumulative
// operands, perfevent.ratio.numerator.NAME and .denominator.NAME per CPU
// and perfevent.ratio.all.numerator.NAME and .denominator.NAME. Items are
// only ever added, so a ratio's PMIDs never change.
const (
	ItemRatioCPU       = 0
	ItemRatioAll       = 1
	ItemNumeratorCPU   = 2
	ItemDenominatorCPU = 3
	ItemNumeratorAll   = 4
	ItemDenominatorAll = 5
)

// InstanceName is the external instance name of a per-CPU value.
func InstanceName(cpu int) string { return "cpu" + strconv.Itoa(cpu) }
