package pfm

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// fakeSysfs is a machine whose kernel PMUs have these perf_event types,
// the ones libpfm4 was given when it produced the answers below.
var fakeSysfs = Env{PerfType: func(name string) (uint32, error) {
	t, ok := map[string]uint32{
		"amd_l3": 100, "amd_nb": 101, "power": 102, "uncore_cbox_0": 103,
		"uncore_cha_0": 127, "uncore_imc_0": 190, "uncore_pcu": 207, "uncore_upi_0": 220,
	}[name]
	if !ok {
		return 0, fmt.Errorf("no /sys/bus/event_source/devices/%s/type", name)
	}
	return t, nil
}}

// checkLibpfm4 encodes each name as libpfm4 4.13 did with its PMU the only
// active one, and compares with libpfm4's answer, given in the goldens'
// format: "name OK type config config1 config2 exclude-bits pmu fstr" or
// "name ERR reason".
func checkLibpfm4(t *testing.T, env Env, answers string) {
	t.Helper()
	saved := loadPMU
	t.Cleanup(func() { loadPMU = saved })
	loadPMU = Load
	for _, line := range strings.Split(strings.TrimSpace(answers), "\n") {
		f := strings.Fields(line)
		pmu, _, _ := strings.Cut(f[0], "::")
		if f[1] == "ERR" {
			f = append(f[:2], strings.Join(f[2:], " "))
		}
		if d := goldenDiff(f[0], f, env, []string{pmu}); d != "" {
			t.Errorf("%s: %s", f[0], d)
		}
	}
}

func TestIntelUncore(t *testing.T) {
	checkLibpfm4(t, fakeSysfs, `
snbep_unc_imc0::UNC_M_CAS_COUNT OK 190 0xf04 0 0 - snbep_unc_imc0 snbep_unc_imc0::UNC_M_CAS_COUNT:ALL:e=0:i=0:t=0:excl=0
snbep_unc_imc0::UNC_M_CAS_COUNT:RD OK 190 0x304 0 0 - snbep_unc_imc0 snbep_unc_imc0::UNC_M_CAS_COUNT:RD:e=0:i=0:t=0:excl=0
snbep_unc_imc0::UNC_M_CAS_COUNT:RD:WR ERR invalid combination of model specific features
snbep_unc_imc0::UNC_M_CAS_COUNT:t=256 ERR invalid event attribute value
snbep_unc_imc0::UNC_M_CAS_COUNT:u ERR invalid event attribute
snbep_unc_cbo0::UNC_C_COUNTER0_OCCUPANCY:cf=2 OK 103 0x8001f 0x4 0 - snbep_unc_cbo0 snbep_unc_cbo0::UNC_C_COUNTER0_OCCUPANCY:e=0:i=0:t=0:tf=1:cf=2:excl=0
snbep_unc_cbo0::UNC_C_LLC_LOOKUP:NID:nf=1 OK 103 0x4334 0x7c0400 0 - snbep_unc_cbo0 snbep_unc_cbo0::UNC_C_LLC_LOOKUP:DATA_READ:NID:STATE_MESIF:e=0:i=0:t=0:tf=0:cf=0:nf=1:excl=0
snbep_unc_cbo0::UNC_C_LLC_LOOKUP:NID ERR invalid event attribute
snbep_unc_cbo0::UNC_C_LLC_LOOKUP:DATA_READ:nf=1 ERR invalid event attribute
hswep_unc_cbo0::UNC_C_TOR_OCCUPANCY:NID_MISS_ALL:nf=3 OK 103 0x4a36 0 0x3 - hswep_unc_cbo0 hswep_unc_cbo0::UNC_C_TOR_OCCUPANCY:NID_MISS_ALL:e=0:t=0:tf=0:nf=3:isoc=0:cf=0:excl=0
snbep_unc_pcu::UNC_P_POWER_STATE_OCCUPANCY:CORES_C0:e=1 OK 207 0x80004080 0 0 - snbep_unc_pcu snbep_unc_pcu::UNC_P_POWER_STATE_OCCUPANCY:CORES_C0:e=1:i=0:t=0:excl=0
bdx_unc_pcu::UNC_P_FREQ_BAND1_CYCLES:ff=7 OK 207 0xc 0x700 0 - bdx_unc_pcu bdx_unc_pcu::UNC_P_FREQ_BAND1_CYCLES:e=0:i=0:t=0:ff=7:excl=0
skx_unc_cha0::UNC_C_TOR_INSERTS:ALL_HIT:e=1 OK 127 0x41535 0x3b00000000 0 - skx_unc_cha0 skx_unc_cha0::UNC_C_TOR_INSERTS:ALL_HIT:e=1:i=0:t=0:isoc=0:loc=1:rem=1:lmem=1:rmem=1:excl=0
skx_unc_upi0::UNC_UPI_RXL_BASIC_HDR_MATCH:dnid=7 OK 220 0x805 0x2700 0 - skx_unc_upi0 skx_unc_upi0::UNC_UPI_RXL_BASIC_HDR_MATCH:REQ:FILT_NONE:e=0:i=0:t=0:dnid=7:rcsnid=0:excl=0
`)
}

// An uncore PMU the kernel does not have cannot be encoded: libpfm4 says
// "not supported", and the error says which kernel PMU is missing.
func TestIntelUncoreNoKernelPMU(t *testing.T) {
	saved := loadPMU
	t.Cleanup(func() { loadPMU = saved })
	loadPMU = Load
	const name = "snbep_unc_ha::UNC_H_REQUESTS:READS"
	_, err := Encode(name, fakeSysfs, []string{"snbep_unc_ha"})
	if !errors.Is(err, ErrNotSupported) || !strings.Contains(err.Error(), "uncore_ha") || !strings.Contains(err.Error(), name) {
		t.Errorf("Encode(%q) without uncore_ha: %v; want not supported, naming uncore_ha and the event", name, err)
	}
	_, err = Encode(name, Env{}, []string{"snbep_unc_ha"})
	if !errors.Is(err, ErrNotSupported) {
		t.Errorf("Encode(%q) with no sysfs: %v, want not supported", name, err)
	}
}

// Errors name the attribute at fault.
func TestIntelUncoreErrorNamesAttribute(t *testing.T) {
	saved := loadPMU
	t.Cleanup(func() { loadPMU = saved })
	loadPMU = Load
	for name, attr := range map[string]string{
		"snbep_unc_imc0::UNC_M_CAS_COUNT:t=256":             "t",
		"snbep_unc_imc0::UNC_M_CAS_COUNT:RD:WR":             "WR",
		"snbep_unc_imc0::UNC_M_CAS_COUNT:BOGUS":             "BOGUS",
		"snbep_unc_cbo0::UNC_C_LLC_LOOKUP:NID":              "nf",
		"snbep_unc_imc0::UNC_M_CAS_COUNT:0x1ff":             "0x1ff",
		"skx_unc_upi0::UNC_UPI_RXL_BASIC_HDR_MATCH:dnid=16": "dnid",
	} {
		_, err := Encode(name, fakeSysfs, []string{strings.Split(name, "::")[0]})
		var ee *EncodeError
		if !errors.As(err, &ee) || !strings.Contains(ee.Attr, attr) {
			t.Errorf("Encode(%q): %v, want an error naming %q", name, err, attr)
		}
	}
}
