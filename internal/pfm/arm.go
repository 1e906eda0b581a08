package pfm

import "golang.org/x/sys/unix"

// The ARM encoders: the core PMUs of libpfm4's arm64 build (Cortex-A53,
// A55, A57, A72, A76 and X4, X-Gene, ThunderX2, A64FX, Kunpeng, Neoverse
// N1, N2, N3, V1, V2 and V3, NVIDIA Olympus, Fujitsu MONAKA), and
// the uncore PMUs that share their table type, ThunderX2's (DMC, LLC,
// CCPI) and Kunpeng's (DDRC, HHA, L3C). They do what libpfm4's
// pfm_arm_get_perf_encoding, pfm_tx2_unc_get_perf_encoding and
// pfm_kunpeng_unc_get_perf_encoding do; docs/libpfm4-encoding.md says
// what that is.

// Bits of the ARM event type register (PMEVTYPER) that filter privilege
// levels: libpfm4 sets them from the levels asked for, then its perf layer
// clears them again, because perf_events controls them through the
// exclude bits.
const (
	armExclHyp = 1 << 27
	armExclPL1 = 1 << 30 // kernel
	armExclUsr = 1 << 31
)

// keepNoSampling keeps the perf layer's modifiers but precise and hw_smpl,
// which is what the ARM and POWER families' validate_pattrs let through.
//
// Their own modifiers never reach perf mode: ARM's three (k, u, hv) are
// all privilege levels, which libpfm4 drops from every event whose mask
// has one, leaving the perf layer's u, k and h; POWER tables have none,
// and the POWER7 PowerBus (torrent) does not list its own.
func keepNoSampling(idx int) bool {
	return idx != perfPrecise && idx != perfHWSmpl
}

// encodeARM is a core PMU's: the event code as the raw config. A PMU
// with a perf_name (after 4.13: Cortex-A53, A55, A57, A72, A76, X4,
// ThunderX2) opens through that kernel PMU's type, so that on a
// big.LITTLE machine an event goes to its own kind of core; when the
// kernel has none of the names, libpfm4 refuses the event. The others keep
// PERF_TYPE_RAW.
func encodeARM(r *request) error {
	if err := r.parseAttrs(nil, keepNoSampling); err != nil {
		return err
	}
	r.attr.Type = unix.PERF_TYPE_RAW
	if r.pmu.PerfName != "" {
		t, err := r.kernelPMUType()
		if err != nil {
			return err
		}
		r.attr.Type = t
	}
	r.attr.Config = uint64(uint32(r.event.Code)) &^ (armExclHyp | armExclPL1 | armExclUsr)
	r.addf("%s", r.event.Name)
	return nil
}

// encodeARMUncore is a ThunderX2 or Kunpeng uncore PMU's: the event code
// as config, on the kernel PMU of the PMU's perf name. These PMUs filter
// no privilege level, so the perf layer excludes none.
func encodeARMUncore(r *request) error {
	if err := r.parseAttrs(nil, keepNoSampling); err != nil {
		return err
	}
	t, err := r.kernelPMUType()
	if err != nil {
		return err
	}
	r.attr.Type = t
	r.attr.Config = uint64(uint32(r.event.Code))
	r.addf("%s", r.event.Name)
	return nil
}
