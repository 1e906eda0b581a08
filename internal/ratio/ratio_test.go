package ratio

import (
	"math"
	"os"
	"strings"
	"testing"
)

func byName(t *testing.T, name string) *Def {
	t.Helper()
	for i := range Builtin {
		if Builtin[i].Name == name {
			return &Builtin[i]
		}
	}
	t.Fatalf("no built-in ratio %q", name)
	return nil
}

func TestBuiltinFormulas(t *testing.T) {
	// Operand increases as the counter package delivers them: already
	// scaled by time_enabled/time_running. Since the operands of a ratio
	// share one group, both carry the same factor, so a multiplexed
	// interval gives the same quotient as a full one.
	const mux = 3 // counted a third of the time: both counts scaled ×3
	for _, c := range []struct {
		name string
		num  float64
		den  uint64
		want float64
	}{
		{"ipc", 2_400_000, 1_000_000, 2.4},
		{"ipc", 2_400_000 * mux, 1_000_000 * mux, 2.4},
		{"cpi", 1_000_000, 2_500_000, 0.4},
		{"branch_miss_ratio", 1_234, 100_000, 0.01234},
		{"branch_miss_ratio", 1_234 * mux, 100_000 * mux, 0.01234},
		{"cache_miss_ratio", 25, 100, 0.25},
		// 500 switches in 250 ms of CPU time: 2000 per CPU second.
		{"context_switches_per_cpu_second", 500, 250_000_000, 2000},
		// 4 slots per cycle for 1e6 cycles: 1.6e6 retiring slots is 40 %;
		// a multiplexed group scales both alike.
		{"topdown_retiring", 1_600_000, 4_000_000, 0.4},
		{"topdown_backend_bound", 1_000_000 * mux, 4_000_000 * mux, 0.25},
	} {
		d := byName(t, c.name)
		got, ok := d.Of(c.num, c.den)
		if !ok || math.Abs(got-c.want) > 1e-12*c.want {
			t.Errorf("%s(%g, %d) = %v, %v; want %v", c.name, c.num, c.den, got, ok, c.want)
		}
	}
	if _, ok := byName(t, "ipc").Of(5, 0); ok {
		t.Error("ipc with no cycles has a value")
	}
	for _, d := range Builtin {
		if err := d.Check(); err != nil {
			t.Error(err)
		}
	}
	// The subtrees of perfevent.ratio are not ratio names.
	for _, name := range []string{"all", "numerator", "denominator"} {
		if err := (Def{Name: name, Num: []string{"a"}, Den: "b", Scale: 1}).Check(); err == nil || !strings.Contains(err.Error(), "perfevent.ratio."+name) {
			t.Errorf("a ratio named %q: %v; want an error naming perfevent.ratio.%s", name, err, name)
		}
	}
}

// chosen is d served on k CPUs, its one numerator event of weight 1.
func chosen(d *Def, k int) *Chosen {
	c := &Chosen{Def: *d, NumEv: []int{0}, NumW: []float64{1}, DenEv: 1}
	for i := range k {
		c.CPUs = append(c.CPUs, i)
	}
	return c
}

func TestTrackerIntervalPerClient(t *testing.T) {
	d := chosen(byName(t, "ipc"), 2)
	tr := NewTracker([]Chosen{*d})
	val, ok := make([]float64, 2), make([]bool, 2)
	a, b := Client{Slot: 1, Ctx: 0}, Client{Slot: 2, Ctx: 0}

	if _, allOK := tr.Step(a, 0, d, 0, []uint64{100, 10}, []uint64{100, 10}, nil, val, ok); allOK || ok[0] || ok[1] {
		t.Fatalf("first fetch gave values %v %v", val, ok)
	}
	tr.Step(a, 0, d, 0, []uint64{300, 40}, []uint64{200, 10}, nil, val, ok)
	if !ok[0] || val[0] != 2 || ok[1] {
		t.Errorf("a's second fetch: %v %v; want [2 -] (cpu1's cycles did not move)", val, ok)
	}
	// b's first fetch has no value, though a has fetched before.
	tr.Step(b, 0, d, 0, []uint64{300, 40}, []uint64{200, 10}, nil, val, ok)
	if ok[0] {
		t.Errorf("b's first fetch gave %v", val[0])
	}
	// a's interval runs from a's previous fetch, b's from b's.
	all, allOK := tr.Step(a, 0, d, 0, []uint64{400, 40}, []uint64{400, 20}, nil, val, ok)
	if val[0] != 0.5 || !ok[1] || val[1] != 0 {
		t.Errorf("a's third fetch: %v %v; want [0.5 0]", val, ok)
	}
	if !allOK || all != 100.0/210 {
		t.Errorf("a's whole machine: %v %v; want (100+0)/(200+10)", all, allOK)
	}
	tr.Step(b, 0, d, 0, []uint64{400, 40}, []uint64{400, 20}, nil, val, ok)
	if val[0] != 0.5 {
		t.Errorf("b's second fetch: %v; want 0.5", val[0])
	}
	// Wrap of an accumulator: unsigned differences still hold.
	tr.Step(b, 0, d, 0, []uint64{400 + 60, 40}, []uint64{math.MaxUint64, 20}, nil, val, ok)
	tr.Step(b, 0, d, 0, []uint64{400 + 60 + 30, 40}, []uint64{9, 20}, nil, val, ok)
	if val[0] != 3 {
		t.Errorf("across a wrap: %v; want 30/10 = 3", val[0])
	}

	tr.Forget(1)
	if tr.Clients() != 1 {
		t.Fatalf("after Forget(1): %d clients", tr.Clients())
	}
	tr.Step(a, 0, d, 0, []uint64{500, 40}, []uint64{500, 20}, nil, val, ok)
	if ok[0] {
		t.Error("a reused slot kept the old client's interval")
	}
}

