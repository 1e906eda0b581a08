package pfm

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// This file is libpfm4's perf_events layer, which every family shares:
// splitting a name into PMU, event and attributes, finding the event,
// parsing the attributes against the list the event accepts, and after
// the family's encoder has done its part, the perf-level modifiers (u, k,
// h, period, freq, precise, excl, mg, mh, cpu, pinned, hw_smpl), the
// exclude bits and the tail of the canonical name.

// libpfm4's error codes, by the text pfm_strerror gives them. Encode's
// errors wrap one of these, so errors.Is tells them apart.
var (
	ErrNotSupported = errors.New("not supported")
	ErrInvalid      = errors.New("invalid parameters")
	ErrNotFound     = errors.New("event not found")
	ErrFeatComb     = errors.New("invalid combination of model specific features")
	ErrUmask        = errors.New("invalid or missing unit mask")
	ErrAttr         = errors.New("invalid event attribute")
	ErrAttrVal      = errors.New("invalid event attribute value")
	ErrAttrSet      = errors.New("attribute value already set")
	ErrTooMany      = errors.New("too many parameters")
)

// EncodeError says which name, and which of its attributes if one is to
// blame, libpfm4 would have refused.
type EncodeError struct {
	Name string // the name as given
	Attr string // the offending attribute or umask, "" when the name as a whole is at fault
	Err  error  // one of the Err* values above
}

func (e *EncodeError) Error() string {
	if e.Attr == "" {
		return fmt.Sprintf("perf event %q: %v", e.Name, e.Err)
	}
	return fmt.Sprintf("perf event %q: %s: %v", e.Name, e.Attr, e.Err)
}

func (e *EncodeError) Unwrap() error { return e.Err }

// badAttr is how encoders blame one attribute; Encode adds the name.
func badAttr(err error, format string, args ...any) error {
	return &EncodeError{Attr: fmt.Sprintf(format, args...), Err: err}
}

// PMU flags common to every family (pfmlib_pmu_t.flags, low 16 bits).
const (
	pmuFlagRawUmask   = 0x4  // takes a raw hexadecimal umask ("0x41")
	pmuFlagNoSampling = 0x10 // cannot sample: no period, freq or precise
	pmuFlagDeprecated = 0x40 // skipped when the name has no PMU prefix
)

// PLMAll is every privilege level libpfm4 knows.
const PLMAll = PLM0 | PLM1 | PLM2 | PLM3 | PLMH

// loadPMU gives a PMU of the host's libpfm4 build by its short name, from
// the generated tables; tests swap in small hand-made PMUs.
var loadPMU = Load

// loadArchPMU gives a PMU of one libpfm4 build, "" for the host's.
func loadArchPMU(arch, name string) (*PMU, error) {
	if arch == "" {
		return loadPMU(name)
	}
	return LoadArch(arch, name)
}

// catalogPMUs lists the PMUs of one libpfm4 build, "" for every build.
var catalogPMUs = func(arch string) []*PMU {
	if arch == "" {
		return PMUs()
	}
	return ArchPMUs(arch)
}

// Encode encodes a libpfm4 event name, "[pmu::]EVENT[:UMASK...][:MOD...]",
// as libpfm4's pfm_get_os_event_encoding(name, PFM_PLM0|PFM_PLM3,
// PFM_OS_PERF_EVENT_EXT) does for the C pmdaperfevent.
//
// active names the PMUs libpfm4 detected on this machine. A name without
// a prefix is looked for in them in libpfm4's order (first match wins,
// deprecated PMUs skipped); a prefixed one only in the PMU it names, and
// only if that PMU is active. PMU, event, umask and modifier names match
// without regard to ASCII case, as in libpfm4.
func Encode(name string, env Env, active []string) (Encoding, error) {
	enc, err := encode(name, env, active)
	if err != nil {
		var ee *EncodeError
		if errors.As(err, &ee) {
			if ee.Name == "" {
				ee.Name = name
			}
			return Encoding{}, ee
		}
		return Encoding{}, &EncodeError{Name: name, Err: err}
	}
	return enc, nil
}

