package pmu

import (
	"os"
	"slices"
	"testing"

	"perfevent/internal/pfm"
)

// fakeCatalog is a few of libpfm4's PMUs, with their real ids, for the
// detection rules' unit test; the fixture tests use the real catalog.
func fakeCatalog() []*pfm.PMU {
	intel := func(id int, name string, models ...int) *pfm.PMU {
		return &pfm.PMU{Name: name, ID: id, Family: pfm.FamilyIntelX86, Type: pfm.PMUTypeCore, CPUFamily: 6, CPUModels: models}
	}
	uncore := func(id int, name, perf string) *pfm.PMU {
		return &pfm.PMU{Name: name, ID: id, Family: pfm.FamilyIntelUncore, Type: pfm.PMUTypeUncore, PerfName: perf}
	}
	other := func(id int, name string, f pfm.Family) *pfm.PMU {
		return &pfm.PMU{Name: name, ID: id, Family: f, Type: pfm.PMUTypeCore}
	}
	nhmUnc := intel(17, "nhm_unc", 26, 30, 31)
	nhmUnc.Type, nhmUnc.PerfName = pfm.PMUTypeUncore, "uncore"
	return []*pfm.PMU{
		other(7, "netburst", pfm.FamilyIntelX86),
		other(8, "netburst_p", pfm.FamilyIntelX86),
		intel(15, "nhm", 26, 30, 31),
		nhmUnc,
		other(18, "ix86arch", pfm.FamilyIntelX86),
		{Name: "perf", ID: 51, Family: pfm.FamilyPerf, Type: pfm.PMUTypeOSGeneric},
		other(56, "amd64_k8_revb", pfm.FamilyAMD64),
		other(60, "amd64_k8_revf", pfm.FamilyAMD64),
		other(62, "amd64_fam10h_barcelona", pfm.FamilyAMD64),
		other(64, "amd64_fam10h_istanbul", pfm.FamilyAMD64),
		other(70, "amd64_fam15h_interlagos", pfm.FamilyAMD64),
		intel(71, "snb_ep", 45),
		uncore(89, "snbep_unc_imc0", "uncore_imc_0"),
		intel(104, "hsw", 60, 69, 70),
		other(109, "power8", pfm.FamilyPower),
		{Name: "rapl", ID: 110, Family: pfm.FamilyIntelRAPL, Type: pfm.PMUTypeUncore, PerfName: "power"},
		other(112, "amd64_fam15h_nb", pfm.FamilyAMD64),
		{Name: "perf_raw", ID: 114, Family: pfm.FamilyPerf, Type: pfm.PMUTypeOSGeneric},
		other(198, "powerpc_nest_mcs_read", pfm.FamilyPower),
		other(268, "power9", pfm.FamilyPower),
		other(317, "amd64_fam17h", pfm.FamilyAMD64),
		intel(319, "skx", 85),
		uncore(354, "skx_unc_imc0", "uncore_imc_0"),
		other(436, "arm_thunderx2", pfm.FamilyARM),
		intel(437, "clx", 85),
		other(438, "tx2_dmc0", pfm.FamilyARM),
		other(444, "amd64_fam17h_zen1", pfm.FamilyAMD64),
		other(445, "amd64_fam17h_zen2", pfm.FamilyAMD64),
		other(449, "arm_n1", pfm.FamilyARM),
		other(450, "amd64_fam19h_zen3", pfm.FamilyAMD64),
		{Name: "amd64_rapl", ID: 451, Family: pfm.FamilyAMD64, Type: pfm.PMUTypeUncore},
		{Name: "amd64_fam19h_zen3_l3", ID: 452, Family: pfm.FamilyAMD64, Type: pfm.PMUTypeUncore},
		intel(512, "spr", 143),
		other(514, "amd64_fam19h_zen4", pfm.FamilyAMD64),
		other(516, "arm_v2", pfm.FamilyARM),
		intel(517, "emr", 207),
		uncore(558, "icx_unc_imc0", "uncore_imc_0"),
		intel(597, "adl_glc", 151, 154, 183, 186, 191),
		intel(598, "adl_grt", 151, 154, 183, 186, 191),
		uncore(599, "spr_unc_imc0", "uncore_imc_0"),
		intel(675, "gnr", 173, 174),
		other(676, "amd64_fam1ah_zen5", pfm.FamilyAMD64),
		{Name: "amd64_fam1ah_zen5_l3", ID: 677, Family: pfm.FamilyAMD64, Type: pfm.PMUTypeUncore, PerfName: "amd_l3"},
		uncore(684, "gnr_unc_imc0", "uncore_imc_0"),
		other(698, "amd64_fam1ah_zen6", pfm.FamilyAMD64),
		{Name: "amd64_fam1ah_zen6_l3", ID: 699, Family: pfm.FamilyAMD64, Type: pfm.PMUTypeUncore, PerfName: "amd_l3"},
	}
}

