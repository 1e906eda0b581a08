package pdu

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
)

// ParseError reports a PDU whose body breaks its layout rules. Field names
// the offending field as PCP's C structs call it.
type ParseError struct {
	Type   Type
	Field  string
	Reason string
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("pdu: %s: %s: %s", e.Type, e.Field, e.Reason)
}

// Parser decodes the body of one PDU. It never panics: every field read is
// bounds-checked, and every layout rule pmcd's decoders enforce is enforced
// here too. Returned byte slices are views into the PDU.
type Parser struct {
	msg []byte
	h   Header
}

// Start checks the header of msg, a whole PDU as returned by Reader.Next,
// and prepares to decode its body.
func (p *Parser) Start(msg []byte) (Header, error) {
	p.msg, p.h = nil, Header{}
	h, err := ParseHeader(msg)
	if err != nil {
		return h, err
	}
	if err := checkHeader(h, math.MaxInt32); err != nil {
		return h, err
	}
	if h.Len != len(msg) {
		return h, &FrameError{h, fmt.Sprintf("header length disagrees with the %d bytes supplied", len(msg))}
	}
	p.msg, p.h = msg, h
	return h, nil
}

// Header returns the header of the PDU being parsed.
func (p *Parser) Header() Header { return p.h }

func (p *Parser) fail(field, format string, args ...any) error {
	return &ParseError{Type: p.h.Type, Field: field, Reason: fmt.Sprintf(format, args...)}
}

func (p *Parser) want(t Type) error {
	if p.msg == nil {
		return &ParseError{Type: t, Field: "header", Reason: "Start was not called or failed"}
	}
	if p.h.Type != t {
		return &ParseError{Type: t, Field: "type", Reason: fmt.Sprintf("PDU is %s", p.h.Type)}
	}
	return nil
}

func (p *Parser) wantLen(t Type, n int) error {
	if err := p.want(t); err != nil {
		return err
	}
	if p.h.Len != n {
		return p.fail("len", "is %d, must be %d", p.h.Len, n)
	}
	return nil
}

// u32/i32 read at off; callers have already checked off+4 <= len.
func (p *Parser) u32(off int) uint32 { return binary.BigEndian.Uint32(p.msg[off:]) }
func (p *Parser) i32(off int) int32  { return int32(p.u32(off)) }

// Creds decodes a CREDS PDU, appending its credentials to dst[:0].
func (p *Parser) Creds(dst []Cred) ([]Cred, error) {
	if err := p.want(TypeCreds); err != nil {
		return dst[:0], err
	}
	if p.h.Len < 16 {
		return dst[:0], p.fail("len", "%d is too short for numcreds", p.h.Len)
	}
	n := p.i32(12)
	if n < 1 || n > 1024 {
		return dst[:0], p.fail("numcreds", "%d is outside 1..1024", n)
	}
	if p.h.Len != 16+4*int(n) {
		return dst[:0], p.fail("len", "is %d, %d credentials need exactly %d", p.h.Len, n, 16+4*int(n))
	}
	dst = dst[:0]
	for i := range int(n) {
		dst = append(dst, credFromWord(p.u32(16+4*i)))
	}
	return dst, nil
}

// Error decodes an ERROR PDU. The 20-byte extended form pmcd sends its
// clients is accepted too; its extra datum is ignored.
func (p *Parser) Error() (Err, error) {
	if err := p.want(TypeError); err != nil {
		return 0, err
	}
	if p.h.Len != 16 && p.h.Len != 20 {
		return 0, p.fail("len", "is %d, must be 16 or 20", p.h.Len)
	}
	return Err(p.i32(12)), nil
}

// Profile is an instance profile: which instances a client context wants.
type Profile struct {
	Ctx    int32 // the client's own context number
	GState int32 // ProfileInclude or ProfileExclude: the default for indoms not listed
	InDoms []ProfileInDom
	insts  []int32
}