func encode(name string, env Env, active []string) (Encoding, error) {
	// One event at a time: libpfm4 refuses its event separators.
	if strings.ContainsAny(name, ", \t\n") {
		return Encoding{}, ErrInvalid
	}
	pmus, err := activePMUs(active, env)
	if err != nil {
		return Encoding{}, err
	}
	r, err := findEvent(name, pmus, env)
	if err != nil {
		return Encoding{}, err
	}
	r.plm = PLM0 | PLM3
	r.env = env
	r.cpu = -1
	encoder := familyEncoders[r.pmu.Family]
	if encoder == nil {
		return Encoding{}, fmt.Errorf("pfm: PMU %s: %w: no encoder for its family", r.pmu.Name, ErrNotSupported)
	}
	if err := encoder(r); err != nil {
		return Encoding{}, err
	}
	if err := r.perfLayer(); err != nil {
		return Encoding{}, err
	}
	full := r.pmu.Name + "::" + string(r.fstr)
	if r.noMods {
		full = ""
	}
	return Encoding{
		PMU:      r.pmu,
		Event:    r.event,
		Attr:     r.attr,
		FullName: full,
		CPU:      r.cpu,
	}, nil
}

// pmuInits are what some PMUs' pmu_init does in libpfm4: build the
// table the machine has from the one compiled in.
var pmuInits = map[string]func(*PMU, Env) *PMU{
	"ix86arch": initIX86Arch,
	"rapl":     initRAPL,
}

// loadActive loads a PMU and initialises it for the machine.
func loadActive(name string, env Env) (*PMU, error) {
	p, err := loadArchPMU(env.Arch, name)
	if err != nil {
		return nil, err
	}
	if init := pmuInits[p.Name]; init != nil {
		p = init(p, env)
	}
	return p, nil
}

// activePMUs gives the active PMUs in libpfm4's order whatever the order
// of the names. Those of a named build come as the index's headers, their
// tables not decoded: findEvent decodes only the tables that may have the
// name (see withTables), as most names are found in one of many PMUs.
func activePMUs(active []string, env Env) ([]*PMU, error) {
	pmus := make([]*PMU, 0, len(active))
	for _, n := range active {
		var p *PMU
		var err error
		if env.Arch != "" {
			p, err = header(env.Arch, n)
		} else {
			p, err = loadActive(n, env)
		}
		if err != nil {
			return nil, err
		}
		pmus = append(pmus, p)
	}
	slices.SortStableFunc(pmus, func(a, b *PMU) int { return a.Order - b.Order })
	perfCorePLM(pmus)
	return pmus, nil
}

// header gives a PMU of one build as the index has it, without its tables.
func header(arch, name string) (*PMU, error) {
	if h := find(arch, name); h != nil {
		return h, nil
	}
	return LoadArch(arch, name) // for its error
}

// withTables gives an active PMU with its tables, initialised for the
// machine; p is returned as it is when it has them already.
func withTables(p *PMU, env Env) (*PMU, error) {
	if p.full || p.table == "" {
		return p, nil
	}
	full, err := loadActive(p.Name, env)
	if err != nil {
		return nil, err
	}
	if full.SupportedPLM != p.SupportedPLM {
		// perfCorePLM's change to the header.
		q := *full
		q.SupportedPLM = p.SupportedPLM
		full = &q
	}
	return full, nil
}

// splitName cuts a name as pfmlib_parse_event does: the PMU prefix ends
// at the first "::", the event name at the first ':' or '.'. attrs is
// nil when nothing follows the event name, and holds one "" for a
// trailing delimiter, which libpfm4 refuses as an unknown attribute.
func splitName(name string) (pmu, event string, attrs []string) {
	if i := strings.Index(name, "::"); i >= 0 {
		pmu, name = name[:i], name[i+2:]
	}
	i := strings.IndexAny(name, ":.")
	if i < 0 {
		return pmu, name, nil
	}
	return pmu, name[:i], splitAttrs(name[i+1:])
}

