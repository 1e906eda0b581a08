package metrics

import (
	"math"
	"strings"
	"testing"

	"perfevent/internal/config"
	"perfevent/internal/counter"
	"perfevent/internal/counter/countertest"
	"perfevent/internal/hostfs"
	"perfevent/internal/pdu"
	"perfevent/internal/pmu"
	"perfevent/internal/ratio"
	"perfevent/internal/setup"
)

// The ratios end to end on the sysfs trees of internal/pmu: a
// configuration planned against a real machine's PMUs, its counters
// opened on the countertest fake with scripted counts, and the agent's
// table serving perfevent.ratio.* over a pipe.

// fixtureRig is the agent's table for conf on the named machine, with the
// built-in ratios. now is its clock for ratios over duration_time.
type fixtureRig struct {
	*rig
	plan *setup.Plan
	now  uint64
}

func newFixtureRig(t *testing.T, machine, conf string) *fixtureRig {
	t.Helper()
	root := "../pmu/testdata/" + machine
	fs := &pmu.FS{FS: hostfs.FS{Sys: root + "/sys", Proc: root + "/proc"}, Tracing: []string{root + "/tracing"}}
	m, err := setup.ReadMachine(fs)
	if err != nil {
		t.Fatal(err)
	}
	f, perr := config.Parse("perfevent.conf", []byte(conf))
	plan := setup.Make(f, perr, m, false)
	if plan.Problems() > 0 {
		t.Fatalf("%s: the plan has problems: %v", machine, plan.Notes)
	}
	specs := plan.Specs()
	ratio.Group(specs, ratio.Builtin)
	fake := countertest.New()
	set, err := counter.New(specs, counter.Config{Opener: fake})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := set.Open(); err != nil {
		t.Fatal(err)
	}
	chosen, _ := ratio.Select(ratio.Builtin, set, plan.Scale)
	r := &fixtureRig{plan: plan}
	var counters []Counter
	for _, c := range plan.Counters {
		ev, _ := set.Lookup(c.Event.Name)
		if len(set.CPUs(ev)) == 0 {
			continue // as the agent serves only what opened
		}
		counters = append(counters, Counter{Event: ev, Metric: c.Metric})
	}
	table, src, err := Build(Spec{Version: "test", Set: set, Clusters: NewClusters(), Counters: counters, Ratios: chosen, Sockets: plan.Sockets, Clock: func() uint64 { return r.now }})
	if err != nil {
		t.Fatal(err)
	}
	r.rig = rigOf(t, fake, set, table, src)
	return r
}

func (r *fixtureRig) served(name string) bool {
	_, err := r.table.PMID(name)
	return err == nil
}

func near(got, want float64) bool { return math.Abs(got-want) <= 1e-9*math.Abs(want) }

// imcConf counts every memory controller of Sandy Bridge-EP (four) as the
// kernel names them, with core cycles beside them.
const imcConf = `[perf]
cycles
[dynamic]
uncore_imc_0.cas_count_read
uncore_imc_0.cas_count_write
uncore_imc_1.cas_count_read
uncore_imc_1.cas_count_write
uncore_imc_2.cas_count_read
uncore_imc_2.cas_count_write
uncore_imc_3.cas_count_read
uncore_imc_3.cas_count_write
`

