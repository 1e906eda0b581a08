package pfm

import "math/bits"

// The encoder of Intel's server uncore PMUs, SandyBridge-EP to Granite
// Rapids and Knights Landing/Mill (libpfm4's snbep_unc family: snbep_unc_*,
// ivbep_unc_*, hswep_unc_*, bdx_unc_*, skx_unc_*, knl_unc_*, knm_unc_*,
// and since 4.13 icx_unc_*, spr_unc_* and gnr_unc_imc*).
//
// Each box's control register shares a layout: event 0-7, umask 8-15,
// edge 18, enable 22, invert 23, threshold 24-31. The power unit (PCU)
// selects occupancy with bits 14-15 and has its own invert and edge for
// it; C-boxes and CHAs have filter registers, handed to perf as config1
// (and config2).

// Per-architecture PMU flags (pfmlib_pmu_t.flags, high 16 bits).
const (
	uncFlagOcc = 0x10000 // the PMU has occupancy events (PCU)
	uncFlagCbo = 0x20000 // a C-box
	uncFlagCha = 0x40000 // a CHA (Skylake and later)
)

// intel_x86 event flag only the uncore reads: filter 0 goes to perf even
// when zero. (The others are intel.go's.)
const ixForceFilt0 = 0x20000

// The uncore modifiers, numbered as in the PMUs' modifier table
// (libpfm4's snbep_unc_mods): an event's ModMask has bit n set when it
// takes modifier n. Several share a name (two "t", "tf", "nf" and three
// "cf"); an event takes one of each.
const (
	uncE = iota
	uncI
	uncT8
	uncT5
	uncTF
	uncCF
	uncNF
	uncFF
	uncA
	uncNF1
	uncIsoc
	uncNC
	uncCF1
	uncTF1
	uncCF2
	uncLoc
	uncRem
	uncLMem
	uncRMem
	uncDNID
	uncRCSNID
	// Added after 4.13, for the Ice Lake-SP PCU: a 6-bit threshold and
	// the occupancy counter's own invert and edge.
	uncT6
	uncOccI
	uncOccE
	uncNumMods
)

// uncorePattrs lists what an uncore event accepts: its unit masks (those
// of this model), its modifiers, then perf's, less those the uncore
// cannot honour (pfm_intel_snbep_unc_perf_validate_pattrs).
func uncorePattrs(p *PMU, ev *Event) ([]attrDesc, func(int) bool) {
	descs := attrRoom(len(ev.Umasks) + bits.OnesCount32(ev.ModMask))
	for i := range ev.Umasks {
		u := &ev.Umasks[i]
		if intelModel(p, u.Model) {
			descs = append(descs, attrDesc{Name: u.Name, Type: attrUmask, Idx: i, Equiv: u.Equiv})
		}
	}
	// libpfm4 drops any attribute numbered like perf's hw_smpl, the
	// PMU's own included: the uncore's modifier 11, "nc", is never usable.
	descs = append(descs, pmuModifiers(p, ev, func(m int) bool { return m != perfHWSmpl })...)
	keep := func(idx int) bool {
		switch idx {
		case perfPrecise, perfH, perfHWSmpl:
			return false
		}
		return perfKeep(p, idx)
	}
	return descs, keep
}

// pmuModifiers lists the modifiers an event takes, from its PMU's
// modifier table, in table order, those use refuses left out.
func pmuModifiers(p *PMU, ev *Event, use func(m int) bool) []attrDesc {
	var descs []attrDesc
	for m := 0; m < 32; m++ {
		if ev.ModMask&(1<<m) == 0 || !use(m) {
			continue
		}
		d := attrDesc{Idx: m, Type: attrBool}
		if m < len(p.Modifiers) {
			d.Name = p.Modifiers[m].Name
			if p.Modifiers[m].Type == ModInteger {
				d.Type = attrInt
			}
		}
		descs = append(descs, d)
	}
	return descs
}

// uncField is a field of the control register (reg 0) or of filter 0
// or 1 (reg 1, 2).
type uncField struct{ reg, pos, width uint }

// uncMod says how a modifier is encoded: the values it takes, the field
// it sets and the one the canonical name shows (not always the same:
// libpfm4 shows tf= as the thread filter's enable bit, and rmem= as rem=).
type uncMod struct {
	bool      bool // 0 or 1, whatever the value
	min, max  uint64
	set, show uncField
	tid       bool // also enables the box's thread and core filter
	enable    uint // a bit of filter 0 it also sets, 0 for none
}