// catalog hands its source's order on as libpfm4's; a fake catalog must
// keep to the ids' order as the generated one does.
func TestFakeCatalogByID(t *testing.T) {
	pmus := fakeCatalog()
	for i := 1; i < len(pmus); i++ {
		if pmus[i-1].ID >= pmus[i].ID {
			t.Errorf("fakeCatalog: %s (id %d) before %s (id %d)", pmus[i-1].Name, pmus[i-1].ID, pmus[i].Name, pmus[i].ID)
		}
	}
}

// Detection by the generated catalog's sketches activates, in the same
// order, the PMUs that Detect finds walking the catalog itself: for every
// fixture, and for CPUs of each vendor's families and models with every
// kernel PMU present, none, and some.
func TestDetectCatalogIsDetect(t *testing.T) {
	var cpus []CPUInfo
	dirs, err := os.ReadDir("testdata")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		fs := testFS(d.Name())
		if c, err := fs.CPUInfo(); err == nil {
			cpus = append(cpus, c)
		}
	}
	if len(cpus) < 15 {
		t.Fatalf("%d fixtures with a cpuinfo, want the 15 or more of testdata", len(cpus))
	}
	perfmon := CPUFlags("fpu arch_perfmon pni")
	for _, fam := range []int{5, 6, 15, 16, 17, 18, 20, 21, 22, 23, 25, 26} {
		for model := 0; model < 256; model++ {
			for _, stepping := range []int{0, 4, 5} {
				cpus = append(cpus,
					CPUInfo{Vendor: "GenuineIntel", Family: fam, Model: model, Stepping: stepping, Flags: perfmon},
					CPUInfo{Vendor: "AuthenticAMD", Family: fam, Model: model, Stepping: stepping})
			}
		}
	}
	for _, a := range armParts {
		cpus = append(cpus, CPUInfo{Implementer: a.implementer, Part: a.part, HasArchitecture: true,
			ARMCores: []ARMCore{{a.implementer, a.part}, {0x41, 0xd05}}})
	}
	for _, p := range powerPVRs {
		for _, pvr := range p.pvrs {
			cpus = append(cpus, CPUInfo{PVR: pvr})
		}
	}
	cpus = append(cpus, CPUInfo{})
	devices := map[string]func(string) bool{
		"every": func(string) bool { return true },
		"no":    func(string) bool { return false },
		// Some kernel PMUs but not others, by their names.
		"odd-named": func(n string) bool { return len(n)%2 == 1 },
	}
	var active int
	for _, c := range cpus {
		for dn, device := range devices {
			want := Detect(c, pfm.ArchPMUsByID(c.arch()), device)
			got := detectCatalog(c, c.arch(), device)
			if !slices.Equal(got, want) {
				t.Errorf("%+v, %s kernel PMU: sketches detect %v, Detect %v", c, dn, pmuNames(got), pmuNames(want))
			}
			active += len(got)
		}
	}
	if active < 3*len(cpus) {
		t.Errorf("%d PMUs active over %d machines: the sweep detects too little to compare", active, len(cpus)*len(devices))
	}
}

func pmuNames(pmus []*pfm.PMU) []string {
	var out []string
	for _, p := range pmus {
		out = append(out, p.Name)
	}
	return out
}
