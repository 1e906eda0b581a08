package bpfcount

import "testing"

// TestTreeAddsTheCountedBelow checks the values the program's sums make
// once the tree adds each cgroup's counted descendants: a cgroup is
// charged those below it and not a sibling whose name starts as its own,
// and no value goes back when a counted cgroup goes, whether a leaf or
// one between counted cgroups.
func TestTreeAddsTheCountedBelow(t *testing.T) {
	const nEvents, nCPU, room = 2, 2, 8
	sums := make([]Reading, room*nEvents*nCPU)
	tr := newTree(room, nEvents, nCPU)
	// charge is what the program does: an interval to one slot.
	charge := func(slot, ev, cpu int, v uint64) {
		r := &sums[index(slot, ev, cpu, nEvents, nCPU)]
		r.Value += v
		r.Enabled += 10 * v
		r.Running += 10 * v
	}
	slotOf := map[string]int{}
	add := func(slot int, p string) {
		t.Helper()
		clear(sums[index(slot, 0, 0, nEvents, nCPU):index(slot+1, 0, 0, nEvents, nCPU)])
		tr.add(slot, p)
		slotOf[cleanPath(p)] = slot
	}
	value := func(p string, ev, cpu int) uint64 {
		return tr.sum(sums, slotOf[p], ev, cpu).Value
	}
	want := func(when string, vals map[string]uint64) {
		t.Helper()
		for p, v := range vals {
			if got := value(p, 1, 1); got != v {
				t.Errorf("%s: %s counted %d, want %d", when, p, got, v)
			}
			if r := tr.sum(sums, slotOf[p], 1, 1); r.Enabled != 10*v || r.Running != 10*v {
				t.Errorf("%s: %s enabled %d, running %d, want %d", when, p, r.Enabled, r.Running, 10*v)
			}
			if got := value(p, 0, 0); got != 0 {
				t.Errorf("%s: %s counted %d of event 0 on cpu0, where nothing was charged", when, p, got)
			}
			sameOnCPUs(t, tr, sums, slotOf[p])
		}
	}
	add(0, "/")
	add(1, "a/b/c") // a child before its parents, and unclean
	add(2, "/a")
	add(3, "/ab")
	add(4, "/a/b/")
	charge(0, 1, 1, 1)
	charge(1, 1, 1, 10)
	charge(2, 1, 1, 100)
	charge(3, 1, 1, 1000)
	charge(4, 1, 1, 10000)
	want("all counted", map[string]uint64{"/": 11111, "/a": 10110, "/ab": 1000, "/a/b": 10010, "/a/b/c": 10})

	// A leaf goes: its parent keeps what it counted, and what its tasks
	// count next is charged to the parent.
	tr.remove(slotOf["/a/b/c"], sums)
	delete(slotOf, "/a/b/c")
	charge(4, 1, 1, 20000)
	want("/a/b/c gone", map[string]uint64{"/": 31111, "/a": 30110, "/ab": 1000, "/a/b": 30010})

	// Its slot comes back for another cgroup, from zero.
	add(1, "/a/b/d")
	charge(1, 1, 1, 5)
	want("/a/b/d added", map[string]uint64{"/": 31116, "/a": 30115, "/a/b": 30015, "/a/b/d": 5})

	// A cgroup between counted ones goes: its parent keeps its sums and
	// its carry, and goes on adding its counted child.
	tr.remove(slotOf["/a/b"], sums)
	delete(slotOf, "/a/b")
	charge(1, 1, 1, 5)
	want("/a/b gone", map[string]uint64{"/": 31121, "/a": 30120, "/a/b/d": 10})

	// The root goes: nothing above keeps its sums, and the others keep
	// theirs.
	tr.remove(slotOf["/"], sums)
	delete(slotOf, "/")
	want("/ gone", map[string]uint64{"/a": 30120, "/a/b/d": 10, "/ab": 1000})
	if c := tr.carry[0]; c != nil {
		t.Errorf("the root's slot keeps a carry after it went")
	}
	// A slot not counted reads its own sums.
	if got := tr.sum(sums, 0, 1, 1).Value; got != 1 {
		t.Errorf("the free slot 0 reads %d, want its own 1", got)
	}
	sameOnCPUs(t, tr, sums, 0)
}

// sameOnCPUs checks that sumCPUs, over every CPU and over the last one
// alone, reads what sum reads CPU by CPU.
func sameOnCPUs(t *testing.T, tr *tree, sums []Reading, slot int) {
	t.Helper()
	for ev := range tr.nEvents {
		all := make([]int, tr.nCPU)
		for i := range all {
			all[i] = i
		}
		for _, cpus := range [][]int{all, {tr.nCPU - 1}} {
			out := make([]Reading, len(cpus))
			for i := range out {
				out[i] = Reading{Value: 7, Enabled: 7, Running: 7} // overwritten
			}
			tr.sumCPUs(sums, slot, ev, cpus, out)
			for i, cpu := range cpus {
				if want := tr.sum(sums, slot, ev, cpu); out[i] != want {
					t.Errorf("slot %d event %d: sumCPUs on cpu%d = %+v, sum = %+v", slot, ev, cpu, out[i], want)
				}
			}
		}
	}
}

func TestBelow(t *testing.T) {
	for _, c := range []struct {
		p, anc string
		want   bool
	}{
		{"/a", "/", true},
		{"/", "/", false},
		{"/a/b", "/a", true},
		{"/ab", "/a", false},
		{"/a", "/a", false},
		{"/a", "/a/b", false},
	} {
		if got := below(c.p, c.anc); got != c.want {
			t.Errorf("below(%q, %q) = %v, want %v", c.p, c.anc, got, c.want)
		}
	}
}
