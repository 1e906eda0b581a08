package catalog_test

import (
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"perfevent/internal/catalog"
	"perfevent/internal/config"
	"perfevent/internal/counter"
	"perfevent/internal/counter/countertest"
	"perfevent/internal/hostfs"
	"perfevent/internal/pmu"
	"perfevent/internal/ratio"
	"perfevent/internal/setup"
)

// machine is the shipped perfevent.conf planned on a fixture machine of
// internal/pmu/testdata as the agent plans it: the catalog's operands
// added, grouped within the family's counters, opened on the countertest
// fake, the ratios chosen.
type machine struct {
	family *catalog.Family
	plan   *setup.Plan
	specs  []counter.Spec
	set    *counter.Set
	chosen map[string]ratio.Chosen
	apart  []string

	// failures are the opens the fake refused.
	failures []counter.Failure
}

func plan(t *testing.T, fixture string) *machine {
	t.Helper()
	root := "../pmu/testdata/" + fixture
	fs := &pmu.FS{FS: hostfs.FS{Sys: root + "/sys", Proc: root + "/proc"}, Tracing: []string{root + "/tracing"}}
	m, err := setup.ReadMachine(fs)
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("../../perfevent.conf")
	if err != nil {
		t.Fatal(err)
	}
	f, perr := config.Parse("perfevent.conf", src)
	p := setup.Make(f, perr, m, false)
	fam := catalog.Detect(fs.PresentNames())
	defs, user, off, errs := ratio.DefsWith("/nonexistent/ratios.conf", fam.Metrics)
	if user != 0 || len(off) != 0 || len(errs) != 0 {
		t.Fatalf("DefsWith: %d user ratios, off %v, errors %v", user, off, errs)
	}
	p, _ = catalog.Open(p, fam.Metrics)
	specs := p.Specs()
	var msr uint32 = 1 << 31
	if pm, err := fs.PMU("msr"); err == nil {
		msr = pm.Type
	}
	soft := func(sp counter.Spec) bool {
		return sp.Attr.Type == unix.PERF_TYPE_SOFTWARE || sp.Attr.Type == unix.PERF_TYPE_TRACEPOINT || sp.Attr.Type == msr
	}
	apart := ratio.GroupFit(specs, defs, fam.Fit(soft))
	fake := countertest.New()
	set, err := counter.New(specs, counter.Config{Opener: fake})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := set.Open()
	if err != nil {
		t.Fatal(err)
	}
	chosen, _ := ratio.Select(defs, set, p.Scale)
	out := &machine{family: fam, plan: p, specs: specs, set: set, failures: sum.Failures, chosen: map[string]ratio.Chosen{}, apart: apart}
	for _, c := range chosen {
		out.chosen[c.Name] = c
	}
	return out
}

// served lists "name = formula" of the catalog's ratios served, sorted.
func (m *machine) served() []string {
	var lines []string
	for _, d := range m.family.Metrics {
		if c, ok := m.chosen[d.Name]; ok && c.Group != "" && !slices.Contains(lines, d.Name+" = "+c.Formula(m.set)) {
			lines = append(lines, d.Name+" = "+c.Formula(m.set))
		}
	}
	slices.Sort(lines)
	return lines
}

// groups lists the perf groups the specs form: "group: member member".
func (m *machine) groups() []string {
	by := map[string][]string{}
	for _, sp := range m.specs {
		if sp.Group != "" {
			by[sp.Group] = append(by[sp.Group], sp.Name)
		}
	}
	var out []string
	for g, members := range by {
		out = append(out, g+": "+strings.Join(members, " "))
	}
	slices.Sort(out)
	return out
}

