package pmu

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// CPUInfo is the identity of the first CPU in /proc/cpuinfo, as far as
// libpfm4 looks at it: vendor, family, model and stepping on x86,
// implementer and part on ARM, the processor version on POWER.
type CPUInfo struct {
	Vendor   string // "GenuineIntel", "AuthenticAMD"
	Family   int
	Model    int
	Stepping int
	Flags    map[string]bool

	Implementer int // ARM "CPU implementer", e.g. 0x41 for Arm Ltd
	Part        int // ARM "CPU part", e.g. 0xd0c for Neoverse N1
	PVR         int // POWER processor version, e.g. 0x004e for POWER9
}

// CPUInfo reads <Proc>/cpuinfo up to the end of the first processor.
func (fs *FS) CPUInfo() (CPUInfo, error) {
	path := fs.procPath("cpuinfo")
	f, err := os.Open(path)
	if err != nil {
		return CPUInfo{}, err
	}
	defer f.Close()
	return parseCPUInfo(path, f)
}

func parseCPUInfo(path string, f *os.File) (CPUInfo, error) {
	info := CPUInfo{Flags: map[string]bool{}}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	line := 0
	seenProcessor := false
	for sc.Scan() {
		line++
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		num := func(dst *int) error {
			n, err := strconv.ParseInt(val, 0, 32)
			if err != nil {
				return fmt.Errorf("%s:%d: %s %q is not a number", path, line, key, val)
			}
			*dst = int(n)
			return nil
		}
		var err error
		switch key {
		case "processor":
			if seenProcessor {
				return info, nil
			}
			seenProcessor = true
		case "vendor_id":
			info.Vendor = val
		case "cpu family":
			err = num(&info.Family)
		case "model":
			err = num(&info.Model)
		case "stepping":
			err = num(&info.Stepping)
		case "flags":
			for _, fl := range strings.Fields(val) {
				info.Flags[fl] = true
			}
		case "CPU implementer":
			err = num(&info.Implementer)
		case "CPU part":
			err = num(&info.Part)
		case "revision":
			// POWER: "2.2 (pvr 004e 1202)"; the version is the first half.
			if _, pvr, ok := strings.Cut(val, "(pvr "); ok {
				if v, err := strconv.ParseUint(strings.Fields(pvr)[0], 16, 16); err == nil {
					info.PVR = int(v)
				}
			}
		}
		if err != nil {
			return info, err
		}
	}
	return info, sc.Err()
}

// Intel family 6 model numbers of libpfm4's core PMUs (lib/pfmlib_intel_*.c).
var intelModels = []struct {
	name   string
	models []int
}{
	{"core", []int{15, 23, 29}},
	{"atom", []int{28, 38, 39, 53, 54}},
	{"nhm", []int{26, 30, 31}},
	{"nhm_unc", []int{26, 30, 31}},
	{"nhm_ex", []int{46}},
	{"wsm", []int{37}},
	{"wsm_dp", []int{44, 47}},
	{"wsm_unc", []int{44, 47}},
	{"snb", []int{42}},
	{"snb_ep", []int{45}},
	{"ivb", []int{58}},
	{"ivb_ep", []int{62}},
	{"hsw", []int{60, 69, 70}},
	{"hsw_ep", []int{63}},
	{"bdw", []int{61, 71}},
	{"bdw_ep", []int{79, 86}},
	{"slm", []int{55, 76, 77}},
	{"glm", []int{92, 95}},
	{"tmt", []int{0x86, 0x96}},
	{"knl", []int{87}},
	{"knm", []int{133}},
	{"skl", []int{78, 94, 142, 158, 165, 166}},
	{"icl", []int{108, 125, 126, 140, 141, 157, 167}},
	{"icx", []int{106}},
	{"spr", []int{143}},
	{"emr", []int{207}},
	{"gnr", []int{173, 174}},
	{"adl_glc", []int{0x97, 0x9a, 0xb7, 0xba, 0xbf}},
	{"adl_grt", []int{0x97, 0x9a, 0xb7, 0xba, 0xbf}},
}

// libpfmCoreNames returns the libpfm4 names of the core PMU that CPUID
// identifies, following libpfm4's detection code.
func libpfmCoreNames(c CPUInfo) []string {
	var names []string
	switch c.Vendor {
	case "GenuineIntel":
		// libpfm4 asks CPUID leaf 0xa for an architectural PMU; the
		// kernel shows the same fact as the arch_perfmon flag.
		if c.Flags["arch_perfmon"] && c.Family >= 5 && c.Family != 15 {
			names = append(names, "ix86arch")
		}
		if c.Family != 6 {
			break
		}
		if c.Model == 85 { // Skylake X and Cascade Lake share a model
			if c.Stepping < 5 {
				names = append(names, "skx")
			} else {
				names = append(names, "clx")
			}
		}
		for _, m := range intelModels {
			if slices.Contains(m.models, c.Model) {
				names = append(names, m.name)
			}
		}
	case "AuthenticAMD":
		names = append(names, amdNames(c)...)
	}
	for _, a := range armParts {
		if c.Implementer == a.implementer && c.Part == a.part {
			names = append(names, a.name)
		}
	}
	switch c.PVR {
	case 0x3f, 0x4a:
		names = append(names, "power7")
	case 0x4b, 0x4c, 0x4d:
		names = append(names, "power8")
	case 0x4e:
		names = append(names, "power9")
	case 0x80:
		names = append(names, "power10")
	}
	return names
}