var (
	ctlThres8 = uncField{0, rThres, 8}
	ctlThres5 = uncField{0, rThres, 5}
	ctlTID    = uncField{0, rTID, 1}
)

// uncMods are the modifiers other than e, i (whose field depends on the
// event), ff and addr, nil for those. Values past the field's width are
// cut, as the C bit-fields cut them (cf on SandyBridge-EP takes 0-15 in 3
// bits). An array, not a map, so that it is data in the binary rather than
// a map every start builds.
var uncMods = [uncNumMods]*uncMod{
	uncT8:     {max: 255, set: ctlThres8, show: ctlThres8},
	uncT5:     {max: 31, set: ctlThres5, show: ctlThres5},
	uncTF:     {max: 1, set: uncField{1, 0, 1}, show: ctlTID, tid: true},
	uncTF1:    {max: 7, set: uncField{1, 0, 3}, show: uncField{1, 0, 3}, tid: true},
	uncCF:     {max: 15, set: uncField{1, 1, 3}, show: uncField{1, 1, 3}, tid: true},
	uncCF1:    {max: 63, set: uncField{1, 1, 5}, show: uncField{1, 1, 5}, tid: true},
	uncCF2:    {max: 64, set: uncField{1, 3, 6}, show: uncField{1, 3, 6}, tid: true},
	uncNF:     {min: 1, max: 255, set: uncField{1, 10, 8}, show: uncField{1, 10, 8}},
	uncNF1:    {min: 1, max: 255, set: uncField{2, 0, 16}, show: uncField{2, 0, 16}},
	uncDNID:   {max: 15, set: uncField{1, 8, 4}, show: uncField{1, 8, 4}, enable: 13},
	uncRCSNID: {max: 15, set: uncField{1, 14, 4}, show: uncField{1, 14, 4}, enable: 18},
	uncT6:     {max: 63, set: ctlThres8, show: uncField{0, rThres, 6}},
	uncOccI:   {bool: true, set: uncField{0, rOccInv, 1}, show: uncField{0, rOccInv, 1}},
	uncOccE:   {bool: true, set: uncField{0, rOccEdge, 1}, show: uncField{0, rOccEdge, 1}},
	uncIsoc:   {bool: true, set: uncField{2, 31, 1}, show: uncField{2, 31, 1}},
	uncNC:     {bool: true, set: uncField{2, 30, 1}, show: uncField{2, 30, 1}},
	uncLoc:    {bool: true, set: uncField{2, 1, 1}, show: uncField{2, 1, 1}},
	uncRem:    {bool: true, set: uncField{2, 0, 1}, show: uncField{2, 0, 1}},
	// libpfm4 4.13 sets the local-target bit for lmem, and shows rem
	// for rmem.
	uncLMem: {bool: true, set: uncField{2, 1, 1}, show: uncField{2, 1, 1}},
	uncRMem: {bool: true, set: uncField{2, 5, 1}, show: uncField{2, 0, 1}},
}

// uncModOf is modifier i's entry of uncMods.
func uncModOf(i int) (uncMod, bool) {
	if i < 0 || i >= len(uncMods) || uncMods[i] == nil {
		return uncMod{}, false
	}
	return *uncMods[i], true
}

// uncEdgeInv is where e and i go: the PCU's occupancy events have their
// own edge and invert bits.
func uncEdgeInv(m int, occ bool) uncField {
	switch {
	case m == uncE && occ:
		return uncField{0, rOccEdge, 1}
	case m == uncE:
		return uncField{0, rEdge, 1}
	case occ:
		return uncField{0, rOccInv, 1}
	}
	return uncField{0, rInv, 1}
}

// bitReg is a 64-bit register (a box's control register, a filter, AMD's
// PERF_CTL) whose fields the encoders set and read.
type bitReg uint64

func (r *bitReg) set(pos, width uint, v uint64) {
	m := uint64(1)<<width - 1
	*r = bitReg(uint64(*r)&^(m<<pos) | (v&m)<<pos)
}

func (r bitReg) get(pos, width uint) uint64 { return uint64(r) >> pos & (1<<width - 1) }

// Field positions in the registers.
const (
	rEdge, rTID, rInv, rThres = 18, 19, 23, 24
	rOcc, rOccInv, rOccEdge   = 14, 30, 31
)

