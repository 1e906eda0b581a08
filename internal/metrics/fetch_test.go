package metrics

import (
	"math"
	"net"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"perfevent/internal/counter"
	"perfevent/internal/counter/countertest"
	"perfevent/internal/pdu"
	"perfevent/internal/pmda"
	"perfevent/internal/pmda/pmcdtest"
	"perfevent/internal/ratio"
)

// rig is a perfevent table on fake counters, served by a real pmda.Agent
// over a pipe, with this test playing pmcd.
type rig struct {
	t     *testing.T
	fake  *countertest.Opener
	set   *counter.Set
	table *pmda.Table
	src   *Source
	conn  net.Conn
	r     *pdu.Reader
	b     pdu.Builder
	p     pdu.Parser
	res   pdu.Result

	client int32 // the pmcd client slot that fetch sends as
}

func newRig(t *testing.T) *rig {
	t.Helper()
	fake, set, table, src := newSource(t)
	return rigOf(t, fake, set, table, src)
}

// rigOf serves table from src, built on set's fake counters.
func rigOf(t *testing.T, fake *countertest.Opener, set *counter.Set, table *pmda.Table, src *Source) *rig {
	t.Helper()
	ours, theirs := net.Pipe()
	agent := pmda.New(pmda.Config{Fetcher: src, OnEndContext: src.Forget}, table)
	done := make(chan error, 1)
	go func() { done <- agent.Serve(theirs); theirs.Close() }()
	t.Cleanup(func() { ours.Close(); <-done })
	r := &rig{t: t, fake: fake, set: set, table: table, src: src, conn: ours, r: pdu.NewReader(ours)}
	r.next() // the agent's CREDS
	r.send(r.b.Creds(1, pdu.VersionCred(0)))
	return r
}

