package pdu

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Builder encodes PDUs into one reusable buffer. The slice a method returns
// is valid until the next call on the Builder; write it out before building
// the next PDU. In steady state (buffers grown to size) building allocates
// nothing.
//
// Fixed-shape PDUs are built by one call. Variable-length ones (INSTANCE,
// PMNS_NAMES, LABEL, RESULT) are started, added to, and completed by Finish,
// which reports the first mistake made while building.
type Builder struct {
	buf    []byte
	aux    []byte // value blocks of a RESULT, or the JSON of a LABEL
	fixups []int  // offsets in buf of words that hold offsets into aux
	err    error
	kind   Type // the variable-length PDU under construction, or 0

	count  int // entries added: sets, instances, names or label sets
	nstr   int // PMNS_NAMES: Σ(namelen+1)
	status bool
	setOff int   // RESULT: offset of the open value set, or -1
	setN   int   // values in the open set
	setFmt int32 // the open set's valfmt, or -1 while unknown
	setAux int   // len(aux) when the open set started
	setFix int   // len(fixups) when the open set started
	labels []labelEntry
}

var errNotStarted = errors.New("pdu: Builder: no PDU of that kind was started")

func (b *Builder) put32(v uint32) { b.buf = binary.BigEndian.AppendUint32(b.buf, v) }

func (b *Builder) set32(off int, v uint32) { binary.BigEndian.PutUint32(b.buf[off:], v) }

func (b *Builder) start(t Type, from int32) {
	b.buf = b.buf[:0]
	b.put32(0) // length, patched by end
	b.put32(uint32(t))
	b.put32(uint32(from))
	b.kind, b.err, b.count = 0, nil, 0
}

func (b *Builder) end() []byte {
	b.set32(0, uint32(len(b.buf)))
	return b.buf
}

// putString appends a length-prefixed string padded to a word boundary.
// Filler is '~', as C senders write it, which makes dumps comparable.
func (b *Builder) putString(s string) {
	b.put32(uint32(len(s)))
	b.buf = append(b.buf, s...)
	for len(b.buf)%4 != 0 {
		b.buf = append(b.buf, '~')
	}
}

// Creds builds a CREDS PDU. Agents send one VersionCred with from = pid.
func (b *Builder) Creds(from int32, creds ...Cred) []byte {
	b.start(TypeCreds, from)
	b.put32(uint32(len(creds)))
	for _, c := range creds {
		b.put32(c.word())
	}
	return b.end()
}

// Error builds a 16-byte ERROR PDU carrying code (0 means success).
func (b *Builder) Error(from int32, code Err) []byte {
	b.start(TypeError, from)
	b.put32(uint32(code))
	return b.end()
}

// Desc builds a DESC PDU.
func (b *Builder) Desc(from int32, d Desc) []byte {
	b.start(TypeDesc, from)
	b.put32(uint32(d.PMID))
	b.put32(uint32(d.Type))
	b.put32(uint32(d.InDom))
	b.put32(uint32(d.Sem))
	b.put32(uint32(d.Units))
	return b.end()
}

// Text builds a TEXT PDU. ident is sent in network order; nobody reads it.
func (b *Builder) Text(from int32, ident uint32, text string) []byte {
	b.start(TypeText, from)
	b.put32(ident)
	b.putString(text)
	return b.end()
}

// IDs builds a PMNS_IDS PDU: an agent's answer to a name lookup (sts 0, one
// PMID), or pmcd's PMID-to-names request.
func (b *Builder) IDs(from int32, sts int32, ids ...PMID) []byte {
	b.start(TypePMNSIDs, from)
	b.put32(uint32(sts))
	b.put32(uint32(len(ids)))
	for _, id := range ids {
		b.put32(uint32(id))
	}
	return b.end()
}

// Profile builds a PROFILE PDU (pmcd's side).
func (b *Builder) Profile(from int32, pr *Profile) []byte {
	b.start(TypeProfile, from)
	b.put32(uint32(pr.Ctx))
	b.put32(uint32(pr.GState))
	b.put32(uint32(len(pr.InDoms)))
	b.put32(0)
	for _, e := range pr.InDoms {
		b.put32(uint32(e.InDom))
		b.put32(uint32(e.State))
		b.put32(uint32(len(e.Insts)))
		b.put32(0)
	}
	for _, e := range pr.InDoms {
		for _, i := range e.Insts {
			b.put32(uint32(i))
		}
	}
	return b.end()
}