func encodeIntelUncore(r *request) error {
	descs, keep := uncorePattrs(r.pmu, r.event)
	if err := r.parseAttrs(descs, keep); err != nil {
		return err
	}
	s := newUncState(r)
	for _, v := range r.pmuVals() {
		if err := s.attr(v); err != nil {
			return err
		}
	}
	if err := s.complete(); err != nil {
		return err
	}
	if err := s.canonical(); err != nil {
		return err
	}
	return s.perf()
}

// uncState is one uncore encoding in progress (the locals of
// pfm_intel_snbep_unc_get_encoding).
type uncState struct {
	r   *request
	p   *PMU
	ev  *Event
	occ bool // a PCU occupancy event

	reg       bitReg    // the box's control register
	filt      [2]bitReg // its filter registers
	addr      bitReg    // the home agent's address match (no 4.13 event takes it)
	mustFilt0 bool      // filter 0 goes to perf even when zero
	pcuBand   int       // ff's frequency band, -1 without ff

	umask1, umask2 uint64 // the unit mask the event code carries, and the unit masks'
	grpmsk         uint32 // every group the event has
	ugrpmsk        uint32 // the groups given a unit mask
	maxGrp         int    // EXCL_GRP_GT: no default from a higher group
	maxReqGrp      int    // GRP_REQ: the highest group required, -1 for none
	reqGrps        [8]bool
	rules          *groupRules
	umodmsk        uint32 // the modifiers given that unit masks may require
	modmskReq      uint32 // the modifiers the event and its unit masks require
	numasks        int
}

func newUncState(r *request) *uncState {
	p, ev := r.pmu, r.event
	return &uncState{
		r: r, p: p, ev: ev,
		occ:       p.Flags&uncFlagOcc != 0 && ev.Code&0x80 != 0,
		reg:       bitReg(ev.Code),
		mustFilt0: ev.Flags&ixForceFilt0 != 0,
		pcuBand:   -1,
		umask1:    ev.Code >> 8,
		umask2:    ev.Code >> 8,
		grpmsk:    uint32(1)<<ev.NumGroups - 1,
		maxGrp:    noGroup,
		maxReqGrp: -1,
		rules:     newGroupRules(),
		modmskReq: ev.ModMaskReq,
	}
}

// setFilters applies a unit mask's filter bits: the low 32 bits of each
// of its values are set in that filter, the high 32 cleared.
func (s *uncState) setFilters(u *Umask) {
	for i := range s.filt {
		s.filt[i] |= bitReg(u.Filters[i] & 0xffffffff)
		s.filt[i] &^= bitReg(u.Filters[i] >> 32)
	}
}

// attr takes one attribute the name gave, in the order given.
func (s *uncState) attr(v attrVal) error {
	a := s.r.desc(v)
	switch a.Type {
	case attrUmask:
		return s.umask(&s.ev.Umasks[a.Idx])
	case attrRawUmask:
		if s.r.raw&^0xff != 0 {
			return badAttr(ErrAttr, "%s: a raw unit mask is 8 bits", s.r.attrName(v.Desc))
		}
		s.umask2 = s.r.raw & 0xff
		s.ugrpmsk = s.grpmsk
		s.numasks++
		return nil
	}
	return s.modifier(a, v.Val)
}

func (s *uncState) umask(u *Umask) error {
	grp := int(u.Group & 0xff)
	if err := s.rules.grpExcl(s.ev, u, grp); err != nil {
		return err
	}
	if u.Flags&intelExclGrpGT != 0 {
		s.maxGrp = grp
	}
	if u.Flags&intelGrpReq != 0 {
		req := int(u.Group >> 8 & 0xff)
		s.maxReqGrp = max(s.maxReqGrp, req)
		s.reqGrps[req&7] = true
	}
	if err := s.rules.ncombo(u, grp); err != nil {
		return err
	}
	s.setFilters(u)
	s.umask2 |= u.Code >> 8
	s.ugrpmsk |= 1 << grp
	if s.occ {
		// An occupancy event's unit mask picks the occupancy counter.
		s.reg.set(rOcc, 2, s.umask2>>6)
		s.umask2 = 0
	} else {
		s.reg |= bitReg(s.umask2 << 8)
	}
	s.modmskReq |= u.ModMaskReq
	s.numasks++
	return nil
}

