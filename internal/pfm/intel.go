package pfm

import (
	"strings"

	"golang.org/x/sys/unix"
)

// The Intel x86 core encoder: ix86arch and every Intel core PMU of
// libpfm4 (core to Granite Rapids, Alder Lake's two cores, the Atoms,
// Knights Corner to Knights Mill), and the client uncores that share their table format
// (nhm_unc, wsm_unc, snb_unc_*, ivb_unc_*). It does what libpfm4's pfm_intel_x86_encode_gen
// and pfm_intel_x86_get_perf_encoding do; docs/libpfm4-encoding.md says
// what that is.

// initIX86Arch is pfm_intel_x86_arch_init: ix86arch has the
// architectural events CPUID does not mark missing (the first seven of
// its table at most), each taking the modifiers of the perfmon version
// (versions 3 and 4 add t, then intx and intxcp; any other has the
// version 2 set).
func initIX86Arch(p *PMU, env Env) *PMU {
	version, missing := 3, uint32(0)
	if a := env.IntelArch; a != nil {
		version, missing = a.Version, a.Unavailable
	}
	mods := uint32(1<<intelModI | 1<<intelModE | 1<<intelModC | 1<<intelModU | 1<<intelModK)
	switch version {
	case 5:
		// After 4.13: AnyThread is gone from version 5; 4.13 gave
		// version 5 only version 2's modifiers.
		mods |= 1<<intelModIntx | 1<<intelModIntxCP
	case 4:
		mods |= 1<<intelModT | 1<<intelModIntx | 1<<intelModIntxCP
	case 3:
		mods |= 1 << intelModT
	}
	q := *p
	q.Events = nil
	for i := 0; i < 7 && i < len(p.Events); i++ {
		if missing&(1<<i) != 0 {
			continue
		}
		ev := p.Events[i]
		ev.ModMask = mods
		q.Events = append(q.Events, ev)
	}
	return &q
}

// Event and umask flags of intel_x86 tables (INTEL_X86_*).
const (
	intelNCombo       = 0x00001 // umasks of this one's group cannot be combined with it
	intelPEBS         = 0x00004
	intelDFL          = 0x00008  // the group's default umask
	intelGrpExcl      = 0x00010  // umasks from one group only
	intelNHMOffcore   = 0x00020  // OFFCORE_RESPONSE: the umask goes to config1
	intelExclGrpGT    = 0x00040  // no umask from a higher group may go with it
	intelCodeOverride = 0x00200  // the umask's low byte replaces the event code
	intelLDLat        = 0x00400  // a load latency umask: config1 takes ldlat
	intelGrpDflNone   = 0x00800  // the group may go without a umask
	intelFrontend     = 0x01000  // FRONTEND_RETIRED: the umask goes to config1
	intelFEThr        = 0x02000  // the umask takes fe_thres
	intelExclGrpBut0  = 0x04000  // only its own group and group 0
	intelGrpReq       = 0x08000  // grpid's high byte names a group that must be present
	intelFiltUmask    = 0x10000  // filters go in config's upper half
	intelNoMods       = 0x200000 // TOPDOWN_M's metrics: no modifier at all (after 4.13)
)

// PMU flags of Intel x86 PMUs (INTEL_X86_PMU_FL_*).
const (
	intelPMUECMask  = 0x10000 // edge requires a counter mask
	intelPMUExtPEBS = 0x20000 // any event can use the PEBS buffer (hw_smpl)
)

// Intel modifiers, numbered as the tables' modifier masks number them.
const (
	intelModK = iota
	intelModU
	intelModE
	intelModI
	intelModC
	intelModT
	intelModLDLat
	intelModIntx
	intelModIntxCP
	intelModFEThres
)

// Fields of the event select register (IA32_PERFEVTSELx).
const (
	selUsr     = 1 << 16
	selOS      = 1 << 17
	selEdge    = 1 << 18
	selInt     = 1 << 20
	selAnyThr  = 1 << 21
	selEn      = 1 << 22
	selInv     = 1 << 23
	selCMask   = 0xff << 24
	selIntx    = 1 << 32
	selIntxCP  = 1 << 33
	cmaskShift = 24
)

// Defaults libpfm4 fills in when a umask needs a threshold and the name
// gives none.
const (
	intelLDLatDefault = 3
	intelFEThrDefault = 1
)

const (
	intelNumGroups  = 8      // umask groups an Intel event may have
	noGroup         = 0xffff // INTEL_X86_MAX_GRPID: no limit on groups
	noExclGroupBut0 = -1     // no EXCL_GRP_BUT_0 umask given
)

