package pfm

// The encoder of AMD's PMUs, K7 to Zen 6, the Family 15h northbridge,
// the Zen 3, 5 and 6 L3 and AMD RAPL (libpfm4's amd64 family).
//
// PERF_CTL layout: event select 0-7 and, for codes above 0xff, 32-35;
// unit mask 8-15; usr 16, os 17, edge 18, int 20, enable 22, invert 23,
// counter mask 24-31, guest 40, host 41. perf_events owns usr, os, int,
// enable, guest and host (through the exclude bits), so they stay clear
// in config.

import (
	"math/bits"

	"golang.org/x/sys/unix"
)

// amd64_entry_t flags: the low byte is flags, then the first and last
// PMU revision (pmu_rev) the event or unit mask exists on.
const (
	amdNCombo = 0x01
	amdIBSFe  = 0x02
	amdIBSOp  = 0x04
	amdDfl    = 0x08
	amdOmit   = 0x10
)

// AMD's modifiers, numbered as in the PMUs' modifier table (libpfm4's
// amd64_mods).
const (
	amdK = iota
	amdU
	amdE
	amdI
	amdC
	amdH
	amdG
	amdNumMods
)

// amdModBit is where each boolean modifier lives in PERF_CTL.
var amdModBit = [amdNumMods]uint{amdK: amdOS, amdU: amdUsr, amdE: amdEdge, amdI: amdInv, amdH: amdHost, amdG: amdGuest}

// libpfm4's internal AMD revisions (amd64_rev_t) that decide whether a
// PMU filters host and guest.
const (
	amdRevFam10h = 8
	amdRevFam11h = 11
)

// amdValid says whether a table entry with these flags exists on the
// PMU's revision.
func amdValid(p *PMU, flags uint32) bool {
	from, till := int(flags>>8&0xff), int(flags>>16&0xff)
	if till == 0 {
		till = 0xff
	}
	return p.Rev >= from && p.Rev <= till
}

func amdSupportsVirt(p *PMU) bool { return p.Rev >= amdRevFam10h && p.Rev != amdRevFam11h }

// amdPattrs lists what an AMD event accepts: its unit masks valid on
// this revision, its modifiers, then perf's. perf_events takes the
// privilege levels, so the PMU's own u, k and h go, except on the
// northbridge, which instead has no perf attributes at all
// (pfm_amd64_perf_validate_pattrs, pfm_amd64_nb_perf_validate_pattrs).
func amdPattrs(p *PMU, ev *Event) ([]attrDesc, func(int) bool) {
	descs := attrRoom(len(ev.Umasks) + bits.OnesCount32(ev.ModMask))
	for i := range ev.Umasks {
		if amdValid(p, ev.Umasks[i].Flags) {
			descs = append(descs, attrDesc{Name: ev.Umasks[i].Name, Type: attrUmask, Idx: i})
		}
	}
	if p.PerfName == "amd_nb" {
		descs = append(descs, pmuModifiers(p, ev, func(m int) bool { return m != perfHWSmpl })...)
		return descs, func(int) bool { return false }
	}
	descs = append(descs, pmuModifiers(p, ev, func(m int) bool {
		return m != amdU && m != amdK && m != amdH && m != perfHWSmpl
	})...)
	keep := func(idx int) bool {
		switch idx {
		case perfPrecise, perfHWSmpl:
			return false
		case perfH:
			return amdSupportsVirt(p)
		}
		return true
	}
	return descs, keep
}

// Bits of PERF_CTL.
const (
	amdUsr, amdOS, amdEdge, amdInt, amdEn, amdInv = 16, 17, 18, 20, 22, 23
	amdCntMask, amdGuest, amdHost                 = 24, 40, 41
	amdIBSFetchEn, amdIBSOpEn                     = 48, 17
)