// splitAttrs splits at every ':' and '.', keeping empty fields.
func splitAttrs(s string) []string {
	var out []string
	for {
		i := strings.IndexAny(s, ":.")
		if i < 0 {
			return append(out, s)
		}
		out = append(out, s[:i])
		s = s[i+1:]
	}
}

// findEvent finds the PMU and event a name means, and follows an event
// alias (equiv) to its target within the same PMU.
func findEvent(name string, active []*PMU, env Env) (*request, error) {
	pname, ename, attrs := splitName(name)
	// "::EVENT" names a PMU too, the one called "", which none is.
	prefixed := strings.Contains(name, "::")
	if prefixed && env.EncodeInactive && !slices.ContainsFunc(active, func(p *PMU) bool { return equalFold(p.Name, pname) }) {
		for _, h := range catalogPMUs(env.Arch) {
			if equalFold(h.Name, pname) {
				p, err := loadActive(h.Name, env)
				if err != nil {
					return nil, err
				}
				active = []*PMU{p}
				// libpfm4 never initialised it: perf has none of the
				// optional events the kernel lists.
				env.KernelEvent = nil
				break
			}
		}
	}
	for _, p := range active {
		if !prefixed && p.Flags&pmuFlagDeprecated != 0 {
			continue
		}
		if prefixed && !equalFold(pname, p.Name) {
			continue
		}
		if p.Family == FamilyPerf && p.Name == "perf_raw" {
			// Its one event stands for every "r<hex>" name.
			code, ok := perfRawCode(ename)
			if !ok {
				continue
			}
			var err error
			if p, err = withTables(p, env); err != nil {
				return nil, err
			}
			if len(p.Events) == 0 {
				continue
			}
			return &request{pmu: p, event: &p.Events[0], attrs: attrs, rawCode: code}, nil
		}
		if !p.mayHave(ename) {
			continue
		}
		var err error
		if p, err = withTables(p, env); err != nil {
			return nil, err
		}
		ev := findPMUEvent(p, ename, env)
		if ev == nil {
			continue
		}
		r := &request{pmu: p, event: ev, attrs: attrs}
		if ev.Equiv != "" {
			_, target, pre := splitName(ev.Equiv)
			r.event = findPMUEvent(p, target, env)
			if r.event == nil {
				return nil, ErrNotFound
			}
			r.preAttrs = pre
		}
		return r, nil
	}
	return nil, ErrNotFound
}

func findPMUEvent(p *PMU, name string, env Env) *Event {
	for i := range p.Events {
		ev := &p.Events[i]
		if p.Family == FamilyPerf && ev.Flags&PerfOptional != 0 && !perfHasOptional(ev, env) {
			continue
		}
		if ev.Model != 0 && int(ev.Model) != p.ID {
			continue // another model's event, invisible to this one
		}
		if p.Family == FamilyAMD64 && !amdValid(p, ev.Flags) {
			continue // another revision's event
		}
		if equalFold(ev.Name, name) {
			return ev
		}
	}
	return nil
}

// equalFold is strcasecmp's equality: ASCII letters only.
func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		if lower(a[i]) != lower(b[i]) {
			return false
		}
	}
	return true
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// attrType is libpfm4's pfm_attr_t.
type attrType uint8

const (
	attrUmask attrType = iota
	attrBool
	attrInt
	attrRawUmask
)

// attrDesc is one attribute an event accepts (libpfm4's pattrs entry):
// its umasks and modifiers, the perf layer's modifiers after them.
type attrDesc struct {
	Name  string
	Type  attrType
	Perf  bool   // the perf_events layer's, not the PMU's
	Idx   int    // the owner's number: umask index in Event.Umasks, modifier number, perf modifier number
	Equiv string // a umask that stands for others ("ANY:SNP_ANY")
}

// attrVal is one attribute the name gave, after parsing (pfmlib_attr_t).
type attrVal struct {
	Desc int    // index in request.pattrs; len(pattrs) for the raw umask
	Val  uint64 // the modifier's value; for the raw umask, the umask
}

// The perf layer's modifiers, numbered as libpfm4 numbers them
// (PERF_ATTR_*).
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
	numPerfAttrs
)