// A client with no previous fetch of a ratio is served the interval from
// the agent's recent sample; its next fetch gets its own interval.
func TestTrackerFirstFetchFromRecent(t *testing.T) {
	d := chosen(byName(t, "ipc"), 2)
	tr := NewTracker([]Chosen{*d})
	rc := NewRecent([]Chosen{*d}, 1000)
	val, ok := make([]float64, 2), make([]bool, 2)
	a := Client{Slot: 1}
	if rc.Base(0, 0) != nil || !rc.Empty(0) {
		t.Fatal("a new Recent has a sample")
	}
	rc.Record(0, 0, []uint64{100, 10}, []uint64{100, 10})
	all, allOK := tr.Step(a, 0, d, 0, []uint64{300, 10}, []uint64{200, 10}, rc.Base(0, 500), val, ok)
	if !ok[0] || val[0] != 2 || ok[1] {
		t.Errorf("first fetch from the recent sample: %v %v; want [2 -]", val, ok)
	}
	if !allOK || all != 2 {
		t.Errorf("first fetch, whole machine: %v %v; want 200/100", all, allOK)
	}
	// The second fetch runs from the first, not from the agent's sample.
	tr.Step(a, 0, d, 0, []uint64{330, 10}, []uint64{230, 10}, rc.Base(0, 900), val, ok)
	if !ok[0] || val[0] != 1 {
		t.Errorf("second fetch: %v %v; want 30/30 = 1", val, ok)
	}
}

// Recent keeps samples at least Span/4 apart and serves the newest that
// is at least Span old, else the oldest it has.
func TestRecentBase(t *testing.T) {
	d := chosen(byName(t, "ipc"), 1)
	rc := NewRecent([]Chosen{*d}, 1000)
	for _, now := range []uint64{0, 100, 250, 400, 600, 900, 1100, 1300} {
		rc.Record(0, now, []uint64{now}, []uint64{now})
	}
	// Kept: 0, 250, 600, 900 (100 and 400 came too soon, as does 1100),
	// then 1300, which pushed out 0.
	for _, c := range []struct{ now, want uint64 }{
		{1300, 250},  // 1050 old
		{1550, 250},  // 600 is only 950 old
		{1600, 600},  // now it is 1000 old
		{1900, 900},  // 900 is too, and newer
		{5000, 1300}, // all are: the newest
	} {
		if b := rc.Base(0, c.now); b == nil || b.T != c.want || b.Num[0] != c.want || b.Den[0] != c.want {
			t.Errorf("Base at %d: %+v; want the sample of %d", c.now, b, c.want)
		}
	}
	// With no sample Span old, the oldest.
	rc = NewRecent([]Chosen{*d}, 1000)
	rc.Record(0, 0, []uint64{1}, []uint64{1})
	rc.Record(0, 300, []uint64{2}, []uint64{2})
	if b := rc.Base(0, 600); b == nil || b.T != 0 {
		t.Errorf("Base at 600 of samples at 0 and 300: %+v; want 0's", b)
	}
}

// A client that has not fetched for Idle is dropped when a new one comes,
// so contexts nobody ends (pmproxy's, one per scrape) do not pile up.
func TestTrackerDropsIdleClients(t *testing.T) {
	d := chosen(byName(t, "ipc"), 1)
	tr := NewTracker([]Chosen{*d})
	val, ok := make([]float64, 1), make([]bool, 1)
	one := []uint64{1}
	const start = 1e12
	tr.Step(Client{Ctx: 1}, start, d, 0, one, one, nil, val, ok)
	tr.Step(Client{Ctx: 2}, start+Idle/2, d, 0, one, one, nil, val, ok)
	tr.Step(Client{Ctx: 1}, start+Idle, d, 0, one, one, nil, val, ok) // fetches on: stays
	// Context 2 is now idle for longer than Idle; a new client's step
	// drops it and keeps context 1.
	tr.Step(Client{Ctx: 3}, start+Idle*3/2+2, d, 0, one, one, nil, val, ok)
	if tr.Clients() != 2 {
		t.Fatalf("%d clients after the sweep; want contexts 1 and 3", tr.Clients())
	}
	tr.Step(Client{Ctx: 1}, start+Idle*3/2+3, d, 0, []uint64{3}, []uint64{2}, nil, val, ok)
	if !ok[0] || val[0] != 2 {
		t.Errorf("context 1 after the sweep: %v %v; want its own interval, 2/1", val, ok)
	}
}

func TestTrackerStepAllocatesNothing(t *testing.T) {
	d := chosen(byName(t, "ipc"), 4)
	tr := NewTracker([]Chosen{*d})
	num, den := make([]uint64, 4), make([]uint64, 4)
	val, ok := make([]float64, 4), make([]bool, 4)
	c := Client{Slot: 3}
	tr.Step(c, 0, d, 0, num, den, nil, val, ok)
	if n := testing.AllocsPerRun(100, func() {
		num[0]++
		den[0]++
		tr.Step(c, 0, d, 0, num, den, nil, val, ok)
	}); n != 0 {
		t.Errorf("Step allocates %v times per call", n)
	}
}

// perfevent.conf(5) lists every built-in ratio.
func TestManPageListsEveryRatio(t *testing.T) {
	man, err := os.ReadFile("../../man/perfevent.conf.5")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range Builtin {
		if !strings.Contains(string(man), `\fB`+d.Name) && !strings.Contains(string(man), ".B "+d.Name) {
			t.Errorf("perfevent.conf(5) does not list %s", d.Name)
		}
	}
}