// intelModel reports whether an event or umask restricted to model (0 for
// none) exists on PMU p.
func intelModel(p *PMU, model uint16) bool {
	return model == 0 || int(model) == p.ID
}

// intelPattrs lists what an Intel event accepts in perf mode: its
// umasks for this model, its modifiers from the PMU's table except the
// first two (k and u on cores: perf's own u and k take their place), then
// the perf layer's, less those libpfm4's pfm_intel_x86_perf_validate_pattrs
// drops.
//
// libpfm4 drops the first two modifiers by position, whatever they are
// called, so the Nehalem and Westmere uncores, whose table starts with e
// and i, lose those two in perf mode.
func intelPattrs(p *PMU, ev *Event) ([]attrDesc, func(int) bool) {
	descs := attrRoom(len(ev.Umasks) + len(p.Modifiers))
	pebs := ev.Flags&intelPEBS != 0
	for i := range ev.Umasks {
		u := &ev.Umasks[i]
		if !intelModel(p, u.Model) {
			continue
		}
		descs = append(descs, attrDesc{Name: u.Name, Type: attrUmask, Idx: i, Equiv: u.Equiv})
		pebs = pebs || u.Flags&intelPEBS != 0
	}
	for m, mod := range p.Modifiers {
		if ev.ModMask&(1<<m) == 0 || m == intelModU || m == intelModK || mod.Name == "" {
			continue
		}
		t := attrBool
		if mod.Type == ModInteger {
			t = attrInt
		}
		descs = append(descs, attrDesc{Name: mod.Name, Type: t, Idx: m})
	}
	hws := p.Flags&intelPMUExtPEBS != 0
	keep := func(idx int) bool {
		switch idx {
		case perfPrecise:
			if !pebs {
				return false
			}
		case perfHWSmpl:
			if !hws || pebs {
				return false
			}
		case perfH:
			return false // no hypervisor level on Intel
		}
		return perfKeep(p, idx)
	}
	return descs, keep
}

// intelState is one encoding in progress (encode_gen's locals).
type intelState struct {
	r   *request
	p   *PMU
	ev  *Event
	reg uint64 // the event select register

	umask1, umask2 uint64 // the event's own umask, and the umasks' bits
	grpmsk         uint32 // every group the event has
	ugrpmsk        uint32 // groups the name gave a umask from
	maxGrp         uint16 // EXCL_GRP_GT: no umask from a higher group
	exclBut0       int    // EXCL_GRP_BUT_0: only this group and group 0
	ldlat          uint64
	ldlatUmask     bool
	feThr          uint64
	feThrUmask     bool
	modhw          uint32 // modifiers the umasks hardwire
	umodmsk        uint32 // modifiers the name gave
	codes1         uint64 // the second register (config1 or filter), with count 2
	count          int
}

func encodeIntelX86(r *request) error {
	descs, keep := intelPattrs(r.pmu, r.event)
	if err := r.parseAttrs(descs, keep); err != nil {
		return err
	}
	s := &intelState{r: r, p: r.pmu, ev: r.event}
	if err := s.encode(); err != nil {
		return err
	}
	return s.perf()
}

// encodeIntelNHMUncore serves the client uncores: Sandy and Ivy Bridge's
// C-boxes have core-style tables and the core encoder; Nehalem's and
// Westmere's (nhm_unc, wsm_unc) have an encoder of their own. All of
// them go to perf as pfm_intel_nhm_unc_get_perf_encoding has it.
func encodeIntelNHMUncore(r *request) error {
	descs, keep := intelPattrs(r.pmu, r.event)
	if err := r.parseAttrs(descs, keep); err != nil {
		return err
	}
	s := &intelState{r: r, p: r.pmu, ev: r.event}
	var err error
	if r.pmu.Name == "nhm_unc" || r.pmu.Name == "wsm_unc" {
		err = s.encodeNHMUncore()
	} else {
		err = s.encode()
	}
	if err != nil {
		return err
	}
	return s.perf()
}

// Modifiers of the Nehalem/Westmere uncore (nhm_unc_mods), and the
// occupancy bit of its event select register.
const (
	nhmUncModE = iota
	nhmUncModI
	nhmUncModC
	nhmUncModO
	uselOcc = 1 << 17
)

