package config

import (
	"reflect"
	"testing"
)

// twoNodes is a machine with CPUs 0-3 on node 0 and 4-6 on node 1, with CPU 2
// offline.
var twoNodes = Topology{
	Online: []int{0, 1, 3, 4, 5, 6},
	Nodes:  [][]int{{0, 1, 2, 3}, {4, 5, 6}},
}

func TestCPUAllocator(t *testing.T) {
	a, err := NewCPUAllocator(twoNodes)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		opt  CPUOption
		want []int
	}{
		{CPUOption{}, []int{0, 1, 3, 4, 5, 6}},
		{CPUOption{Kind: CPUAll}, []int{0, 1, 3, 4, 5, 6}},
		{CPUOption{Kind: CPUNode}, []int{0, 4}},
		{CPUOption{Kind: CPUIndex, Index: 2}, []int{3}}, // an index, not an id
		{CPUOption{Kind: CPUIndex, Index: 5}, []int{6}},
		{CPUOption{Kind: CPURoundRobin}, []int{0}},
		{CPUOption{Kind: CPURoundRobin}, []int{1}},
		{CPUOption{Kind: CPUNodeRoundRobin}, []int{0, 4}},
		{CPUOption{Kind: CPURoundRobin}, []int{3}},
		{CPUOption{Kind: CPUNodeRoundRobin}, []int{1, 5}},
		{CPUOption{Kind: CPUNodeRoundRobin}, []int{3, 6}},
		{CPUOption{Kind: CPUNodeRoundRobin}, []int{0, 4}}, // node_rr wraps after 3 turns
		{CPUOption{Kind: CPURoundRobin}, []int{4}},
		{CPUOption{Kind: CPURoundRobin}, []int{5}},
		{CPUOption{Kind: CPURoundRobin}, []int{6}},
		{CPUOption{Kind: CPURoundRobin}, []int{0}}, // cpu_rr wraps after 6
	}
	for i, s := range steps {
		got, err := a.CPUs(s.opt, at(i+1))
		if err != nil {
			t.Fatalf("step %d (%v): %v", i, s.opt, err)
		}
		if !reflect.DeepEqual(got, s.want) {
			t.Errorf("step %d (%q): CPUs = %v, want %v", i, s.opt.String(), got, s.want)
		}
	}

	// Every event gets the one list of the online CPUs, which an append
	// to it copies rather than changes.
	all, _ := a.CPUs(CPUOption{Kind: CPUAll}, at(1))
	def, _ := a.CPUs(CPUOption{}, at(2))
	if &all[0] != &def[0] {
		t.Error("CPUs made a copy of the online CPUs for each event")
	}
	more := append(all, 99)
	if again, _ := a.CPUs(CPUOption{Kind: CPUAll}, at(3)); len(again) != 6 || &more[0] == &all[0] {
		t.Errorf("an append to CPUs' list changed the allocator's: %v", again)
	}
}

func TestCPUAllocatorErrors(t *testing.T) {
	a, err := NewCPUAllocator(Topology{Online: []int{0, 1}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		opt CPUOption
		err string
	}{
		{CPUOption{Kind: CPUIndex, Index: 2}, "perfevent.conf:7: CPU index 2 is out of range: this machine has 2 online CPUs (0-1), so the index must be 0 to 1"},
		{CPUOption{Kind: CPUIndex, Index: -1}, "perfevent.conf:7: CPU index -1 is out of range: this machine has 2 online CPUs (0-1), so the index must be 0 to 1"},
		{CPUOption{Kind: 42}, "perfevent.conf:7: unknown CPU option kind 42"},
	} {
		cpus, err := a.CPUs(tc.opt, at(7))
		if err == nil || err.Error() != tc.err {
			t.Errorf("CPUs(%v) = %v, %v; want error %s", tc.opt, cpus, err, tc.err)
		}
	}
	if _, err := NewCPUAllocator(Topology{}); err == nil || err.Error() != "no online CPUs to count on" {
		t.Errorf("no CPUs: err = %v", err)
	}
}

func TestCPUAllocatorTopologyQuirks(t *testing.T) {
	for _, tc := range []struct {
		name          string
		topo          Topology
		node, nodeRR2 []int
	}{{
		name: "no NUMA information: one node",
		topo: Topology{Online: []int{0, 1, 2}},
		node: []int{0}, nodeRR2: []int{1},
	}, {
		name: "node lists with only offline CPUs",
		topo: Topology{Online: []int{0, 1}, Nodes: [][]int{{8, 9}}},
		node: []int{0}, nodeRR2: []int{1},
	}, {
		name: "unsorted online list and a memory-only node",
		topo: Topology{Online: []int{3, 1, 2, 0, 1}, Nodes: [][]int{{2, 3}, {}, {0, 1}}},
		node: []int{2, 0}, nodeRR2: []int{3, 1},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := NewCPUAllocator(tc.topo)
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := a.CPUs(CPUOption{Kind: CPUNode}, at(1)); !reflect.DeepEqual(got, tc.node) {
				t.Errorf("node = %v, want %v", got, tc.node)
			}
			a.CPUs(CPUOption{Kind: CPUNodeRoundRobin}, at(1))
			if got, _ := a.CPUs(CPUOption{Kind: CPUNodeRoundRobin}, at(1)); !reflect.DeepEqual(got, tc.nodeRR2) {
				t.Errorf("second node_rr = %v, want %v", got, tc.nodeRR2)
			}
			if got, _ := a.CPUs(CPUOption{Kind: CPUIndex}, at(1)); got[0] != 0 {
				t.Errorf("index 0 = %v, want the lowest online CPU", got)
			}
		})
	}
}