// Fetch builds a FETCH PDU (pmcd's side).
func (b *Builder) Fetch(from int32, ctx int32, pmids []PMID) []byte {
	b.start(TypeFetch, from)
	b.put32(uint32(ctx))
	b.put32(0)
	b.put32(0)
	b.put32(uint32(len(pmids)))
	for _, id := range pmids {
		b.put32(uint32(id))
	}
	return b.end()
}

// DescReq builds a DESC_REQ PDU (pmcd's side).
func (b *Builder) DescReq(from int32, pmid PMID) []byte {
	b.start(TypeDescReq, from)
	b.put32(uint32(pmid))
	return b.end()
}

// InstanceReq builds an INSTANCE_REQ PDU (pmcd's side). Use inst InNull
// and name "" to ask for every instance.
func (b *Builder) InstanceReq(from int32, indom InDom, inst int32, name string) []byte {
	b.start(TypeInstanceReq, from)
	b.put32(uint32(indom))
	b.put32(0)
	b.put32(0)
	b.put32(uint32(inst))
	b.putString(name)
	return b.end()
}

// TextReq builds a TEXT_REQ PDU (pmcd's side).
func (b *Builder) TextReq(from int32, ident uint32, typ int32) []byte {
	return b.identReq(TypeTextReq, from, ident, typ)
}

// identReq builds a request that names one PMID, instance domain or
// other identifier and says which kind it is: TEXT_REQ and LABEL_REQ.
func (b *Builder) identReq(t Type, from int32, ident uint32, typ int32) []byte {
	b.start(t, from)
	b.put32(ident)
	b.put32(uint32(typ))
	return b.end()
}

// NameReq builds a PMNS_CHILD or PMNS_TRAVERSE request (pmcd's side).
func (b *Builder) NameReq(from int32, t Type, subtype int32, name string) []byte {
	b.start(t, from)
	b.put32(uint32(subtype))
	b.putString(name)
	return b.end()
}

// LabelReq builds a LABEL_REQ PDU (pmcd's side).
func (b *Builder) LabelReq(from int32, ident uint32, typ int32) []byte {
	return b.identReq(TypeLabelReq, from, ident, typ)
}

// Attr builds an ATTR PDU (pmcd's side). The value is not padded.
func (b *Builder) Attr(from int32, key int32, value []byte) []byte {
	b.start(TypeAttr, from)
	b.put32(uint32(key))
	b.buf = append(b.buf, value...)
	return b.end()
}

// StartInstance begins an INSTANCE PDU; add entries with AddInstance.
func (b *Builder) StartInstance(from int32, indom InDom) {
	b.start(TypeInstance, from)
	b.kind = TypeInstance
	b.put32(uint32(indom))
	b.put32(0) // numinst
}

// AddInstance adds one entry; an empty name is sent as namelen 0.
func (b *Builder) AddInstance(inst int32, name string) {
	if b.kind != TypeInstance {
		b.setErr(errNotStarted)
		return
	}
	b.put32(uint32(inst))
	b.putString(name)
	b.count++
}

// StartNames begins a PMNS_NAMES PDU; withStatus adds a status word to each
// name (CHILD replies with subtype 1).
func (b *Builder) StartNames(from int32, withStatus bool) {
	b.start(TypePMNSNames, from)
	b.kind, b.status, b.nstr = TypePMNSNames, withStatus, 0
	b.put32(0) // nstrbytes
	b.put32(0) // numstatus
	b.put32(0) // numnames
}

// AddName adds a name; status is ignored unless the list has status words.
func (b *Builder) AddName(name string, status int32) {
	if b.kind != TypePMNSNames {
		b.setErr(errNotStarted)
		return
	}
	if name == "" {
		// libpcp's decoder counts at least 4 bytes per name beyond its
		// length word, so an empty name would make the PDU undecodable.
		b.setErr(errors.New("pdu: PMNS_NAMES: empty name"))
		return
	}
	if b.status {
		b.put32(uint32(status))
	}
	b.putString(name)
	b.nstr += len(name) + 1
	b.count++
}