// encodeNHMUncore is pfm_nhm_unc_get_encoding: the core encoder's
// checks, fewer of them (no EXCL_GRP_GT, no EXCL_GRP_BUT_0, no
// hardwired-value comparison: a hardwired modifier may not be set at all).
func (s *intelState) encodeNHMUncore() error {
	r, ev := s.r, s.ev
	s.begin()
	umask := ev.Code >> 8 & 0xff
	modmskReq := ev.ModMaskReq
	g := newGroupRules()
	for _, v := range r.pmuVals() {
		switch d := r.desc(v); d.Type {
		case attrUmask:
			u := s.umask(v)
			if err := g.grpExcl(ev, u, int(u.Group)); err != nil {
				return err
			}
			if err := g.ncombo(u, int(u.Group&0xff)); err != nil {
				return err
			}
			s.modhw |= u.ModHW
			umask |= u.Code >> 8
			s.ugrpmsk |= grpBit(u.Group)
			// libpfm4 ORs the umask so far into the register at each umask.
			s.reg |= umask << 8
			modmskReq |= u.ModMaskReq
		case attrRawUmask:
			if r.raw&^0xff != 0 {
				return badAttr(ErrAttr, "0x%x: raw umask wider than 8 bits", r.raw)
			}
			umask = r.raw & 0xff
			s.ugrpmsk = s.grpmsk
		default:
			bit := map[int]uint64{nhmUncModI: selInv, nhmUncModE: selEdge, nhmUncModO: uselOcc}[d.Idx]
			switch {
			case d.Idx == nhmUncModC && v.Val > 255:
				return badAttr(ErrInvalid, "c=%d: the counter mask is 0 to 255", v.Val)
			case d.Idx == nhmUncModC:
				s.reg = s.reg&^selCMask | v.Val<<cmaskShift
			case v.Val != 0:
				s.reg |= bit
			default:
				s.reg &^= bit
			}
			s.umodmsk |= 1 << d.Idx
		}
	}
	for _, m := range []struct {
		mod  int
		bits uint64
	}{{nhmUncModI, selInv}, {nhmUncModE, selEdge}, {nhmUncModC, selCMask}, {nhmUncModO, uselOcc}} {
		if s.modhw&(1<<m.mod) != 0 && s.reg&m.bits != 0 {
			return badAttr(ErrAttrSet, "%s: the umask hardwires it", s.p.Modifiers[m.mod].Name)
		}
	}
	if (s.ugrpmsk != s.grpmsk && ev.Flags&intelGrpExcl == 0) || s.ugrpmsk == 0 {
		s.umask2 = umask
		if err := s.addDefaults(s.ugrpmsk ^ s.grpmsk); err != nil {
			return err
		}
		umask = s.umask2
	}
	if modmskReq != 0 && s.umodmsk != modmskReq {
		return badAttr(ErrAttr, "%s requires modifiers %s and no others", ev.Name, modNames(s.p, modmskReq))
	}
	s.r.canonicalUmasks()
	s.reg |= umask<<8 | selEn | selInt
	s.count = 1
	for _, d := range r.pattrs {
		if d.Perf || d.Type == attrUmask {
			continue
		}
		var v uint64
		switch d.Idx {
		case nhmUncModE:
			v = s.reg & selEdge >> 18
		case nhmUncModI:
			v = s.reg & selInv >> 23
		case nhmUncModC:
			v = s.reg & selCMask >> cmaskShift
		case nhmUncModO:
			v = s.reg & uselOcc >> 17
		}
		r.addf(":%s=%d", d.Name, v)
	}
	return nil
}

// begin starts an encoding from the event's code, with no limit on groups.
func (s *intelState) begin() {
	s.reg = s.ev.Code
	s.grpmsk = uint32(1)<<s.ev.NumGroups - 1
	s.maxGrp = noGroup
	s.exclBut0 = noExclGroupBut0
}

// groupRules are the checks both Intel encoders make of the umasks in
// the order given: from one group only where the event says GRP_EXCL,
// and no second umask in a group that has an NCOMBO one.
type groupRules struct {
	counts, combo [256]int
	last          int
}

func newGroupRules() *groupRules { return &groupRules{last: -1} }

func (g *groupRules) grpExcl(ev *Event, u *Umask, grp int) error {
	if g.last != -1 && grp != g.last && ev.Flags&intelGrpExcl != 0 {
		return badAttr(ErrFeatComb, "%s: umasks of %s come from one group only", u.Name, ev.Name)
	}
	g.last = grp
	return nil
}

