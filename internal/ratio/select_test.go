package ratio

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"perfevent/internal/counter"
	"perfevent/internal/counter/countertest"
)

func spec(name string, typ uint32, cpus ...int) counter.Spec {
	return counter.Spec{Name: name, Attr: unix.PerfEventAttr{Type: typ}, CPUs: cpus}
}

func TestGroup(t *testing.T) {
	hw, sw := uint32(unix.PERF_TYPE_HARDWARE), uint32(unix.PERF_TYPE_SOFTWARE)
	specs := []counter.Spec{
		spec("cycles", hw, 0), spec("instructions", hw, 0),
		spec("branch-instructions", hw, 0), spec("branch-misses", hw, 0),
		spec("cache-misses", hw, 0), // cache-references is not configured
		spec("cpu-clock", sw, 0), spec("context-switches", sw, 0),
		spec("page-faults", sw, 0),
	}
	specs = append(specs, spec("cpu.slots", 4, 0), spec("cpu.topdown-retiring", 4, 0), spec("cpu.topdown-be-bound", 4, 0))
	Group(specs, Builtin)
	want := map[string]string{
		"cycles": "ipc+cpi", "instructions": "ipc+cpi",
		"branch-instructions": "branch_miss_ratio", "branch-misses": "branch_miss_ratio",
		"cache-misses": "",                         // no ratio to serve
		"cpu-clock":    "", "context-switches": "", // grouped as software events
		"page-faults": "",
		// The TopDown shares are one group of slots and its metrics.
		"cpu.slots": "topdown_retiring+topdown_backend_bound", "cpu.topdown-retiring": "topdown_retiring+topdown_backend_bound",
		"cpu.topdown-be-bound": "topdown_retiring+topdown_backend_bound",
	}
	for _, sp := range specs {
		if sp.Group != want[sp.Name] {
			t.Errorf("%s: group %q, want %q", sp.Name, sp.Group, want[sp.Name])
		}
	}
}

// selectSet opens five events on a fake, where cycles fails on every CPU
// and page-faults counts on CPU 1 alone.
func selectSet(t *testing.T) *counter.Set {
	t.Helper()
	fake := countertest.New()
	fake.FailOpen("cycles", countertest.AnyCPU, unix.ENOENT)
	set, err := counter.New([]counter.Spec{
		spec("cycles", unix.PERF_TYPE_HARDWARE, 0, 1), spec("instructions", unix.PERF_TYPE_HARDWARE, 0, 1),
		spec("cpu-clock", unix.PERF_TYPE_SOFTWARE, 0, 1), spec("context-switches", unix.PERF_TYPE_SOFTWARE, 0, 1),
		spec("page-faults", unix.PERF_TYPE_SOFTWARE, 1),
	}, counter.Config{Opener: fake})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := set.Open(); err != nil {
		t.Fatal(err)
	}
	return set
}

func TestSelect(t *testing.T) {
	set := selectSet(t)
	defs := append([]Def{
		{Name: "faults", Num: []string{"page-faults"}, Den: "cpu-clock", Scale: 1},
		{Name: "context_switches_per_cpu_second", Num: []string{"cpu-migrations"}, Den: "cpu-clock", Scale: 1},
	}, Builtin...)
	chosen, why := Select(defs, set, nil)
	if len(chosen) != 1 || chosen[0].Name != "context_switches_per_cpu_second" || !slices.Equal(chosen[0].Num, []string{"context-switches"}) || len(chosen[0].CPUs) != 2 {
		t.Fatalf("chosen %+v", chosen)
	}
	if why[0] == "" || why[1] == "" || why[2] == "" {
		t.Errorf("why %q: faults (different CPUs), the first definition (cpu-migrations not configured) and ipc (no cycles) should each say why", why)
	}
	t.Logf("%q", why)
}