// TestServedPerFamily: the shipped configuration, with no edits, serves
// on each fixture machine the catalog's metrics its hardware and kernel
// allow, from the events named here.
func TestServedPerFamily(t *testing.T) {
	x86 := []string{"busy_share", "frequency_average_hz", "frequency_relative", "energy_package_watts"}
	mpki3 := []string{"l1d_mpki", "llc_mpki", "branch_mpki"}
	bw := []string{"mem_bandwidth", "mem_read_bandwidth", "mem_write_bandwidth"}
	l1 := []string{"topdown_frontend_bound", "topdown_bad_speculation", "topdown_retiring", "topdown_backend_bound"}
	l2 := []string{"topdown_fetch_latency", "topdown_fetch_bandwidth", "topdown_branch_mispredicts", "topdown_memory_bound"}
	cat := func(parts ...[]string) []string {
		var all []string
		for _, p := range parts {
			all = append(all, p...)
		}
		return all
	}
	for _, tc := range []struct {
		fixture, family string
		served          []string
		formulas        []string // some served formulas, exactly
	}{
		{"skylake", "Intel Skylake-SP / Cascade Lake", cat([]string{"ipc", "energy_dram_watts"}, x86, mpki3, bw, l1, l2), []string{
			"topdown_backend_bound = (4 × cycles - IDQ_UOPS_NOT_DELIVERED:CORE - UOPS_ISSUED:ANY - 4 × INT_MISC:RECOVERY_CYCLES) / cycles × 0.25",
			"topdown_fetch_bandwidth = (skx::IDQ_UOPS_NOT_DELIVERED:CORE - 4 × IDQ_UOPS_NOT_DELIVERED:CYCLES_0_UOPS_DELIV_CORE) / CPU_CLK_UNHALTED:THREAD_P × 0.25",
			"topdown_branch_mispredicts = skx::BR_MISP_RETIRED:ALL_BRANCHES × (UOPS_ISSUED:ANY - UOPS_RETIRED:RETIRE_SLOTS + 4 × INT_MISC:RECOVERY_CYCLES) / (4 × (skx::BR_MISP_RETIRED:ALL_BRANCHES + MACHINE_CLEARS:COUNT) × cycles)",
			"mem_read_bandwidth = 64 × uncore_imc_0.cas_count_read / duration_time × 1e+09",
			"energy_dram_watts = 2.3283064365386963e-10 × power.energy-ram / duration_time × 1e+09",
			"frequency_relative = msr.aperf / msr.mperf",
		}},
		{"icelake-sp", "Intel Ice Lake-SP", cat([]string{"ipc", "energy_dram_watts"}, x86, mpki3, bw, l1, l2), []string{
			"topdown_frontend_bound = (cpu.topdown-fe-bound - INT_MISC:UOP_DROPPING) / cpu.slots",
			"topdown_backend_bound = (cpu.topdown-be-bound + 5 × INT_MISC:CLEARS_COUNT) / cpu.slots",
			"llc_mpki = MEM_LOAD_RETIRED:L3_MISS / INST_RETIRED:ANY_P × 1000",
		}},
		{"zen3", "AMD Zen 3", cat([]string{"ipc", "l1d_mpki", "branch_mpki"}, x86), []string{
			"ipc = RETIRED_INSTRUCTIONS / CYCLES_NOT_IN_HALT",
			"energy_package_watts = 2.3283064365386963e-10 × power.energy-pkg / duration_time × 1e+09",
		}},
		{"zen4", "AMD Zen 4", cat([]string{"ipc", "l1d_mpki", "branch_mpki", "topdown_smt_contention"}, x86, bw, l1), []string{
			"topdown_bad_speculation = (cpu/event=0xaa,umask=0x7/ - RETIRED_OPS) / amd64_fam19h_zen4::CYCLES_NOT_IN_HALT × 0.16666666666666666",
			"mem_write_bandwidth = 64 × amd_umc_0/event=0xa,rdwrmask=0x2/ / duration_time × 1e+09",
		}},
		{"graviton2", "Arm Neoverse N1", cat([]string{"ipc", "frequency_average_hz", "topdown_frontend_bound", "topdown_backend_bound", "topdown_not_stalled", "topdown_retired_share", "topdown_retiring", "topdown_bad_speculation"}, mpki3), []string{
			"topdown_frontend_bound = STALL_FRONTEND / cycles",
			"topdown_retiring = INST_RETIRED × (cycles - STALL_FRONTEND - STALL_BACKEND) / (INST_SPEC × cycles)",
			"topdown_not_stalled = (cycles - STALL_FRONTEND - STALL_BACKEND) / cycles",
			"llc_mpki = LL_CACHE_MISS_RD / INST_RETIRED × 1000",
			"frequency_average_hz = cycles / cpu-clock × 1e+09",
		}},
		{"power9", "IBM POWER9", []string{"ipc", "frequency_average_hz", "l1d_mpki", "branch_mpki"}, []string{
			"ipc = instructions / cycles",
		}},
		{"haswell", "generic", cat([]string{"ipc", "energy_dram_watts", "energy_cores_watts"}, x86, mpki3), nil},
		// Its kernel lists no level-2 topdown events, so level 2 is not
		// served.
		{"sapphirerapids", "Intel Sapphire Rapids / Emerald Rapids", cat([]string{"ipc", "energy_dram_watts"}, x86, mpki3, bw, l1), []string{
			"topdown_frontend_bound = (cpu.topdown-fe-bound - INT_MISC:UOP_DROPPING) / cpu.slots",
			"topdown_backend_bound = cpu.topdown-be-bound / cpu.slots",
		}},
		// Its fixture's kernel, too, lists no level-2 topdown events.
		{"graniterapids", "Intel Granite Rapids", cat([]string{"ipc", "energy_dram_watts"}, x86, mpki3, bw, l1), []string{
			"topdown_frontend_bound = (cpu.topdown-fe-bound - INT_MISC:UOP_DROPPING) / cpu.slots",
			"llc_mpki = MEM_LOAD_RETIRED:L3_MISS / INST_RETIRED:ANY_P × 1000",
		}},
		// Zen 5 dispatches 8 ops a cycle, Zen 4 6; its PMCx0AA has no
		// loop-buffer source.
		{"zen5", "AMD Zen 5", cat([]string{"ipc", "l1d_mpki", "branch_mpki", "topdown_smt_contention"}, x86, bw, l1), []string{
			"topdown_frontend_bound = cpu/event=0x1a0,umask=0x1/ / amd64_fam1ah_zen5::CYCLES_NOT_IN_HALT × 0.125",
			"topdown_bad_speculation = (cpu/event=0xaa,umask=0x3/ - RETIRED_OPS) / amd64_fam1ah_zen5::CYCLES_NOT_IN_HALT × 0.125",
			"topdown_retiring = RETIRED_OPS / amd64_fam1ah_zen5::CYCLES_NOT_IN_HALT × 0.125",
			"ipc = RETIRED_INSTRUCTIONS / CYCLES_NOT_IN_HALT",
			"mem_read_bandwidth = 64 × amd_umc_0/event=0xa,rdwrmask=0x1/ / duration_time × 1e+09",
			"energy_package_watts = 2.3283064365386963e-10 × power.energy-pkg / duration_time × 1e+09",
		}},
		{"neoverse-v2", "Arm Neoverse V2", cat([]string{"ipc", "frequency_average_hz", "topdown_frontend_bound", "topdown_backend_bound", "topdown_not_stalled", "topdown_retired_share",
			"topdown_retiring", "topdown_bad_speculation"}, mpki3), []string{
			"topdown_bad_speculation = ((OP_SPEC - OP_RETIRED) × (8 × cycles - STALL_SLOT) + 32 × BR_MIS_PRED × OP_SPEC) / (8 × OP_SPEC × cycles)",
			"topdown_frontend_bound = (STALL_SLOT_FRONTEND - 8 × BR_MIS_PRED) / cycles × 0.125",
			"topdown_backend_bound = (STALL_SLOT_BACKEND - 24 × BR_MIS_PRED) / cycles × 0.125",
			"topdown_not_stalled = (8 × cycles - STALL_SLOT) / cycles × 0.125",
			"topdown_retired_share = OP_RETIRED / OP_SPEC",
			"llc_mpki = LL_CACHE_MISS_RD / INST_RETIRED × 1000",
		}},
		// 10 slots a cycle; Arm's level 2 is the split of each end's
		// stalled cycles.
		{"neoverse-v3", "Arm Neoverse V3", cat([]string{"ipc", "frequency_average_hz", "topdown_frontend_bound", "topdown_backend_bound", "topdown_not_stalled", "topdown_retired_share",
			"topdown_retiring", "topdown_bad_speculation",
			"topdown_frontend_core_bound", "topdown_frontend_mem_bound", "topdown_backend_core_bound", "topdown_backend_mem_bound"}, mpki3), []string{
			"topdown_frontend_bound = (STALL_SLOT_FRONTEND - 10 × STALL_FRONTEND_FLUSH) / cycles × 0.1",
			"topdown_backend_bound = STALL_SLOT_BACKEND / cycles × 0.1",
			"topdown_not_stalled = (10 × cycles - STALL_SLOT) / cycles × 0.1",
			"topdown_backend_mem_bound = STALL_BACKEND_MEMBOUND / STALL_BACKEND",
		}},
	} {
		if _, err := os.Stat("../pmu/testdata/" + tc.fixture); err != nil {
			t.Logf("no fixture %s: %v", tc.fixture, err)
			continue
		}
		m := plan(t, tc.fixture)
		if m.family.Name != tc.family {
			t.Errorf("%s: family %q, want %q", tc.fixture, m.family.Name, tc.family)
		}
		var got []string
		for _, l := range m.served() {
			name, _, _ := strings.Cut(l, " = ")
			got = append(got, name)
		}
		want := slices.Clone(tc.served)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s: served %v\nwant %v", tc.fixture, got, want)
		}
		for _, f := range tc.formulas {
			if !slices.Contains(m.served(), f) {
				t.Errorf("%s: no %q in %v", tc.fixture, f, m.served())
			}
		}
		for _, n := range m.plan.Notes {
			if n.Severity == setup.Problem {
				t.Errorf("%s: %s", tc.fixture, n)
			}
		}
		for _, f := range m.failures {
			if f.Kind != counter.Unsupported {
				t.Errorf("%s: %v", tc.fixture, f)
			}
		}
	}
}

