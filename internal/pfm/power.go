package pfm

import "golang.org/x/sys/unix"

// The POWER encoders: the core PMUs of libpfm4's ppc64le build (POWER4 to
// POWER10, PPC970 and 970MP), the POWER8 nest memory controller PMUs
// (powerpc_nest_mcs_read, _write) and the POWER7 PowerBus (power_torrent).
// They do what libpfm4's pfm_gen_powerpc_get_perf_encoding,
// pfm_gen_powerpc_get_nest_perf_encoding and pfm_torrent_get_encoding do;
// docs/libpfm4-encoding.md says what that is.

// encodePower gives the event code as config: raw on a core PMU, on the
// kernel PMU of its perf name for a nest PMU.
func encodePower(r *request) error {
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
	r.attr.Config = r.event.Code
	r.addf("%s", r.event.Name)
	return nil
}

// The PowerBus event code: which of its PMUs counts the event, and where
// the modifiers' fields go.
const (
	torrentPMUMask = 0x01f00000 // TORRENT_SPACE and the PMU id
	torrentMCD     = 0x01200000 // PowerBus MCD: takes type
	torrentUtil    = 0x01300000 // PowerBus utilisation: takes sel, lo_cmp, hi_cmp
	torrentHigh    = 32         // type and sel go at bit 32, the thresholds at 34

	torrentModType  = 0 // the event's modifier mask numbers them so
	torrentModSel   = 1
	torrentModLoCmp = 2
	torrentModHiCmp = 3
)

// encodeTorrent is pfm_torrent_get_encoding under the POWER perf layer,
// quirks kept. libpfm4 lists none of the PowerBus modifiers as the
// event's, so a name can give only the perf layer's; but the encoder reads
// every attribute given as one of its own, the n-th taking the n-th bit of
// the event's modifier mask, and its value goes into the code: on an MCD
// event ":u" sets type=1. The canonical name has no event name, as
// libpfm4 never writes it.
func encodeTorrent(r *request) error {
	if err := r.parseAttrs(nil, keepNoSampling); err != nil {
		return err
	}
	code := r.event.Code
	for _, v := range r.vals {
		name := r.desc(v).Name
		mod := nthBit(uint64(r.event.ModMask), v.Desc)
		switch code & torrentPMUMask {
		case torrentMCD:
			if mod != torrentModType {
				return badAttr(ErrAttr, "%s: the PowerBus MCD event %s takes type alone", name, r.event.Name)
			}
			if v.Val > 3 {
				return badAttr(ErrAttrVal, "%s=%d: taken as type, which is 0 to 3", name, v.Val)
			}
			code |= v.Val << torrentHigh
		case torrentUtil:
			switch mod {
			case torrentModSel:
				if v.Val > 3 {
					return badAttr(ErrAttrVal, "%s=%d: taken as sel, which is 0 to 3", name, v.Val)
				}
				code |= v.Val << torrentHigh
			case torrentModLoCmp, torrentModHiCmp:
				if v.Val > 31 {
					return badAttr(ErrAttrVal, "%s=%d: taken as a threshold, which is 0 to 31", name, v.Val)
				}
				code |= v.Val << (torrentHigh + 2)
			}
		default:
			return badAttr(ErrAttr, "%s: the PowerBus event %s takes no attribute", name, r.event.Name)
		}
	}
	r.attr.Type = unix.PERF_TYPE_RAW
	r.attr.Config = code
	return nil
}

// nthBit is the number of the n-th set bit of mask (counting from 0), or
// 64 when it has fewer, as libpfm4's attr2mod walks a modifier mask.
func nthBit(mask uint64, n int) int {
	for b := 0; b < 64; b++ {
		if mask&(1<<b) == 0 {
			continue
		}
		if n == 0 {
			return b
		}
		n--
	}
	return 64
}