func (b *Builder) setErr(err error) {
	if b.err == nil {
		b.err = err
	}
}

// Finish completes the variable-length PDU started last.
func (b *Builder) Finish() ([]byte, error) {
	kind := b.kind
	b.kind = 0
	if b.err != nil {
		return nil, b.err
	}
	switch kind {
	case TypeInstance:
		b.set32(16, uint32(b.count))
	case TypePMNSNames:
		b.set32(12, uint32(b.nstr))
		if b.status {
			b.set32(16, uint32(b.count))
		}
		b.set32(20, uint32(b.count))
	case TypeLabel:
		b.set32(24, uint32(b.count))
		b.appendAux(false)
	case TypeResult:
		b.closeSet()
		if b.err != nil {
			return nil, b.err
		}
		b.set32(20, uint32(b.count))
		if len(b.buf)+len(b.aux) > math.MaxInt32 {
			return nil, fmt.Errorf("pdu: RESULT of %d bytes is too large", len(b.buf)+len(b.aux))
		}
		b.appendAux(true)
	default:
		return nil, errNotStarted
	}
	return b.end(), nil
}

// appendAux moves the aux area to the end of buf and turns the offsets
// recorded at fixups from aux-relative into PDU-relative: bytes for LABEL
// JSON, words for RESULT value blocks (aux starts on a word boundary).
func (b *Builder) appendAux(words bool) {
	base := uint32(len(b.buf))
	if words {
		base /= 4
	}
	for _, off := range b.fixups {
		b.set32(off, binary.BigEndian.Uint32(b.buf[off:])+base)
	}
	b.buf = append(b.buf, b.aux...)
}

// StartResult begins a RESULT PDU. flags goes in the tv_sec word: an agent
// sends 0 or StateLabelChange/StateNamesChange, never a time.
func (b *Builder) StartResult(from int32, flags int32) {
	b.start(TypeResult, from)
	b.kind = TypeResult
	b.aux, b.fixups, b.setOff = b.aux[:0], b.fixups[:0], -1
	b.put32(uint32(flags))
	b.put32(0) // tv_usec
	b.put32(0) // numpmid
}

// closeSet fixes up the open value set: its numval, and the valfmt word,
// which exists only when there are values.
func (b *Builder) closeSet() {
	if b.setOff < 0 {
		return
	}
	if b.setN == 0 {
		b.buf = b.buf[:b.setOff+8]
		b.set32(b.setOff+4, 0)
	} else {
		b.set32(b.setOff+4, uint32(b.setN))
		b.set32(b.setOff+8, uint32(b.setFmt))
	}
	b.setOff = -1
}

// AddSet opens the value set of pmid. Sets must be added in the order of the
// FETCH request, one per requested PMID (repeats included).
func (b *Builder) AddSet(pmid PMID) {
	if b.kind != TypeResult {
		b.setErr(errNotStarted)
		return
	}
	b.closeSet()
	b.setOff, b.setN, b.setFmt = len(b.buf), 0, -1
	b.setAux, b.setFix = len(b.aux), len(b.fixups)
	b.put32(uint32(pmid))
	b.put32(0) // numval
	b.put32(0) // valfmt
	b.count++
}

// AddSetError adds a value set that carries only an error code for pmid.
func (b *Builder) AddSetError(pmid PMID, code Err) {
	b.AddSet(pmid)
	b.FailSet(code)
}

// FailSet drops any values of the open set and makes it carry code instead.
func (b *Builder) FailSet(code Err) {
	if b.kind != TypeResult || b.setOff < 0 {
		b.setErr(errNotStarted)
		return
	}
	b.buf = b.buf[:b.setOff+8]
	b.set32(b.setOff+4, uint32(code))
	b.aux, b.fixups = b.aux[:b.setAux], b.fixups[:b.setFix]
	b.setOff = -1
}

