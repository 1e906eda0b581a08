package pmu

import (
	"slices"
	"strings"

	"perfevent/internal/pfm"
)

// Detect returns the PMUs of the catalog that libpfm4 (at the commit the
// catalog comes from) activates on a machine with this CPU and these
// kernel PMUs, in the catalog's order.
// device reports whether the kernel has a PMU of that name (sysfs
// bus/event_source/devices/NAME); libpfm4 asks it of most uncore PMUs and
// of RAPL, which it activates only when the kernel can open them.
//
// The rules are libpfm4's pmu_detect and os_detect callbacks, restated on
// the facts /proc/cpuinfo gives instead of CPUID: the kernel derives its
// "cpu family", "model" and "stepping" from CPUID leaf 1 the same way
// libpfm4 does, and its arch_perfmon flag from leaf 0xa. docs/libpfm4-detection.md
// lists the rules and where they come from.
func Detect(cpu CPUInfo, pmus []*pfm.PMU, device func(string) bool) []*pfm.PMU {
	var active []*pfm.PMU
	for _, p := range pmus {
		if detects(cpu, p, device) {
			active = append(active, p)
		}
	}
	return active
}

func detects(c CPUInfo, p *pfm.PMU, device func(string) bool) bool {
	name := p.Name
	switch {
	case p.Family == pfm.FamilyPerf || name == "perf" || name == "perf_raw":
		return true
	case c.Vendor == "GenuineIntel":
		return intelDetects(c, p, device)
	case c.Vendor == "AuthenticAMD":
		return amdDetects(c, name)
	case c.Implementer != 0 || c.Part != 0:
		return armDetects(c, name)
	case c.PVR != 0:
		return powerDetects(name, c.PVR)
	}
	return false
}

// intelUncoreModels gives, for each uncore generation, the model its
// detect callback accepts, and whether libpfm4 also asks for the kernel PMU
// (its perf_name): every generation does but Sandy Bridge-EP's, whose unit
// PMUs are active on every SNB-EP, kernel support or not.
var intelUncoreModels = []struct {
	prefix   string
	models   []int
	osDetect bool
}{
	{"snbep_unc_", []int{45}, false},
	{"ivbep_unc_", []int{62}, true},
	{"hswep_unc_", []int{63}, true},
	{"bdx_unc_", []int{79, 86}, true},
	{"knl_unc_", []int{87}, true},
	{"knm_unc_", []int{133}, true},
	{"skx_unc_", []int{85}, true},
	// Added after 4.13: Ice Lake-SP, Sapphire and Emerald Rapids, Granite
	// Rapids (X and D).
	{"icx_unc_", []int{106}, true},
	{"spr_unc_", []int{143, 207}, true},
	{"gnr_unc_", []int{173, 174}, true},
	// The client C-box PMUs: snb_unc_cbo0..3 and ivb_unc_cbo0..3.
	{"snb_unc_", []int{42}, true},
	{"ivb_unc_", []int{58}, true},
}

// raplModels are the family 6 models libpfm4's rapl PMU accepts.
var raplModels = []int{
	42, 58, 60, 69, 70, 61, 71, 92, 95, 102, 122, // client and Atom
	45, 62, // SandyBridge-EP, IvyBridge-EP
	78, 94, 142, 158, 165, 166, 125, 126, 157, // Skylake to Ice Lake client
	63, 79, 86, 85, 106, 108, 143, // Haswell-EP to Sapphire Rapids
}