// ProfileInDom is one per-indom entry of a Profile.
type ProfileInDom struct {
	InDom InDom
	State int32 // ProfileInclude: all but Insts; ProfileExclude: only Insts
	Insts []int32
}

// In reports whether inst of indom is selected, with the semantics of
// libpcp's __pmInProfile. A nil profile selects everything.
func (pr *Profile) In(indom InDom, inst int32) bool {
	if pr == nil {
		return true
	}
	for i := range pr.InDoms {
		e := &pr.InDoms[i]
		if e.InDom != indom {
			continue
		}
		listed := slices.Contains(e.Insts, inst)
		if e.State == ProfileInclude {
			return !listed
		}
		return listed
	}
	return pr.GState == ProfileInclude
}

// Reset makes pr the default profile: include everything.
func (pr *Profile) Reset() {
	pr.Ctx, pr.GState = 0, ProfileInclude
	pr.InDoms, pr.insts = pr.InDoms[:0], pr.insts[:0]
}

// CopyFrom makes pr an independent copy of src, reusing pr's storage.
func (pr *Profile) CopyFrom(src *Profile) {
	pr.Reset()
	pr.Ctx, pr.GState = src.Ctx, src.GState
	for _, e := range src.InDoms {
		pr.insts = append(pr.insts, e.Insts...)
	}
	off := 0
	for _, e := range src.InDoms {
		n := len(e.Insts)
		pr.InDoms = append(pr.InDoms, ProfileInDom{e.InDom, e.State, pr.insts[off : off+n : off+n]})
		off += n
	}
}

// Profile decodes a PROFILE PDU into pr, reusing pr's storage.
func (p *Parser) Profile(pr *Profile) error {
	pr.Reset()
	if err := p.want(TypeProfile); err != nil {
		return err
	}
	// A profile without entries may omit its final pad word.
	if p.h.Len < 24 {
		return p.fail("len", "%d is too short for ctxid, g_state and numprof", p.h.Len)
	}
	ctx, gstate, numprof := p.i32(12), p.i32(16), p.i32(20)
	if ctx < 0 {
		return p.fail("ctxid", "%d is negative", ctx)
	}
	if gstate != ProfileInclude && gstate != ProfileExclude {
		return p.fail("g_state", "%d is neither include (0) nor exclude (1)", gstate)
	}
	if numprof < 0 || int64(numprof) > int64(p.h.Len-28)/16 {
		return p.fail("numprof", "%d entries cannot fit in %d bytes", numprof, p.h.Len)
	}
	if numprof == 0 {
		if p.h.Len > 28 {
			return p.fail("len", "%d bytes follow an empty profile", p.h.Len-28)
		}
		pr.Ctx, pr.GState = ctx, gstate
		return nil
	}
	off := 28 + 16*int(numprof)
	total := 0
	for k := range int(numprof) {
		e := 28 + 16*k
		state, n := p.i32(e+4), p.i32(e+8)
		if state != ProfileInclude && state != ProfileExclude {
			return p.fail(fmt.Sprintf("profile[%d].state", k), "%d is neither include (0) nor exclude (1)", state)
		}
		if n < 0 || int64(n) > int64(p.h.Len) {
			return p.fail(fmt.Sprintf("profile[%d].numinst", k), "%d is out of range", n)
		}
		total += int(n)
	}
	if p.h.Len != off+4*total {
		return p.fail("len", "is %d, %d entries with %d instances need exactly %d", p.h.Len, numprof, total, off+4*total)
	}
	pr.Ctx, pr.GState = ctx, gstate
	for i := range total {
		pr.insts = append(pr.insts, p.i32(off+4*i))
	}
	at := 0
	for k := range int(numprof) {
		e := 28 + 16*k
		n := int(p.i32(e + 8))
		pr.InDoms = append(pr.InDoms, ProfileInDom{InDom(p.u32(e)), p.i32(e + 4), pr.insts[at : at+n : at+n]})
		at += n
	}
	return nil
}

