package names

import "testing"

func TestMetric(t *testing.T) {
	for _, tc := range []struct {
		event  string
		compat bool
		want   string
	}{
		{"cpu-clock", false, "cpu_clock"},
		{"PERF_COUNT_SW_TASK_CLOCK", false, "PERF_COUNT_SW_TASK_CLOCK"},
		{"perf::PAGE-FAULTS", false, "perf__PAGE_FAULTS"},
		{"software.page-faults", false, "software.page_faults"},
		{"snbep_unc_imc0::UNC_M_CAS_COUNT:RD", false, "snbep_unc_imc0__UNC_M_CAS_COUNT_RD"},
		{"RAPL:PACKAGE_ENERGY", false, "RAPL_PACKAGE_ENERGY"},
		{"RAW:foo", false, "RAW_foo"},
		{"sched:sched_switch", false, "sched_sched_switch"},
		{"cycles:u", false, "cycles_u"},
		{"snbep_unc_imc0::UNC_M_CAS_COUNT:RD", true, "snbep_unc_imc0--UNC_M_CAS_COUNT-RD"},
		{"cpu-clock", true, "cpu-clock"},
	} {
		if got := Metric(tc.event, tc.compat); got != tc.want {
			t.Errorf("Metric(%q, %v) = %q, want %q", tc.event, tc.compat, got, tc.want)
		}
	}
}

func TestValid(t *testing.T) {
	for name, want := range map[string]bool{
		"cycles":               true,
		"software.page_faults": true,
		"a..b":                 false,
		".cycles":              false,
		"cycles.":              false,
		"":                     false,
	} {
		if got := Valid(name); got != want {
			t.Errorf("Valid(%q) = %v, want %v", name, got, want)
		}
	}
}
