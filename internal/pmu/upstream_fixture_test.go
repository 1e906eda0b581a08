package pmu

import (
	"slices"
	"strings"
	"testing"
)

// TestUpstreamFamilies: on a fixture of each CPU that libpfm4 knows only
// since 4.13, --list-events --pmu P lists as many events as libpfm4
// upstream counts for P (pfmoracle -l with LIBPFM_FORCE_PMU=P), and each
// listed event, with its first unit mask, resolves on P, opened through
// the kernel PMU libpfm4 names (its type, and its CPUs: an uncore's
// cpumask, a hybrid core's cpus).
func TestUpstreamFamilies(t *testing.T) {
	for _, tc := range []struct {
		fixture string
		pmus    map[string]int // libpfm4's PMU name to its event count
	}{
		{"zen5", map[string]int{"amd64_fam1ah_zen5": 81, "amd64_fam1ah_zen5_l3": 1}},
		{"sapphirerapids", map[string]int{"spr": 73, "spr_unc_imc0": 43, "spr_unc_cha1": 55, "spr_unc_upi2": 36}},
		{"graniterapids", map[string]int{"gnr": 75, "gnr_unc_imc7": 22}},
		{"icelake-sp", map[string]int{"icx": 71, "icx_unc_imc0": 59, "icx_unc_cha0": 131, "icx_unc_upi0": 36}},
		{"alderlake", map[string]int{"adl_glc": 68, "adl_grt": 27}},
		{"neoverse-v2", map[string]int{"arm_v2": 160}},
		{"neoverse-v3", map[string]int{"arm_v3": 228}},
		{"biglittle", map[string]int{"arm_ac55": 112, "arm_ac76": 107}},
	} {
		fs := testFS(tc.fixture)
		all, _ := fs.ListEvents()
		for pmuName, n := range tc.pmus {
			ls, err := FilterListings(all, pmuName, "")
			if err != nil {
				t.Fatalf("%s: %v", tc.fixture, err)
			}
			if len(ls) != n {
				t.Errorf("%s: %s lists %d events, libpfm4 counts %d", tc.fixture, pmuName, len(ls), n)
			}
			resolved := 0
			for _, l := range ls {
				if l.Err != nil {
					t.Errorf("%s: %s: %v", tc.fixture, l.Name, l.Err)
					continue
				}
				name := l.Name
				if len(l.Umasks) > 0 {
					name += ":" + l.Umasks[0].Name
				}
				ev, err := fs.Resolve(name)
				if err != nil {
					t.Errorf("%s: %s: %v", tc.fixture, name, err)
					continue
				}
				wantType, wantCPUs := kernelSide(t, fs, tc.fixture, pmuName)
				if ev.PMU != pmuName || ev.Attr.Type != wantType || !slices.Equal(ev.CPUs, wantCPUs) {
					t.Errorf("%s: %s: PMU %s type %d CPUs %v, want %s type %d CPUs %v",
						tc.fixture, name, ev.PMU, ev.Attr.Type, ev.CPUs, pmuName, wantType, wantCPUs)
					continue
				}
				resolved++
			}
			if resolved == 0 {
				t.Errorf("%s: nothing of %s resolves", tc.fixture, pmuName)
			}
		}
	}
}

// kernelSide is the perf_event type and CPUs an event of a libpfm4 PMU
// must have on a fixture, from the fixture's sysfs: the kernel PMU of the
// perf_name (uncore, AMD L3, hybrid cores), else PERF_TYPE_RAW on every CPU.
func kernelSide(t *testing.T, fs *FS, fixture, pmuName string) (uint32, []int) {
	t.Helper()
	for _, h := range fs.LibpfmPMUs() {
		if h.Name != pmuName {
			continue
		}
		if h.PerfName == "" {
			return 4, nil
		}
		k, ok := fs.perfNamePMU(h.PerfName)
		if !ok {
			t.Fatalf("%s: no kernel PMU %s", fixture, h.PerfName)
		}
		p, err := fs.PMU(k)
		if err != nil {
			t.Fatal(err)
		}
		return p.Type, p.CPUs
	}
	t.Fatalf("%s: libpfm4 finds no %s (it finds %s)", fixture, pmuName, strings.Join(fs.libpfmNames(), ", "))
	return 0, nil
}

// TestBigLittle: on a machine of Cortex-A55 and A76 cores, each core's
// events open through its own kernel PMU's type and on its CPUs, as
// libpfm4 upstream encodes them (its answers on this fixture, under
// qemu-aarch64: types 8 and 9, an unprefixed name the A55's).
func TestBigLittle(t *testing.T) {
	fs := testFS("biglittle")
	for _, tc := range []struct {
		name, pmu string
		typ       uint32
		cpus      []int
	}{
		{"arm_ac55::INST_RETIRED", "arm_ac55", 8, []int{0, 1, 2, 3}},
		{"arm_ac76::INST_RETIRED", "arm_ac76", 9, []int{4, 5, 6, 7}},
		{"INST_RETIRED", "arm_ac55", 8, []int{0, 1, 2, 3}},
	} {
		ev, err := fs.Resolve(tc.name)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if ev.PMU != tc.pmu || ev.Attr.Type != tc.typ || ev.Attr.Config != 0x8 || !slices.Equal(ev.CPUs, tc.cpus) {
			t.Errorf("%s: PMU %s type %d config %#x CPUs %v, want %s type %d config 0x8 CPUs %v",
				tc.name, ev.PMU, ev.Attr.Type, ev.Attr.Config, ev.CPUs, tc.pmu, tc.typ, tc.cpus)
		}
	}
}