func encodeAMD64(r *request) error {
	p, ev := r.pmu, r.event
	descs, keep := amdPattrs(p, ev)
	if err := r.parseAttrs(descs, keep); err != nil {
		return err
	}

	var (
		reg       bitReg
		umask     uint64
		plmmsk    uint32
		grpmsk    = uint32(1)<<ev.NumGroups - 1
		ugrpmsk   uint32
		grpCounts [32]int
		ncombo    [32]bool
	)
	switch {
	case ev.Flags&amdIBSFe != 0:
		reg.set(amdIBSFetchEn, 1, 1)
	case ev.Flags&amdIBSOp != 0:
		reg.set(amdIBSOpEn, 1, 1)
	default:
		reg.set(0, 8, ev.Code)
		reg.set(32, 4, ev.Code>>8)
		reg.set(amdEn, 1, 1)
		reg.set(amdInt, 1, 1)
	}

	for _, v := range r.pmuVals() {
		a := r.desc(v)
		switch a.Type {
		case attrUmask:
			u := &ev.Umasks[a.Idx]
			g := int(u.Group & 31)
			grpCounts[g]++
			if u.Flags&amdNCombo != 0 {
				ncombo[g] = true
			}
			if grpCounts[g] > 1 && ncombo[g] {
				return badAttr(ErrFeatComb, "%s: unit mask cannot be combined with another of its group", u.Name)
			}
			umask |= u.Code
			ugrpmsk |= 1 << u.Group
		case attrRawUmask:
			if r.raw&^0xff != 0 {
				return badAttr(ErrAttr, "%s: a raw unit mask is 8 bits", r.attrName(v.Desc))
			}
			umask = r.raw & 0xff
			ugrpmsk = grpmsk
		default:
			iv := v.Val
			switch a.Idx {
			case amdC:
				if iv > 255 {
					return badAttr(ErrAttrVal, "%s: value %d out of range [0-255]", a.Name, iv)
				}
				reg.set(amdCntMask, 8, iv)
			case amdK, amdU, amdE, amdI, amdH, amdG:
				reg.set(amdModBit[a.Idx], 1, b2u(iv != 0))
				if a.Idx != amdE && a.Idx != amdI {
					plmmsk |= 1 << a.Idx
				}
			}
		}
	}
	if plmmsk&(1<<amdK|1<<amdU|1<<amdH) == 0 {
		reg.set(amdOS, 1, b2u(r.plm&PLM0 != 0))
		reg.set(amdUsr, 1, b2u(r.plm&PLM3 != 0))
		reg.set(amdHost, 1, b2u(r.plm&PLMH != 0))
	}

	if ugrpmsk != grpmsk {
		um, added, err := r.amdDefaults(ugrpmsk ^ grpmsk)
		if err != nil {
			return err
		}
		umask |= um
		r.vals = append(r.vals, added...)
	}
	reg.set(8, 8, umask)

	r.canonicalUmasks()
	for _, a := range r.pattrs {
		if a.Perf || a.Type == attrUmask {
			continue
		}
		switch a.Idx {
		case amdC:
			r.addf(":c=%d", reg.get(amdCntMask, 8))
		case amdK, amdU, amdE, amdI, amdH, amdG:
			r.addf(":%s=%d", a.Name, reg.get(amdModBit[a.Idx], 1))
		}
	}

	r.attr.Type = unix.PERF_TYPE_RAW
	if p.PerfName != "" {
		typ, err := r.kernelPMUType()
		if err != nil {
			return err
		}
		r.attr.Type = typ
	}
	for _, b := range []uint{amdEn, amdInt, amdOS, amdUsr, amdGuest, amdHost} {
		reg.set(b, 1, 0)
	}
	r.attr.Config = uint64(reg)
	return nil
}

// amdDefaults adds the default unit masks of each group in msk the user
// left empty, as amd64_add_defaults does: a group needs one unless all
// its unit masks may be omitted.
func (r *request) amdDefaults(msk uint32) (uint64, []attrVal, error) {
	ev := r.event
	var um uint64
	var added []attrVal
	for i := uint32(0); msk != 0; msk, i = msk>>1, i+1 {
		if msk&1 == 0 {
			continue
		}
		n, omit, inGroup := 0, 0, 0
		for j, a := range r.pattrs {
			if a.Perf || a.Type != attrUmask {
				continue
			}
			u := &ev.Umasks[a.Idx]
			if uint32(u.Group) != i {
				continue
			}
			inGroup++
			if u.Flags&amdDfl != 0 {
				um |= u.Code
				added = append(added, attrVal{Desc: j})
				n++
			}
			if u.Flags&amdOmit != 0 {
				omit++
			}
		}
		if n == 0 && omit != inGroup {
			return 0, nil, badAttr(ErrUmask, "no unit mask given for group %d, and it has no default", i)
		}
	}
	return um, added, nil
}
