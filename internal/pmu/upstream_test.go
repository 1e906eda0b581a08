package pmu

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"perfevent/internal/hostfs"
)

// TestZen5Listing: on the Zen 5 virtual machine of the vm fixture (this
// project's test machine: family 0x1a model 2, no kernel core PMU)
// --list-events --pmu amd64_fam1ah_zen5 lists the 81 events libpfm4
// upstream counts for it, each one resolves, and the L3's are marked as
// needing the kernel's amd_l3 PMU, which the machine lacks.
func TestZen5Listing(t *testing.T) {
	fs := testFS("vm")
	all, _ := fs.ListEvents()
	ls, err := FilterListings(all, "amd64_fam1ah_zen5", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 81 {
		t.Errorf("amd64_fam1ah_zen5: %d events listed, libpfm4 counts 81", len(ls))
	}
	for _, l := range ls {
		name := l.Name
		if len(l.Umasks) > 0 {
			name += ":" + l.Umasks[0].Name
		}
		ev, err := fs.Resolve(name)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if ev.PMU != "amd64_fam1ah_zen5" || ev.Attr.Type != 4 {
			t.Errorf("%s: PMU %s type %d, want amd64_fam1ah_zen5 type 4", name, ev.PMU, ev.Attr.Type)
		}
	}
	l3, _ := FilterListings(all, "amd64_fam1ah_zen5_l3", "")
	if len(l3) == 0 {
		t.Fatal("amd64_fam1ah_zen5_l3 lists nothing")
	}
	for _, l := range l3 {
		if l.Err == nil {
			t.Errorf("%s: listed as usable without an amd_l3 kernel PMU", l.Name)
		}
	}
	// A section naming the CPU's PMU is not chosen without a core PMU.
	for _, n := range fs.PresentNames() {
		if n != "perf" && n != "perf_raw" {
			t.Errorf("PresentNames has %s on a machine without a core PMU", n)
		}
	}
}

// libpfm4 upstream takes a kernel PMU only if its directory has
// perf_event_mux_interval_ms, which every PMU of a real kernel has; the
// agent reads the type file as 4.13 did, so a sysfs without those files
// (a container's) keeps its uncore: here an Ice Lake-SP IMC.
func TestTypeWithoutMuxFile(t *testing.T) {
	root := t.TempDir()
	cpuinfo, err := os.ReadFile(filepath.Join("testdata", "icelake-sp", "proc", "cpuinfo"))
	if err != nil {
		t.Fatal(err)
	}
	for path, text := range map[string]string{
		"proc/cpuinfo":                                       string(cpuinfo),
		"sys/devices/system/cpu/online":                      "0-3\n",
		"sys/bus/event_source/devices/cpu/type":              "4\n",
		"sys/bus/event_source/devices/cpu/events/cpu-cycles": "event=0x3c\n",
		"sys/bus/event_source/devices/uncore_imc_0/type":     "42\n",
		"sys/bus/event_source/devices/uncore_imc_0/cpumask":  "0\n",
	} {
		p := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fs := &FS{FS: hostfs.FS{Sys: filepath.Join(root, "sys"), Proc: filepath.Join(root, "proc")}}
	ev, err := fs.Resolve("icx_unc_imc0::UNC_M_CAS_COUNT:RD")
	if err != nil {
		t.Fatal(err)
	}
	if ev.PMU != "icx_unc_imc0" || ev.Attr.Type != 42 || !slices.Equal(ev.CPUs, []int{0}) {
		t.Errorf("PMU %s type %d CPUs %v, want icx_unc_imc0 type 42 CPUs [0]", ev.PMU, ev.Attr.Type, ev.CPUs)
	}
}