// TestGroupsFitTheCounters: every perf group the catalog forms needs no
// more general-purpose counters than the family has, and TopDown level 1
// is counted in one group on each family that has it.
func TestGroupsFitTheCounters(t *testing.T) {
	for _, tc := range []struct{ fixture, l1 string }{
		{"skylake", "cycles instructions IDQ_UOPS_NOT_DELIVERED:CORE UOPS_ISSUED:ANY UOPS_RETIRED:RETIRE_SLOTS INT_MISC:RECOVERY_CYCLES"},
		{"icelake-sp", "cpu.slots cpu.topdown-fe-bound INT_MISC:UOP_DROPPING cpu.topdown-be-bound INT_MISC:CLEARS_COUNT cpu.topdown-retiring IDQ_UOPS_NOT_DELIVERED:CYCLES_0_UOPS_DELIV_CORE " +
			"CYCLE_ACTIVITY:STALLS_TOTAL EXE_ACTIVITY:1_PORTS_UTIL EXE_ACTIVITY:BOUND_ON_STORES EXE_ACTIVITY:2_PORTS_UTIL CYCLE_ACTIVITY:STALLS_MEM_ANY"},
		{"zen4", "amd64_fam19h_zen4::CYCLES_NOT_IN_HALT cpu/event=0x1a0,umask=0x1/ cpu/event=0xaa,umask=0x7/ RETIRED_OPS cpu/event=0x1a0,umask=0x1e/ cpu/event=0x1a0,umask=0x60/"},
		{"graviton2", "cycles instructions cpu-clock STALL_FRONTEND STALL_BACKEND"},
		{"zen5", "amd64_fam1ah_zen5::CYCLES_NOT_IN_HALT cpu/event=0x1a0,umask=0x1/ cpu/event=0xaa,umask=0x3/ RETIRED_OPS cpu/event=0x1a0,umask=0x1e/ cpu/event=0x1a0,umask=0x60/"},
		{"neoverse-v2", "cycles instructions cpu-clock STALL_SLOT_FRONTEND BR_MIS_PRED STALL_SLOT_BACKEND STALL_SLOT"},
		{"neoverse-v3", "cycles instructions cpu-clock STALL_SLOT_FRONTEND STALL_FRONTEND_FLUSH STALL_SLOT_BACKEND STALL_SLOT"},
		{"graniterapids", "cpu.slots cpu.topdown-fe-bound INT_MISC:UOP_DROPPING cpu.topdown-be-bound cpu.topdown-retiring"},
		{"zen3", ""}, {"power9", ""},
	} {
		m := plan(t, tc.fixture)
		// The shipped configuration's branch_miss_ratio and the
		// catalog's branch_mpki share branch-misses on POWER9, whose
		// family names no fixed counter: five events, one counted apart.
		if len(m.apart) > 0 && tc.fixture != "power9" {
			t.Errorf("%s: ratios counted apart: %q", tc.fixture, m.apart)
		}
		fit := m.family.Fit(nil)
		by := map[string][]counter.Spec{}
		for _, sp := range m.specs {
			if sp.Group != "" {
				by[sp.Group] = append(by[sp.Group], sp)
			}
		}
		var l1 string
		for g, members := range by {
			need := 0
			var names []string
			for _, sp := range members {
				names = append(names, sp.Name)
				if sp.Attr.Type != unix.PERF_TYPE_SOFTWARE && !fit.Free(sp) {
					need++
				}
			}
			if need > m.family.Counters {
				t.Errorf("%s: group %s needs %d counters, the family has %d", tc.fixture, g, need, m.family.Counters)
			}
			if strings.Contains(g, "topdown_frontend_bound") {
				l1 = strings.Join(names, " ")
			}
		}
		if l1 != tc.l1 {
			t.Errorf("%s: TopDown level 1's group is %q, want %q", tc.fixture, l1, tc.l1)
		}
	}
}