var perfAttrs = [numPerfAttrs]attrDesc{
	{Name: "u", Type: attrBool},
	{Name: "k", Type: attrBool},
	{Name: "h", Type: attrBool},
	{Name: "period", Type: attrInt},
	{Name: "freq", Type: attrInt},
	{Name: "precise", Type: attrInt},
	{Name: "excl", Type: attrBool},
	{Name: "mg", Type: attrBool},
	{Name: "mh", Type: attrBool},
	{Name: "cpu", Type: attrInt},
	{Name: "pinned", Type: attrBool},
	{Name: "hw_smpl", Type: attrBool},
}

// attrRoom is a family's attributes of ev, n of its own and its PMU's
// modifiers: a slice with room for them and for the perf layer's, which
// parseAttrs adds, so that it never grows.
func attrRoom(n int) []attrDesc { return make([]attrDesc, 0, n+len(perfAttrs)) }

// perfKeep is the part of a family's validate_pattrs every family
// shares: a PMU that cannot sample has no period, freq or precise; one
// that filters no privilege level has no u, k, mg or mh.
func perfKeep(p *PMU, idx int) bool {
	switch idx {
	case perfPeriod, perfFreq, perfPrecise:
		if p.Flags&pmuFlagNoSampling != 0 {
			return false
		}
	}
	switch idx {
	case perfU, perfK, perfMG, perfMH:
		if p.SupportedPLM == 0 {
			return false
		}
	}
	return true
}

// parseAttrs is the family encoder's first step: pmuAttrs are the
// event's own attributes (umasks, then modifiers, in libpfm4's order),
// keep says which perf-layer modifiers the family lets through. It sets
// r.pattrs and r.vals from the name's attributes, as
// pfmlib_parse_event_attr and pfmlib_sanitize_event do.
func (r *request) parseAttrs(pmuAttrs []attrDesc, keep func(idx int) bool) error {
	// The families make pmuAttrs afresh for each request, with room for
	// the perf layer's (attrRoom): they are appended to it in place.
	r.pattrs = slices.Grow(pmuAttrs, len(perfAttrs))
	for i, a := range perfAttrs {
		if keep(i) {
			a.Perf = true
			a.Idx = i
			r.pattrs = append(r.pattrs, a)
		}
	}
	// An alias's own attributes come first, parsed on their own, as
	// libpfm4 parses them before the name's.
	if r.preAttrs != nil {
		if err := r.parseList(r.preAttrs); err != nil {
			return err
		}
		if err := r.sanitize(); err != nil {
			return err
		}
	}
	if r.attrs != nil {
		if err := r.parseList(r.attrs); err != nil {
			return err
		}
	}
	return r.sanitize()
}

// maxAttrs is how many attributes libpfm4 takes for one event.
const maxAttrs = 64

