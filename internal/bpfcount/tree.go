package bpfcount

import (
	"path"
	"slices"
	"strings"
	"sync/atomic"
)

// tree adds up a cgroup's sums from the slots of the counted cgroups in
// its subtree. The program charges each interval to one slot only, the
// task's nearest counted cgroup (charging every counted ancestor would
// cost the verifier levels × events blocks); a perf cgroup event counts
// the cgroups below its own too, so a counted cgroup's value is the sum
// of its own slot and those of the counted cgroups below it.
//
// A counted cgroup that goes leaves its sums to its nearest counted
// ancestor, as a carry that the ancestor's value keeps adding: they were
// part of every counted ancestor's value, and values never go back. The
// carry is kept here rather than added to the ancestor's slot, which the
// program may be adding to on that CPU at the same moment.
type tree struct {
	nEvents, nCPU int
	path          []string // per slot: its cgroup's path; "" when free
	// within is per slot the slots of the counted cgroups at or below
	// its cgroup, its own first: kept as cgroups come and go, so that a
	// read walks a list and allocates nothing.
	within [][]int
	carry  [][]Reading // per slot: nil, or what counted cgroups below it left, by index(0, ev, cpu)
}

func newTree(slots, nEvents, nCPU int) *tree {
	return &tree{nEvents: nEvents, nCPU: nCPU, path: make([]string, slots), within: make([][]int, slots), carry: make([][]Reading, slots)}
}

// cleanPath is p as a cgroup path: rooted, without a trailing slash.
func cleanPath(p string) string {
	return path.Clean("/" + p)
}

// below says whether the cgroup at p is strictly below the one at anc.
func below(p, anc string) bool {
	if anc == "/" {
		return p != "/"
	}
	return len(p) > len(anc) && p[len(anc)] == '/' && strings.HasPrefix(p, anc)
}

// add counts slot as the cgroup at p, whose sums start from zero.
func (t *tree) add(slot int, p string) {
	p = cleanPath(p)
	t.path[slot], t.carry[slot] = p, nil
	within := append(t.within[slot][:0], slot)
	for s, q := range t.path {
		switch {
		case q == "" || s == slot:
		case below(q, p):
			within = append(within, s)
		case below(p, q):
			t.within[s] = append(t.within[s], slot)
		}
	}
	t.within[slot] = within
}

// remove lets slot go, and leaves what it counted (sums is the counts
// map) to its nearest counted ancestor, if any.
func (t *tree) remove(slot int, sums []Reading) {
	p := t.path[slot]
	if p == "" {
		return
	}
	up := -1
	for s, q := range t.path {
		if q == "" || s == slot || !below(p, q) {
			continue
		}
		if up < 0 || len(q) > len(t.path[up]) {
			up = s
		}
		t.within[s] = slices.DeleteFunc(t.within[s], func(x int) bool { return x == slot })
	}
	if up >= 0 {
		if t.carry[up] == nil {
			t.carry[up] = make([]Reading, t.nEvents*t.nCPU)
		}
		for ev := range t.nEvents {
			for cpu := range t.nCPU {
				r := t.own(sums, slot, ev, cpu)
				c := &t.carry[up][index(0, ev, cpu, t.nEvents, t.nCPU)]
				c.Value += r.Value
				c.Enabled += r.Enabled
				c.Running += r.Running
			}
		}
	}
	t.path[slot], t.carry[slot], t.within[slot] = "", nil, t.within[slot][:0]
}

// own is slot's own sums of event ev on cpu and its carry.
func (t *tree) own(sums []Reading, slot, ev, cpu int) Reading {
	r := &sums[index(slot, ev, cpu, t.nEvents, t.nCPU)]
	// Each field is one aligned word that the program adds to on cpu
	// alone; an atomic load never sees half of one.
	out := Reading{
		Value:   atomic.LoadUint64(&r.Value),
		Enabled: atomic.LoadUint64(&r.Enabled),
		Running: atomic.LoadUint64(&r.Running),
	}
	if c := t.carry[slot]; c != nil {
		k := c[index(0, ev, cpu, t.nEvents, t.nCPU)]
		out.Value += k.Value
		out.Enabled += k.Enabled
		out.Running += k.Running
	}
	return out
}

// sumCPUs is sum on each of cpus, into out (as long as cpus): a fetch
// at 768 CPUs makes it for every counted cgroup and event, so it walks
// each slot's sums in one loop rather than calling sum per CPU.
func (t *tree) sumCPUs(sums []Reading, slot, ev int, cpus []int, out []Reading) {
	within := t.within[slot]
	if len(within) == 0 {
		within = []int{slot} // not counted: its own alone
	}
	clear(out)
	for _, s := range within {
		for i, cpu := range cpus {
			r := &sums[index(s, ev, cpu, t.nEvents, t.nCPU)]
			o := &out[i]
			o.Value += atomic.LoadUint64(&r.Value)
			o.Enabled += atomic.LoadUint64(&r.Enabled)
			o.Running += atomic.LoadUint64(&r.Running)
		}
		if c := t.carry[s]; c != nil {
			for i, cpu := range cpus {
				k, o := &c[index(0, ev, cpu, t.nEvents, t.nCPU)], &out[i]
				o.Value += k.Value
				o.Enabled += k.Enabled
				o.Running += k.Running
			}
		}
	}
}

// sum is slot's value of event ev on cpu: its own sums and those of the
// counted cgroups below it. A slot not counted has its own alone.
func (t *tree) sum(sums []Reading, slot, ev, cpu int) Reading {
	within := t.within[slot]
	if len(within) == 0 {
		return t.own(sums, slot, ev, cpu)
	}
	var out Reading
	for _, s := range within {
		r := t.own(sums, s, ev, cpu)
		out.Value += r.Value
		out.Enabled += r.Enabled
		out.Running += r.Running
	}
	return out
}
