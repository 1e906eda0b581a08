package pfm

// What the uncore, RAPL and AMD64 encoders share with libpfm4's common
// layer: the event's attribute list (its "pattrs": unit masks, the
// family's modifiers, then perf_events' own), the parsing of what the
// user wrote after the event name against that list, and the perf_events
// step that turns privilege levels into exclude bits.

import (
	"fmt"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrCode is one of libpfm4's PFM_ERR_* results.
type ErrCode int

const (
	ErrNotSupp  ErrCode = -1
	ErrInval    ErrCode = -2
	ErrNotFound ErrCode = -4
	ErrFeatComb ErrCode = -5
	ErrUmask    ErrCode = -6
	ErrAttr     ErrCode = -8
	ErrAttrVal  ErrCode = -9
	ErrAttrSet  ErrCode = -10
	ErrTooMany  ErrCode = -11
)

// String is pfm_strerror's wording, which the C agent logs.
func (c ErrCode) String() string {
	switch c {
	case ErrNotSupp:
		return "not supported"
	case ErrInval:
		return "invalid parameters"
	case ErrNotFound:
		return "event not found"
	case ErrFeatComb:
		return "invalid combination of model specific features"
	case ErrUmask:
		return "invalid or missing unit mask"
	case ErrAttr:
		return "invalid event attribute"
	case ErrAttrVal:
		return "invalid event attribute value"
	case ErrAttrSet:
		return "attribute value already set"
	case ErrTooMany:
		return "too many parameters"
	}
	return "unknown error code"
}

// famError is an encoding refused the way libpfm4 refuses it, with the
// event and the attribute at fault named.
type famError struct {
	Code   ErrCode
	Event  string // "pmu::EVENT"
	Attr   string // the attribute at fault, "" if none in particular
	Detail string
}

func (e *famError) Error() string {
	var b strings.Builder
	b.WriteString(e.Event)
	if e.Attr != "" {
		fmt.Fprintf(&b, ": attribute %q", e.Attr)
	}
	if e.Detail != "" {
		b.WriteString(": " + e.Detail)
	}
	b.WriteString(": " + e.Code.String())
	return b.String()
}

func (r *request) fail(code ErrCode, attr, format string, args ...any) error {
	return &famError{Code: code, Event: r.pmu.Name + "::" + r.event.Name, Attr: attr, Detail: fmt.Sprintf(format, args...)}
}

// PMU flags common to every family (pfmlib_pmu_t.flags, low 16 bits).
const (
	pmuFlagRawUmask = 0x4
	pmuFlagNoSmpl   = 0x10
)

// plmAll is every privilege level libpfm4 knows.
const plmAll = PLM0 | PLM1 | PLM2 | PLM3 | PLMH

// attrKind is an attribute's pfm_attr_t.
type attrKind uint8

const (
	kindUmask attrKind = iota
	kindBool
	kindInt
	kindRawUmask
)

// attrCtl says who interprets an attribute: the PMU's encoder or the
// perf_events layer.
type attrCtl uint8

const (
	ctlPMU attrCtl = iota
	ctlPerf
)

// pattr is one attribute an event accepts.
type pattr struct {
	name  string
	kind  attrKind
	ctl   attrCtl
	idx   int    // umask: index in Event.Umasks; modifier: the family's (or perf's) number
	equiv string // a umask that stands for others
}

// attrVal is one attribute as the user set it: which pattr (or, for a
// raw umask, len(pattrs)) and its value.
type attrVal struct {
	id   int
	ival uint64
	raw  uint64 // a raw umask
}

// perf_events' attributes, numbered as libpfm4 numbers them
// (PERF_ATTR_*), in the order it offers them.
const (
	perfU = iota
	perfK
	perfH
	perfPeriod
	perfFreq
	perfPrecise
	perfExcl
	perfMG
	perfMH
	perfCPU
	perfPinned
	perfHWSmpl
)

var perfAttrs = [...]pattr{
	{name: "u", kind: kindBool, ctl: ctlPerf, idx: perfU},
	{name: "k", kind: kindBool, ctl: ctlPerf, idx: perfK},
	{name: "h", kind: kindBool, ctl: ctlPerf, idx: perfH},
	{name: "period", kind: kindInt, ctl: ctlPerf, idx: perfPeriod},
	{name: "freq", kind: kindInt, ctl: ctlPerf, idx: perfFreq},
	{name: "precise", kind: kindInt, ctl: ctlPerf, idx: perfPrecise},
	{name: "excl", kind: kindBool, ctl: ctlPerf, idx: perfExcl},
	{name: "mg", kind: kindBool, ctl: ctlPerf, idx: perfMG},
	{name: "mh", kind: kindBool, ctl: ctlPerf, idx: perfMH},
	{name: "cpu", kind: kindInt, ctl: ctlPerf, idx: perfCPU},
	{name: "pinned", kind: kindBool, ctl: ctlPerf, idx: perfPinned},
	{name: "hw_smpl", kind: kindBool, ctl: ctlPerf, idx: perfHWSmpl},
}

// withPerfAttrs appends perf_events' attributes to a PMU's, keeping
// those drop does not reject. As in libpfm4's validate_pattrs hooks, the
// test may look at both PMU and perf attributes (drop sees every one but
// the unit masks, which never conflict).
func withPerfAttrs(pmuAttrs []pattr, drop func(a pattr) bool) []pattr {
	all := append(pmuAttrs, perfAttrs[:]...)
	out := all[:0]
	for _, a := range all {
		if a.kind == kindUmask || !drop(a) {
			out = append(out, a)
		}
	}
	return out
}

// libpfm4 keeps at most this many attributes per event.
const maxAttrs = 64

// parseAttrs matches the user's attributes against pattrs as
// pfmlib_parse_event_attr does, then drops duplicates as
// pfmlib_sanitize_event does (including its habit of looking past the
// attribute that follows one it dropped).
func (r *request) parseAttrs(pattrs []pattr) ([]attrVal, error) {
	var vals []attrVal
	var hasRaw, hasUmask bool
	var parse func(list []string) error
	parse = func(list []string) error {
		for _, s := range list {
			name, val, hasVal := strings.Cut(s, "=")
			if len(name) >= 2 && name[0] == '0' && (name[1] == 'x' || name[1] == 'X') {
				if hasRaw || hasUmask {
					return r.fail(ErrAttr, s, "a raw unit mask cannot be combined with another unit mask")
				}
				if r.pmu.Flags&pmuFlagRawUmask == 0 {
					return r.fail(ErrAttr, s, "%s takes no raw unit mask", r.pmu.Name)
				}
				v, ok := strtoull(name)
				if !ok {
					return r.fail(ErrAttr, s, "raw unit mask is not a number")
				}
				hasRaw = true
				if hasVal {
					return r.fail(ErrAttrVal, s, "a raw unit mask takes no value")
				}
				vals = append(vals, attrVal{id: len(pattrs), raw: v})
				continue
			}
			id := -1
			for i, a := range pattrs {
				// A modifier and a unit mask may share a name
				// (snb::L2_LINES_IN:I:I=1): a value means the modifier.
				if strings.EqualFold(a.name, name) && !(hasVal && a.kind == kindUmask) {
					id = i
					break
				}
			}
			if id < 0 {
				return r.fail(ErrAttr, s, "no such unit mask or modifier")
			}
			a := pattrs[id]
			if a.kind == kindUmask {
				hasUmask = true
				if hasRaw {
					return r.fail(ErrAttr, s, "a unit mask cannot be combined with a raw unit mask")
				}
			}
			if a.equiv != "" {
				if hasVal {
					return r.fail(ErrAttrVal, s, "an alias takes no value")
				}
				if err := parse(strings.FieldsFunc(a.equiv, func(c rune) bool { return c == ':' || c == '.' })); err != nil {
					return err
				}
				continue
			}
			if a.kind != kindUmask && !hasVal {
				if a.kind != kindBool {
					return r.fail(ErrAttrVal, s, "modifier needs a value")
				}
				val, hasVal = "y", true
			}
			v := attrVal{id: id}
			if hasVal {
				if val == "" {
					return r.fail(ErrAttrVal, s, "empty value")
				}
				if len(vals) == maxAttrs {
					return r.fail(ErrTooMany, s, "more than %d attributes", maxAttrs)
				}
				switch a.kind {
				case kindBool:
					if len(val) > 1 {
						return r.fail(ErrAttrVal, s, "boolean is one of 0 1 y n t f")
					}
					switch strings.ToLower(val) {
					case "y", "t", "1":
						v.ival = 1
					case "n", "f", "0":
					default:
						return r.fail(ErrAttrVal, s, "boolean is one of 0 1 y n t f")
					}
				case kindInt:
					n, ok := strtoull(val)
					if !ok {
						return r.fail(ErrAttrVal, s, "not a number")
					}
					v.ival = n
				}
			}
			vals = append(vals, v)
		}
		return nil
	}
	if err := parse(r.attrs); err != nil {
		return nil, err
	}
	for i := 0; i < len(vals); i++ {
		for j := i + 1; j < len(vals); j++ {
			if !sameAttr(pattrs, vals[i], vals[j]) {
				continue
			}
			if vals[i].ival != vals[j].ival {
				return nil, r.fail(ErrAttrSet, attrName(pattrs, vals[j]), "set twice to different values")
			}
			vals = append(vals[:j], vals[j+1:]...)
		}
	}
	return vals, nil
}

func attrInfo(pattrs []pattr, v attrVal) pattr {
	if v.id == len(pattrs) {
		return pattr{name: "RAW_UMASK", kind: kindRawUmask, ctl: ctlPMU, idx: int(v.raw)}
	}
	return pattrs[v.id]
}

func attrName(pattrs []pattr, v attrVal) string {
	if v.id == len(pattrs) {
		return fmt.Sprintf("0x%x", uint32(v.raw))
	}
	return pattrs[v.id].name
}

func sameAttr(pattrs []pattr, a, b attrVal) bool {
	x, y := attrInfo(pattrs, a), attrInfo(pattrs, b)
	return x.idx == y.idx && x.kind == y.kind && x.ctl == y.ctl
}

// sortAttrs orders attributes as libpfm4 prints them: by pattrs index.
func sortAttrs(vals []attrVal) {
	for i := 1; i < len(vals); i++ {
		for j := i; j > 0 && vals[j].id < vals[j-1].id; j-- {
			vals[j], vals[j-1] = vals[j-1], vals[j]
		}
	}
}

// strtoull parses s as C's strtoull(s, &end, 0) does and says whether it
// used all of s. Overflow gives the largest value, as in C.
func strtoull(s string) (uint64, bool) {
	i := 0
	for i < len(s) && (s[i] == ' ' || (s[i] >= '\t' && s[i] <= '\r')) {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	base := uint64(10)
	if i+1 < len(s) && s[i] == '0' && (s[i+1] == 'x' || s[i+1] == 'X') && i+2 < len(s) && hexDigit(s[i+2]) >= 0 {
		base, i = 16, i+2
	} else if i < len(s) && s[i] == '0' {
		base = 8
	}
	start := i
	var n uint64
	over := false
	for ; i < len(s); i++ {
		d := hexDigit(s[i])
		if d < 0 || uint64(d) >= base {
			break
		}
		if n > (^uint64(0)-uint64(d))/base {
			over = true
		}
		n = n*base + uint64(d)
	}
	if i == start {
		return 0, false
	}
	if over {
		return ^uint64(0), i == len(s)
	}
	if neg {
		n = -n
	}
	return n, i == len(s)
}

func hexDigit(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// fstr builds libpfm4's canonical name in its fixed buffer, which keeps
// at most 255 characters, dropping whatever would not fit.
type fstr struct{ b []byte }

const fstrMax = 255

func (f *fstr) add(format string, args ...any) {
	if room := fstrMax - len(f.b); room > 0 {
		s := fmt.Sprintf(format, args...)
		if len(s) > room {
			s = s[:room]
		}
		f.b = append(f.b, s...)
	}
}

// perfFinish is the perf_events layer's part once the PMU's encoder has
// filled r.attr.Type and Config..: perf attributes the user set, the
// exclude bits from the privilege levels the PMU can filter, and the
// perf part of the canonical name; then r.fstr becomes "pmu::name...".
func (r *request) perfFinish(pattrs []pattr, vals []attrVal, f *fstr) error {
	attr := &r.attr
	var plm, vmxPLM uint32
	hasPLM, hasVMX := false, false
	pinned := false
	for _, v := range vals {
		a := attrInfo(pattrs, v)
		if a.ctl != ctlPerf {
			continue
		}
		switch a.idx {
		case perfU, perfK, perfH:
			if v.ival != 0 {
				plm |= [...]uint32{PLM3, PLM0, PLMH}[a.idx]
			}
			hasPLM = true
		case perfPeriod:
			if v.ival == 0 || attr.Bits&unix.PerfBitFreq != 0 {
				return r.fail(ErrAttrVal, a.name, "period must be positive and not given with freq")
			}
			attr.Sample = v.ival
		case perfFreq:
			if v.ival == 0 || attr.Sample != 0 {
				return r.fail(ErrAttrVal, a.name, "freq must be positive and not given with period")
			}
			attr.Sample = v.ival
			attr.Bits |= unix.PerfBitFreq
		case perfPrecise:
			if v.ival > 3 {
				return r.fail(ErrAttrVal, a.name, "precise is 0 to 3")
			}
			setPrecise(attr, v.ival)
		case perfExcl:
			if v.ival != 0 {
				attr.Bits |= unix.PerfBitExclusive
			}
		case perfMG:
			// libpfm4 counts the guest in whatever value mg= has.
			vmxPLM |= PLM3
			hasVMX = true
		case perfMH:
			vmxPLM |= PLM0
			hasVMX = true
		case perfCPU:
			if v.ival >= 1<<31-1 {
				return r.fail(ErrAttrVal, a.name, "cpu out of range")
			}
		case perfPinned:
			pinned = v.ival != 0
		case perfHWSmpl:
			setPrecise(attr, min(v.ival, 1))
		}
	}
	if !hasPLM {
		plm = r.plm
	}
	if !hasVMX {
		vmxPLM = PLM0
	}
	plm |= ^r.pmu.SupportedPLM & plmAll
	vmxPLM |= ^r.pmu.SupportedPLM & plmAll
	const excl = unix.PerfBitExcludeUser | unix.PerfBitExcludeKernel | unix.PerfBitExcludeHv |
		unix.PerfBitExcludeGuest | unix.PerfBitExcludeHost | unix.PerfBitPinned
	attr.Bits &^= excl
	setIf := func(bit uint64, on bool) {
		if on {
			attr.Bits |= bit
		}
	}
	setIf(unix.PerfBitExcludeUser, plm&PLM3 == 0)
	setIf(unix.PerfBitExcludeKernel, plm&PLM0 == 0)
	setIf(unix.PerfBitExcludeHv, plm&PLMH == 0)
	setIf(unix.PerfBitExcludeGuest, vmxPLM&PLM3 == 0)
	setIf(unix.PerfBitExcludeHost, vmxPLM&PLM0 == 0)
	setIf(unix.PerfBitPinned, pinned)

	b2i := func(b bool) int {
		if b {
			return 1
		}
		return 0
	}
	for _, a := range pattrs {
		if a.ctl != ctlPerf {
			continue
		}
		switch a.idx {
		case perfK:
			f.add(":k=%d", b2i(plm&PLM0 != 0))
		case perfU:
			f.add(":u=%d", b2i(plm&PLM3 != 0))
		case perfH:
			f.add(":h=%d", b2i(plm&PLMH != 0))
		case perfPrecise, perfHWSmpl:
			f.add(":%s=%d", a.name, precise(attr))
		case perfPeriod, perfFreq:
			if attr.Sample != 0 {
				f.add(":%s=%d", a.name, attr.Sample)
			}
		case perfMG:
			f.add(":mg=%d", b2i(attr.Bits&unix.PerfBitExcludeGuest == 0))
		case perfMH:
			f.add(":mh=%d", b2i(attr.Bits&unix.PerfBitExcludeHost == 0))
		case perfExcl:
			f.add(":excl=%d", b2i(attr.Bits&unix.PerfBitExclusive != 0))
		}
	}
	r.fstr = r.pmu.Name + "::" + string(f.b)
	return nil
}

const precisePos = 15 // precise_ip: bits 15-16 of perf_event_attr's flags

func setPrecise(attr *unix.PerfEventAttr, v uint64) {
	attr.Bits = attr.Bits&^(3<<precisePos) | (v&3)<<precisePos
}

func precise(attr *unix.PerfEventAttr) uint64 { return attr.Bits >> precisePos & 3 }

// perfType asks the environment for a kernel PMU's perf_event type.
func (r *request) perfType(name string) (uint32, error) {
	if r.env.PerfType == nil {
		return 0, r.fail(ErrNotSupp, "", "no kernel PMU %s (no sysfs given)", name)
	}
	t, err := r.env.PerfType(name)
	if err != nil {
		return 0, r.fail(ErrNotSupp, "", "kernel PMU %s: %v", name, err)
	}
	return t, nil
}