func intelDetects(c CPUInfo, p *pfm.PMU, device func(string) bool) bool {
	name := p.Name
	switch name {
	case "ix86arch":
		// CPUID leaf 0xa with a version >= 1, which the kernel reports as
		// arch_perfmon; never on Pentium 4 (family 15) or older than P5.
		return c.Family >= 5 && c.Family != 15 && c.Flags.Has("arch_perfmon")
	case "netburst":
		return c.Family == 15 && c.Model != 3 && c.Model != 4 && c.Model != 6
	case "netburst_p":
		return c.Family == 15 && (c.Model == 3 || c.Model == 4 || c.Model == 6)
	case "rapl":
		return c.Family == 6 && slices.Contains(raplModels, c.Model) && device(p.PerfName)
	}
	for _, u := range intelUncoreModels {
		if strings.HasPrefix(name, u.prefix) {
			// libpfm4's detect callbacks skip their family test on
			// Intel CPUs (a missing return), so only the model counts.
			return slices.Contains(u.models, c.Model) && (!u.osDetect || device(p.PerfName))
		}
	}
	if p.CPUFamily == 0 || c.Family != p.CPUFamily || !slices.Contains(p.CPUModels, c.Model) {
		return false
	}
	// Skylake-SP and Cascade Lake share model 85; libpfm4 tells them by
	// stepping.
	switch name {
	case "skx":
		return c.Stepping < 5
	case "clx":
		return c.Stepping >= 5
	}
	return true
}

// amdRevision is libpfm4's amd64_get_revision: the one AMD core PMU model
// of a CPU, by family, model and (for K8) stepping, or "" when libpfm4
// does not know the CPU, in which case no AMD PMU is active at all.
func amdRevision(c CPUInfo) string {
	switch c.Family {
	case 6:
		return "amd64_k7"
	case 15:
		switch c.Model >> 4 {
		case 0:
			if (c.Model == 5 && c.Stepping < 2) || (c.Model == 4 && c.Stepping == 0) {
				return "amd64_k8_revb"
			}
			return "amd64_k8_revc"
		case 1:
			return "amd64_k8_revd"
		case 2, 3:
			return "amd64_k8_reve"
		case 4, 5, 0xc:
			return "amd64_k8_revf"
		case 6, 7, 8:
			return "amd64_k8_revg"
		}
		return "amd64_k8_revb"
	case 0x10:
		switch c.Model {
		case 4, 5, 6:
			return "amd64_fam10h_shanghai"
		case 8, 9:
			return "amd64_fam10h_istanbul"
		}
		return "amd64_fam10h_barcelona"
	case 0x11:
		return "amd64_fam11h_turion"
	case 0x12:
		return "amd64_fam12h_llano"
	case 0x14:
		return "amd64_fam14h_bobcat"
	case 0x15:
		return "amd64_fam15h_interlagos"
	case 0x16:
		return "amd64_fam16h"
	case 0x17:
		if c.Model >= 48 {
			return "amd64_fam17h_zen2"
		}
		return "amd64_fam17h_zen1"
	case 0x19:
		// Zen 4 is models 0x10-0x1f and 0x60 up, Zen 3 the rest. (4.13
		// knew only Genoa, 0x11, of Zen 4, and no Zen 3 past 0x5f.)
		if c.Model >= 0x60 || (c.Model >= 0x10 && c.Model <= 0x1f) {
			return "amd64_fam19h_zen4"
		}
		return "amd64_fam19h_zen3"
	case 0x1a:
		// Zen 5 is models 0-0x4f and 0x60-0x7f, Zen 6 the rest.
		if c.Model <= 0x4f || (c.Model >= 0x60 && c.Model <= 0x7f) {
			return "amd64_fam1ah_zen5"
		}
		return "amd64_fam1ah_zen6"
	}
	return ""
}

// amdCompanions are the PMUs detected by another PMU's revision: the
// northbridge and L3 PMUs, the deprecated fam17h name, and RAPL. It and
// powerPVRs are slices, not maps, so that they are data in the binary
// rather than maps every start builds.
var amdCompanions = []struct {
	name string
	revs []string
}{
	{"amd64_fam15h_nb", []string{"amd64_fam15h_interlagos"}},
	{"amd64_fam17h", []string{"amd64_fam17h_zen1"}},
	{"amd64_fam19h_zen3_l3", []string{"amd64_fam19h_zen3"}},
	{"amd64_fam1ah_zen5_l3", []string{"amd64_fam1ah_zen5"}},
	{"amd64_fam1ah_zen6_l3", []string{"amd64_fam1ah_zen6"}},
	{"amd64_rapl", []string{"amd64_fam17h_zen2", "amd64_fam19h_zen3", "amd64_fam19h_zen4"}},
}

