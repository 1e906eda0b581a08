package pfm

import (
	"testing"

	"golang.org/x/sys/unix"
)

// FuzzEncode checks that no name makes Encode panic, and that what it
// encodes it encodes again, the same, from its canonical name, but for
// the guest and host bits: the canonical name spells out mg and mh, and
// libpfm4 counts the guest (or the host) whenever mg (mh) is given,
// whatever its value.
func FuzzEncode(f *testing.F) {
	for _, s := range []string{
		"INST_RETIRED:ANY_P", "skx::OFFCORE_RESPONSE_0:DMND_DATA_RD:L3_MISS", "FRONTEND_RETIRED:IDQ_4_BUBBLES:fe_thres=3",
		"MEM_TRANS_RETIRED:LOAD_LATENCY:ldlat=9", "INST_RETIRED:0x3:u=0", "UOPS_ISSUED.ANY.c=1.i.e", "INST_RETIRED:",
		"glm::OFFCORE_RESPONSE_0:OUTSTANDING", "nhm_unc::UNC_DRAM_OPEN:CH0:c=3", "ix86arch::LLC_MISSES:t",
		"skx_unc_cha0::UNC_C_TOR_INSERTS:IA_MISS:tf=3:loc=0", "snbep_unc_cbo0::UNC_C_LLC_LOOKUP:NID:nf=1",
		"bdx_unc_pcu::UNC_P_FREQ_BAND1_CYCLES:ff=7", "snbep_unc_pcu::UNC_P_POWER_STATE_OCCUPANCY:CORES_C0:e",
		"amd64_fam19h_zen4::P0_FREQ_CYCLES_NOT_IN_HALT", "amd64_fam17h_zen2::RETIRED_INSTRUCTIONS:0x3:c=2",
		"amd64_fam15h_nb::DRAM_ACCESSES", "rapl::RAPL_ENERGY_PKG",
	} {
		f.Add(s)
	}
	env := Env{EncodeInactive: true, PerfType: func(string) (uint32, error) { return 99, nil }}
	f.Fuzz(func(t *testing.T, name string) {
		enc, err := Encode(name, env, []string{"skx"})
		if err != nil || enc.PMU.Family == FamilyIntelUncore {
			// An uncore canonical name does not encode as its name did in
			// libpfm4 either: it spells out tf=, cf= and the CHA's filter
			// bits, and giving them sets the filter enables and drops the
			// CHA's default filter.
			return
		}
		again, err := Encode(enc.FullName, env, []string{"skx"})
		if err != nil {
			// libpfm4's own canonical names do not always parse again
			// (a hardwired modifier spelled out next to the umask that
			// hardwires it, an fstr cut at 255 bytes), so only a
			// successful re-encoding is compared.
			return
		}
		const vmx = unix.PerfBitExcludeGuest | unix.PerfBitExcludeHost
		enc.Attr.Bits &^= vmx
		again.Attr.Bits &^= vmx
		if again.Attr != enc.Attr {
			t.Errorf("%q encodes as %+v, its canonical name %q as %+v", name, enc.Attr, enc.FullName, again.Attr)
		}
	})
}