// Fetch decodes a FETCH PDU, appending the PMIDs to dst[:0].
func (p *Parser) Fetch(dst []PMID) (ctx int32, pmids []PMID, err error) {
	if err := p.want(TypeFetch); err != nil {
		return 0, dst[:0], err
	}
	if p.h.Len < 28 {
		return 0, dst[:0], p.fail("len", "%d is too short for the fixed part (28)", p.h.Len)
	}
	n := p.i32(24)
	if n < 1 || int64(n) > int64(p.h.Len) {
		return 0, dst[:0], p.fail("numpmid", "%d is out of range", n)
	}
	if p.h.Len != 28+4*int(n) {
		return 0, dst[:0], p.fail("len", "is %d, %d PMIDs need exactly %d", p.h.Len, n, 28+4*int(n))
	}
	dst = dst[:0]
	for i := range int(n) {
		dst = append(dst, PMID(p.u32(28+4*i)))
	}
	return p.i32(12), dst, nil
}

// DescReq decodes a DESC_REQ PDU.
func (p *Parser) DescReq() (PMID, error) {
	if err := p.wantLen(TypeDescReq, 16); err != nil {
		return 0, err
	}
	return PMID(p.u32(12)), nil
}

// Desc decodes a DESC PDU.
func (p *Parser) Desc() (Desc, error) {
	if err := p.wantLen(TypeDesc, 32); err != nil {
		return Desc{}, err
	}
	return Desc{PMID(p.u32(12)), ValueType(p.i32(16)), InDom(p.u32(20)), Sem(p.i32(24)), Units(p.u32(28))}, nil
}

// InstanceReq is a decoded INSTANCE_REQ: all instances (Inst == InNull and
// Name == nil), the name of Inst, or the id of Name.
type InstanceReq struct {
	InDom InDom
	Inst  int32
	Name  []byte // nil when no name was given
}

// InstanceReq decodes an INSTANCE_REQ PDU.
func (p *Parser) InstanceReq() (InstanceReq, error) {
	if err := p.want(TypeInstanceReq); err != nil {
		return InstanceReq{}, err
	}
	if p.h.Len < 32 {
		return InstanceReq{}, p.fail("len", "%d is too short for the fixed part (32)", p.h.Len)
	}
	n := p.i32(28)
	if n < 0 || int64(n) > int64(p.h.Len) {
		return InstanceReq{}, p.fail("namelen", "%d is out of range", n)
	}
	if p.h.Len != 32+pad4(int(n)) {
		return InstanceReq{}, p.fail("len", "is %d, a %d-byte name needs exactly %d", p.h.Len, n, 32+pad4(int(n)))
	}
	r := InstanceReq{InDom: InDom(p.u32(12)), Inst: p.i32(24)}
	if n > 0 {
		r.Name = p.msg[32 : 32+n : 32+n]
	}
	return r, nil
}

// Instance is one entry of an INSTANCE reply.
type Instance struct {
	Inst int32
	Name []byte // nil when namelen is 0
}

// Instance decodes an INSTANCE PDU, appending its entries to dst[:0].
func (p *Parser) Instance(dst []Instance) (InDom, []Instance, error) {
	dst = dst[:0]
	if err := p.want(TypeInstance); err != nil {
		return 0, dst, err
	}
	if p.h.Len < 20 {
		return 0, dst, p.fail("len", "%d is too short for the fixed part (20)", p.h.Len)
	}
	n := p.i32(16)
	if n < 0 || int64(n) > int64(p.h.Len-20)/8 {
		return 0, dst, p.fail("numinst", "%d entries cannot fit in %d bytes", n, p.h.Len)
	}
	off := 20
	for i := range int(n) {
		if off+8 > p.h.Len {
			return 0, dst, p.fail(fmt.Sprintf("instance[%d]", i), "runs past the end of the PDU")
		}
		inst, nl := p.i32(off), p.i32(off+4)
		off += 8
		if nl < 0 || int64(nl) > int64(p.h.Len-off) {
			return 0, dst, p.fail(fmt.Sprintf("instance[%d].namelen", i), "%d runs past the end of the PDU", nl)
		}
		e := Instance{Inst: inst}
		if nl > 0 {
			e.Name = p.msg[off : off+int(nl) : off+int(nl)]
		}
		dst = append(dst, e)
		off += pad4(int(nl))
	}
	if off != p.h.Len {
		return 0, dst, p.fail("len", "is %d, the entries end at %d", p.h.Len, off)
	}
	return InDom(p.u32(12)), dst, nil
}