// ARM cores libpfm4 knows, by "CPU implementer" and "CPU part"
// (lib/pfmlib_arm_armv8.c, lib/pfmlib_arm_armv9.c).
var armParts = []struct {
	implementer, part int
	name              string
}{
	{0x41, 0xd03, "arm_ac53"},
	{0x41, 0xd05, "arm_ac55"},
	{0x41, 0xd07, "arm_ac57"},
	{0x41, 0xd08, "arm_ac72"},
	{0x41, 0xd0b, "arm_ac76"},
	{0x41, 0xd0c, "arm_n1"},
	{0x41, 0xd40, "arm_v1"},
	{0x41, 0xd49, "arm_n2"},
	{0x41, 0xd4f, "arm_v2"},
	{0x41, 0xd84, "arm_v3"},
	{0x41, 0xd8e, "arm_n3"},
	{0x42, 0x516, "arm_thunderx2"},
	{0x43, 0xaf, "arm_thunderx2"},
	{0x46, 0x001, "arm_a64fx"},
	{0x48, 0xd01, "arm_kunpeng"},
	{0x50, 0x000, "arm_xgene"},
}

func amdNames(c CPUInfo) []string {
	switch c.Family {
	case 0x10:
		switch c.Model {
		case 4, 5, 6:
			return []string{"amd64_fam10h_shanghai"}
		case 8, 9:
			return []string{"amd64_fam10h_istanbul"}
		}
		return []string{"amd64_fam10h_barcelona"}
	case 0x11:
		return []string{"amd64_fam11h_turion"}
	case 0x12:
		return []string{"amd64_fam12h_llano"}
	case 0x14:
		return []string{"amd64_fam14h_bobcat"}
	case 0x15:
		return []string{"amd64_fam15h_interlagos", "amd64_fam15h_nb"}
	case 0x16:
		return []string{"amd64_fam16h"}
	case 0x17:
		if c.Model >= 48 {
			return []string{"amd64_fam17h_zen2"}
		}
		return []string{"amd64_fam17h_zen1", "amd64_fam17h"}
	case 0x19:
		if c.Model >= 0x60 || (c.Model >= 0x10 && c.Model <= 0x1f) {
			return []string{"amd64_fam19h_zen4"}
		}
		return []string{"amd64_fam19h_zen3", "amd64_fam19h_zen3_l3"}
	case 0x1a:
		return []string{"amd64_fam1ah_zen5", "amd64_fam1ah_zen5_l3"}
	}
	return nil
}

// hasCorePMU reports whether the kernel exposes a core PMU with events.
// Without one, guests whose CPUID still names a real model cannot count
// its events, so that model must not select a perfevent.conf section.
func (fs *FS) hasCorePMU() bool {
	names, _ := fs.PMUNames()
	for _, n := range names {
		// x86 and POWER call it cpu (cpu_core and cpu_atom on hybrid
		// Intel); ARM names it after the architecture and core.
		core := n == "cpu" || n == "cpu_core" || n == "cpu_atom" ||
			strings.HasPrefix(n, "armv8_") || strings.HasPrefix(n, "armv9_")
		if !core {
			continue
		}
		if st, err := os.Stat(fs.sysPath("bus", "event_source", "devices", n, "events")); err == nil && st.IsDir() {
			return true
		}
	}
	return false
}

// PresentNames returns the PMU names a perfevent.conf section may name
// to be chosen on this machine, sorted: libpfm4's "perf" and "perf_raw"
// (always), the libpfm4 core PMU names for this CPU when the kernel
// exposes a core PMU, and the kernel's own PMU names from sysfs ("msr",
// "software", "uncore_imc_0", ...).
func (fs *FS) PresentNames() []string {
	names := []string{"perf", "perf_raw"}
	if fs.hasCorePMU() {
		if c, err := fs.CPUInfo(); err == nil {
			names = append(names, libpfmCoreNames(c)...)
		}
	}
	if sys, err := fs.PMUNames(); err == nil {
		names = append(names, sys...)
	}
	slices.Sort(names)
	return slices.Compact(names)
}