// parseList parses one list of attributes. Like libpfm4, a umask alias
// is replaced by what it stands for, a boolean modifier without a value
// means "=1", and a raw umask cannot go with a named one.
func (r *request) parseList(list []string) error {
	hasRaw, hasUmask := false, false
	for _, s := range list {
		name, val, hasVal := strings.Cut(s, "=")
		var d attrDesc
		desc := -1
		if len(name) >= 2 && name[0] == '0' && lower(name[1]) == 'x' {
			if hasRaw || hasUmask {
				return badAttr(ErrAttr, "%s: a raw umask cannot go with another umask", s)
			}
			if r.pmu.Flags&pmuFlagRawUmask == 0 {
				return badAttr(ErrAttr, "%s: PMU %s takes no raw umask", s, r.pmu.Name)
			}
			v, end := strtoull(name)
			if end != len(name) {
				return badAttr(ErrAttr, "%s: raw umask is not a number", s)
			}
			r.raw = v
			hasRaw = true
			desc = len(r.pattrs)
			d = attrDesc{Name: "RAW_UMASK", Type: attrRawUmask}
		} else {
			for i, a := range r.pattrs {
				// "I=1" is the modifier even where a umask is called I.
				if equalFold(a.Name, name) && !(hasVal && a.Type == attrUmask) {
					desc, d = i, a
					break
				}
			}
			if desc < 0 {
				return badAttr(ErrAttr, "%q: no such umask or modifier for %s", s, r.event.Name)
			}
		}
		if d.Type == attrUmask {
			hasUmask = true
			if hasRaw {
				return badAttr(ErrAttr, "%s: a raw umask cannot go with another umask", s)
			}
		}
		if d.Equiv != "" {
			if hasVal {
				return badAttr(ErrAttrVal, "%s: an alias takes no value", s)
			}
			if err := r.parseList(splitAttrs(d.Equiv)); err != nil {
				return err
			}
			continue
		}
		v := attrVal{Desc: desc}
		switch {
		case d.Type == attrUmask || d.Type == attrRawUmask:
			if hasVal {
				return badAttr(ErrAttrVal, "%s: a umask takes no value", s)
			}
			if len(r.vals) == maxAttrs {
				// libpfm4 checks only modifiers; more umasks (an alias
				// counts what it stands for) run past its array and
				// crash the C agent.
				return badAttr(ErrTooMany, "%s: more than %d attributes", s, maxAttrs)
			}
		case !hasVal && d.Type != attrBool:
			return badAttr(ErrAttrVal, "%s: needs a value", s)
		default:
			if !hasVal {
				val = "y"
			}
			if val == "" {
				return badAttr(ErrAttrVal, "%s: empty value", s)
			}
			if len(r.vals) == maxAttrs {
				return badAttr(ErrTooMany, "%s: more than %d attributes", s, maxAttrs)
			}
			if d.Type == attrBool {
				b, ok := parseBool(val)
				if !ok {
					return badAttr(ErrAttrVal, "%s: not a boolean", s)
				}
				v.Val = b
			} else {
				n, end := strtoull(val)
				if end != len(val) {
					return badAttr(ErrAttrVal, "%s: not a number", s)
				}
				v.Val = n
			}
		}
		r.vals = append(r.vals, v)
	}
	return nil
}

func parseBool(s string) (uint64, bool) {
	if len(s) != 1 {
		return 0, false
	}
	switch lower(s[0]) {
	case 'y', 't', '1':
		return 1, true
	case 'n', 'f', '0':
		return 0, true
	}
	return 0, false
}