// TextReq decodes a TEXT_REQ PDU: ident is a PMID or an InDom, as typ says.
func (p *Parser) TextReq() (ident uint32, typ int32, err error) {
	if err := p.wantLen(TypeTextReq, 20); err != nil {
		return 0, 0, err
	}
	return p.u32(12), p.i32(16), nil
}

// Text decodes a TEXT PDU. Nobody checks its ident (libpcp_pmda sends it in
// host order), so neither does this.
func (p *Parser) Text() (ident uint32, text []byte, err error) {
	if err := p.want(TypeText); err != nil {
		return 0, nil, err
	}
	if p.h.Len < 20 {
		return 0, nil, p.fail("len", "%d is too short for the fixed part (20)", p.h.Len)
	}
	n := p.i32(16)
	if n < 0 || int64(pad4(int(n))) > int64(p.h.Len-20) {
		return 0, nil, p.fail("buflen", "%d runs past the end of the PDU", n)
	}
	return p.u32(12), p.msg[20 : 20+n : 20+n], nil
}

// IDs decodes a PMNS_IDS PDU (an idlist), appending the PMIDs to dst[:0].
func (p *Parser) IDs(dst []PMID) (sts int32, ids []PMID, err error) {
	dst = dst[:0]
	if err := p.want(TypePMNSIDs); err != nil {
		return 0, dst, err
	}
	if p.h.Len < 20 {
		return 0, dst, p.fail("len", "%d is too short for the fixed part (20)", p.h.Len)
	}
	n := p.i32(16)
	if n < 0 || int64(n) > int64(p.h.Len) {
		return 0, dst, p.fail("numids", "%d is out of range", n)
	}
	if p.h.Len != 20+4*int(n) {
		return 0, dst, p.fail("len", "is %d, %d PMIDs need exactly %d", p.h.Len, n, 20+4*int(n))
	}
	for i := range int(n) {
		dst = append(dst, PMID(p.u32(20+4*i)))
	}
	return p.i32(12), dst, nil
}

// Name is one entry of a PMNS_NAMES list.
type Name struct {
	Name   []byte
	Status int32 // PMNSLeaf or PMNSNonLeaf; 0 when the list has no status words
}

// Names decodes a PMNS_NAMES PDU, appending its entries to dst[:0].
// hasStatus reports whether the list carried status words.
func (p *Parser) Names(dst []Name) (names []Name, hasStatus bool, err error) {
	dst = dst[:0]
	if err := p.want(TypePMNSNames); err != nil {
		return dst, false, err
	}
	if p.h.Len < 24 {
		return dst, false, p.fail("len", "%d is too short for the fixed part (24)", p.h.Len)
	}
	nstr, nstatus, n := p.i32(12), p.i32(16), p.i32(20)
	per := 8
	if nstatus != 0 {
		per = 12
	}
	if n < 0 || int64(n) > int64(p.h.Len-24)/int64(per) {
		return dst, false, p.fail("numnames", "%d entries cannot fit in %d bytes", n, p.h.Len)
	}
	if nstatus != 0 && nstatus != n {
		return dst, false, p.fail("numstatus", "is %d, must be 0 or numnames (%d)", nstatus, n)
	}
	if nstr < 0 || int(nstr) > p.h.Len {
		return dst, false, p.fail("nstrbytes", "%d is out of range", nstr)
	}
	off, need := 24, 0
	for i := range int(n) {
		var status int32
		if nstatus != 0 {
			if off+4 > p.h.Len {
				return dst, false, p.fail(fmt.Sprintf("name[%d].status", i), "runs past the end of the PDU")
			}
			status = p.i32(off)
			off += 4
		}
		if off+4 > p.h.Len {
			return dst, false, p.fail(fmt.Sprintf("name[%d].namelen", i), "runs past the end of the PDU")
		}
		nl := p.i32(off)
		off += 4
		if nl < 0 || int64(nl) > int64(p.h.Len-off) {
			return dst, false, p.fail(fmt.Sprintf("name[%d].namelen", i), "%d runs past the end of the PDU", nl)
		}
		dst = append(dst, Name{p.msg[off : off+int(nl) : off+int(nl)], status})
		off += pad4(int(nl))
		need += int(nl) + 1
	}
	if need > int(nstr) {
		return dst, false, p.fail("nstrbytes", "is %d, the names need %d", nstr, need)
	}
	if off != p.h.Len {
		return dst, false, p.fail("len", "is %d, the names end at %d", p.h.Len, off)
	}
	return dst, nstatus != 0, nil
}