func (b *Builder) addValue(inst int32, fmt_ int32) bool {
	if b.kind != TypeResult || b.setOff < 0 {
		b.setErr(errNotStarted)
		return false
	}
	if b.setFmt >= 0 && (b.setFmt == ValInsitu) != (fmt_ == ValInsitu) {
		b.setErr(fmt.Errorf("pdu: RESULT: value set of %s mixes in-situ and block values", PMID(binary.BigEndian.Uint32(b.buf[b.setOff:]))))
		return false
	}
	if b.setFmt < 0 {
		b.setFmt = fmt_
	}
	b.put32(uint32(inst))
	b.setN++
	return true
}

// AddInsitu adds a 32-bit value (PM_TYPE_32 or U32) to the open set.
func (b *Builder) AddInsitu(inst int32, v uint32) {
	if b.addValue(inst, ValInsitu) {
		b.put32(v)
	}
}

// AddBlock adds a value carried in a value block to the open set.
func (b *Builder) AddBlock(inst int32, vtype ValueType, payload []byte) {
	if 4+len(payload) > 0xFFFFFF {
		b.setErr(fmt.Errorf("pdu: RESULT: a %d-byte value exceeds the 24-bit vlen", len(payload)))
		return
	}
	if !b.blockSlot(inst) {
		return
	}
	b.aux = binary.BigEndian.AppendUint32(b.aux, uint32(vtype)<<24|uint32(4+len(payload)))
	b.aux = append(b.aux, payload...)
	b.padAux()
}

// blockSlot writes the value slot of a block value: for now the block's
// word offset within aux, made PDU-relative by Finish.
func (b *Builder) blockSlot(inst int32) bool {
	if !b.addValue(inst, ValDPtr) {
		return false
	}
	b.fixups = append(b.fixups, len(b.buf))
	b.put32(uint32(len(b.aux) / 4))
	return true
}

func (b *Builder) padAux() {
	for len(b.aux)%4 != 0 {
		b.aux = append(b.aux, '~')
	}
}

// Add64 adds an 8-byte value (PM_TYPE_64, U64, or DOUBLE bits) in a block.
func (b *Builder) Add64(inst int32, vtype ValueType, v uint64) {
	if !b.blockSlot(inst) {
		return
	}
	b.aux = binary.BigEndian.AppendUint32(b.aux, uint32(vtype)<<24|12)
	b.aux = binary.BigEndian.AppendUint64(b.aux, v)
}

// AddInt64 adds a PM_TYPE_64 value.
func (b *Builder) AddInt64(inst int32, v int64) { b.Add64(inst, ValueInt64, uint64(v)) }

// AddUint64 adds a PM_TYPE_U64 value.
func (b *Builder) AddUint64(inst int32, v uint64) { b.Add64(inst, ValueUint64, v) }

// AddDouble adds a PM_TYPE_DOUBLE value.
func (b *Builder) AddDouble(inst int32, v float64) { b.Add64(inst, ValueDouble, math.Float64bits(v)) }

// AddFloat adds a PM_TYPE_FLOAT value in a block, as libpcp_pmda does.
func (b *Builder) AddFloat(inst int32, v float32) {
	if !b.blockSlot(inst) {
		return
	}
	b.aux = binary.BigEndian.AppendUint32(b.aux, uint32(ValueFloat)<<24|8)
	b.aux = binary.BigEndian.AppendUint32(b.aux, math.Float32bits(v))
}

// AddString adds a PM_TYPE_STRING value. Like libpcp, the block includes
// the C string's NUL in vlen.
func (b *Builder) AddString(inst int32, s string) {
	if 5+len(s) > 0xFFFFFF {
		b.setErr(fmt.Errorf("pdu: RESULT: a %d-byte string exceeds the 24-bit vlen", len(s)))
		return
	}
	if !b.blockSlot(inst) {
		return
	}
	b.aux = binary.BigEndian.AppendUint32(b.aux, uint32(ValueString)<<24|uint32(5+len(s)))
	b.aux = append(b.aux, s...)
	b.aux = append(b.aux, 0)
	b.padAux()
}