// strtoull is C's strtoull(s, &end, 0): leading space, a sign, 0x for
// hexadecimal and 0 for octal, saturating on overflow. It returns the
// value and how many bytes it used (0 if there was no number).
func strtoull(s string) (uint64, int) {
	i := 0
	for i < len(s) && (s[i] == ' ' || ('\t' <= s[i] && s[i] <= '\r')) {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	base := uint64(10)
	if i < len(s) && s[i] == '0' {
		if i+2 < len(s) && lower(s[i+1]) == 'x' && digit(s[i+2]) < 16 {
			base, i = 16, i+2
		} else {
			base = 8
		}
	}
	start := i
	var v uint64
	overflow := false
	for i < len(s) {
		d := digit(s[i])
		if d >= base {
			break
		}
		if v > (^uint64(0)-d)/base {
			overflow = true
		}
		v = v*base + d
		i++
	}
	if i == start {
		return 0, 0
	}
	if overflow {
		return ^uint64(0), i
	}
	if neg {
		v = -v
	}
	return v, i
}

func digit(c byte) uint64 {
	switch {
	case '0' <= c && c <= '9':
		return uint64(c - '0')
	case 'a' <= lower(c) && lower(c) <= 'z':
		return uint64(lower(c)-'a') + 10
	}
	return 99
}

// sanitize drops repeated attributes and refuses one given twice with
// different values. It keeps libpfm4's quirk: removing a repeat skips
// the entry that moves into its place, so a third copy survives.
func (r *request) sanitize() error {
	for i := 0; i < len(r.vals); i++ {
		for j := i + 1; j < len(r.vals); j++ {
			if r.vals[i].Desc != r.vals[j].Desc {
				continue
			}
			if r.vals[i].Val != r.vals[j].Val {
				return badAttr(ErrAttrSet, "%s given twice with different values", r.attrName(r.vals[j].Desc))
			}
			r.vals = slices.Delete(r.vals, j, j+1)
		}
	}
	return nil
}

func (r *request) attrName(desc int) string {
	if desc == len(r.pattrs) {
		return fmt.Sprintf("0x%x", r.raw)
	}
	return r.pattrs[desc].Name
}

// desc is the description of a parsed attribute.
func (r *request) desc(v attrVal) attrDesc {
	if v.Desc == len(r.pattrs) {
		return attrDesc{Name: "RAW_UMASK", Type: attrRawUmask}
	}
	return r.pattrs[v.Desc]
}

// pmuVals are the attributes given that are the PMU's, not the perf
// layer's.
func (r *request) pmuVals() []attrVal {
	var vals []attrVal
	for _, v := range r.vals {
		if !r.desc(v).Perf {
			vals = append(vals, v)
		}
	}
	return vals
}

// sortVals orders the attributes as the event lists them, so that the
// canonical name does not depend on the order they were given in.
func (r *request) sortVals() {
	slices.SortStableFunc(r.vals, func(a, b attrVal) int { return a.Desc - b.Desc })
}

// canonicalUmasks starts the canonical name: the event, then its umasks
// (given and default) in table order.
func (r *request) canonicalUmasks() {
	r.sortVals()
	r.fstr = r.fstr[:0]
	r.addf("%s", r.event.Name)
	for _, v := range r.vals {
		switch d := r.desc(v); {
		case d.Perf:
		case d.Type == attrUmask:
			r.addf(":%s", r.event.Umasks[d.Idx].Name)
		case d.Type == attrRawUmask:
			r.addf(":0x%x", uint32(r.raw))
		}
	}
}

// fstrMax is the room libpfm4 gives the canonical name, less the PMU
// prefix: longer ones are cut short.
const fstrMax = 255

// addf appends to the canonical name, which libpfm4 cuts at fstrMax. The
// name is written into one buffer of that size, not made anew at each
// attribute as a string would be.
func (r *request) addf(format string, args ...any) {
	if r.fstr == nil {
		r.fstr = make([]byte, 0, fstrMax+1)
	}
	if len(r.fstr) >= fstrMax {
		return
	}
	r.fstr = fmt.Appendf(r.fstr, format, args...)
	if len(r.fstr) > fstrMax {
		r.fstr = r.fstr[:fstrMax]
	}
}

// perfLayer applies the perf-level modifiers once the family has
// encoded the event, as pfmlib_perf_event_encode does: privilege levels
// become exclude bits (a level the PMU cannot filter is never
// excluded), guest execution is excluded unless asked for, and the
// modifiers are spelled out at the end of the canonical name.
func (r *request) perfLayer() error {
	a := &r.attr
	plm, hasPLM := uint32(0), false
	vmx, hasVMX := uint32(0), false
	pinned := false
	for _, v := range r.vals {
		d := r.desc(v)
		if !d.Perf {
			continue
		}
		if r.noMods && v.Val != 0 && d.Idx != perfPinned {
			return badAttr(ErrAttrVal, "%s: %s takes no modifier", d.Name, r.event.Name)
		}
		switch d.Idx {
		case perfU, perfK, perfH:
			if v.Val != 0 {
				plm |= [...]uint32{PLM3, PLM0, PLMH}[d.Idx]
			}
			hasPLM = true
		case perfPeriod:
			if v.Val == 0 || a.Bits&unix.PerfBitFreq != 0 {
				return badAttr(ErrAttrVal, "period=%d", v.Val)
			}
			a.Sample = v.Val
		case perfFreq:
			if v.Val == 0 || a.Sample != 0 {
				return badAttr(ErrAttrVal, "freq=%d", v.Val)
			}
			a.Sample = v.Val
			a.Bits |= unix.PerfBitFreq
		case perfPrecise:
			if v.Val > 3 {
				return badAttr(ErrAttrVal, "precise=%d: at most 3", v.Val)
			}
			setPrecise(a, v.Val)
		case perfExcl:
			if v.Val != 0 {
				a.Bits |= unix.PerfBitExclusive
			}
		case perfMG:
			// libpfm4 counts the guest whatever value mg has.
			vmx |= PLM3
			hasVMX = true
		case perfMH:
			vmx |= PLM0
			hasVMX = true
		case perfCPU:
			if v.Val >= 1<<31-1 {
				return badAttr(ErrAttrVal, "cpu=%d", v.Val)
			}
			r.cpu = int(v.Val)
		case perfPinned:
			pinned = v.Val != 0
		case perfHWSmpl:
			setPrecise(a, min(v.Val, 1))
		}
	}
	if !hasPLM {
		plm = r.plm
	}
	if !hasVMX {
		vmx = PLM0
	}
	plm |= ^r.pmu.SupportedPLM & PLMAll
	vmx |= ^r.pmu.SupportedPLM & PLMAll
	setBit(a, unix.PerfBitExcludeUser, plm&PLM3 == 0)
	setBit(a, unix.PerfBitExcludeKernel, plm&PLM0 == 0)
	setBit(a, unix.PerfBitExcludeHv, plm&PLMH == 0)
	setBit(a, unix.PerfBitExcludeGuest, vmx&PLM3 == 0)
	setBit(a, unix.PerfBitExcludeHost, vmx&PLM0 == 0)
	setBit(a, unix.PerfBitPinned, pinned)

	for _, d := range r.pattrs {
		if !d.Perf {
			continue
		}
		switch d.Idx {
		case perfU:
			r.addf(":u=%d", b2i(plm&PLM3 != 0))
		case perfK:
			r.addf(":k=%d", b2i(plm&PLM0 != 0))
		case perfH:
			r.addf(":h=%d", b2i(plm&PLMH != 0))
		case perfPrecise, perfHWSmpl:
			r.addf(":%s=%d", d.Name, precise(a))
		case perfPeriod, perfFreq:
			// period and freq share one field, so each shows it.
			if a.Sample != 0 {
				r.addf(":%s=%d", d.Name, a.Sample)
			}
		case perfMG:
			r.addf(":mg=%d", b2i(a.Bits&unix.PerfBitExcludeGuest == 0))
		case perfMH:
			r.addf(":mh=%d", b2i(a.Bits&unix.PerfBitExcludeHost == 0))
		case perfExcl:
			r.addf(":excl=%d", b2i(a.Bits&unix.PerfBitExclusive != 0))
		}
	}
	return nil
}

func setBit(a *unix.PerfEventAttr, bit uint64, on bool) {
	if on {
		a.Bits |= bit
	} else {
		a.Bits &^= bit
	}
}

func setPrecise(a *unix.PerfEventAttr, v uint64) {
	setBit(a, unix.PerfBitPreciseIPBit1, v&1 != 0)
	setBit(a, unix.PerfBitPreciseIPBit2, v&2 != 0)
}

func precise(a *unix.PerfEventAttr) int {
	return b2i(a.Bits&unix.PerfBitPreciseIPBit1 != 0) | b2i(a.Bits&unix.PerfBitPreciseIPBit2 != 0)<<1
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// kernelPMUType gives the perf_event type of the kernel PMU the request's
// PMU is opened through, which libpfm4 reads from sysfs; an uncore PMU
// the kernel does not have cannot be encoded.
//
// After 4.13 a perf_name may list several kernel PMUs, comma-separated
// ("armv8_cortex_a57,armv8_pmuv3_0,armv8_pmuv3"): the first the kernel
// has is the one (pfm_perf_find_pmu_type).
func (r *request) kernelPMUType() (uint32, error) {
	name := r.pmu.PerfName
	if r.env.PerfType == nil {
		return 0, badAttr(ErrNotSupported, "kernel PMU %s not found", name)
	}
	var first error
	for _, n := range strings.Split(name, ",") {
		t, err := r.env.PerfType(n)
		if err == nil {
			return t, nil
		}
		if first == nil {
			first = err
		}
	}
	return 0, badAttr(ErrNotSupported, "kernel PMU %s: %v", name, first)
}