// NameReq decodes a PMNS_CHILD or PMNS_TRAVERSE request. For CHILD,
// subtype 1 asks for status words.
func (p *Parser) NameReq() (subtype int32, name []byte, err error) {
	if p.msg == nil || (p.h.Type != TypePMNSChild && p.h.Type != TypePMNSTraverse) {
		if err := p.want(TypePMNSChild); err != nil {
			return 0, nil, err
		}
	}
	if p.h.Len < 20 {
		return 0, nil, p.fail("len", "%d is too short for the fixed part (20)", p.h.Len)
	}
	n := p.i32(16)
	if n < 0 || int64(n) > int64(p.h.Len-20) {
		return 0, nil, p.fail("namelen", "%d runs past the end of the PDU", n)
	}
	if p.h.Len > 20+pad4(int(n)) {
		return 0, nil, p.fail("len", "is %d, a %d-byte name needs at most %d", p.h.Len, n, 20+pad4(int(n)))
	}
	return p.i32(12), p.msg[20 : 20+n : 20+n], nil
}

// LabelReq decodes a LABEL_REQ PDU.
func (p *Parser) LabelReq() (ident uint32, typ int32, err error) {
	if err := p.wantLen(TypeLabelReq, 20); err != nil {
		return 0, 0, err
	}
	return p.u32(12), p.i32(16), nil
}

// Label is one pmLabel: where a label's name and value sit in its set's JSON.
type Label struct {
	Name     uint16 // offset of the name's first byte (after the quote)
	NameLen  uint8
	Flags    uint8  // the label type bit, plus LabelCompound/LabelOptional
	Value    uint16 // offset of the value's first byte
	ValueLen uint16 // including quotes for strings
}

// LabelSet is one label set of a LABEL PDU.
type LabelSet struct {
	Inst    int32
	NLabels int32 // count, or a negative error code for this set
	JSON    []byte
	Labels  []Label
}

