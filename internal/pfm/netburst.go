package pfm

// The encoder of libpfm4's Pentium 4 PMUs (netburst, netburst_p). An
// event programs two registers, an ESCR (event select, event mask, tag,
// privilege levels) and a CCCR (which ESCR, threads, threshold, edge);
// perf_events takes both in one config, the ESCR in the high half with
// perf's own number of the event in place of the event select. The
// catalog keeps the table's fields as package tables' README says: Code
// is the event select, CntMask the ESCR select, Flags perf's event code,
// a unit mask's Code its bit in the event mask (16 and up: tag bits).

import "golang.org/x/sys/unix"

// The netburst modifiers, by position in its table.
const (
	netburstModU = iota
	netburstModK
	netburstModCmpl
	netburstModE
	netburstModThr
)

const (
	netburstMaskBits  = 16  // event mask bits; unit mask bits past them tag the uops
	netburstUmaskDfl  = 0x1 // NETBURST_FL_DFL
	netburstReplay    = 37  // perf's code for replay_event, whose mask keeps only its two real bits
	netburstReplayMsk = 0x3 // P4_REPLAY_REAL_MASK
	escrEventSelShift = 25  // ESCR event select, 6 bits
	escrEventMaskShft = 9   // ESCR event mask, 16 bits
	escrTagShift      = 5   // ESCR tag value, 4 bits; tag enable is bit 4
	cccrEnable        = 1 << 12
	cccrESCRShift     = 13
	cccrBothThreads   = 3 << 16
	cccrCompare       = 1 << 18
	cccrComplement    = 1 << 19
	cccrThrShift      = 20
	cccrEdge          = 1 << 24
)

func encodeNetburst(r *request) error {
	p, ev := r.pmu, r.event
	descs := attrRoom(len(ev.Umasks) + len(p.Modifiers))
	for i, u := range ev.Umasks {
		descs = append(descs, attrDesc{Name: u.Name, Type: attrUmask, Idx: i})
	}
	// u and k are perf's (exclude bits), never the ESCR's.
	for m, mod := range p.Modifiers {
		if m == netburstModU || m == netburstModK || mod.Name == "" {
			continue
		}
		t := attrBool
		if mod.Type == ModInteger {
			t = attrInt
		}
		descs = append(descs, attrDesc{Name: mod.Name, Type: t, Idx: m})
	}
	keep := func(idx int) bool {
		switch idx {
		case perfPrecise, perfH, perfHWSmpl:
			return false
		}
		return perfKeep(p, idx)
	}
	if err := r.parseAttrs(descs, keep); err != nil {
		return err
	}

	var evmask, tag, cccr uint64
	umasks := false
	for _, v := range r.pmuVals() {
		d := r.desc(v)
		switch {
		case d.Type == attrRawUmask:
			return badAttr(ErrAttr, "%#x: no raw unit masks on %s", r.raw, p.Name)
		case d.Type == attrUmask:
			if bit := ev.Umasks[d.Idx].Code; bit < netburstMaskBits {
				evmask |= 1 << bit
			} else {
				tag |= 1 << (bit - netburstMaskBits)
			}
			umasks = true
		case d.Idx == netburstModE && v.Val != 0:
			cccr |= cccrCompare | cccrEdge
		case d.Idx == netburstModCmpl && v.Val != 0:
			cccr |= cccrCompare | cccrComplement
		case d.Idx == netburstModThr:
			if v.Val > 15 {
				return badAttr(ErrAttrVal, "thr=%d: at most 15", v.Val)
			}
			if v.Val != 0 {
				cccr |= cccrCompare | v.Val<<cccrThrShift
			}
		}
	}
	if !umasks {
		// The first default unit mask, or none: libpfm4 then blames an
		// attribute ("invalid event attribute").
		dfl := -1
		for i, u := range ev.Umasks {
			if u.Flags&netburstUmaskDfl != 0 {
				dfl = i
				break
			}
		}
		if dfl < 0 {
			return badAttr(ErrAttr, "%s needs a unit mask", ev.Name)
		}
		evmask = 1 << ev.Umasks[dfl].Code
		r.vals = append(r.vals, attrVal{Desc: r.umaskDesc(dfl)})
	}
	if ev.Flags == netburstReplay {
		evmask &= netburstReplayMsk
	}
	// The ESCR's privilege bits come from the levels asked of the call
	// (PFM_PLM0|PFM_PLM3), whatever u and k say.
	var escr uint64
	if r.plm&PLM0 != 0 {
		escr |= 0xa // t1_os, t0_os
	}
	if r.plm&PLM3 != 0 {
		escr |= 0x5 // t1_usr, t0_usr
	}
	if tag != 0 {
		escr |= 1<<4 | tag<<escrTagShift
	}
	escr |= evmask<<escrEventMaskShft | uint64(ev.Flags&0x3f)<<escrEventSelShift
	cccr |= cccrEnable | (ev.CntMask&7)<<cccrESCRShift | cccrBothThreads

	r.attr.Type = unix.PERF_TYPE_RAW
	r.attr.Config = escr<<32 | cccr
	r.canonicalUmasks()
	r.addf(":k=%d:u=%d:e=%d:cmpl=%d:thr=%d", b2i(escr&0x8 != 0), b2i(escr&0x4 != 0),
		b2i(cccr&cccrEdge != 0), b2i(cccr&cccrComplement != 0), cccr>>cccrThrShift&0xf)
	return nil
}
