package pdu

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
)

type labelEntry struct {
	name, value [2]int // offset and length within the set's JSON
	flags       uint8
}

// CheckLabelName reports whether name may name a label: 1 to 254 bytes of
// [A-Za-z0-9_], which is what PCP's label parser and the LABEL PDU's 8-bit
// name length allow.
func CheckLabelName[T ~string | ~[]byte](name T) error {
	if len(name) == 0 || len(name) >= 255 {
		return fmt.Errorf("label name %q must have 1..254 bytes", name)
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !(c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return fmt.Errorf("label name %q: only [A-Za-z0-9_] are allowed", name)
		}
	}
	return nil
}

// StartLabel begins a LABEL PDU. ident and typ must echo the LABEL_REQ
// exactly: clients reject a mismatch.
func (b *Builder) StartLabel(from int32, ident uint32, typ int32) {
	b.start(TypeLabel, from)
	b.kind = TypeLabel
	b.aux, b.fixups = b.aux[:0], b.fixups[:0]
	b.put32(ident)
	b.put32(uint32(typ))
	b.put32(0) // padding
	b.put32(0) // nsets
}

// AddLabelSet adds one label set. json must be a JSON object whose keys are
// label names ([A-Za-z0-9_]+, unique); canonical form (no whitespace,
// sorted keys) is what PCP expects, and what the pmda package produces.
// Each label's flags are typ (the PM_LABEL_* source bit), plus
// LabelCompound for object values. An empty json or "{}" gives a set with
// no labels.
func (b *Builder) AddLabelSet(inst int32, json []byte, typ uint8) {
	if b.kind != TypeLabel {
		b.setErr(errNotStarted)
		return
	}
	ents, err := scanLabels(json, typ, b.labels[:0])
	b.labels = ents
	if err != nil {
		b.setErr(fmt.Errorf("pdu: LABEL: set %d: %w", b.count, err))
		return
	}
	if len(ents) >= 255 {
		b.setErr(fmt.Errorf("pdu: LABEL: set %d: %d labels, the limit is 254", b.count, len(ents)))
		return
	}
	if len(json) >= 65535 {
		b.setErr(fmt.Errorf("pdu: LABEL: set %d: %d bytes of JSON, the limit is 65534", b.count, len(json)))
		return
	}
	slices.SortFunc(ents, func(x, y labelEntry) int {
		return bytes.Compare(json[x.name[0]:x.name[0]+x.name[1]], json[y.name[0]:y.name[0]+y.name[1]])
	})
	for i := 1; i < len(ents); i++ {
		p, c := ents[i-1].name, ents[i].name
		if bytes.Equal(json[p[0]:p[0]+p[1]], json[c[0]:c[0]+c[1]]) {
			b.setErr(fmt.Errorf("pdu: LABEL: set %d: duplicate label %q", b.count, json[c[0]:c[0]+c[1]]))
			return
		}
	}
	if len(ents) == 0 {
		json = nil
	}
	b.put32(uint32(inst))
	b.put32(uint32(len(ents)))
	b.fixups = append(b.fixups, len(b.buf))
	b.put32(uint32(len(b.aux)))
	b.put32(uint32(len(json)))
	for _, e := range ents {
		b.buf = binary.BigEndian.AppendUint16(b.buf, uint16(e.name[0]))
		b.buf = append(b.buf, uint8(e.name[1]), e.flags)
		b.buf = binary.BigEndian.AppendUint16(b.buf, uint16(e.value[0]))
		b.buf = binary.BigEndian.AppendUint16(b.buf, uint16(e.value[1]))
	}
	b.aux = append(b.aux, json...)
	b.count++
}

// AddLabelSetError adds a set that carries an error code instead of labels.
func (b *Builder) AddLabelSetError(inst int32, code Err) {
	if b.kind != TypeLabel {
		b.setErr(errNotStarted)
		return
	}
	b.put32(uint32(inst))
	b.put32(uint32(code))
	b.fixups = append(b.fixups, len(b.buf))
	b.put32(uint32(len(b.aux)))
	b.put32(0)
	b.count++
}