func (s *uncState) modifier(a attrDesc, iv uint64) error {
	regs := [3]*bitReg{&s.reg, &s.filt[0], &s.filt[1]}
	switch m, ok := uncModOf(a.Idx); {
	case a.Idx == uncE || a.Idx == uncI:
		f := uncEdgeInv(a.Idx, s.occ)
		regs[f.reg].set(f.pos, 1, b2u(iv != 0))
	case a.Idx == uncFF:
		if iv > 255 {
			return badAttr(ErrAttrVal, "%s: value %d out of range [0-255]", a.Name, iv)
		}
		// The band is the event's distance from UNC_P_FREQ_BAND0_CYCLES
		// (0xb); its threshold replaces all of filter 0.
		s.pcuBand = int(s.reg.get(0, 8)) - 0xb
		s.filt[0] = bitReg(iv << (uint(s.pcuBand) * 8 & 63))
	case a.Idx == uncA:
		if iv>>40 != 0 {
			return badAttr(ErrAttrVal, "%s: value %#x wider than 40 bits", a.Name, iv)
		}
		s.addr.set(6, 26, iv)
		s.addr.set(32, 14, iv>>26)
	case !ok:
		return badAttr(ErrAttr, "%s: unknown modifier %d", a.Name, a.Idx)
	case m.bool:
		regs[m.set.reg].set(m.set.pos, 1, b2u(iv != 0))
	default:
		if iv < m.min || iv > m.max {
			return badAttr(ErrAttrVal, "%s: value %d out of range [%d-%d]", a.Name, iv, m.min, m.max)
		}
		regs[m.set.reg].set(m.set.pos, m.set.width, iv)
		if m.tid {
			s.reg.set(rTID, 1, 1)
			s.mustFilt0 = true
		}
		if m.enable != 0 {
			s.filt[0].set(m.enable, 1, 1)
		}
	}
	if a.Idx < 10 || a.Idx == uncCF1 || a.Idx == uncTF1 || a.Idx == uncCF2 || a.Idx >= uncT6 {
		s.umodmsk |= 1 << a.Idx
	}
	return nil
}

// complete checks the groups and modifiers required, and adds the
// default unit masks.
func (s *uncState) complete() error {
	r, ev := s.r, s.ev
	for x := 0; x <= s.maxReqGrp; x++ {
		if s.reqGrps[x&7] && s.ugrpmsk&(1<<x) == 0 {
			return badAttr(ErrFeatComb, "a unit mask of group %d is required", x)
		}
	}
	if len(ev.Umasks) > 0 && (s.ugrpmsk != s.grpmsk || s.ugrpmsk == 0) {
		um, added, err := r.uncoreDefaults(s.ugrpmsk^s.grpmsk, s.maxGrp, s.setFilters)
		if err != nil {
			return err
		}
		r.vals = append(r.vals, added...)
		s.numasks += len(added)
		s.umask2 |= um
	}
	if len(ev.Umasks) > 0 && s.numasks == 0 {
		return badAttr(ErrAttr, "the event needs a unit mask")
	}
	for _, nf := range []int{uncNF, uncNF1} {
		if s.modmskReq&(1<<nf) == 0 && s.umodmsk&(1<<nf) != 0 {
			return badAttr(ErrAttr, "nf: no unit mask chosen takes it")
		}
	}
	if s.modmskReq != 0 && s.umodmsk&s.modmskReq == 0 {
		return badAttr(ErrAttr, "%s needs one of the modifiers %s", ev.Name, modNames(s.p, s.modmskReq))
	}
	// A CHA's TOR events filter on opcode and target only as asked: by
	// default every target and opcode (rem, loc, all_opc, nm, not_nm).
	if isChaFilt(s.p, 1, s.reg) {
		if s.filt[1] == 0 {
			s.filt[1] = 0x3b
		} else if s.filt[1].get(9, 10) != 0 || s.filt[1].get(19, 10) != 0 {
			s.filt[1] &^= 1 << 3
		}
	}
	s.reg |= bitReg((s.umask1 | s.umask2) << 8)
	return nil
}

// canonical writes the canonical name: unit masks, then every modifier
// the event has with its final value.
func (s *uncState) canonical() error {
	r := s.r
	r.canonicalUmasks()
	for _, a := range r.pattrs {
		if a.Perf || a.Type == attrUmask {
			continue
		}
		regs := [3]bitReg{s.reg, s.filt[0], s.filt[1]}
		var v uint64
		switch m, ok := uncModOf(a.Idx); {
		case a.Idx == uncE || a.Idx == uncI:
			f := uncEdgeInv(a.Idx, s.occ)
			v = regs[f.reg].get(f.pos, 1)
		case a.Idx == uncFF:
			v = uint64(s.filt[0]) >> (uint(s.pcuBand) * 8 & 63) & 0xff
		case a.Idx == uncA:
			// libpfm4 computes this in 32 bits.
			r.addf(":addr=0x%x", uint32(s.addr.get(32, 14)<<26|s.addr.get(6, 26)))
			continue
		case (a.Idx == uncNF || a.Idx == uncNF1) && s.modmskReq&(1<<a.Idx) == 0:
			continue // shown only where a unit mask requires it
		case !ok:
			return badAttr(ErrAttr, "%s: unknown modifier %d", a.Name, a.Idx)
		default:
			v = regs[m.show.reg].get(m.show.pos, m.show.width)
		}
		r.addf(":%s=%d", a.Name, v)
	}
	return nil
}