// value is a served ratio over one interval in which each event of counts
// advanced by that much (a missing event by 0); elapsed is the interval in
// ns for a ratio over duration_time.
func (m *machine) value(t *testing.T, name string, counts map[string]float64, elapsed uint64) float64 {
	t.Helper()
	c, ok := m.chosen[name]
	if !ok {
		t.Fatalf("%s is not served", name)
	}
	if c.Compound != nil {
		x := make([]float64, len(c.Num))
		for j, ev := range c.NumEv {
			x[c.Term[j]] += c.NumW[j] * counts[m.set.Name(ev)]
		}
		v, ok := c.OfTerms(x)
		if !ok {
			t.Fatalf("%s: no value", name)
		}
		return v
	}
	var num float64
	for j, ev := range c.NumEv {
		num += c.NumW[j] * counts[m.set.Name(ev)]
	}
	den := elapsed
	if !c.Elapsed() {
		den = uint64(counts[m.set.Name(c.DenEv)])
	}
	v, ok := c.Of(num, den)
	if !ok {
		t.Fatalf("%s: no value", name)
	}
	return v
}

// TestFormulasByHand: each family's formulas on fixed counts give the
// values worked out by hand from the vendors' definitions.
func TestFormulasByHand(t *testing.T) {
	type want map[string]float64
	for _, tc := range []struct {
		fixture string
		counts  map[string]float64
		elapsed uint64
		want    want
	}{
		// Skylake: 1000 cycles are 4000 slots; 800 undelivered, 2600
		// issued, 2000 retired, 50 recovery cycles (200 slots).
		{"skylake", map[string]float64{
			"cycles": 1000, "IDQ_UOPS_NOT_DELIVERED:CORE": 800, "UOPS_ISSUED:ANY": 2600, "UOPS_RETIRED:RETIRE_SLOTS": 2000, "INT_MISC:RECOVERY_CYCLES": 50,
			"CPU_CLK_UNHALTED:THREAD_P": 1000, "IDQ_UOPS_NOT_DELIVERED:CYCLES_0_UOPS_DELIV_CORE": 100, "skx::IDQ_UOPS_NOT_DELIVERED:CORE": 800,
			"INST_RETIRED:ANY_P": 1e6, "L1D:REPLACEMENT": 20000, "MEM_LOAD_RETIRED:L3_MISS": 1000, "BR_MISP_RETIRED:ALL_BRANCHES": 5000,
			"uncore_imc_0.cas_count_read": 1e6, "uncore_imc_0.cas_count_write": 5e5,
			"power.energy-pkg": 50 << 32, "power.energy-ram": 4 << 32,
			"msr.aperf": 3e9, "msr.mperf": 2e9, "msr.tsc": 4e9, "cpu-clock": 1e9,
			// Level 2: 300 of 400 clears mispredicts; 300 + 100 memory
			// stall cycles of 450 + 200 + 100 + retiring 0.5 × 100 = 800.
			"skx::BR_MISP_RETIRED:ALL_BRANCHES": 300, "MACHINE_CLEARS:COUNT": 100,
			"CYCLE_ACTIVITY:STALLS_MEM_ANY": 300, "EXE_ACTIVITY:BOUND_ON_STORES": 100, "CYCLE_ACTIVITY:STALLS_TOTAL": 450,
			"EXE_ACTIVITY:1_PORTS_UTIL": 200, "EXE_ACTIVITY:2_PORTS_UTIL": 100,
		}, 2e9, want{
			"topdown_frontend_bound": 0.2, "topdown_bad_speculation": 0.2, "topdown_retiring": 0.5, "topdown_backend_bound": 0.1,
			"topdown_fetch_latency": 0.1, "topdown_fetch_bandwidth": 0.1,
			"topdown_branch_mispredicts": 0.75 * 0.2, "topdown_memory_bound": 0.5 * 0.1,
			"l1d_mpki": 20, "llc_mpki": 1, "branch_mpki": 5,
			"mem_read_bandwidth": 32e6, "mem_write_bandwidth": 16e6, "mem_bandwidth": 48e6, // 64 B a CAS over 2 s
			"energy_package_watts": 25, "energy_dram_watts": 2, // 2^32 counts a joule, over 2 s
			"busy_share": 0.5, "frequency_relative": 1.5, "frequency_average_hz": 3e9,
		}},
		// Ice Lake: 10000 slots; the kernel's shares in slots, 100
		// dropped micro-ops, 40 clears (5 slots each), 300 cycles of no
		// delivery (5 slots each).
		{"icelake-sp", map[string]float64{
			"cpu.slots": 10000, "cpu.topdown-fe-bound": 2000, "cpu.topdown-be-bound": 3000, "cpu.topdown-retiring": 4000,
			"INT_MISC:UOP_DROPPING": 100, "INT_MISC:CLEARS_COUNT": 40, "IDQ_UOPS_NOT_DELIVERED:CYCLES_0_UOPS_DELIV_CORE": 300,
			// Level 2: 600 of 900 clears mispredicts; 400 + 100 memory
			// stall cycles of 500 + 200 + 100 + retiring 0.4 × 500 = 1000.
			"BR_MISP_RETIRED:ALL_BRANCHES": 600, "MACHINE_CLEARS:COUNT": 300,
			"CYCLE_ACTIVITY:STALLS_MEM_ANY": 400, "EXE_ACTIVITY:BOUND_ON_STORES": 100, "CYCLE_ACTIVITY:STALLS_TOTAL": 500,
			"EXE_ACTIVITY:1_PORTS_UTIL": 200, "EXE_ACTIVITY:2_PORTS_UTIL": 500,
		}, 1e9, want{
			"topdown_frontend_bound": 0.19, "topdown_backend_bound": 0.32, "topdown_retiring": 0.4, "topdown_bad_speculation": 0.09,
			"topdown_fetch_latency": 0.14, "topdown_fetch_bandwidth": 0.05,
			"topdown_branch_mispredicts": 0.06, "topdown_memory_bound": 0.16,
		}},
		// Zen 4: 1000 cycles are 6000 dispatch slots.
		{"zen4", map[string]float64{
			"amd64_fam19h_zen4::CYCLES_NOT_IN_HALT": 1000, "cpu/event=0x1a0,umask=0x1/": 1200, "cpu/event=0xaa,umask=0x7/": 3300, "RETIRED_OPS": 3000,
			"cpu/event=0x1a0,umask=0x1e/": 1200, "cpu/event=0x1a0,umask=0x60/": 300,
			"amd_umc_0/event=0xa,rdwrmask=0x1/": 1e6, "RETIRED_INSTRUCTIONS": 2000, "CYCLES_NOT_IN_HALT": 1000,
		}, 1e9, want{
			"topdown_frontend_bound": 0.2, "topdown_bad_speculation": 0.05, "topdown_backend_bound": 0.2, "topdown_smt_contention": 0.05, "topdown_retiring": 0.5,
			"mem_read_bandwidth": 64e6, "ipc": 2,
		}},
		// Neoverse N1: of 1000 cycles 200 stalled in front, 300 behind;
		// 900 of 1000 speculated instructions retired.
		{"graviton2", map[string]float64{
			"cycles": 1000, "instructions": 1500, "STALL_FRONTEND": 200, "STALL_BACKEND": 300, "INST_RETIRED": 900, "INST_SPEC": 1000,
			"L1D_CACHE_REFILL": 9, "LL_CACHE_MISS_RD": 0.9, "BR_MIS_PRED_RETIRED": 4.5, "cpu-clock": 5e8,
		}, 1e9, want{
			"ipc": 1.5, "topdown_frontend_bound": 0.2, "topdown_backend_bound": 0.3, "topdown_not_stalled": 0.5, "topdown_retired_share": 0.9,
			"topdown_retiring": 0.45, "topdown_bad_speculation": 0.05,
			"l1d_mpki": 10, "llc_mpki": 1, "branch_mpki": 5, "frequency_average_hz": 2000,
		}},
		// Sapphire Rapids: 10000 slots; level 2 in slots as the kernel
		// reports it.
		{"sapphirerapids", map[string]float64{
			"cpu.slots": 10000, "cpu.topdown-fe-bound": 2000, "cpu.topdown-be-bound": 3000, "cpu.topdown-retiring": 4000,
			"INT_MISC:UOP_DROPPING": 100,
		}, 1e9, want{
			"topdown_frontend_bound": 0.19, "topdown_backend_bound": 0.3, "topdown_retiring": 0.4, "topdown_bad_speculation": 0.11,
		}},
		// Granite Rapids: level 1 as Sapphire Rapids; each memory
		// controller's reads and writes are two schedulers' CAS commands:
		// 2.5e6 reads and 5e5 writes of 64 bytes over 2 s.
		{"graniterapids", map[string]float64{
			"cpu.slots": 10000, "cpu.topdown-fe-bound": 2000, "cpu.topdown-be-bound": 3000, "cpu.topdown-retiring": 4000,
			"INT_MISC:UOP_DROPPING":               100,
			"uncore_imc_0/event=0x05,umask=0xcf/": 1e6, "uncore_imc_0/event=0x06,umask=0xcf/": 1e6, "uncore_imc_1/event=0x05,umask=0xcf/": 5e5,
			"uncore_imc_0/event=0x05,umask=0xf0/": 2.5e5, "uncore_imc_7/event=0x06,umask=0xf0/": 2.5e5,
			"uncore_imc_0.cas_count_read": 1e9, "uncore_imc_0.cas_count_write": 1e9, // the kernel's aliases: not operands
			"power.energy-pkg": 300 << 32, "msr.aperf": 3e9, "msr.mperf": 2e9, "msr.tsc": 4e9, "cpu-clock": 1e9,
		}, 2e9, want{
			"topdown_frontend_bound": 0.19, "topdown_backend_bound": 0.3, "topdown_retiring": 0.4, "topdown_bad_speculation": 0.11,
			"mem_read_bandwidth": 80e6, "mem_write_bandwidth": 16e6, "mem_bandwidth": 96e6,
			"energy_package_watts": 150, "busy_share": 0.5, "frequency_relative": 1.5, "frequency_average_hz": 3e9,
		}},
		// Zen 5: 1000 cycles are 8000 dispatch slots (Zen 4's 6000).
		{"zen5", map[string]float64{
			"amd64_fam1ah_zen5::CYCLES_NOT_IN_HALT": 1000, "cpu/event=0x1a0,umask=0x1/": 1600, "cpu/event=0xaa,umask=0x3/": 4400, "RETIRED_OPS": 4000,
			"cpu/event=0x1a0,umask=0x1e/": 1600, "cpu/event=0x1a0,umask=0x60/": 400,
			"amd_umc_0/event=0xa,rdwrmask=0x1/": 1e6, "amd_umc_0/event=0xa,rdwrmask=0x2/": 5e5,
			"RETIRED_INSTRUCTIONS": 3000, "CYCLES_NOT_IN_HALT": 1000, "RETIRED_BRANCH_INSTRUCTIONS_MISPREDICTED": 6, "L1-dcache-load-misses": 30,
			"power.energy-pkg": 30 << 32, "msr.aperf": 3e9, "msr.mperf": 2e9, "msr.tsc": 4e9, "cpu-clock": 1e9,
		}, 2e9, want{
			"topdown_frontend_bound": 0.2, "topdown_bad_speculation": 0.05, "topdown_backend_bound": 0.2, "topdown_smt_contention": 0.05, "topdown_retiring": 0.5,
			"mem_read_bandwidth": 32e6, "mem_write_bandwidth": 16e6, "mem_bandwidth": 48e6,
			"ipc": 3, "branch_mpki": 2, "l1d_mpki": 10,
			"energy_package_watts": 15, "busy_share": 0.5, "frequency_relative": 1.5, "frequency_average_hz": 3e9,
		}},
		// Neoverse V2: 1000 cycles are 8000 slots; 2000 stalled in front and
		// 3600 behind (5600 in all); 50 mispredicts cost the front end 8
		// slots each and the back end 24. Arm's own formulas give 0.25 −
		// 0.05 and 0.45 − 0.15; retiring 0.9 × 0.3 = 0.27 and bad
		// speculation 0.1 × 0.3 + 0.2 = 0.23 complete the 1.
		{"neoverse-v2", map[string]float64{
			"cycles": 1000, "instructions": 2500, "STALL_SLOT_FRONTEND": 2000, "STALL_SLOT_BACKEND": 3600, "STALL_SLOT": 5600, "BR_MIS_PRED": 50,
			"OP_RETIRED": 900, "OP_SPEC": 1000, "INST_RETIRED": 2000, "L1D_CACHE_REFILL": 20, "LL_CACHE_MISS_RD": 2, "BR_MIS_PRED_RETIRED": 8, "cpu-clock": 5e8,
		}, 1e9, want{
			"ipc": 2.5, "topdown_frontend_bound": 0.2, "topdown_backend_bound": 0.3, "topdown_not_stalled": 0.3, "topdown_retired_share": 0.9,
			"topdown_retiring": 0.27, "topdown_bad_speculation": 0.23,
			"l1d_mpki": 10, "llc_mpki": 1, "branch_mpki": 4, "frequency_average_hz": 2000,
		}},
		// Neoverse V3: 1000 cycles are 10000 slots; 2500 stalled in front,
		// of which 50 cycles of flush recovery (500 slots) are bad
		// speculation's, 3000 behind. Arm's own formulas give 0.25 − 0.05
		// and 0.3; retiring 0.8 × 0.45 = 0.36 and bad speculation 0.2 ×
		// 0.45 + 0.05 = 0.14 complete the 1.
		{"neoverse-v3", map[string]float64{
			"cycles": 1000, "instructions": 3000, "STALL_SLOT_FRONTEND": 2500, "STALL_FRONTEND_FLUSH": 50, "STALL_SLOT_BACKEND": 3000, "STALL_SLOT": 5500,
			"OP_RETIRED": 800, "OP_SPEC": 1000, "STALL_FRONTEND": 400, "STALL_FRONTEND_CPUBOUND": 100, "STALL_FRONTEND_MEMBOUND": 300,
			"STALL_BACKEND": 600, "STALL_BACKEND_CPUBOUND": 150, "STALL_BACKEND_MEMBOUND": 450,
			"INST_RETIRED": 2000, "L1D_CACHE_REFILL": 20, "LL_CACHE_MISS_RD": 2, "BR_MIS_PRED_RETIRED": 8, "cpu-clock": 5e8,
		}, 1e9, want{
			"ipc": 3, "topdown_frontend_bound": 0.2, "topdown_backend_bound": 0.3, "topdown_not_stalled": 0.45, "topdown_retired_share": 0.8,
			"topdown_retiring": 0.36, "topdown_bad_speculation": 0.14,
			"topdown_frontend_core_bound": 0.25, "topdown_frontend_mem_bound": 0.75, "topdown_backend_core_bound": 0.25, "topdown_backend_mem_bound": 0.75,
			"l1d_mpki": 10, "llc_mpki": 1, "branch_mpki": 4, "frequency_average_hz": 2000,
		}},
		{"power9", map[string]float64{"instructions": 3000, "cycles": 2000, "L1-dcache-load-misses": 30, "branch-misses": 6}, 1e9, want{
			"ipc": 1.5, "l1d_mpki": 10, "branch_mpki": 2,
		}},
	} {
		if _, err := os.Stat("../pmu/testdata/" + tc.fixture); err != nil {
			t.Logf("no fixture %s: %v", tc.fixture, err)
			continue
		}
		m := plan(t, tc.fixture)
		for name, w := range tc.want {
			if got := m.value(t, name, tc.counts, tc.elapsed); math.Abs(got-w) > 1e-9*math.Max(1, math.Abs(w)) {
				t.Errorf("%s: %s = %g, want %g", tc.fixture, name, got, w)
			}
		}
	}
}