// newSource builds the perfevent table on fake counters.
func newSource(t testing.TB) (*countertest.Opener, *counter.Set, *pmda.Table, *Source) {
	t.Helper()
	fake := countertest.New()
	fake.FailOpen("cycles", countertest.AnyCPU, unix.ENOENT)
	// CPU 1 is offline: instances are cpu0, cpu2, cpu3, with ids 0, 2, 3.
	cpus := []int{0, 2, 3}
	set, err := counter.New([]counter.Spec{
		{Name: "cpu-clock", CPUs: cpus},
		{Name: "page-faults", CPUs: cpus},
		{Name: "cycles", CPUs: cpus},
	}, counter.Config{Opener: fake})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := set.Open(); err != nil {
		t.Fatal(err)
	}
	if _, err := set.AddDerived(counter.DerivedSpec{Name: "both", Terms: []counter.Term{{Event: "cpu-clock", Scale: 0.5}, {Event: "page-faults", Scale: 2}}}); err != nil {
		t.Fatal(err)
	}
	ratios, why := ratio.Select([]ratio.Def{
		{Name: "faults_per_second", Num: []string{"page-faults"}, Den: "cpu-clock", Scale: 1e9, Unit: ratio.PerSecond},
		{Name: "ipc", Num: []string{"instructions"}, Den: "cycles", Scale: 1},
		// Two events over wall-clock time, so that the fetch path of
		// sums and of duration_time is in TestFetchMakesNoGarbage too.
		{Name: "both_per_second", Num: []string{"page-faults", "cpu-*"}, Den: ratio.Elapsed, Scale: 1e9, Unit: ratio.PerSecond},
		// A product of two ratios plus a third, put over one denominator,
		// so that the compound fetch path is in TestFetchMakesNoGarbage:
		// faults per µs × the share of the two counts, plus faults per µs.
		ratio.NewCompound("faults_compound", ratio.Compound{
			Num: []ratio.Product{
				{C: 1, Factors: []ratio.Linear{{{W: 1, Op: "page-faults"}}, {{W: 1, Op: "page-faults"}}}},
				{C: 1, Factors: []ratio.Linear{{{W: 1, Op: "page-faults"}}, {{W: 1, Op: "cpu-clock"}, {W: 1, Op: "page-faults"}}}},
			},
			Den: []ratio.Product{{C: 1, Factors: []ratio.Linear{{{W: 1, Op: "cpu-clock"}}, {{W: 1, Op: "cpu-clock"}, {W: 1, Op: "page-faults"}}}}},
		}, 1e3),
	}, set, nil)
	if len(ratios) != 3 || why[0] != "" || why[1] == "" || why[2] != "" || why[3] != "" {
		t.Fatalf("ratios chosen %+v; not chosen: %q", ratios, why)
	}
	clusters, _ := LoadClusters(filepath.Join(t.TempDir(), "pmids"))
	// The C agent's numbering of the same configuration (setup.CLayout).
	clusters.Prefer([]string{"hwcounters.cpu_clock", "hwcounters.page_faults", "derived.both",
		"hwcounters.software.alignment_faults", "hwcounters.software.page_faults", "derived.gone", "hwcounters.cpu_clock.value"})
	table, src, err := Build(Spec{
		Version:  "test",
		Set:      set,
		Clusters: clusters,
		Counters: []Counter{{Event: 0, Metric: "cpu_clock"}, {Event: 1, Metric: "page_faults"}},
		Derived:  []Derived{{Derived: 0, Metric: "both"}},
		Ratios:   ratios,
		C: []CMetric{
			{Key: "hwcounters.software.alignment_faults", Event: -1},
			{Key: "hwcounters.software.page_faults", Event: 1},
			{Key: "derived.gone", Event: -1},
			{Key: "hwcounters.cpu_clock.value", Event: -1}, // a metric here: left out
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return fake, set, table, src
}

func (r *rig) send(msg []byte) {
	r.t.Helper()
	r.conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := r.conn.Write(msg); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rig) next() []byte {
	r.t.Helper()
	r.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, msg, err := r.r.Next()
	if err != nil {
		r.t.Fatal(err)
	}
	return msg
}

// fetch returns, per requested PMID, instance id → value as a float64
// (doubles decoded, integers converted), or the set's error code.
func (r *rig) fetch(names ...string) []map[int32]float64 {
	r.t.Helper()
	var pmids []pdu.PMID
	for _, n := range names {
		id, err := r.table.PMID(n)
		if err != nil {
			r.t.Fatalf("PMID(%s): %v", n, err)
		}
		pmids = append(pmids, id)
	}
	r.send(r.b.Fetch(r.client, 0, pmids))
	if _, err := r.p.Start(r.next()); err != nil {
		r.t.Fatal(err)
	}
	if err := r.p.Result(&r.res); err != nil {
		r.t.Fatalf("decoding RESULT: %v", err)
	}
	out := make([]map[int32]float64, len(r.res.Sets))
	for i, vs := range r.res.Sets {
		m := &r.table.Metrics()[0]
		for j := range r.table.Metrics() {
			if r.table.Metrics()[j].Desc.PMID == vs.PMID {
				m = &r.table.Metrics()[j]
			}
		}
		out[i] = map[int32]float64{}
		if vs.NumVal < 0 {
			out[i][-99] = float64(vs.NumVal)
		}
		for _, v := range vs.Values {
			switch m.Desc.Type {
			case pdu.ValueInt32:
				out[i][v.Inst] = float64(int32(v.Insitu))
			case pdu.ValueUint32:
				out[i][v.Inst] = float64(uint32(v.Insitu))
			case pdu.ValueInt64:
				u, _ := v.Uint64()
				out[i][v.Inst] = float64(int64(u))
			case pdu.ValueUint64:
				u, _ := v.Uint64()
				out[i][v.Inst] = float64(u)
			case pdu.ValueDouble:
				u, _ := v.Uint64()
				out[i][v.Inst] = math.Float64frombits(u)
			}
		}
	}
	return out
}

func TestTableLayout(t *testing.T) {
	r := newRig(t)
	for name, want := range map[string]string{
		"perfevent.version":                        "127.0.0",
		"perfevent.active":                         "127.0.1",
		"perfevent.derived.active":                 "127.1.0",
		"perfevent.hwcounters.cpu_clock.value":     "127.2.0",
		"perfevent.hwcounters.cpu_clock.dutycycle": "127.2.1",
		"perfevent.hwcounters.page_faults.value":   "127.3.0",
		"perfevent.derived.both.value":             "127.4.0",
	} {
		id, err := r.table.PMID(name)
		if err != nil || id.String() != want {
			t.Errorf("%s = %v, %v; want %s", name, id, err, want)
		}
	}
	m, _ := r.table.Metric(pdu.NewPMID(127, 3, 0))
	if m.Desc.Type != pdu.ValueInt64 || m.Desc.Sem != pdu.SemCounter || m.Desc.Units != pdu.UnitsCount || m.Desc.InDom != pdu.NewInDom(127, 1) {
		t.Errorf("page_faults.value desc %+v", m.Desc)
	}
	if m.OneLine != "The values of the counter" {
		t.Errorf("one-line help %q", m.OneLine)
	}
	d, ok := r.table.InDom(pdu.NewInDom(127, 1))
	if !ok || len(d.Instances) != 3 || d.Instances[1].ID != 2 || d.Instances[1].Name != "cpu2" || d.Instances[1].Labels["cpu"] != 2 {
		t.Errorf("indom %+v", d)
	}
	if _, err := r.table.PMID("perfevent.hwcounters.cycles.value"); err == nil {
		t.Error("cycles opened nowhere but is in the table")
	}
}

func TestFetchValuesAndReads(t *testing.T) {
	r := newRig(t)
	r.fake.Add("cpu-clock", 0, 1000, 10, 10)
	r.fake.Add("cpu-clock", 2, 2000, 10, 5) // multiplexed: scaled ×2
	r.fake.Add("page-faults", 3, 7, 10, 10)

	got := r.fetch("perfevent.hwcounters.cpu_clock.value")
	if want := map[int32]float64{0: 1000, 2: 4000, 3: 0}; !same(got[0], want) {
		t.Errorf("cpu_clock = %v, want %v", got[0], want)
	}
	// Only cpu-clock's descriptors were read, once each.
	if n := r.fake.ReadsOf("page-faults", 3); n != 0 {
		t.Errorf("page-faults read %d times by a fetch of cpu_clock", n)
	}
	if n := r.fake.ReadsOf("cpu-clock", 2); n != 1 {
		t.Errorf("cpu-clock read %d times, want 1", n)
	}

	got = r.fetch("perfevent.hwcounters.cpu_clock.dutycycle", "perfevent.derived.both.value", "perfevent.hwcounters.cpu_clock.value")
	if want := map[int32]float64{0: 1, 2: 0.5, 3: 0}; !same(got[0], want) {
		t.Errorf("dutycycle = %v, want %v", got[0], want)
	}
	if want := map[int32]float64{0: 500, 2: 2000, 3: 14}; !same(got[1], want) {
		t.Errorf("derived = %v, want %v", got[1], want)
	}
	// Three metrics over two events: each descriptor read once more.
	if n := r.fake.ReadsOf("cpu-clock", 2); n != 2 {
		t.Errorf("cpu-clock read %d times after two fetches, want 2", n)
	}
}

func TestActiveAndReservation(t *testing.T) {
	r := newRig(t)
	// As in C: 0 on the first read after an open, then the descriptors.
	if got := r.fetch("perfevent.active")[0][pdu.InNull]; got != 0 {
		t.Errorf("first active = %v, want 0", got)
	}
	got := r.fetch("perfevent.active", "perfevent.derived.active", "perfevent.version")
	if got[0][pdu.InNull] != 6 || got[1][pdu.InNull] != 1 {
		t.Errorf("active = %v, derived.active = %v; want 6 and 1", got[0], got[1])
	}
	// A fetch of active alone reads every descriptor, as the C agent does.
	if n := r.fake.ReadsOf("page-faults", 0); n != 2 {
		t.Errorf("page-faults read %d times by two fetches of active, want 2", n)
	}

	r.fake.Add("cpu-clock", 0, 100, 1, 1)
	before := r.fetch("perfevent.hwcounters.cpu_clock.value")[0][0]
	if err := r.set.Close(); err != nil {
		t.Fatal(err)
	}
	r.fake.AddAll(555, 1, 1) // nothing is open: must not show
	got = r.fetch("perfevent.active", "perfevent.hwcounters.cpu_clock.value")
	if got[0][pdu.InNull] != 0 || got[1][0] != before {
		t.Errorf("while reserved: active %v, cpu_clock %v; want 0 and the frozen %v", got[0], got[1][0], before)
	}
	if _, err := r.set.Reopen(); err != nil {
		t.Fatal(err)
	}
	r.fake.Add("cpu-clock", 0, 5, 1, 1)
	got = r.fetch("perfevent.active", "perfevent.hwcounters.cpu_clock.value")
	if got[0][pdu.InNull] != 0 || got[1][0] != before+5 {
		t.Errorf("first fetch after release: active %v, cpu_clock %v; want 0 and %v", got[0], got[1][0], before+5)
	}
	if got := r.fetch("perfevent.active")[0][pdu.InNull]; got != 6 {
		t.Errorf("active after release = %v, want 6", got)
	}
}

func same(a, b map[int32]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || math.Abs(w-v) > 1e-12*math.Abs(v) {
			return false
		}
	}
	return true
}

// A fetch of every metric, answered by the whole agent (framing, Source,
// counters), makes no garbage: at 100 Hz for months, garbage would be the
// agent's largest cost after the system calls.
func TestFetchMakesNoGarbage(t *testing.T) {
	_, _, table, src := newSource(t)
	var pmids []pdu.PMID
	for _, m := range table.Metrics() {
		pmids = append(pmids, m.Desc.PMID)
	}
	var b pdu.Builder
	fetch := b.Fetch(0, 0, pmids)
	const n = 200
	serve := func(fetches int) (replies int, mallocs uint64) {
		agent := pmda.New(pmda.Config{Fetcher: src}, table)
		r := pmcdtest.NewReplay(fetch, fetches)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if err := agent.Serve(r); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		return r.Replies, after.Mallocs - before.Mallocs
	}
	// Start-up costs (buffers sized to the first RESULT, the agent itself)
	// are the same for one fetch as for n: the difference is per fetch.
	one, base := serve(1)
	many, total := serve(n)
	if one != 2 || many != n+1 {
		t.Fatalf("%d and %d replies, want 2 and %d", one, many, n+1)
	}
	t.Logf("%d allocations serving one FETCH, %d serving %d", base, total, n)
	if per := float64(int64(total)-int64(base)) / (n - 1); per >= 0.5 {
		t.Errorf("%.1f allocations per FETCH of %d metrics (%d for one fetch, %d for %d)", per, len(pmids), base, total, n)
	}
}

// BenchmarkFetchAll serves FETCHes of every metric through the whole
// agent (framing, Source, countertest counters), without the ratios, with
// their values, and with their operands too, so that what the ratios add
// to a fetch, in time and in allocations, is one comparison.
func BenchmarkFetchAll(b *testing.B) {
	_, _, table, src := newSource(b)
	for _, name := range []string{"counters", "counters+ratios", "counters+ratios+operands"} {
		var pmids []pdu.PMID
		for _, m := range table.Metrics() {
			ratio := strings.HasPrefix(m.Name, "perfevent.ratio.")
			operand := ratio && m.Desc.PMID.Item() > ItemRatioAll
			if ratio && name == "counters" || operand && name != "counters+ratios+operands" {
				continue
			}
			pmids = append(pmids, m.Desc.PMID)
		}
		b.Run(name, func(b *testing.B) {
			var pb pdu.Builder
			r := pmcdtest.NewReplay(pb.Fetch(0, 0, pmids), b.N)
			agent := pmda.New(pmda.Config{Fetcher: src}, table)
			b.ReportAllocs()
			b.ResetTimer()
			if err := agent.Serve(r); err != nil {
				b.Fatal(err)
			}
		})
	}
}

func TestRatioOverEachClientsInterval(t *testing.T) {
	r := newRig(t)
	const name = "perfevent.ratio.faults_per_second"
	m, _ := r.table.Metric(mustPMID(t, r.table, name))
	if m.Desc.Sem != pdu.SemInstant || m.Desc.Units != pdu.NewUnits(0, -1, 1, 0, pdu.TimeSec, pdu.CountOne) {
		t.Errorf("%s desc %+v", name, m.Desc)
	}
	if _, err := r.table.PMID("perfevent.ratio.ipc"); err == nil {
		t.Error("ipc's operands are not counted, yet it is in the table")
	}
	clock := fakeClock(r.src, 1e9)
	// The first fetch has the agent's interval: since the counters were
	// opened, when nobody fetched before. cpu2's and cpu3's cpu-clock did
	// not move: no value there.
	r.fake.Add("page-faults", 0, 10, 1, 1)
	r.fake.Add("cpu-clock", 0, 1e6, 1, 1)
	clock.step(0.5e9)
	first := r.fetch(name, "perfevent.ratio.all.faults_per_second")
	if want := map[int32]float64{0: 10000}; !same(first[0], want) || !same(first[1], map[int32]float64{pdu.InNull: 10000}) {
		t.Errorf("first fetch gave %v; want 10 faults in 1 ms, %v, and the same for all", first, want)
	}
	// 30 faults in 10 ms of cpu-clock on cpu0; cpu2 multiplexed at half
	// duty: both operands are scaled ×2, and the ratio is unchanged.
	r.fake.Add("page-faults", 0, 30, 1, 1)
	r.fake.Add("cpu-clock", 0, 10e6, 1, 1)
	r.fake.Add("page-faults", 2, 5, 10, 5)
	r.fake.Add("cpu-clock", 2, 1e6, 10, 5)
	clock.step(0.5e9)
	both := r.fetch(name, "perfevent.ratio.all.faults_per_second")
	if want := map[int32]float64{0: 3000, 2: 5000}; !same(both[0], want) {
		t.Errorf("second fetch: %v; want %v (cpu3's cpu-clock did not move)", both[0], want)
	}
	// The whole machine: (30 + 5×2) faults in (10 + 1×2) ms.
	if got, want := both[1][pdu.InNull], 40/12e-3; math.Abs(got-want) > 1e-9*want {
		t.Errorf("all: %v; want %v", both[1], want)
	}
	// Another client's first fetch has the agent's interval, from its
	// newest sample at least a second old: client 0's first fetch, a
	// second ago. The first client's interval still runs from its own
	// previous fetch.
	r.fake.Add("page-faults", 0, 1, 1, 1)
	r.fake.Add("cpu-clock", 0, 1e6, 1, 1)
	clock.step(0.5e9)
	r.client = 7
	if got, want := r.fetch(name)[0], map[int32]float64{0: 31 / 11e-3, 2: 5000}; !same(got, want) {
		t.Errorf("client 7's first fetch gave %v; want %v", got, want)
	}
	r.client = 0
	if got := r.fetch(name)[0]; got[0] != 1000 {
		t.Errorf("client 0's third fetch: %v; want cpu0 1000", got)
	}
	// The whole machine's value keeps its own interval: client 0 last
	// fetched it with its second fetch of the per-CPU value.
	r.fake.Add("page-faults", 0, 9, 1, 1)
	r.fake.Add("cpu-clock", 0, 1e6, 1, 1)
	got := r.fetch("perfevent.ratio.all.faults_per_second")[0]
	if want := 10 / 2e-3; math.Abs(got[pdu.InNull]-want) > 1e-9*want {
		t.Errorf("all, fetched alone: %v; want (1+9) faults in 2 ms, %v", got, want)
	}
}

func mustPMID(t *testing.T, table *pmda.Table, name string) pdu.PMID {
	t.Helper()
	id, err := table.PMID(name)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// When pmcd says a client went away, its intervals go with it: a new
// client in the same slot starts with no value.
func TestRatioForgetsAClientThatWentAway(t *testing.T) {
	r := newRig(t)
	clock := fakeClock(r.src, 1e9)
	const name = "perfevent.ratio.faults_per_second"
	r.fake.Add("cpu-clock", 0, 1e6, 1, 1)
	clock.step(0.5e9)
	r.fetch(name)
	r.fake.Add("cpu-clock", 0, 1e6, 1, 1)
	clock.step(0.5e9)
	if got := r.fetch(name)[0]; len(got) == 0 {
		t.Fatalf("second fetch gave no value")
	}
	r.send(r.b.Error(r.client, pdu.ErrNotConn)) // no reply
	r.fake.Add("cpu-clock", 0, 1e6, 1, 1)
	r.fake.Add("page-faults", 0, 4, 1, 1)
	clock.step(0.6e9)
	// The agent's interval, from the first fetch 1.1 s ago (4 faults in
	// 2 ms), not the old client's (4 in 1 ms).
	if got := r.fetch(name)[0]; !same(got, map[int32]float64{0: 2000}) {
		t.Errorf("the slot's next client got %v; want the agent's interval, cpu0 2000", got)
	}
}

// testClock is a Source's clock, stepped by hand.
type testClock struct{ now uint64 }

func (c *testClock) step(ns uint64) { c.now += ns }

// fakeClock gives src a clock that reads start until stepped. Call it
// before the first fetch: src's counters count as opened at start.
func fakeClock(src *Source, start uint64) *testClock {
	c := &testClock{now: start}
	src.clock = func() uint64 { return c.now }
	src.born = start
	return c
}

// Each ratio's operands are served as cumulative counters, per CPU and for
// the whole machine, in the ratio's own cluster (new items, so the ratio's
// PMIDs stay), and they give the ratio: Scale × Δnum / Δden over the same
// fetches is exactly what a client's interval gets.
func TestRatioOperands(t *testing.T) {
	r := newRig(t)
	clock := fakeClock(r.src, 1e9)
	ratioID := mustPMID(t, r.table, "perfevent.ratio.faults_per_second")
	nsec := pdu.NewUnits(0, 1, 0, 0, pdu.TimeNSec, 0)
	for _, c := range []struct {
		name  string
		item  int
		indom bool
		units pdu.Units
	}{
		{"perfevent.ratio.numerator.faults_per_second", ItemNumeratorCPU, true, pdu.UnitsCount},
		{"perfevent.ratio.denominator.faults_per_second", ItemDenominatorCPU, true, nsec},
		{"perfevent.ratio.all.numerator.faults_per_second", ItemNumeratorAll, false, pdu.UnitsCount},
		{"perfevent.ratio.all.denominator.faults_per_second", ItemDenominatorAll, false, nsec},
		{"perfevent.ratio.denominator.both_per_second", ItemDenominatorCPU, true, nsec},
	} {
		m, _ := r.table.Metric(mustPMID(t, r.table, c.name))
		d := m.Desc
		if d.Sem != pdu.SemCounter || d.Type != pdu.ValueUint64 || d.Units != c.units || (d.InDom != pdu.InDomNull) != c.indom {
			t.Errorf("%s: desc %+v; want a U64 counter in %v", c.name, d, c.units)
		}
		if strings.HasSuffix(c.name, "faults_per_second") && (d.PMID.Cluster() != ratioID.Cluster() || d.PMID.Item() != c.item) {
			t.Errorf("%s: PMID %v; want item %d of the ratio's cluster %d", c.name, d.PMID, c.item, ratioID.Cluster())
		}
	}
	operands := []string{
		"perfevent.ratio.numerator.faults_per_second", "perfevent.ratio.denominator.faults_per_second",
		"perfevent.ratio.all.numerator.faults_per_second", "perfevent.ratio.all.denominator.faults_per_second",
		"perfevent.ratio.faults_per_second", "perfevent.ratio.all.faults_per_second",
		"perfevent.hwcounters.page_faults.value", "perfevent.hwcounters.cpu_clock.value",
		"perfevent.ratio.numerator.both_per_second", "perfevent.ratio.denominator.both_per_second",
		"perfevent.ratio.all.denominator.both_per_second",
	}
	var prev []map[int32]float64
	for step, add := range []struct{ faults, clock float64 }{{3, 1e6}, {40, 2e6}, {0, 5e6}} {
		for _, cpu := range []int{0, 2, 3} {
			r.fake.Add("page-faults", cpu, uint64(add.faults)*uint64(cpu+1), 2, 1) // multiplexed: scaled ×2
			r.fake.Add("cpu-clock", cpu, uint64(add.clock), 2, 1)
		}
		clock.step(0.7e9)
		got := r.fetch(operands...)
		// Equal to the events' own cumulative values, per CPU and summed.
		if !same(got[0], got[6]) || !same(got[1], got[7]) {
			t.Errorf("fetch %d: operands %v / %v; want the counters' %v / %v", step, got[0], got[1], got[6], got[7])
		}
		if got[2][pdu.InNull] != sum(got[6]) || got[3][pdu.InNull] != sum(got[7]) {
			t.Errorf("fetch %d: all operands %v / %v; want the sums %v / %v", step, got[2], got[3], sum(got[6]), sum(got[7]))
		}
		// Over duration_time: the numerator adds its two events, the
		// denominator is the clock, on every instance and for all.
		for cpu, v := range got[8] {
			if v != got[6][cpu]+got[7][cpu] {
				t.Errorf("fetch %d: both_per_second's numerator on cpu%d %v; want %v", step, cpu, v, got[6][cpu]+got[7][cpu])
			}
		}
		if want := float64(clock.now); got[9][0] != want || got[9][3] != want || got[10][pdu.InNull] != want {
			t.Errorf("fetch %d: duration_time operands %v, %v; want the clock %v", step, got[9], got[10], want)
		}
		if prev != nil {
			for _, k := range []int{0, 1, 2, 3} {
				for inst, v := range got[k] {
					if v < prev[k][inst] {
						t.Errorf("fetch %d: %s went back on %d: %v after %v", step, operands[k], inst, v, prev[k][inst])
					}
				}
			}
			// The ratio from the operands is the client's ratio.
			for cpu, v := range got[4] {
				want := 1e9 * (got[0][cpu] - prev[0][cpu]) / (got[1][cpu] - prev[1][cpu])
				if math.Abs(v-want) > 1e-12*want {
					t.Errorf("fetch %d, cpu%d: ratio %v; from the operands %v", step, cpu, v, want)
				}
			}
			all := 1e9 * (got[2][pdu.InNull] - prev[2][pdu.InNull]) / (got[3][pdu.InNull] - prev[3][pdu.InNull])
			if v := got[5][pdu.InNull]; math.Abs(v-all) > 1e-12*all {
				t.Errorf("fetch %d: all %v; from the operands %v", step, v, all)
			}
		}
		prev = got
	}
}

func sum(m map[int32]float64) float64 {
	var s float64
	for _, v := range m {
		s += v
	}
	return s
}

// Instances say which socket their CPU is on, when the topology is known.
func TestSocketLabels(t *testing.T) {
	d := cpuInstances{}.inDom(pdu.NewInDom(Domain, 5), []int{0, 8}, map[int]int{0: 0, 8: 1})
	for i, want := range []pmda.Labels{{"cpu": 0, "socket": 0}, {"cpu": 8, "socket": 1}} {
		if got := d.Instances[i].Labels; len(got) != 2 || got["cpu"] != want["cpu"] || got["socket"] != want["socket"] {
			t.Errorf("instance %s: labels %v; want %v", d.Instances[i].Name, got, want)
		}
	}
	if got := (cpuInstances{}).inDom(pdu.NewInDom(Domain, 5), []int{3}, nil).Instances[0].Labels; len(got) != 1 {
		t.Errorf("with no topology: labels %v; want cpu only", got)
	}
}

// The C agent's names that the configuration does not give are served
// with its PMIDs: from the counter of the same event, or without values.
func TestCMetrics(t *testing.T) {
	fake, set, table, src := newSource(t)
	r := rigOf(t, fake, set, table, src)
	for name, want := range map[string]string{
		"perfevent.hwcounters.software.alignment_faults.value":     "127.5.0",
		"perfevent.hwcounters.software.alignment_faults.dutycycle": "127.5.1",
		"perfevent.hwcounters.software.page_faults.value":          "127.6.0",
		"perfevent.derived.gone.value":                             "127.7.0",
	} {
		if id, err := r.table.PMID(name); err != nil || id.String() != want {
			t.Errorf("%s = %v, %v; want %s", name, id, err, want)
		}
	}
	if _, err := r.table.PMID("perfevent.hwcounters.cpu_clock.value.value"); err == nil {
		t.Error("a C name below a metric of the table was served")
	}
	if len(src.Skipped()) != 1 || !strings.Contains(src.Skipped()[0].Error(), "perfevent.hwcounters.cpu_clock.value clashes") {
		t.Errorf("Skipped() = %v; want the clash", src.Skipped())
	}
	fake.Add("page-faults", 0, 7, 1, 1)
	got := r.fetch("perfevent.hwcounters.software.page_faults.value", "perfevent.hwcounters.page_faults.value",
		"perfevent.hwcounters.software.alignment_faults.value", "perfevent.derived.gone.value")
	if !same(got[0], got[1]) || len(got[0]) != 3 {
		t.Errorf("software.page_faults %v, page_faults %v; want the same three values", got[0], got[1])
	}
	if len(got[2]) != 0 || len(got[3]) != 0 {
		t.Errorf("names without a counter: %v, %v; want no values and no error", got[2], got[3])
	}
}

// A compound ratio (a product of ratios plus a third, over one
// denominator) is served per CPU and for the whole machine over each
// client's interval, the first fetch from the agent's own: the formula
// over each CPU's increases, and over the increases summed. It has no
// numerator or denominator of its own: its events are their counters.
func TestCompoundRatio(t *testing.T) {
	r := newRig(t)
	const name, all = "perfevent.ratio.faults_compound", "perfevent.ratio.all.faults_compound"
	f := func(pf, cc float64) float64 { return 1e3 * (pf*pf + pf*(cc+pf)) / (cc * (cc + pf)) }
	clock := fakeClock(r.src, 1e9)
	r.fake.Add("page-faults", 0, 10, 1, 1)
	r.fake.Add("cpu-clock", 0, 1e6, 1, 1)
	clock.step(0.5e9)
	first := r.fetch(name, all)
	if want := f(10, 1e6); !same(first[0], map[int32]float64{0: want}) || !same(first[1], map[int32]float64{pdu.InNull: want}) {
		t.Errorf("first fetch gave %v; want %v on cpu0 and for all", first, want)
	}
	// cpu2 multiplexed at half duty: both its counts scaled ×2.
	r.fake.Add("page-faults", 0, 30, 1, 1)
	r.fake.Add("cpu-clock", 0, 10e6, 1, 1)
	r.fake.Add("page-faults", 2, 5, 10, 5)
	r.fake.Add("cpu-clock", 2, 1e6, 10, 5)
	clock.step(0.5e9)
	got := r.fetch(name, all)
	if want := map[int32]float64{0: f(30, 10e6), 2: f(10, 2e6)}; !same(got[0], want) {
		t.Errorf("second fetch: %v; want %v", got[0], want)
	}
	if want := f(40, 12e6); !same(got[1], map[int32]float64{pdu.InNull: want}) {
		t.Errorf("all: %v; want the formula over the sums, %v", got[1], want)
	}
	for _, op := range []string{"perfevent.ratio.numerator.faults_compound", "perfevent.ratio.all.denominator.faults_compound"} {
		if _, err := r.table.PMID(op); err == nil {
			t.Errorf("%s is served: a compound ratio has no one numerator or denominator", op)
		}
	}
	m, _ := r.table.Metric(mustPMID(t, r.table, name))
	if !strings.Contains(m.OneLine, "(page-faults × page-faults + page-faults × (cpu-clock + page-faults)) / (cpu-clock × (cpu-clock + page-faults)) × 1000") {
		t.Errorf("one-line help %q lacks the formula", m.OneLine)
	}
}

// The agent's own clusters start at FirstOwn, above the C agent's: the
// references by cluster keep no slot for the unused ones between, and every
// metric served finds its own.
func TestRefsByCluster(t *testing.T) {
	_, _, table, src := newSource(t)
	own := 0
	for _, m := range table.Metrics() {
		if src.lookup(m.Desc.PMID).kind == kindNone {
			t.Errorf("%s (cluster %d): no reference", m.Name, m.Desc.PMID.Cluster())
		}
		if m.Desc.PMID.Cluster() >= FirstOwn {
			own++
		}
	}
	if own == 0 {
		t.Fatal("no metric with a cluster of the agent's own: the test proves nothing")
	}
	if n := cap(src.refs) + cap(src.ownRefs); n > 64 {
		t.Errorf("%d references held for %d metrics", n, len(table.Metrics()))
	}
	if r := src.lookup(pdu.NewPMID(Domain, FirstOwn+1000, 0)); r.kind != kindNone {
		t.Errorf("a cluster never given: %+v", r)
	}
}