// perf is pfm_intel_snbep_unc_get_perf_encoding: the kernel PMU's type,
// the control register as config, the filters (and address match) that
// are set after it.
func (s *uncState) perf() error {
	codes := []uint64{uint64(s.reg)}
	if s.filt[0] != 0 || s.filt[1] != 0 || s.mustFilt0 {
		codes = append(codes, uint64(s.filt[0]))
	}
	if s.filt[1] != 0 {
		codes = append(codes, uint64(s.filt[1]))
	}
	if s.addr != 0 {
		codes = append(codes, uint64(s.addr))
	}
	a := &s.r.attr
	typ, err := s.r.kernelPMUType()
	if err != nil {
		return err
	}
	a.Type = typ
	a.Config = codes[0]
	if (isCboFilt(s.p, s.reg) || isChaFilt(s.p, 0, s.reg) || isChaFilt(s.p, 1, s.reg)) && len(codes) > 1 {
		// The kernel takes both C-box filters in config1.
		a.Ext1 = codes[1]
		if len(codes) >= 3 {
			a.Ext1 |= codes[2] << 32
		}
		return nil
	}
	if len(codes) >= 2 {
		a.Ext1 = codes[1]
	}
	if len(codes) >= 3 {
		a.Ext2 = codes[2]
	}
	return nil
}

// uncoreDefaults adds the default unit mask of each group in msk that the
// user left empty, as snbep_unc_add_defaults does.
func (r *request) uncoreDefaults(msk uint32, maxGrp int, setFilters func(*Umask)) (uint64, []attrVal, error) {
	ev := r.event
	var um uint64
	var added []attrVal
	for i := 0; msk != 0; msk, i = msk>>1, i+1 {
		if msk&1 == 0 {
			continue
		}
		n, skip := 0, false
		for j, a := range r.pattrs {
			if a.Perf || a.Type != attrUmask {
				continue
			}
			u := &ev.Umasks[a.Idx]
			if int(u.Group&0xff) != i {
				continue
			}
			if maxGrp != noGroup && i > maxGrp {
				skip = true
				continue
			}
			if u.Flags&intelGrpDflNone != 0 {
				skip = true
				continue
			}
			if u.Flags&intelDFL == 0 {
				continue
			}
			um |= u.Code >> 8
			setFilters(u)
			added = append(added, attrVal{Desc: j})
			n++
			if ev.Flags&intelGrpExcl != 0 {
				return um, added, nil
			}
			if u.Flags&intelExclGrpGT != 0 {
				if maxGrp != noGroup {
					return 0, nil, badAttr(ErrUmask, "%s: two default unit masks limit the groups", u.Name)
				}
				maxGrp = int(u.Group & 0xff)
			}
		}
		if n == 0 && !skip {
			return 0, nil, badAttr(ErrUmask, "no unit mask given for group %d, and it has no default", i)
		}
	}
	return um, added, nil
}

// isChaFilt says whether a CHA event uses filter x: LLC_LOOKUP (0x34)
// filter 0, TOR_INSERTS and TOR_OCCUPANCY (0x35, 0x36) filter 1.
func isChaFilt(p *PMU, x int, reg bitReg) bool {
	if p.Flags&uncFlagCha == 0 {
		return false
	}
	sel := reg.get(0, 8)
	if x == 0 {
		return sel == 0x34
	}
	return sel == 0x35 || sel == 0x36
}

// isCboFilt says whether a C-box event's filters go to config1 together:
// opcode-matching (umask bit 0) LLC_LOOKUP and TOR events.
func isCboFilt(p *PMU, reg bitReg) bool {
	if p.Flags&uncFlagCbo == 0 {
		return false
	}
	sel := reg.get(0, 8)
	return reg.get(8, 1) == 1 && (sel == 0x34 || sel == 0x35 || sel == 0x36)
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}