// TestVMOpensNothing: on a VM without a core PMU, RAPL or APERF, the
// catalog's ratios that the configuration does not already provide cannot
// be served, so none of their events is opened, and the plan says why.
func TestVMOpensNothing(t *testing.T) {
	m := plan(t, "vm")
	for _, c := range m.plan.Counters {
		if c.For != "" {
			t.Errorf("the catalog opened %s %s", c.Event.Name, c.For)
		}
	}
	var notes int
	for _, n := range m.plan.Notes {
		if strings.Contains(n.Text, "is not usable here") {
			notes++
		}
	}
	if notes == 0 {
		t.Errorf("no note says why the catalog's ratios are not opened: %v", m.plan.Notes)
	}
}

// TestLevel2FromPerfMetrics: Sapphire and Granite Rapids' level 2, from the kernel's
// level-2 PERF_METRICS events, on fixed counts worked out by hand.
func TestLevel2FromPerfMetrics(t *testing.T) {
	counts := map[string]float64{
		"cpu.slots": 10000, "cpu.topdown-fe-bound": 2000, "cpu.topdown-be-bound": 3000, "cpu.topdown-retiring": 4000,
		"INT_MISC:UOP_DROPPING": 100, "cpu.topdown-fetch-lat": 1500, "cpu.topdown-br-mispredict": 600,
		"cpu.topdown-mem-bound": 1800, "cpu.topdown-heavy-ops": 1000,
	}
	want := map[string]float64{
		"topdown_fetch_latency": 0.14, "topdown_fetch_bandwidth": 0.05, "topdown_branch_mispredicts": 0.06,
		"topdown_machine_clears": 0.05, "topdown_memory_bound": 0.18, "topdown_core_bound": 0.12,
		"topdown_heavy_operations": 0.1, "topdown_light_operations": 0.3,
	}
	for _, pmu := range []string{"spr", "gnr"} {
		fam := catalog.Detect([]string{pmu})
		seen := 0
		for _, d := range fam.Metrics {
			w, ok := want[d.Name]
			if !ok {
				continue
			}
			seen++
			var num float64
			for j, term := range d.Num {
				weight := 1.0
				if j < len(d.Weights) {
					weight = d.Weights[j]
				}
				num += weight * counts[term]
			}
			if got, _ := d.Of(num, uint64(counts[d.Den])); math.Abs(got-w) > 1e-12 {
				t.Errorf("%s: %s = %s = %g, want %g", fam.Name, d.Name, d.Formula(), got, w)
			}
		}
		if seen != len(want) {
			t.Errorf("%s: %d of the %d level-2 metrics are in the catalog", fam.Name, seen, len(want))
		}
	}
}
