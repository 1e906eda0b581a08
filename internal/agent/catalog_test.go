package agent

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"perfevent/internal/counter"
	"perfevent/internal/counter/countertest"
	"perfevent/internal/hostfs"
	"perfevent/internal/pmu"
)

// TestCheckShowsTheCatalog: with no edits to the shipped configuration,
// --check on a Skylake-SP names the family, shows each catalog metric with
// its formula and source, a product of ratios too; ratios.conf turns a
// group off.
func TestCheckShowsTheCatalog(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "perfevent.conf")
	src, err := os.ReadFile("../../perfevent.conf")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(conf, src, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ratios.conf"), []byte("disable mpki\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join("..", "pmu", "testdata", "skylake")
	var out strings.Builder
	if _, err := Check(Options{Config: conf, FS: &pmu.FS{FS: hostfs.FS{Sys: filepath.Join(root, "sys"), Proc: filepath.Join(root, "proc")}, Tracing: []string{filepath.Join(dir, "none")}}}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"catalog: this machine is Intel Skylake-SP / Cascade Lake, 4 general-purpose counters a perf group",
		"catalog topdown: perfevent.ratio.topdown_retiring = UOPS_RETIRED:RETIRE_SLOTS / cycles × 0.25: not served:",
		"source: Intel perfmon SKX/metrics/skylakex_metrics.json (TMA 5.01), Retiring",
		"catalog topdown_l2: perfevent.ratio.topdown_memory_bound = (CYCLE_ACTIVITY:STALLS_MEM_ANY + EXE_ACTIVITY:BOUND_ON_STORES) × (4 × cycles - ",
		"catalog: perfevent.ratio.l1d_mpki turned off in " + filepath.Join(dir, "ratios.conf"),
		"catalog: UOPS_ISSUED:ANY: libpfm4",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("--check lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "L1D:REPLACEMENT") {
		t.Errorf("--check opens l1d_mpki's event though ratios.conf turned mpki off:\n%s", out.String())
	}
}

// TestGroupingHonoursJoinSoftware: the catalog's ratios are grouped with
// the events the counters are opened to read in the software group
// (counter.Config.JoinSoftware) taking no counter. Joined, as the agent
// joins msr by default, APERF, MPERF and the TSC need no perf group; not
// joined (an empty JoinSoftware), their ratios get one.
func TestGroupingHonoursJoinSoftware(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "perfevent.conf")
	src, err := os.ReadFile("../../perfevent.conf")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(conf, src, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		join  []uint32
		group string
	}{
		{nil, ""},
		{[]uint32{}, "busy_share+frequency_relative+frequency_average_hz"},
	} {
		o := Options{Config: conf, FS: fixtureFS("skylake", filepath.Join(dir, "none"))}
		files := holdFiles(&o)
		r, err := ready(&o, files)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.open(&o, counter.Config{Opener: countertest.New(), JoinSoftware: tc.join}); err != nil {
			t.Fatal(err)
		}
		files.Close()
		i := slices.IndexFunc(r.specs, func(sp counter.Spec) bool { return sp.Name == "msr.mperf" })
		if i < 0 {
			t.Fatalf("JoinSoftware %v: msr.mperf is not opened", tc.join)
		}
		if g := r.specs[i].Group; g != tc.group {
			t.Errorf("JoinSoftware %v: msr.mperf in group %q, want %q", tc.join, g, tc.group)
		}
	}
}