func TestChoose(t *testing.T) {
	fake := countertest.New()
	set, err := counter.New([]counter.Spec{
		spec("cpu-clock", unix.PERF_TYPE_SOFTWARE, 0), spec("context-switches", unix.PERF_TYPE_SOFTWARE, 0),
		spec("page-faults", unix.PERF_TYPE_SOFTWARE, 0),
	}, counter.Config{Opener: fake})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := set.Open(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ratios.conf")
	text := "faults_per_cpu_second = page-faults / cpu-clock * 1e9 per-second\nnonsense\nipc2 = instructions / cycles\n"
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	chosen, problems, info := Choose(path, set, nil)
	if len(chosen) != 2 || chosen[0].Name != "faults_per_cpu_second" || chosen[1].Name != "context_switches_per_cpu_second" {
		t.Errorf("chosen %+v", chosen)
	}
	if len(problems) != 1 || !strings.Contains(problems[0].Error(), "ratios.conf:2:") {
		t.Errorf("problems %v, want line 2's", problems)
	}
	want := []string{
		`ratio "ipc2" not served: instructions and cycles not counted here (not configured, or opened on no CPU)`,
		"perfevent.ratio.faults_per_cpu_second = page-faults / cpu-clock × 1e+09, on 1 CPUs",
		"perfevent.ratio.context_switches_per_cpu_second = context-switches / cpu-clock × 1e+09, on 1 CPUs",
	}
	if strings.Join(info, "\n") != strings.Join(want, "\n") {
		t.Errorf("info:\n%s\nwant:\n%s", strings.Join(info, "\n"), strings.Join(want, "\n"))
	}
}

// The bytes of a count are the kernel's scale in its unit; without a
// size from the kernel, a CAS is a 64-byte line.
func TestBytesPerCount(t *testing.T) {
	scales := func(event string) (float64, string, bool) {
		switch event {
		case "imc.read":
			return 6.103515625e-5, "MiB", true
		case "df.read":
			return 0.5, "MB", true
		case "odd":
			return 3, "Joules", true
		}
		return 0, "", false
	}
	for event, want := range map[string]float64{"imc.read": 64, "df.read": 5e5, "odd": BytesPerCAS, "none": BytesPerCAS} {
		if got := bytesPerCount(event, scales); got != want {
			t.Errorf("%s: %v bytes per count, want %v", event, got, want)
		}
	}
	if got := bytesPerCount("imc.read", nil); got != BytesPerCAS {
		t.Errorf("no scales: %v", got)
	}
}

func TestMatch(t *testing.T) {
	names := []string{"uncore_imc_0.cas_count_read", "", "uncore_imc_1.cas_count_read", "skx_unc_imc0::UNC_M_CAS_COUNT:RD", "cycles"}
	for term, want := range map[string][]int{
		"uncore_imc_*.cas_count_read":                                {0, 2},
		"*_unc_imc*::UNC_M_CAS_COUNT:RD|uncore_imc_*.cas_count_read": {3}, // the first alternative that matches
		"nothing|cycles":              {4},
		"uncore_imc_1.cas_count_read": {2},
		"":                            nil,
		"uncore_imc_[":/* a bad pattern matches only itself */ nil,
	} {
		if got := match(term, names); !slices.Equal(got, want) {
			t.Errorf("match(%q) = %v, want %v", term, got, want)
		}
	}
}

// TestMatchAsGlobbing: match compares plain alternatives without a glob
// match, and finds what globbing every alternative finds.
func TestMatchAsGlobbing(t *testing.T) {
	glob := func(term string, names []string) []int {
		var evs []int
		for _, alt := range strings.Split(term, "|") {
			for i, name := range names {
				if ok, _ := path.Match(alt, name); name != "" && (ok || alt == name) {
					evs = append(evs, i)
				}
			}
			if len(evs) > 0 {
				break
			}
		}
		return evs
	}
	names := []string{"cycles", "", "instructions", "INST_RETIRED:ANY_P", "a[b", `x\y`, "x*y", "imc0.read", "imc1.read", "sched:sched_switch"}
	alts := []string{"cycles", "instructions", "INST_RETIRED:ANY_P", "a[b", `x\y`, "x*y", "x?y", "imc*.read", "imc[01].read", "imc[", `imc\0.read`, "sched:*", "nothing", ""}
	for _, a := range alts {
		for _, b := range alts {
			for _, term := range []string{a, a + "|" + b} {
				if got, want := match(term, names), glob(term, names); !slices.Equal(got, want) {
					t.Errorf("match(%q) = %v; globbing every alternative gives %v", term, got, want)
				}
			}
		}
	}
}

// TestGroupFit: a ratio whose operands would overflow the PMU's counters
// together with the group they would join stays out of it and is named.
func TestGroupFit(t *testing.T) {
	hw := uint32(unix.PERF_TYPE_HARDWARE)
	specs := []counter.Spec{spec("cycles", hw, 0), spec("a", hw, 0), spec("b", hw, 0), spec("c", hw, 0), spec("d", hw, 0)}
	defs := []Def{
		{Name: "ab", Num: []string{"a", "b"}, Den: "cycles", Scale: 1},
		{Name: "cd", Num: []string{"c", "d"}, Den: "cycles", Scale: 1},
	}
	fit := Fit{Counters: 3, Free: func(sp counter.Spec) bool { return sp.Name == "cycles" }}
	apart := GroupFit(specs, defs, fit)
	var got []string
	for _, sp := range specs {
		got = append(got, sp.Name+"="+sp.Group)
	}
	if want := "cycles=ab a=ab b=ab c= d="; strings.Join(got, " ") != want {
		t.Errorf("groups %v, want %s", got, want)
	}
	if len(apart) != 1 || !strings.Contains(apart[0], `ratio "cd": its operands would need 4 counters in one group, the PMU has 3`) {
		t.Errorf("apart %q", apart)
	}
	// With 4 counters both fit in one.
	specs = []counter.Spec{spec("cycles", hw, 0), spec("a", hw, 0), spec("b", hw, 0), spec("c", hw, 0), spec("d", hw, 0)}
	fit.Counters = 4
	if apart := GroupFit(specs, defs, fit); len(apart) != 0 || specs[4].Group != "ab+cd" {
		t.Errorf("with 4 counters: apart %q, d's group %q", apart, specs[4].Group)
	}
}

// TestWeightsAndKernelScale: weighted terms and the kernel's scale enter
// the numerator's weights and the formula.
func TestWeightsAndKernelScale(t *testing.T) {
	hw := uint32(unix.PERF_TYPE_HARDWARE)
	fake := countertest.New()
	set, err := counter.New([]counter.Spec{spec("x", hw, 0), spec("y", hw, 0), spec("power.energy-pkg", 9, 0)}, counter.Config{Opener: fake})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := set.Open(); err != nil {
		t.Fatal(err)
	}
	scales := func(ev string) (float64, string, bool) {
		if ev == "power.energy-pkg" {
			return 0.25, "Joules", true
		}
		return 0, "", false
	}
	defs := []Def{
		{Name: "w", Num: []string{"x", "y"}, Weights: []float64{4, -1}, Den: "x", Scale: 0.25},
		{Name: "e", Num: []string{"power.energy-pkg"}, Den: Elapsed, Scale: 1e9, KernelScale: true},
	}
	chosen, why := Select(defs, set, scales)
	if len(chosen) != 2 {
		t.Fatalf("chosen %d, why %q", len(chosen), why)
	}
	if got := chosen[0].Formula(set); got != "(4 × x - y) / x × 0.25" {
		t.Errorf("formula %q", got)
	}
	if !slices.Equal(chosen[0].NumW, []float64{4, -1}) || !slices.Equal(chosen[1].NumW, []float64{0.25}) {
		t.Errorf("weights %v and %v", chosen[0].NumW, chosen[1].NumW)
	}
	if got := defs[0].Formula(); got != "(4 × x - y) / x × 0.25" {
		t.Errorf("Def.Formula %q", got)
	}
}

// ChooseFrom has Select write only the lines it logs: the same ratios are
// chosen, the lines asked for are Select's, and the others are not written.
func TestSelectSayingOnlyAsked(t *testing.T) {
	set := selectSet(t)
	defer set.Close()
	defs := append([]Def{
		{Name: "faults", Num: []string{"page-faults"}, Den: "cpu-clock", Scale: 1},
		{Name: "bad name", Num: []string{"page-faults"}, Den: "cpu-clock", Scale: 1},
		{Name: "faults", Num: []string{"page-faults"}, Den: "cpu-clock", Scale: 1},
		{Name: "context_switches_per_cpu_second", Num: []string{"cpu-migrations"}, Den: "cpu-clock", Scale: 1},
	}, Builtin...)
	chosen, why := Select(defs, set, nil)
	even := func(i int) bool { return i%2 == 0 }
	chosen2, why2 := selectSaying(defs, set, nil, even)
	if fmt.Sprint(chosen) != fmt.Sprint(chosen2) {
		t.Errorf("chosen %+v, Select chose %+v", chosen2, chosen)
	}
	said := 0
	for i := range defs {
		want := why[i]
		if !even(i) {
			want = ""
		} else if want != "" {
			said++
		}
		if why2[i] != want {
			t.Errorf("why[%d] = %q, want %q", i, why2[i], want)
		}
	}
	if said < 3 {
		t.Errorf("only %d lines asked for and written: %q", said, why)
	}
}