func (g *groupRules) ncombo(u *Umask, grp int) error {
	g.counts[grp]++
	if u.Flags&intelNCombo != 0 {
		g.combo[grp] = 1
	}
	if g.counts[grp] > 1 && g.combo[grp] != 0 {
		return badAttr(ErrFeatComb, "%s: cannot be combined with another umask of its group", u.Name)
	}
	return nil
}

// umask is the umask a parsed attribute names.
func (s *intelState) umask(v attrVal) *Umask {
	return &s.ev.Umasks[s.r.pattrs[v.Desc].Idx]
}

// grpBit is 1<<grpid as x86 computes it: the shift counts modulo 32.
func grpBit(g uint16) uint32 { return 1 << (g & 31) }

func (s *intelState) encode() error {
	r, ev := s.r, s.ev
	s.begin()
	s.umask1 = ev.Code >> 8 & 0xff
	modmskReq := ev.ModMaskReq

	g := newGroupRules()
	reqGrps := map[int]bool{}
	maxReqGrp := -1
	lastCode := ^uint64(0)

	for _, v := range r.pmuVals() {
		switch d := r.desc(v); d.Type {
		case attrUmask:
			u := s.umask(v)
			grp := u.Group & 0xff
			reqGrp := int(u.Group >> 8 & 0xff)
			if err := g.grpExcl(ev, u, int(grp)); err != nil {
				return err
			}
			if u.Flags&intelExclGrpGT != 0 {
				s.maxGrp = grp
			}
			if u.Flags&intelExclGrpBut0 != 0 {
				s.exclBut0 = int(grp)
			}
			if u.Flags&intelGrpReq != 0 {
				maxReqGrp = max(maxReqGrp, reqGrp)
				reqGrps[reqGrp] = true
			}
			if u.Flags&intelLDLat != 0 {
				s.ldlatUmask = true
			}
			if u.Flags&intelFEThr != 0 {
				s.feThrUmask = true
			}
			if err := g.ncombo(u, int(grp)); err != nil {
				return err
			}
			s.modhw |= u.ModHW
			s.umask2 |= u.Code >> 8
			s.ugrpmsk |= grpBit(u.Group)
			modmskReq |= u.ModMaskReq
			if u.Flags&intelCodeOverride != 0 {
				if lastCode != ^uint64(0) && u.Code&0xff != lastCode {
					return badAttr(ErrFeatComb, "%s: overrides the event code differently from another umask", u.Name)
				}
				lastCode = u.Code & 0xff
				s.reg = s.reg&^0xff | lastCode
			}
		case attrRawUmask:
			bits := 8
			if ev.Flags&intelNHMOffcore != 0 {
				bits = 38
				if s.p.Name == "wsm" || s.p.Name == "wsm_dp" {
					bits = 16
				}
			}
			mask := uint64(1)<<bits - 1
			if r.raw&^mask != 0 {
				return badAttr(ErrAttr, "0x%x: raw umask wider than %d bits", r.raw, bits)
			}
			s.umask2 = r.raw & mask
			s.ugrpmsk = s.grpmsk
		default:
			if err := s.modifier(d, v.Val); err != nil {
				return err
			}
		}
	}

	for x := 0; x <= maxReqGrp; x++ {
		if reqGrps[x] && s.ugrpmsk&(1<<x) == 0 {
			return badAttr(ErrFeatComb, "a umask of group %d is required", x)
		}
	}

	// A modifier the name gives may repeat a hardwired one, so that a
	// canonical name parses again, but not contradict it.
	hw := (s.umask1 | s.umask2) << 8
	for _, m := range []struct {
		mod  int
		bits uint64
	}{
		{intelModI, selInv}, {intelModE, selEdge}, {intelModC, selCMask},
		{intelModU, selUsr}, {intelModK, selOS}, {intelModT, selAnyThr},
		{intelModIntx, selIntx}, {intelModIntxCP, selIntxCP},
	} {
		if s.modhw&s.umodmsk&(1<<m.mod) != 0 && hw&m.bits != s.reg&m.bits {
			return badAttr(ErrAttrSet, "%s: the umask hardwires it to another value", s.p.Modifiers[m.mod].Name)
		}
	}

	// perf mode: u and k are perf's, so the default privilege levels apply.
	if r.plm&PLM0 != 0 && s.p.SupportedPLM&PLM0 != 0 {
		s.reg |= selOS
	}
	if r.plm&PLM3 != 0 && s.p.SupportedPLM&PLM3 != 0 {
		s.reg |= selUsr
	}

	if (s.ugrpmsk != s.grpmsk && ev.Flags&intelGrpExcl == 0) || s.ugrpmsk == 0 {
		if err := s.addDefaults(s.ugrpmsk ^ s.grpmsk); err != nil {
			return err
		}
	}

	if s.exclBut0 != noExclGroupBut0 {
		for k := 1; k < intelNumGroups; k++ {
			if g.counts[k] != 0 && k != s.exclBut0 {
				return badAttr(ErrFeatComb, "umasks of group %d cannot go with those of group %d", k, s.exclBut0)
			}
		}
	}

	if s.maxGrp != noGroup {
		for _, v := range r.pmuVals() {
			if r.desc(v).Type == attrUmask && s.umask(v).Group > s.maxGrp {
				return badAttr(ErrFeatComb, "%s: cannot go with a umask of group %d", s.umask(v).Name, s.maxGrp)
			}
		}
	}

	if modmskReq != 0 && s.umodmsk != modmskReq {
		return badAttr(ErrAttr, "%s requires modifiers %s and no others", ev.Name, modNames(s.p, modmskReq))
	}

	s.r.canonicalUmasks()

	if ev.Flags&intelFrontend != 0 && s.feThrUmask {
		umThr := s.umask2 >> 8 & 0xfff
		switch {
		case umThr != 0 && s.modhw&s.umodmsk&(1<<intelModFEThres) != 0:
			if s.feThr != umThr {
				return badAttr(ErrAttrSet, "fe_thres=%d: the umask hardwires %d", s.feThr, umThr)
			}
		case umThr != 0:
			s.feThr = umThr
		case s.feThr == 0:
			s.feThr = intelFEThrDefault
		}
		s.umask2 = s.umask2&^(0xfff<<8) | s.feThr<<8
	}

	s.count = 1
	if ev.Flags&(intelNHMOffcore|intelFrontend) != 0 {
		s.codes1, s.count = s.umask2, 2
		s.umask2 = 0
	}
	if s.ldlat != 0 && !s.ldlatUmask {
		return badAttr(ErrAttr, "ldlat=%d: no load latency umask", s.ldlat)
	}
	if s.ldlatUmask && s.ldlat == 0 {
		s.ldlat = intelLDLatDefault
	}
	if s.ldlat != 0 && s.ldlatUmask {
		s.codes1, s.count = s.ldlat, 2
	}

	s.reg |= (s.umask1|s.umask2)<<8 | selEn | selInt

	if s.p.Flags&intelPMUECMask != 0 && s.reg&selEdge != 0 && s.reg&selCMask == 0 {
		return badAttr(ErrAttr, "e: edge detection needs a counter mask (c=1 or more)")
	}

	// A metric of the PERF_METRICS register (TOPDOWN_M) is read
	// whole: libpfm4 takes no modifier on it, and gives no canonical name.
	for _, v := range r.pmuVals() {
		if r.desc(v).Type == attrUmask && s.umask(v).Flags&intelNoMods != 0 {
			r.noMods = true
		}
	}
	if r.noMods {
		return nil
	}
	for _, d := range r.pattrs {
		if d.Perf || d.Type == attrUmask {
			continue
		}
		r.addf(":%s=%d", d.Name, s.modValue(d.Idx))
	}
	return nil
}