func amdDetects(c CPUInfo, name string) bool {
	rev := amdRevision(c)
	if rev == "" {
		return false
	}
	for _, c := range amdCompanions {
		if c.name == name {
			return slices.Contains(c.revs, rev)
		}
	}
	return name == rev
}

// armParts are the 64-bit ARM cores libpfm4 knows, by "CPU implementer"
// and "CPU part" (the MIDR's), with the uncore PMUs that come with the
// core (ThunderX2's tx2_*, Kunpeng's hisi_sccl*), which libpfm4 detects by
// the core alone.
var armParts = []struct {
	implementer, part int
	name, uncore      string
}{
	{0x41, 0xd03, "arm_ac53", ""},
	{0x41, 0xd05, "arm_ac55", ""},
	{0x41, 0xd07, "arm_ac57", ""},
	{0x41, 0xd08, "arm_ac72", ""},
	{0x41, 0xd0b, "arm_ac76", ""},
	{0x41, 0xd0c, "arm_n1", ""},
	{0x41, 0xd40, "arm_v1", ""},
	{0x41, 0xd49, "arm_n2", ""},
	{0x41, 0xd4f, "arm_v2", ""},
	{0x41, 0xd82, "arm_x4", ""},
	{0x41, 0xd84, "arm_v3", ""},
	{0x41, 0xd8e, "arm_n3", ""},
	{0x42, 0x516, "arm_thunderx2", "tx2_"},
	{0x43, 0x0af, "arm_thunderx2", "tx2_"},
	{0x46, 0x001, "arm_a64fx", ""},
	{0x46, 0x003, "arm_monaka", ""},
	{0x48, 0xd01, "arm_kunpeng", "hisi_sccl"},
	{0x4e, 0x010, "arm_olympus", ""},
	{0x50, 0x000, "arm_xgene", ""},
}

// armDetects: libpfm4 activates the PMU of every kind of core the
// machine has (both on big.LITTLE), and insists on a "CPU architecture"
// line. libpfm4 4.13 looked at the first processor only.
func armDetects(c CPUInfo, name string) bool {
	cores := c.ARMCores
	if len(cores) == 0 && c.HasArchitecture {
		cores = []ARMCore{{c.Implementer, c.Part}}
	}
	for _, core := range cores {
		for _, a := range armParts {
			if core.Implementer != a.implementer || core.Part != a.part {
				continue
			}
			if name == a.name || a.uncore != "" && strings.HasPrefix(name, a.uncore) {
				return true
			}
		}
	}
	return false
}

// powerPVRs gives the processor versions each POWER PMU accepts.
var powerPVRs = []struct {
	name string
	pvrs []int
}{
	{"power4", []int{0x35, 0x38}},
	{"ppc970", []int{0x39, 0x3c, 0x45}},
	{"ppc970mp", []int{0x44}},
	{"power5", []int{0x3a}},
	{"power5p", []int{0x3b}},
	{"power6", []int{0x3e}},
	{"power7", []int{0x3f, 0x4a}},
	{"power8", []int{0x4b, 0x4c, 0x4d}},
	{"power9", []int{0x4e}},
	{"power10", []int{0x80}},
	{"powerpc_nest_mcs_read", []int{0x4d}},
	{"powerpc_nest_mcs_write", []int{0x4d}},
}

// powerDetects reports whether the POWER PMU name accepts the processor
// version pvr.
func powerDetects(name string, pvr int) bool {
	for _, p := range powerPVRs {
		if p.name == name {
			return slices.Contains(p.pvrs, pvr)
		}
	}
	return false
}
