package setup

import (
	"strings"
	"testing"
)

// On the models only the vendors' lists serve, a section named after a
// vendor PMU is chosen and its events, in every spelling, are planned.
func TestPlanVendorSections(t *testing.T) {
	for _, c := range []struct {
		fixture, conf string
		section       string
		events        int
	}{
		{"meteorlake", "[skx]\ncycles\n\n[mtl_core mtl_atom]\nINST_RETIRED.ANY\nmtl_atom::INST_RETIRED.ANY\ncpu_core/event=0xc0,umask=0x0/\nMEM_TRANS_RETIRED.LOAD_LATENCY_GT_128:u\nmtl_unc_arb::UNC_ARB_DAT_OCCUPANCY.RD\n\n[perf]\ncycles\n",
			"mtl_core", 5},
		{"sierraforest", "[srf]\nLONGEST_LAT_CACHE.MISS\nUNC_M_CAS_COUNT_SCH0.RD\nuncore_imc_1::UNC_M_CAS_COUNT_SCH0.RD\nUNC_CHA_TOR_INSERTS.IA_HIT_RFO\n",
			"srf", 4},
		{"cortex-a78", "[arm_n1]\nCPU_CYCLES\n[arm_ac78]\nCPU_CYCLES\nL1D_CACHE_REFILL\narmv8_cortex_a78/event=0x8/\n",
			"arm_ac78", 3},
	} {
		p := plan(t, fixture(t, c.fixture), c.conf)
		if p.Section == nil || !strings.Contains(strings.Join(p.Section.PMUs, " "), c.section) {
			t.Errorf("%s: section %+v, want %s\n%s", c.fixture, p.Section, c.section, notes(p))
			continue
		}
		if len(p.Counters) != c.events || strings.Contains(notes(p), "PROBLEM") {
			t.Errorf("%s: %d counters, want %d\n%s", c.fixture, len(p.Counters), c.events, notes(p))
		}
	}
}