func TestMemBandwidthOnUncoreIMC(t *testing.T) {
	r := newFixtureRig(t, "snbep", imcConf)
	const name, all = "perfevent.ratio.mem_bandwidth", "perfevent.ratio.all.mem_bandwidth"
	m, _ := r.table.Metric(mustPMID(t, r.table, name))
	if m.Desc.Units != pdu.NewUnits(1, -1, 0, pdu.SpaceByte, pdu.TimeSec, 0) || m.Desc.Sem != pdu.SemInstant {
		t.Errorf("%s: desc %+v, want bytes/sec, instant", name, m.Desc)
	}
	// One instance per package: the CPUs of the IMCs' cpumask.
	var inst []string
	indom, _ := r.table.InDom(m.Desc.InDom)
	for _, in := range indom.Instances {
		inst = append(inst, in.Name)
	}
	if strings.Join(inst, " ") != "cpu0 cpu8" {
		t.Errorf("instances %v, want the cpumask's cpu0 cpu8", inst)
	}
	// Each says which socket it counts for.
	for i, in := range indom.Instances {
		if in.Labels["socket"] != i || in.Labels["cpu"] != int(in.ID) {
			t.Errorf("instance %s: labels %v, want cpu %d and socket %d", in.Name, in.Labels, in.ID, i)
		}
	}
	// The first fetch has the agent's interval, from the counters'
	// opening (at 0) to now: nothing read or written, 0 B/s.
	r.now = 5e9
	if got := r.fetch(name, all); !same(got[0], map[int32]float64{0: 0, 8: 0}) || !same(got[1], map[int32]float64{pdu.InNull: 0}) {
		t.Errorf("first fetch gave %v; want 0 B/s on both packages and all", got)
	}
	// Two seconds: package 0 reads 1000 lines from each controller and
	// writes 500 to imc_0; package 1's imc_3 was multiplexed, on the PMU
	// a quarter of the time, so its 100 writes stand for 400.
	for _, imc := range []string{"0", "1", "2", "3"} {
		r.fake.Add("uncore_imc_"+imc+".cas_count_read", 0, 1000, 1, 1)
	}
	r.fake.Add("uncore_imc_0.cas_count_write", 0, 500, 1, 1)
	r.fake.Add("uncore_imc_3.cas_count_write", 8, 100, 4, 1)
	r.fake.Add("cycles", 0, 1e9, 1, 1) // not an operand
	r.now += 2e9
	got := r.fetch(name, all)
	want := map[int32]float64{0: 4500 * 64 / 2.0, 8: 400 * 64 / 2.0}
	if !near(got[0][0], want[0]) || !near(got[0][8], want[8]) || len(got[0]) != 2 {
		t.Errorf("per package: %v B/s, want %v", got[0], want)
	}
	if v := got[1][pdu.InNull]; !near(v, 4900*64/2.0) {
		t.Errorf("all: %v B/s, want (4500 + 400) lines × 64 B / 2 s = %v", v, 4900*64/2.0)
	}
	// An idle second is 0 B/s, not "no value": time moved.
	r.now += 1e9
	if got := r.fetch(all)[0]; len(got) != 1 || got[pdu.InNull] != 0 {
		t.Errorf("idle interval: %v, want 0", got)
	}
}

// With libpfm4's names for the same events, the bytes per count are still
// the kernel's: its scale is found by encoding.
func TestMemBandwidthFromLibpfm4Names(t *testing.T) {
	r := newFixtureRig(t, "skylake", "[skx]\nskx_unc_imc0::UNC_M_CAS_COUNT:RD\nskx_unc_imc0::UNC_M_CAS_COUNT:WR\n")
	if s, unit, ok := r.plan.Scale("skx_unc_imc0::UNC_M_CAS_COUNT:RD"); s != 6.103515625e-5 || unit != "MiB" || !ok {
		t.Errorf("the kernel's scale of UNC_M_CAS_COUNT:RD: %g %q %v", s, unit, ok)
	}
	const all = "perfevent.ratio.all.mem_bandwidth"
	r.fetch(all)
	r.fake.Add("skx_unc_imc0::UNC_M_CAS_COUNT:RD", 18, 3, 1, 1)
	r.fake.Add("skx_unc_imc0::UNC_M_CAS_COUNT:WR", 0, 1, 1, 1)
	r.now += 1e9
	if got := r.fetch(all)[0][pdu.InNull]; got != 4*64 {
		t.Errorf("all: %v B/s, want 4 × 64", got)
	}
}

// A machine with no memory controller PMU (a VM) has no mem_bandwidth:
// the lines are skipped as expected, not as problems.
func TestMemBandwidthAbsentOnVM(t *testing.T) {
	r := newFixtureRig(t, "vm", imcConf)
	if r.served("perfevent.ratio.mem_bandwidth") || r.served("perfevent.ratio.all.mem_bandwidth") {
		t.Error("mem_bandwidth served on a VM")
	}
	// Reads alone are not the bandwidth either.
	r = newFixtureRig(t, "snbep", "[dynamic]\nuncore_imc_0.cas_count_read\n")
	if r.served("perfevent.ratio.mem_bandwidth") {
		t.Error("mem_bandwidth served without the writes")
	}
}

