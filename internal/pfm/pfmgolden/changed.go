package pfmgolden

import "strings"

// The catalog follows libpfm4 upstream, and upstream changed some entries
// that Debian's 4.13 has (see the tables' README): their names may answer
// differently from Debian's goldens and Debian's libpfm4. The upstream
// goldens hold them as the agent encodes them.

// UpstreamChanged gives why a name of one PMU of Debian's 4.13 answers
// differently in upstream, "" if it should not.
func UpstreamChanged(arch, pmu, name string) string {
	if why, ok := upstreamChangedPMU[arch+"/"+pmu]; ok {
		return why
	}
	if _, rest, ok := strings.Cut(name, "::"); ok {
		name = rest
	}
	ev, _, _ := strings.Cut(name, ":")
	return upstreamChangedEvent[arch+"/"+pmu+"::"+strings.ToUpper(ev)]
}

// upstreamChangedEvent lists the events whose every name may differ from
// Debian's 4.13 goldens, "arch/pmu::EVENT" to the reason: the catalog
// follows upstream's tables, and upstream changed these entries since 4.13
// (see the tables' README). The upstream goldens hold them as the agent
// encodes them.
var upstreamChangedEvent = map[string]string{
	"amd64/icl::MEM_LOAD_MISC_RETIRED": "upstream fixed the code: 0xd4 (Intel's MEM_LOAD_MISC_RETIRED.UC), 4.13 had 0xc4",
	"amd64/icx::MEM_LOAD_MISC_RETIRED": "upstream fixed the code: 0xd4 (Intel's MEM_LOAD_MISC_RETIRED.UC), 4.13 had 0xc4",
	"amd64/icl::BR_INST_RETIRED":       "upstream made ALL_BRANCHES the default: 4.13 refused the bare event",
	"amd64/icx::BR_INST_RETIRED":       "upstream made ALL_BRANCHES the default: 4.13 refused the bare event",
	"amd64/spr::BR_INST_RETIRED":       "upstream made ALL_BRANCHES the default: 4.13 refused the bare event",
	"amd64/icl::BR_MISP_RETIRED":       "upstream made ALL_BRANCHES the default: 4.13 refused the bare event",
	"amd64/icx::BR_MISP_RETIRED":       "upstream made ALL_BRANCHES the default: 4.13 refused the bare event",
	"amd64/spr::BR_MISP_RETIRED":       "upstream made ALL_BRANCHES the default: 4.13 refused the bare event",
	// Upstream made the ARMv8 deprecated names aliases of the
	// architected ones: same code, the canonical name is the target's.
	"arm64/arm_n1::L2D_CACHE_ACCESS": armAlias,
	"arm64/arm_n2::L2D_CACHE_ACCESS": armAlias,
	"arm64/arm_v1::L2D_CACHE_ACCESS": armAlias,
	"arm64/arm_n2::L1I_CACHE_ACCESS": armAlias,
	"arm64/arm_v1::L1I_CACHE_ACCESS": armAlias,
	"arm64/arm_v2::L1I_CACHE_ACCESS": armAlias,
}

const armAlias = "upstream made it an alias: the same encoding, named after L2D_CACHE or L1I_CACHE"

// upstreamChangedPMU lists the PMUs whose every name may differ from Debian's
// 4.13 goldens, "arch/pmu" to the reason.
var upstreamChangedPMU = map[string]string{
	"amd64/spr": "upstream regenerated spr's table from Intel's event list (PEBS flags, new unit masks, " +
		"INST_RETIRED:ANY and TOPDOWN:BAD_SPEC_SLOTS on their fixed counters' codes, AMX_OPS_RETIRED gone)",
	"arm64/arm_ac53":      armSysfsType,
	"arm64/arm_ac57":      armSysfsType,
	"arm64/arm_thunderx2": armSysfsType,
}

// armSysfsType: upstream opens the ARM cores that have a perf_name through
// that kernel PMU's type, read from sysfs, and refuses their events when
// the kernel has none of the names; 4.13 used PERF_TYPE_RAW, which on a
// big.LITTLE machine counts on whichever kind of core the CPU is. The
// machine of Debian's goldens has no such kernel PMU.
const armSysfsType = "upstream reads the ARM core's perf_event type from sysfs"