// modifier applies one of the event's modifiers to the register.
func (s *intelState) modifier(d attrDesc, val uint64) error {
	set := func(bits uint64, on bool) {
		if on {
			s.reg |= bits
		} else {
			s.reg &^= bits
		}
	}
	switch d.Idx {
	case intelModI:
		set(selInv, val != 0)
	case intelModE:
		set(selEdge, val != 0)
	case intelModC:
		if val > 255 {
			return badAttr(ErrAttrVal, "c=%d: the counter mask is 0 to 255", val)
		}
		s.reg = s.reg&^selCMask | val<<cmaskShift
	case intelModT:
		set(selAnyThr, val != 0)
	case intelModLDLat:
		if val < 1 || val > 65535 {
			return badAttr(ErrAttrVal, "ldlat=%d: the load latency threshold is 1 to 65535", val)
		}
		s.ldlat = val
		return nil // libpfm4 does not count ldlat among the given modifiers
	case intelModIntx:
		set(selIntx, val != 0)
	case intelModIntxCP:
		set(selIntxCP, val != 0)
	case intelModFEThres:
		if val < 1 || val > 4095 {
			return badAttr(ErrAttrVal, "fe_thres=%d: the frontend threshold is 1 to 4095", val)
		}
		s.feThr = val
	}
	s.umodmsk |= 1 << d.Idx
	return nil
}

