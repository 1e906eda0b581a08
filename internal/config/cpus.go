package config

import (
	"fmt"
	"slices"

	"perfevent/internal/cpulist"
)

// Topology is what CPU options are expanded against. The caller
// (setup.ReadMachine) reads it from /sys/devices/system/cpu/online and
// /sys/devices/system/node/node*/cpulist, both in the kernel's CPU list
// format, which internal/cpulist parses.
type Topology struct {
	// Online holds the online CPU ids, ascending.
	Online []int
	// Nodes holds the CPU ids of each NUMA node, in node order. CPUs that
	// are not online are ignored. Empty means one node holding every online
	// CPU (kernels without NUMA have no node directory).
	Nodes [][]int
}

// CPUAllocator turns CPU options into CPU ids. It remembers where the
// round-robin options (cpu_rr, node_rr) got to, so expand the events in file
// order with one allocator to get the C agent's placement.
type CPUAllocator struct {
	online []int
	// byRank[i] holds the i-th online CPU of every node that has one: the
	// CPUs a node_rr event gets on its i-th turn.
	byRank [][]int
	rr     int
	nodeRR int
}

// NewCPUAllocator checks the topology and prepares the round-robin state.
func NewCPUAllocator(t Topology) (*CPUAllocator, error) {
	if len(t.Online) == 0 {
		return nil, fmt.Errorf("no online CPUs to count on")
	}
	online := slices.Clone(t.Online)
	slices.Sort(online)
	online = slices.Compact(online)

	nodes := t.Nodes
	if len(nodes) == 0 {
		nodes = [][]int{online}
	}
	var byRank [][]int
	for _, node := range nodes {
		rank := 0
		for _, cpu := range node {
			if _, ok := slices.BinarySearch(online, cpu); !ok {
				continue
			}
			if rank == len(byRank) {
				byRank = append(byRank, nil)
			}
			byRank[rank] = append(byRank[rank], cpu)
			rank++
		}
	}
	if len(byRank) == 0 {
		// The node lists named no online CPU; counting per node would count
		// nowhere, so fall back to treating the machine as one node.
		for _, cpu := range online {
			byRank = append(byRank, []int{cpu})
		}
	}
	return &CPUAllocator{online: online, byRank: byRank}, nil
}

// CPUs returns the CPU ids an event with option opt counts on; at is the
// event's position, for the error. CPUDefault gives every online CPU: a
// [dynamic] event whose PMU has a cpumask should use that instead, and not
// call CPUs. Each cpu_rr or node_rr call advances the round robin.
//
// A CPU index beyond the online CPUs is an error; the C agent quietly used
// the first CPU instead.
//
// The lists are shared by the events given them, so that a machine of
// hundreds of CPUs does not keep a copy of its CPU list for each event:
// callers must not change them. Appending to one is safe, as each ends at
// its capacity.
func (a *CPUAllocator) CPUs(opt CPUOption, at Pos) ([]int, error) {
	switch opt.Kind {
	case CPUDefault, CPUAll:
		return slices.Clip(a.online), nil
	case CPURoundRobin:
		cpu := a.online[a.rr]
		a.rr = (a.rr + 1) % len(a.online)
		return []int{cpu}, nil
	case CPUNode:
		return slices.Clip(a.byRank[0]), nil
	case CPUNodeRoundRobin:
		cpus := a.byRank[a.nodeRR]
		a.nodeRR = (a.nodeRR + 1) % len(a.byRank)
		return slices.Clip(cpus), nil
	case CPUIndex:
		if opt.Index < 0 || opt.Index >= len(a.online) {
			return nil, errorf(at, "CPU index %d is out of range: this machine has %d online CPUs (%s), so the index must be 0 to %d",
				opt.Index, len(a.online), cpulist.Format(a.online), len(a.online)-1)
		}
		return []int{a.online[opt.Index]}, nil
	}
	return nil, errorf(at, "unknown CPU option kind %d", int(opt.Kind))
}
