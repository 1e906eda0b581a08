package ratio

import (
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"perfevent/internal/counter"
	"perfevent/internal/counter/countertest"
)

// retiring is Arm's retiring, a product of two ratios: retired / spec ×
// (slots not stalled) / (4 × cycles), put over one denominator, each
// factor counted in a group of its own.
func retiring() Def {
	return NewCompound("retiring", Compound{
		Num:    []Product{{C: 1, Factors: []Linear{{{1, "retired"}}, {{4, "cycles"}, {-1, "stall"}}}}},
		Den:    []Product{{C: 4, Factors: []Linear{{{1, "spec"}}, {{1, "cycles"}}}}},
		Groups: [][]string{{"retired", "spec"}, {"cycles", "stall"}},
	}, 1)
}

func TestCompoundFormulaAndCheck(t *testing.T) {
	d := retiring()
	if got, want := d.Formula(), "retired × (4 × cycles - stall) / (4 × spec × cycles)"; got != want {
		t.Errorf("Formula %q, want %q", got, want)
	}
	if got := strings.Join(d.Num, " "); got != "spec cycles retired stall" || d.Den != "spec" {
		t.Errorf("operands %q over %q, want the denominator's first", got, d.Den)
	}
	if err := d.Check(); err != nil {
		t.Error(err)
	}
	bad := d
	bad.Weights = []float64{1, 1, 1, 1}
	if err := bad.Check(); err == nil {
		t.Error("a compound ratio with weights passes Check")
	}
	bad = retiring()
	bad.Compound.Groups = [][]string{{"retired", "nothing"}}
	if err := bad.Check(); err == nil || !strings.Contains(err.Error(), `"nothing"`) {
		t.Errorf("a group of an unknown operand: %v", err)
	}
}

// TestCompoundGroupsAndSteps: each group of a compound ratio is a perf
// group of its own, within the counters; Step gives the formula over each
// CPU's increases and, for the whole machine, over their sums, and
// allocates nothing.
func TestCompoundGroupsAndSteps(t *testing.T) {
	hw := uint32(unix.PERF_TYPE_HARDWARE)
	mk := func() []counter.Spec {
		var s []counter.Spec
		for _, n := range []string{"cycles", "stall", "retired", "spec"} {
			sp := spec(n, hw, 0)
			sp.CPUs = []int{0, 1}
			s = append(s, sp)
		}
		return s
	}
	specs := mk()
	if apart := GroupFit(specs, []Def{retiring()}, Fit{Counters: 2}); len(apart) != 0 {
		t.Errorf("apart %q", apart)
	}
	var got []string
	for _, sp := range specs {
		got = append(got, sp.Name+"="+sp.Group)
	}
	if want := "cycles=retiring#2 stall=retiring#2 retired=retiring spec=retiring"; strings.Join(got, " ") != want {
		t.Errorf("groups %v, want %s", got, want)
	}
	if specs[0].Group == "" || GroupFit(mk(), []Def{retiring()}, Fit{Counters: 1}) == nil {
		t.Error("with 1 counter the groups of 2 fit")
	}

	set, err := counter.New(mk(), counter.Config{Opener: countertest.New()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := set.Open(); err != nil {
		t.Fatal(err)
	}
	chosen, why := Select([]Def{retiring()}, set, nil)
	if len(chosen) != 1 {
		t.Fatalf("not chosen: %q", why)
	}
	c := &chosen[0]
	if got, want := c.Formula(set), "retired × (4 × cycles - stall) / (4 × spec × cycles)"; got != want {
		t.Errorf("served formula %q, want %q", got, want)
	}
	tr := NewTracker(chosen)
	val, ok := make([]float64, 2), make([]bool, 2)
	// NumEv is spec cycles retired stall, term-major, 2 CPUs.
	at := func(spec, cycles, retired, stall [2]uint64) []uint64 {
		return []uint64{spec[0], spec[1], cycles[0], cycles[1], retired[0], retired[1], stall[0], stall[1]}
	}
	num := at([2]uint64{0, 0}, [2]uint64{0, 0}, [2]uint64{0, 0}, [2]uint64{0, 0})
	den := []uint64{0, 0}
	base := &Sample{Num: num, Den: den}
	// CPU 0: 900 of 1000 ops retired, 1000 of 4000 slots stalled: 0.9 ×
	// 0.75. CPU 1: 500 of 1000 retired, 2000 of 4000 stalled: 0.5 × 0.5.
	next := at([2]uint64{1000, 1000}, [2]uint64{1000, 1000}, [2]uint64{900, 500}, [2]uint64{1000, 2000})
	all, allOK := tr.Step(Client{}, 0, c, 0, next, []uint64{1000, 1000}, base, val, ok)
	if !ok[0] || !ok[1] || val[0] != 0.675 || val[1] != 0.25 {
		t.Errorf("per CPU %v %v, want [0.675 0.25]", val, ok)
	}
	// The sums: 1400 of 2000 retired, 3000 of 8000 stalled: 0.7 × 0.625.
	if !allOK || all != 0.4375 {
		t.Errorf("whole machine %v %v, want 0.7 × 0.625", all, allOK)
	}
	// A denominator that did not move on CPU 1: no value there.
	next2 := at([2]uint64{2000, 1000}, [2]uint64{2000, 1000}, [2]uint64{1800, 500}, [2]uint64{1000, 2000})
	tr.Step(Client{}, 0, c, 0, next2, []uint64{2000, 1000}, nil, val, ok)
	if !ok[0] || val[0] != 0.9 || ok[1] {
		t.Errorf("second step %v %v, want [0.9 -]", val, ok)
	}
	if n := testing.AllocsPerRun(100, func() {
		next2[0]++
		tr.Step(Client{}, 0, c, 0, next2, []uint64{2000, 1000}, nil, val, ok)
	}); n != 0 {
		t.Errorf("Step of a compound ratio allocates %v times per call", n)
	}
}
