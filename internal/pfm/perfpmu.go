package pfm

// The encoders of libpfm4's two pseudo-PMUs, which name perf_events' own
// events rather than a CPU's: "perf" (the generic hardware, software and
// hardware-cache events, and a few optional raw ones) and "perf_raw"
// ("r<hex>", the raw config as perf(1) writes it).
//
// libpfm4 also adds the running kernel's tracepoints to "perf" when it
// initialises. They are not in the catalog: they depend on the kernel and
// on debugfs being mounted, and the C agent's configurations do not use
// them, so a tracepoint name is "event not found" here.

import (
	"golang.org/x/sys/unix"
)

// Umask flags of the perf PMU's table (PERF_FL_*).
const perfFlDefault = 0x1 // the umask is its group's default

// perfHasOptional is add_optional_events' test, made at look-up rather
// than by copying the table for every name: libpfm4 adds an optional
// event to the perf PMU only if the kernel's core PMU lists it.
func perfHasOptional(ev *Event, env Env) bool {
	return env.KernelEvent != nil && env.KernelEvent("cpu", ev.Name)
}

// perfCorePLM is pfm_perf_init's last step: the perf PMU filters the
// privilege levels that the first active core PMU filters. pmus are the
// active PMUs in libpfm4's order; a perf PMU named by prefix while
// inactive is never initialised, and keeps every level.
func perfCorePLM(pmus []*PMU) {
	var core *PMU
	for _, p := range pmus {
		if p.Type == PMUTypeCore {
			core = p
			break
		}
	}
	if core == nil {
		return
	}
	for i, p := range pmus {
		if p.Family == FamilyPerf && p.Name == "perf" && p.SupportedPLM != core.SupportedPLM {
			q := *p
			q.SupportedPLM = core.SupportedPLM
			pmus[i] = &q
		}
	}
}

func encodePerfPMU(r *request) error {
	if r.pmu.Name == "perf_raw" {
		return encodePerfRaw(r)
	}
	ev := r.event
	descs := attrRoom(len(ev.Umasks))[:len(ev.Umasks)]
	for i, u := range ev.Umasks {
		descs[i] = attrDesc{Name: u.Name, Type: attrUmask, Idx: i}
	}
	// pfm_perf_perf_validate_pattrs: only hardware events (cache ones
	// included) may be precise or count the hypervisor, and they keep
	// only the levels the core PMU filters. None samples in hardware.
	plm := r.pmu.SupportedPLM
	hw := ev.Type == unix.PERF_TYPE_HARDWARE || ev.Type == unix.PERF_TYPE_HW_CACHE
	keep := func(idx int) bool {
		switch {
		case idx == perfHWSmpl:
			return false
		case hw && idx == perfH:
			return plm&PLMH != 0
		case hw && idx == perfU:
			return plm&PLM3 != 0
		case hw && idx == perfK:
			return plm&PLM0 != 0
		case !hw && (idx == perfPrecise || idx == perfH):
			return false
		}
		return perfKeep(r.pmu, idx)
	}
	if err := r.parseAttrs(descs, keep); err != nil {
		return err
	}
	r.attr.Type = ev.Type
	r.attr.Config = ev.Code
	switch ev.Type {
	case unix.PERF_TYPE_HW_CACHE:
		if err := r.encodeHWCache(); err != nil {
			return err
		}
		r.canonicalUmasks()
	case unix.PERF_TYPE_HARDWARE, unix.PERF_TYPE_SOFTWARE, unix.PERF_TYPE_RAW:
		// No unit masks: parseAttrs has refused any.
		r.addf("%s", ev.Name)
	default:
		return badAttr(ErrNotSupported, "%s: perf_event type %d", ev.Name, ev.Type)
	}
	return nil
}

// encodeHWCache is pfmlib_perf_encode_hw_cache: the cache, the operation
// and the result are each one group of unit masks, whose codes are ORed
// into config; a group may be given once, and one left out takes its
// default.
func (r *request) encodeHWCache() error {
	ev := r.event
	missing := uint32(1)<<ev.NumGroups - 1
	for _, v := range r.pmuVals() {
		u := &ev.Umasks[r.desc(v).Idx]
		g := uint32(1) << u.Group
		if missing&g == 0 {
			return badAttr(ErrUmask, "%s: another unit mask of its group was given", u.Name)
		}
		missing &^= g
		r.attr.Config |= u.Code
	}
	for g := uint16(0); missing != 0; g, missing = g+1, missing>>1 {
		if missing&1 == 0 {
			continue
		}
		added := false
		for i := range ev.Umasks {
			u := &ev.Umasks[i]
			if u.Group != g || u.Flags&perfFlDefault == 0 {
				continue
			}
			r.attr.Config |= u.Code
			r.vals = append(r.vals, attrVal{Desc: r.umaskDesc(i)})
			added = true
		}
		if !added {
			return badAttr(ErrUmask, "no default unit mask for group %d", g)
		}
	}
	return nil
}

// umaskDesc is the index in r.pattrs of the event's i-th unit mask.
func (r *request) umaskDesc(i int) int {
	for d, a := range r.pattrs {
		if a.Type == attrUmask && !a.Perf && a.Idx == i {
			return d
		}
	}
	return -1
}

// encodePerfRaw is perf_raw's encoding: findEvent has read the config
// from the name ("r1c2"), and libpfm4 writes no event name, so the
// canonical name is "perf_raw::" followed by the modifiers alone.
func encodePerfRaw(r *request) error {
	if err := r.parseAttrs(nil, func(idx int) bool { return perfKeep(r.pmu, idx) }); err != nil {
		return err
	}
	r.attr.Type = unix.PERF_TYPE_RAW
	r.attr.Config = r.rawCode
	return nil
}

// perfRawCode is pfm_perf_raw_match_event: a perf_raw event is 'r' and a
// hexadecimal number (strtoull's base 16, so "r0x1c2" too) that is all
// of the name. All ones is refused, as strtoull's overflow value.
func perfRawCode(name string) (uint64, bool) {
	if len(name) < 2 || name[0] != 'r' || digit(name[1]) >= 16 {
		return 0, false
	}
	s := name[1:]
	if len(s) > 2 && s[0] == '0' && lower(s[1]) == 'x' && digit(s[2]) < 16 {
		s = s[2:]
	}
	var v uint64
	for i := 0; i < len(s); i++ {
		d := digit(s[i])
		if d >= 16 {
			return 0, false
		}
		if v > (^uint64(0)-d)/16 {
			return 0, false
		}
		v = v*16 + d
	}
	if v == ^uint64(0) {
		return 0, false
	}
	return v, true
}
