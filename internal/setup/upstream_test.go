package setup

import (
	"strings"
	"testing"

	"perfevent/internal/cpulist"
)

// TestUpstreamFamiliesConfig: on a fixture of each CPU that libpfm4 knows
// only since 4.13, a perfevent.conf naming events of each of its libpfm4
// PMUs chooses that CPU's section and opens every event on the PMU, with
// no problem: core events on every CPU (a hybrid core's on its own), an
// uncore's on its kernel PMU's cpumask.
func TestUpstreamFamiliesConfig(t *testing.T) {
	for _, tc := range []struct {
		fixture, conf string
		want          []string // each counter as metric@CPUs PMU
	}{
		{"zen5", "[amd64_fam1ah_zen5]\nRETIRED_INSTRUCTIONS\nCYCLES_NOT_IN_HALT\namd64_fam1ah_zen5_l3::UNC_L3_REQUESTS:L3_MISS\n", []string{
			"RETIRED_INSTRUCTIONS@0-1 amd64_fam1ah_zen5",
			"CYCLES_NOT_IN_HALT@0-1 amd64_fam1ah_zen5",
			"amd64_fam1ah_zen5_l3__UNC_L3_REQUESTS_L3_MISS@0 amd64_fam1ah_zen5_l3",
		}},
		{"sapphirerapids", "[spr]\nINST_RETIRED:ANY_P\nTOPDOWN:SLOTS\nspr_unc_imc0::UNC_M_CAS_COUNT:RD\nspr_unc_cha0::UNC_CHA_CLOCKTICKS\nspr_unc_upi0::UNC_UPI_TxL_FLITS:ALL_DATA\n", []string{
			"INST_RETIRED_ANY_P@0-159 spr",
			"TOPDOWN_SLOTS@0-159 spr",
			"spr_unc_imc0__UNC_M_CAS_COUNT_RD@0,40 spr_unc_imc0",
			"spr_unc_cha0__UNC_CHA_CLOCKTICKS@0,40 spr_unc_cha0",
			"spr_unc_upi0__UNC_UPI_TxL_FLITS_ALL_DATA@0,40 spr_unc_upi0",
		}},
		{"graniterapids", "[gnr]\nINST_RETIRED:ANY_P\ngnr_unc_imc0::UNC_M_CAS_COUNT_SCH0:RD\n", []string{
			"INST_RETIRED_ANY_P@0-159 gnr",
			"gnr_unc_imc0__UNC_M_CAS_COUNT_SCH0_RD@0,40 gnr_unc_imc0",
		}},
		{"alderlake", "[adl_glc]\nINST_RETIRED:ANY_P\nadl_grt::INST_RETIRED:ANY_P\n", []string{
			"INST_RETIRED_ANY_P@0-15 adl_glc",
			"adl_grt__INST_RETIRED_ANY_P@16-19 adl_grt",
		}},
		{"neoverse-v2", "[arm_v2]\nINST_RETIRED\nCPU_CYCLES\n", []string{
			"INST_RETIRED@0-63 arm_v2",
			"CPU_CYCLES@0-63 arm_v2",
		}},
		{"neoverse-v3", "[arm_v3]\nINST_RETIRED\nCPU_CYCLES\n", []string{
			"INST_RETIRED@0-63 arm_v3",
			"CPU_CYCLES@0-63 arm_v3",
		}},
	} {
		m := fixture(t, tc.fixture)
		p := plan(t, m, tc.conf)
		if p.Problems() != 0 || p.Section == nil {
			t.Errorf("%s: section %v, %d problems:\n%s", tc.fixture, p.Section, p.Problems(), notes(p))
			continue
		}
		var got []string
		for _, c := range p.Counters {
			got = append(got, c.Metric+"@"+cpulist.Format(c.CPUs)+" "+c.Event.PMU)
		}
		if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
			t.Errorf("%s: counters\n%s\nwant\n%s", tc.fixture, strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
		}
	}
}

// On a guest without a core PMU (the vm fixture, a Zen 5) the CPU's
// section is not chosen, and the note says libpfm4 does find its PMU.
func TestGatedSectionNote(t *testing.T) {
	p := plan(t, fixture(t, "vm"), "[amd64_fam1ah_zen5]\nRETIRED_INSTRUCTIONS\n\n[perf]\ncpu-clock\n")
	if p.Section == nil || p.Section.Header() != "[perf]" {
		t.Fatalf("section = %v\n%s", p.Section, notes(p))
	}
	want := "info    test.conf:1: [amd64_fam1ah_zen5] skipped: no PMU named amd64_fam1ah_zen5 on this machine " +
		"(libpfm4 finds amd64_fam1ah_zen5 from the CPU, but the kernel exposes no core PMU to count its events)"
	if !strings.Contains(notes(p), want+"\n") {
		t.Errorf("notes lack %q:\n%s", want, notes(p))
	}
}