// IPC from the vendor's own events as libpfm4 names them, and from the
// kernel's generic ones, on AMD Zen, Arm Neoverse N1 and IBM POWER9. The
// two operands are one group: when the kernel multiplexes it, both counts
// are scaled by the group's time_enabled/time_running, and the quotient is
// what the PMU counted.
func TestIPCOnEachVendor(t *testing.T) {
	for _, c := range []struct{ machine, conf, cycles, instructions string }{
		{"zen2", "[amd64_fam17h_zen2]\nCYCLES_NOT_IN_HALT\nRETIRED_INSTRUCTIONS\n", "CYCLES_NOT_IN_HALT", "RETIRED_INSTRUCTIONS"},
		{"zen3", "[perf]\ncycles\ninstructions\n", "cycles", "instructions"},
		{"zen4", "[amd64_fam19h_zen4]\nCYCLES_NOT_IN_HALT\nRETIRED_INSTRUCTIONS\n", "CYCLES_NOT_IN_HALT", "RETIRED_INSTRUCTIONS"},
		{"graviton2", "[arm_n1]\nCPU_CYCLES\nINST_RETIRED\n", "CPU_CYCLES", "INST_RETIRED"},
		{"graviton2", "[perf]\ncycles\ninstructions\n", "cycles", "instructions"},
		{"power9", "[power9]\nPM_CYC\nPM_INST_CMPL\n", "PM_CYC", "PM_INST_CMPL"},
		{"power9", "[perf]\ncycles\ninstructions\n", "cycles", "instructions"},
	} {
		t.Run(c.machine+"/"+c.cycles, func(t *testing.T) {
			r := newFixtureRig(t, c.machine, c.conf)
			const ipc, all = "perfevent.ratio.ipc", "perfevent.ratio.all.ipc"
			if got := r.fake.Group(c.cycles, 1); strings.Join(got, ",") != c.cycles+","+c.instructions {
				t.Errorf("cpu1's group %v, want cycles leading instructions", got)
			}
			r.fetch(ipc, all, "perfevent.ratio.cpi")
			// cpu0 counted all the time; cpu1's group ran a third
			// of the time: 1e6 cycles and 1.5e6 instructions stand
			// for three times as many.
			r.fake.Add(c.cycles, 0, 2e6, 10, 10)
			r.fake.Add(c.instructions, 0, 5e6, 0, 0)
			r.fake.Add(c.cycles, 1, 1e6, 30, 10)
			r.fake.Add(c.instructions, 1, 1.5e6, 0, 0)
			got := r.fetch(ipc, all, "perfevent.ratio.cpi")
			if got[0][0] != 2.5 || got[0][1] != 1.5 {
				t.Errorf("ipc %v, want cpu0 2.5, cpu1 1.5", got[0])
			}
			// The machine: (5e6 + 3 × 1.5e6) / (2e6 + 3 × 1e6).
			if v := got[1][pdu.InNull]; !near(v, 9.5/5) {
				t.Errorf("all.ipc %v, want %v", v, 9.5/5)
			}
			if got[2][0] != 0.4 {
				t.Errorf("cpi %v, want cpu0 0.4", got[2])
			}
		})
	}
}

// TopDown level 1 on Ice Lake-SP: slots leads the group of the four
// topdown-* metric events, which the kernel reports in slots.
func TestTopDownOnIceLake(t *testing.T) {
	r := newFixtureRig(t, "icelake-sp", "[dynamic]\ncpu.slots\ncpu.topdown-retiring\ncpu.topdown-bad-spec\ncpu.topdown-fe-bound\ncpu.topdown-be-bound\n")
	want := "cpu.slots,cpu.topdown-retiring,cpu.topdown-bad-spec,cpu.topdown-fe-bound,cpu.topdown-be-bound"
	if got := strings.Join(r.fake.Group("cpu.slots", 40), ","); got != want {
		t.Errorf("cpu40's group %s, want %s", got, want)
	}
	names := []string{"perfevent.ratio.topdown_retiring", "perfevent.ratio.topdown_bad_speculation", "perfevent.ratio.topdown_frontend_bound", "perfevent.ratio.topdown_backend_bound", "perfevent.ratio.all.topdown_retiring"}
	r.fetch(names...)
	// 4e6 slots on cpu0, counted throughout; cpu40's group ran half the
	// time. Shares are the same scaled or not.
	for _, cpu := range []int{0, 40} {
		duty := uint64(1)
		if cpu == 40 {
			duty = 2
		}
		r.fake.Add("cpu.slots", cpu, 4e6, 2*duty, 2)
		r.fake.Add("cpu.topdown-retiring", cpu, 1.6e6, 0, 0)
		r.fake.Add("cpu.topdown-bad-spec", cpu, 0.4e6, 0, 0)
		r.fake.Add("cpu.topdown-fe-bound", cpu, 0.8e6, 0, 0)
		r.fake.Add("cpu.topdown-be-bound", cpu, 1.2e6, 0, 0)
	}
	got := r.fetch(names...)
	for i, share := range []float64{0.4, 0.1, 0.2, 0.3} {
		if !near(got[i][0], share) || !near(got[i][40], share) {
			t.Errorf("%s: %v, want %v on cpu0 and cpu40", names[i], got[i], share)
		}
	}
	if v := got[4][pdu.InNull]; !near(v, 0.4) {
		t.Errorf("all.topdown_retiring %v, want 0.4", v)
	}
}