// Label decodes a LABEL PDU, reusing dst's storage for the sets.
func (p *Parser) Label(dst []LabelSet) (ident uint32, typ int32, sets []LabelSet, err error) {
	dst = dst[:0]
	if err := p.want(TypeLabel); err != nil {
		return 0, 0, dst, err
	}
	if p.h.Len < 28 {
		return 0, 0, dst, p.fail("len", "%d is too short for the fixed part (28)", p.h.Len)
	}
	n := p.i32(24)
	if n < 0 || int64(n) > int64(p.h.Len-28)/16 {
		return 0, 0, dst, p.fail("nsets", "%d sets cannot fit in %d bytes", n, p.h.Len)
	}
	off, jsonTotal := 28, 0
	for i := range int(n) {
		if off+16 > p.h.Len {
			return 0, 0, dst, p.fail(fmt.Sprintf("labelset[%d]", i), "runs past the end of the PDU")
		}
		s := LabelSet{Inst: p.i32(off), NLabels: p.i32(off + 4)}
		jo, jl := p.i32(off+8), p.i32(off+12)
		off += 16
		if s.NLabels >= 255 {
			return 0, 0, dst, p.fail(fmt.Sprintf("labelset[%d].nlabels", i), "%d is not below 255", s.NLabels)
		}
		if jl < 0 || jl >= 65535 || jo < 0 || int64(jo)+int64(jl) > int64(p.h.Len) {
			return 0, 0, dst, p.fail(fmt.Sprintf("labelset[%d].json", i), "offset %d length %d is outside the PDU", jo, jl)
		}
		s.JSON = p.msg[jo : jo+jl : jo+jl]
		jsonTotal += int(jl)
		if i < cap(dst) {
			s.Labels = dst[:i+1][i].Labels[:0]
		}
		for j := range max(int(s.NLabels), 0) {
			if off+8 > p.h.Len {
				return 0, 0, dst, p.fail(fmt.Sprintf("labelset[%d].label[%d]", i, j), "runs past the end of the PDU")
			}
			l := Label{
				Name: binary.BigEndian.Uint16(p.msg[off:]), NameLen: p.msg[off+2], Flags: p.msg[off+3],
				Value: binary.BigEndian.Uint16(p.msg[off+4:]), ValueLen: binary.BigEndian.Uint16(p.msg[off+6:]),
			}
			if int(l.Name)+int(l.NameLen) > int(jl) || int(l.Value)+int(l.ValueLen) > int(jl) {
				return 0, 0, dst, p.fail(fmt.Sprintf("labelset[%d].label[%d]", i, j), "name or value lies outside the set's %d JSON bytes", jl)
			}
			s.Labels = append(s.Labels, l)
			off += 8
		}
		dst = append(dst, s)
	}
	// The JSON follows the sets; PCP tolerates up to 3 stray bytes after it.
	if end := off + jsonTotal; p.h.Len < end || p.h.Len > end+3 {
		return 0, 0, dst, p.fail("len", "is %d, the sets and their JSON take %d", p.h.Len, end)
	}
	return p.u32(12), p.i32(16), dst, nil
}

// Attr decodes an ATTR PDU: a PCP_ATTR_* key and its unpadded value.
func (p *Parser) Attr() (key int32, value []byte, err error) {
	if err := p.want(TypeAttr); err != nil {
		return 0, nil, err
	}
	if p.h.Len < 16 {
		return 0, nil, p.fail("len", "%d is too short for the attribute key", p.h.Len)
	}
	if p.h.Len-16 >= 4096 {
		return 0, nil, p.fail("len", "a %d-byte value is not below the 4096-byte limit", p.h.Len-16)
	}
	return p.i32(12), p.msg[16:p.h.Len:p.h.Len], nil
}

// Value is one value of a decoded RESULT.
type Value struct {
	Inst   int32
	Insitu uint32    // the value itself, for ValInsitu sets
	VType  ValueType // the block's vtype, for pointer sets
	Block  []byte    // the block's payload (vlen-4 bytes, no padding), for pointer sets
}

// Uint64 returns a 64-bit payload (int64, uint64 or double bits), or false
// when the block is not 8 bytes.
func (v Value) Uint64() (uint64, bool) {
	if len(v.Block) != 8 {
		return 0, false
	}
	return binary.BigEndian.Uint64(v.Block), true
}

// ValueSet is the values of one PMID in a decoded RESULT.
type ValueSet struct {
	PMID   PMID
	NumVal int32 // number of values, or a negative error code
	ValFmt int32
	Values []Value
}

// Result is a decoded RESULT PDU. Its storage is reused across calls.
type Result struct {
	Flags  int32 // the tv_sec word: state-change flags from an agent
	USec   int32
	Sets   []ValueSet
	values []Value
	spans  [][2]int
}