// modValue is a modifier's final value, for the canonical name.
func (s *intelState) modValue(m int) uint64 {
	bit := func(b uint64) uint64 {
		if s.reg&b != 0 {
			return 1
		}
		return 0
	}
	switch m {
	case intelModU:
		return bit(selUsr)
	case intelModK:
		return bit(selOS)
	case intelModE:
		return bit(selEdge)
	case intelModI:
		return bit(selInv)
	case intelModC:
		return s.reg & selCMask >> cmaskShift
	case intelModT:
		return bit(selAnyThr)
	case intelModLDLat:
		return s.ldlat
	case intelModIntx:
		return bit(selIntx)
	case intelModIntxCP:
		return bit(selIntxCP)
	case intelModFEThres:
		return s.feThr
	}
	return 0
}

// modNames names the modifiers of a mask.
func modNames(p *PMU, mask uint32) string {
	var names []string
	for m, mod := range p.Modifiers {
		if mask&(1<<m) != 0 {
			names = append(names, mod.Name)
		}
	}
	return strings.Join(names, ",")
}

// addDefaults adds the default umask of each group in msk the name left
// empty, as pfm_intel_x86_add_defaults does, into umask2 and the
// attribute list (so that the canonical name shows them).
func (s *intelState) addDefaults(msk uint32) error {
	r, ev := s.r, s.ev
	maxGrp := s.maxGrp
	for i := 0; msk != 0; msk, i = msk>>1, i+1 {
		if msk&1 == 0 {
			continue
		}
		added, skip := 0, false
		for j, d := range r.pattrs {
			if d.Perf || d.Type != attrUmask {
				continue
			}
			u := &ev.Umasks[d.Idx]
			if int(u.Group&0xff) != i {
				continue
			}
			if maxGrp != noGroup && i > int(maxGrp) {
				skip = true
				continue
			}
			if u.Flags&intelGrpDflNone != 0 {
				skip = true
				continue
			}
			if s.exclBut0 != noExclGroupBut0 && u.Group != 0 && int(u.Group) != s.exclBut0 {
				skip = true
				continue
			}
			if u.Flags&intelDFL == 0 {
				continue
			}
			s.umask2 |= u.Code >> 8
			r.vals = append(r.vals, attrVal{Desc: j})
			added++
			if ev.Flags&intelGrpExcl != 0 {
				return nil
			}
			if u.Flags&intelExclGrpGT != 0 {
				if maxGrp != noGroup {
					return badAttr(ErrUmask, "%s: two default umasks limit the groups", u.Name)
				}
				maxGrp = u.Group
			}
		}
		if added == 0 && !skip {
			return badAttr(ErrUmask, "%s needs a umask of group %d and has no default", ev.Name, i)
		}
	}
	return nil
}

// perf is pfm_intel_x86_get_perf_encoding (or, for the client uncores,
// pfm_intel_nhm_unc_get_perf_encoding): the register less what perf
// controls itself, and the second register in config1.
func (s *intelState) perf() error {
	a := &s.r.attr
	if s.p.Type == PMUTypeUncore {
		t, err := s.r.kernelPMUType()
		if err != nil {
			return err
		}
		a.Type = t
		a.Config = s.reg &^ (selEn | selInt)
		return nil
	}
	a.Type = unix.PERF_TYPE_RAW
	if s.p.PerfName != "" {
		if t, err := s.r.kernelPMUType(); err == nil {
			a.Type = t
		}
	}
	a.Config = s.reg &^ (selEn | selInt | selOS | selUsr)
	if s.count > 1 {
		if s.ev.Flags&(intelNHMOffcore|intelFrontend) != 0 {
			a.Ext1 = s.codes1
		}
		if s.ev.Flags&intelFiltUmask != 0 {
			a.Config |= s.codes1 << 32
		}
		if s.hasLDLatUmask() {
			a.Ext1 = s.codes1
		}
	}
	return nil
}

// hasLDLatUmask reports whether any umask, given or default, is a load
// latency one.
func (s *intelState) hasLDLatUmask() bool {
	for _, v := range s.r.pmuVals() {
		if s.r.desc(v).Type == attrUmask && s.umask(v).Flags&intelLDLat != 0 {
			return true
		}
	}
	return false
}
