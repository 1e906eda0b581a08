package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"perfevent/internal/hostfs"
	"perfevent/internal/pmu"
)

// TestCheckShowsTheCatalog: with no edits to the shipped configuration,
// --check on a Skylake-SP names the family, shows each catalog metric with
// its formula and source, and says what the vendor defines that is not
// served and why; ratios.conf turns a group off.
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
		"catalog topdown_l2: perfevent.ratio.topdown_memory_bound not served on Intel Skylake-SP / Cascade Lake: a product of two ratios",
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