// The miss ratios, their two events in one group that the kernel
// multiplexed: scaled alike, the quotient is what the PMU counted.
func TestMissRatiosMultiplexed(t *testing.T) {
	r := newFixtureRig(t, "zen3", "[perf]\nbranch-instructions\nbranch-misses\ncache-references\ncache-misses\n")
	names := []string{"perfevent.ratio.branch_miss_ratio", "perfevent.ratio.cache_miss_ratio"}
	r.fetch(names...)
	r.fake.Add("branch-instructions", 5, 1e5, 40, 10) // on the PMU a quarter of the time
	r.fake.Add("branch-misses", 5, 2e3, 0, 0)
	r.fake.Add("cache-references", 5, 400, 40, 40)
	r.fake.Add("cache-misses", 5, 100, 0, 0)
	got := r.fetch(names...)
	if got[0][5] != 0.02 || got[1][5] != 0.25 {
		t.Errorf("cpu5: branch misses %v, cache misses %v; want 0.02 and 0.25", got[0][5], got[1][5])
	}
	if v := r.fetch("perfevent.hwcounters.branch_instructions.value")[0][5]; v != 4e5 {
		t.Errorf("branch-instructions %v, want 1e5 scaled ×4", v)
	}
}

// A reload builds new counters, which continue the old values (Carry),
// and a new table and Source, whose ratios remember no client: each
// client's first fetch after it gets the agent's interval, which starts
// when the new counters were opened, from the values they carried over,
// so it never spans the reload: the counts between the old generation's
// last read and the new one's open are in neither. The next fetch has the
// client's own interval again.
func TestRatioAfterReload(t *testing.T) {
	const name = "perfevent.ratio.faults_per_second"
	old := newRig(t)
	old.fake.Add("cpu-clock", 0, 1e6, 1, 1)
	old.fetch(name)
	old.fake.Add("page-faults", 0, 10, 1, 1)
	old.fake.Add("cpu-clock", 0, 1e6, 1, 1)
	if got := old.fetch(name)[0]; got[0] != 10e3 {
		t.Fatalf("before the reload: %v", got)
	}
	// Counted after the old generation's last fetch: Carry reads the old
	// counters once more, so these are kept too.
	old.fake.Add("page-faults", 0, 1000, 1, 1)

	fake, set, table, src := newSource(t)
	set.Carry(old.set)
	r := rigOf(t, fake, set, table, src)
	fake.Add("page-faults", 0, 30, 1, 1)
	fake.Add("cpu-clock", 0, 1e6, 1, 1)
	if got := r.fetch(name, "perfevent.hwcounters.page_faults.value"); !same(got[0], map[int32]float64{0: 30e3}) || got[1][0] != 1040 {
		t.Errorf("first fetch after the reload: ratio %v (want cpu0 30 faults in 1 ms since the open), page_faults %v (want 1040, carried)", got[0], got[1])
	}
	fake.Add("page-faults", 0, 5, 1, 1)
	fake.Add("cpu-clock", 0, 1e6, 1, 1)
	if got := r.fetch(name)[0]; got[0] != 5e3 {
		t.Errorf("second fetch after the reload: %v, want cpu0 5000", got)
	}
}
