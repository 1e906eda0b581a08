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

// --check shows each vendor line's canonical form (Counter.Describe): the vendor PMU and
// event, the kernel PMU it opens on and the terms, whatever the spelling.
func TestCheckShowsVendorNames(t *testing.T) {
	p := plan(t, fixture(t, "meteorlake"), "[mtl_core]\nINST_RETIRED:ANY\ncpu_core/event=0x0,umask=0x1/\nuncore_arb::UNC_ARB_DAT_OCCUPANCY.RD\n")
	var text string
	for _, c := range p.Counters {
		text += "info    " + c.Pos.String() + ": " + c.Event.Name + ": " + c.Describe() + "\n"
	}
	for _, want := range []string{
		"info    test.conf:2: INST_RETIRED:ANY: github.com/intel/perfmon mtl_core::INST_RETIRED.ANY on cpu_core (event=0x0,umask=0x1): type 4 config 0x100 exclude guest -> perfevent.hwcounters.INST_RETIRED_ANY",
		"info    test.conf:3: cpu_core/event=0x0,umask=0x1/: perf syntax cpu_core/event=0x0,umask=0x1/ = mtl_core::INST_RETIRED.ANY: type 4 config 0x100",
		"info    test.conf:4: uncore_arb::UNC_ARB_DAT_OCCUPANCY.RD: github.com/intel/perfmon mtl_unc_arb::UNC_ARB_DAT_OCCUPANCY.RD on uncore_arb (event=0x85,umask=0x2): type 12 config 0x285 exclude none",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("notes lack %q:\n%s", want, text)
		}
	}
}
