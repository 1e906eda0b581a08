package ratio

import (
	"fmt"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"perfevent/internal/counter"
)

// Chosen is a ratio this machine can serve: its operands' event indexes in
// the counter.Set and the CPUs both count on, which are its instances.
type Chosen struct {
	Def
	NumEv, DenEv int
	CPUs         []int
}

// Select keeps the ratios of defs whose operands are both served by set on
// the same CPUs, in defs order, and says for each of the others why not, in
// one line for the log: why[i] is about defs[i], "" when it was chosen.
// Call it after set.Open. Of a name defined twice, the first definition
// that can be served is kept.
func Select(defs []Def, set *counter.Set) (chosen []Chosen, why []string) {
	seen := map[string]bool{}
	why = make([]string, len(defs))
	for i, d := range defs {
		if err := d.Check(); err != nil {
			why[i] = err.Error()
			continue
		}
		if seen[d.Name] {
			why[i] = (fmt.Sprintf("ratio %q is defined twice; the first definition is kept", d.Name))
			continue
		}
		num, nok := set.Lookup(d.Num)
		den, dok := set.Lookup(d.Den)
		switch {
		case !nok || !dok:
			why[i] = (fmt.Sprintf("ratio %q not served: %s and %s are not both configured events", d.Name, d.Num, d.Den))
			continue
		case len(set.CPUs(num)) == 0 || len(set.CPUs(den)) == 0:
			why[i] = (fmt.Sprintf("ratio %q not served: %s or %s counts on no CPU of this machine", d.Name, d.Num, d.Den))
			continue
		case !slices.Equal(set.CPUs(num), set.CPUs(den)):
			why[i] = (fmt.Sprintf("ratio %q not served: %s and %s count on different CPUs", d.Name, d.Num, d.Den))
			continue
		}
		seen[d.Name] = true
		chosen = append(chosen, Chosen{Def: d, NumEv: num, DenEv: den, CPUs: set.CPUs(num)})
	}
	return chosen, why
}

// Group puts the operands of each ratio of defs into one named perf group
// (counter.Spec.Group) per CPU, so that both are counted over the same time
// and scaled alike. Ratios that share an operand share the group (ipc and
// cpi are one group of instructions and cycles), which stays as small as
// the ratios allow. Two software operands need nothing: the software events
// of a CPU are one group already.
func Group(specs []counter.Spec, defs []Def) {
	idx := make(map[string]int, len(specs))
	for i, sp := range specs {
		idx[sp.Name] = i
	}
	// Union-find over spec indexes; name collects the ratios of each set.
	parent := make([]int, len(specs))
	for i := range parent {
		parent[i] = i
	}
	var find func(int) int
	find = func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	names := map[int][]string{}
	for _, d := range defs {
		n, nok := idx[d.Num]
		m, mok := idx[d.Den]
		if !nok || !mok || n == m {
			continue
		}
		if software(specs[n]) && software(specs[m]) {
			continue
		}
		rn, rm := find(n), find(m)
		if rn != rm {
			parent[rm] = rn
			names[rn] = append(names[rn], names[rm]...)
			delete(names, rm)
		}
		if !slices.Contains(names[rn], d.Name) {
			names[rn] = append(names[rn], d.Name)
		}
	}
	for i := range specs {
		if r := find(i); len(names[r]) > 0 {
			specs[i].Group = strings.Join(names[r], "+")
		}
	}
}

func software(sp counter.Spec) bool { return sp.Attr.Type == unix.PERF_TYPE_SOFTWARE }