// scanLabels finds the top-level names and values of a JSON object.
func scanLabels(js []byte, typ uint8, dst []labelEntry) ([]labelEntry, error) {
	s := jsonScanner{b: js}
	s.ws()
	if s.i == len(js) {
		return dst, nil
	}
	if !s.eat('{') {
		return dst, s.errf("expected '{'")
	}
	s.ws()
	if s.eat('}') {
		return dst, s.end()
	}
	for {
		s.ws()
		start := s.i
		if err := s.str(); err != nil {
			return dst, err
		}
		name := [2]int{start + 1, s.i - start - 2}
		if err := CheckLabelName(js[name[0] : name[0]+name[1]]); err != nil {
			return dst, fmt.Errorf("at byte %d: %w", start, err)
		}
		s.ws()
		if !s.eat(':') {
			return dst, s.errf("expected ':'")
		}
		s.ws()
		vstart := s.i
		flags := typ
		if s.i < len(js) && js[s.i] == '{' {
			flags |= LabelCompound
		}
		if err := s.value(0); err != nil {
			return dst, err
		}
		if name[0] > 0xFFFF || vstart > 0xFFFF || s.i-vstart > 0xFFFF {
			return dst, fmt.Errorf("label %q lies beyond 64 KiB", js[name[0]:name[0]+name[1]])
		}
		dst = append(dst, labelEntry{name: name, value: [2]int{vstart, s.i - vstart}, flags: flags})
		s.ws()
		if s.eat(',') {
			continue
		}
		if s.eat('}') {
			return dst, s.end()
		}
		return dst, s.errf("expected ',' or '}'")
	}
}

type jsonScanner struct {
	b []byte
	i int
}

func (s *jsonScanner) errf(msg string) error {
	return fmt.Errorf("label JSON at byte %d: %s", s.i, msg)
}

func (s *jsonScanner) ws() {
	for s.i < len(s.b) && (s.b[s.i] == ' ' || s.b[s.i] == '\t' || s.b[s.i] == '\n' || s.b[s.i] == '\r') {
		s.i++
	}
}

func (s *jsonScanner) eat(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

func (s *jsonScanner) end() error {
	s.ws()
	if s.i != len(s.b) {
		return s.errf("unexpected data after the object")
	}
	return nil
}

func (s *jsonScanner) str() error {
	if !s.eat('"') {
		return s.errf("expected a string")
	}
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case '\\':
			s.i += 2
		case '"':
			s.i++
			return nil
		default:
			s.i++
		}
	}
	return s.errf("unterminated string")
}

// value skips one JSON value; depth bounds nesting so hostile input cannot
// exhaust the stack.
func (s *jsonScanner) value(depth int) error {
	if depth > 32 {
		return s.errf("nested too deeply")
	}
	if s.i >= len(s.b) {
		return s.errf("expected a value")
	}
	switch c := s.b[s.i]; {
	case c == '"':
		return s.str()
	case c == '{' || c == '[':
		closer := byte('}')
		if c == '[' {
			closer = ']'
		}
		s.i++
		s.ws()
		if s.eat(closer) {
			return nil
		}
		for {
			s.ws()
			if c == '{' {
				if err := s.str(); err != nil {
					return err
				}
				s.ws()
				if !s.eat(':') {
					return s.errf("expected ':'")
				}
				s.ws()
			}
			if err := s.value(depth + 1); err != nil {
				return err
			}
			s.ws()
			if s.eat(',') {
				continue
			}
			if s.eat(closer) {
				return nil
			}
			return s.errf("expected ',' or a closing bracket")
		}
	default:
		start := s.i
		for s.i < len(s.b) && (s.b[s.i] == '-' || s.b[s.i] == '+' || s.b[s.i] == '.' ||
			s.b[s.i] >= '0' && s.b[s.i] <= '9' || s.b[s.i] >= 'a' && s.b[s.i] <= 'z' || s.b[s.i] >= 'A' && s.b[s.i] <= 'Z') {
			s.i++
		}
		if s.i == start {
			return s.errf("expected a value")
		}
		return nil
	}
}