// Result decodes a RESULT PDU into r. The layout rules of the 64-bit libpcp
// decoder are enforced: value blocks must each belong to exactly one value
// and tile the end of the PDU from the end of the last value set.
func (p *Parser) Result(r *Result) error {
	r.Sets, r.values, r.spans = r.Sets[:0], r.values[:0], r.spans[:0]
	if err := p.want(TypeResult); err != nil {
		return err
	}
	if p.h.Len < 24 {
		return p.fail("len", "%d is too short for the fixed part (24)", p.h.Len)
	}
	n := p.i32(20)
	if n < 0 || int64(n) > int64(p.h.Len-24)/8 {
		return p.fail("numpmid", "%d value sets cannot fit in %d bytes", n, p.h.Len)
	}
	r.Flags, r.USec = p.i32(12), p.i32(16)
	off := 24
	for i := range int(n) {
		if off+8 > p.h.Len {
			return p.fail(fmt.Sprintf("vset[%d]", i), "runs past the end of the PDU")
		}
		vs := ValueSet{PMID: PMID(p.u32(off)), NumVal: p.i32(off + 4)}
		off += 8
		if vs.NumVal > 0 {
			if int64(vs.NumVal) > int64(p.h.Len-off-4)/8 {
				return p.fail(fmt.Sprintf("vset[%d].numval", i), "%d values cannot fit in the PDU", vs.NumVal)
			}
			vs.ValFmt = p.i32(off)
			off += 4
			if vs.ValFmt != ValInsitu && vs.ValFmt != ValDPtr && vs.ValFmt != ValSPtr {
				return p.fail(fmt.Sprintf("vset[%d].valfmt", i), "%d is not 0, 1 or 2", vs.ValFmt)
			}
			// The sets' Values are cut from r.values once every append is
			// done, so that growth cannot strand earlier slices.
			for range int(vs.NumVal) {
				r.values = append(r.values, Value{Inst: p.i32(off), Insitu: p.u32(off + 4)})
				off += 8
			}
		}
		r.Sets = append(r.Sets, vs)
	}
	setsEnd := off
	at := 0
	for i := range r.Sets {
		vs := &r.Sets[i]
		if vs.NumVal <= 0 {
			vs.Values = nil
			continue
		}
		vs.Values = r.values[at : at+int(vs.NumVal) : at+int(vs.NumVal)]
		at += int(vs.NumVal)
		if vs.ValFmt == ValInsitu {
			continue
		}
		for j := range vs.Values {
			v := &vs.Values[j]
			idx := int64(v.Insitu) * 4
			if idx < int64(setsEnd) || idx+4 > int64(p.h.Len) {
				return p.fail(fmt.Sprintf("vset[%d].value[%d]", i, j), "block index %d (byte %d) is outside the value block area %d..%d", v.Insitu, idx, setsEnd, p.h.Len)
			}
			b := int(idx)
			hdr := p.u32(b)
			vlen := int(hdr & 0xFFFFFF)
			if vlen < 4 || b+vlen > p.h.Len {
				return p.fail(fmt.Sprintf("vset[%d].value[%d].vlen", i, j), "%d does not fit between byte %d and the PDU end %d", vlen, b, p.h.Len)
			}
			v.VType = ValueType(hdr >> 24)
			v.Block = p.msg[b+4 : b+vlen : b+vlen]
			r.spans = append(r.spans, [2]int{b, min(pad4(vlen), p.h.Len-b)})
		}
	}
	slices.SortFunc(r.spans, func(a, b [2]int) int { return a[0] - b[0] })
	next := setsEnd
	for _, s := range r.spans {
		if s[0] != next {
			return p.fail("value blocks", "block at byte %d, expected one at byte %d (blocks must tile the PDU end without gaps or sharing)", s[0], next)
		}
		next += s[1]
	}
	if next != p.h.Len {
		return p.fail("len", "is %d, the value sets and blocks end at %d", p.h.Len, next)
	}
	return nil
}
