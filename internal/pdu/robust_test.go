package pdu

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestReader(t *testing.T) {
	var b Builder
	var stream []byte
	stream = append(stream, b.DescReq(7, NewPMID(127, 2, 0))...)
	stream = append(stream, b.Attr(0, AttrContainer, []byte("foo\x00bar"))...) // 23 bytes: not a multiple of 4
	stream = append(stream, b.Fetch(1, 2, []PMID{1, 2, 3})...)
	// One byte per Read: every PDU must still come out whole.
	r := NewReader(iotest.OneByteReader(bytes.NewReader(stream)))
	want := []struct {
		t    Type
		n    int
		from int32
	}{{TypeDescReq, 16, 7}, {TypeAttr, 23, 0}, {TypeFetch, 40, 1}}
	for _, w := range want {
		h, msg, err := r.Next()
		if err != nil || h.Type != w.t || h.Len != w.n || len(msg) != w.n || h.From != w.from {
			t.Fatalf("Next = %+v (%d bytes), %v; want %+v", h, len(msg), err, w)
		}
	}
	if _, _, err := r.Next(); err != io.EOF {
		t.Fatalf("at the end: %v, want io.EOF", err)
	}
}

// countingReader counts the Read calls that reach the stream.
type countingReader struct {
	r     io.Reader
	chunk int // the most one Read returns; 0 for no limit
	reads int
}

func (c *countingReader) Read(p []byte) (int, error) {
	c.reads++
	if c.chunk > 0 && len(p) > c.chunk {
		p = p[:c.chunk]
	}
	return c.r.Read(p)
}

// A request that is all there is one read(2) away, not two (header, then
// body), and PDUs that arrive together share a read; cut anywhere by the
// stream, every PDU still comes out whole and in order.
func TestReaderReadsWhatIsReady(t *testing.T) {
	var b Builder
	var stream []byte
	var want [][]byte
	// The Builder reuses its buffer: copy each PDU before building the next.
	for _, build := range []func() []byte{
		func() []byte { return b.Profile(3, &Profile{}) },
		func() []byte { return b.Fetch(3, 1, []PMID{NewPMID(127, 0, 1), NewPMID(127, 2, 0)}) },
		func() []byte { return b.Attr(0, AttrContainer, []byte("foo\x00bar")) },
		func() []byte { return b.DescReq(7, NewPMID(127, 2, 0)) },
	} {
		m := append([]byte(nil), build()...)
		want = append(want, m)
		stream = append(stream, m...)
	}

	one := &countingReader{r: bytes.NewReader(want[1])}
	r := NewReader(one)
	if _, msg, err := r.Next(); err != nil || !bytes.Equal(msg, want[1]) || one.reads != 1 {
		t.Fatalf("a lone FETCH: %v, %d bytes, in %d reads; want it whole in 1 read", err, len(msg), one.reads)
	}

	for chunk := range len(stream) + 1 {
		c := &countingReader{r: bytes.NewReader(stream), chunk: chunk}
		r := NewReader(c)
		for i, w := range want {
			h, msg, err := r.Next()
			if err != nil || !bytes.Equal(msg, w) || h.Len != len(w) {
				t.Fatalf("chunks of %d: PDU %d = %+v, %v; want %d bytes % x", chunk, i, h, err, len(w), w)
			}
		}
		if _, _, err := r.Next(); err != io.EOF {
			t.Fatalf("chunks of %d: at the end %v, want io.EOF", chunk, err)
		}
		if chunk == 0 && c.reads != 2 {
			t.Errorf("%d PDUs that arrived together took %d reads, want 1 and 1 for the end", len(want), c.reads)
		}
	}
}

// A stream that keeps returning nothing is broken, not slow.
func TestReaderGivesUpOnEmptyReads(t *testing.T) {
	r := NewReader(readerFunc(func([]byte) (int, error) { return 0, nil }))
	if _, _, err := r.Next(); err != io.ErrNoProgress {
		t.Fatalf("Next = %v, want io.ErrNoProgress", err)
	}
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

func TestReaderRejects(t *testing.T) {
	var b Builder
	desc := b.DescReq(0, 1)
	cases := map[string]struct {
		in      []byte
		max     int
		frame   bool // a *FrameError
		trunc   bool // ErrTruncated
		snippet string
	}{
		"len below 12":  {in: []byte{0, 0, 0, 8, 0, 0, 0x70, 4, 0, 0, 0, 0}, frame: true, snippet: "below the 12-byte minimum"},
		"negative len":  {in: []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0x70, 4, 0, 0, 0, 0}, frame: true},
		"negative type": {in: []byte{0, 0, 0, 12, 0xff, 0, 0x70, 4, 0, 0, 0, 0}, frame: true, snippet: "negative type"},
		"oversize":      {in: []byte{0, 1, 0, 0, 0, 0, 0x70, 4, 0, 0, 0, 0}, max: 4096, frame: true, snippet: "exceeds the 4096-byte limit"},
		"header cut":    {in: desc[:7], trunc: true, snippet: "header cut after 7"},
		"body cut":      {in: desc[:14], trunc: true, snippet: "DESC_REQ body cut after 2 of 4"},
		"huge len cut":  {in: []byte{0x03, 0, 0, 0, 0, 0, 0x70, 4, 0, 0, 0, 0, 1}, trunc: true},
		"default max":   {in: []byte{0x7f, 0, 0, 0, 0, 0, 0x70, 4, 0, 0, 0, 0}, frame: true, snippet: "67108864"},
	}
	for name, c := range cases {
		r := NewReader(bytes.NewReader(c.in))
		r.MaxLen = c.max
		_, _, err := r.Next()
		var fe *FrameError
		switch {
		case err == nil:
			t.Errorf("%s: accepted", name)
		case c.frame && !errors.As(err, &fe):
			t.Errorf("%s: %v is not a FrameError", name, err)
		case c.trunc && (!errors.Is(err, ErrTruncated) || !errors.Is(err, io.ErrUnexpectedEOF)):
			t.Errorf("%s: %v is not a truncation", name, err)
		case !strings.Contains(err.Error(), c.snippet):
			t.Errorf("%s: %q lacks %q", name, err, c.snippet)
		}
	}
}

// Every parser must reject each of its PDUs cut short or lengthened by a
// word, with an error, never a panic, and must reject other PDU types.
func TestParsersRejectBadLengths(t *testing.T) {
	for _, c := range samplePDUs() {
		for _, delta := range []int{-4, -1, 1, 4} {
			n := len(c.msg) + delta
			if n < HeaderLen {
				continue
			}
			msg := make([]byte, n)
			copy(msg, c.msg)
			msg[0], msg[1], msg[2], msg[3] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
			var p Parser
			if _, err := p.Start(msg); err != nil {
				t.Fatalf("%s%+d: Start: %v", c.name, delta, err)
			}
			if err := c.parse(&p); err == nil && !c.lenient(delta) {
				t.Errorf("%s with %+d bytes: accepted", c.name, delta)
			}
		}
		var p Parser
		other := append([]byte(nil), c.msg...)
		other[6], other[7] = 0x70, 0x0b // an unused type code
		p.Start(other)
		if err := c.parse(&p); err == nil || !strings.Contains(err.Error(), "PDU is TYPE_0x700b") {
			t.Errorf("%s: parsing a PDU of another type: %v", c.name, err)
		}
	}
}

type samplePDU struct {
	name    string
	msg     []byte
	parse   func(*Parser) error
	lenient func(delta int) bool // length changes the format itself tolerates
}

func never(int) bool { return false }

// samplePDUs gives one valid PDU of every kind, with the parser for it.
func samplePDUs() []samplePDU {
	var b Builder
	cp := func(m []byte) []byte { return append([]byte(nil), m...) }
	fin := func() []byte { m, err := b.Finish(); must(err); return cp(m) }
	var out []samplePDU
	add := func(name string, msg []byte, parse func(*Parser) error, lenient func(int) bool) {
		out = append(out, samplePDU{name, msg, parse, lenient})
	}
	add("CREDS", cp(b.Creds(1, VersionCred(0))), func(p *Parser) error { _, err := p.Creds(nil); return err }, never)
	add("ERROR", cp(b.Error(0, ErrPMID)), func(p *Parser) error { _, err := p.Error(); return err },
		func(d int) bool { return d == 4 }) // the 20-byte extended form
	add("PROFILE", cp(b.Profile(0, &Profile{GState: ProfileExclude, InDoms: []ProfileInDom{{1, 1, []int32{4, 5}}, {2, 0, nil}}})),
		func(p *Parser) error { var pr Profile; return p.Profile(&pr) }, never)
	add("PROFILE empty", cp(b.Profile(0, &Profile{})), func(p *Parser) error { var pr Profile; return p.Profile(&pr) },
		func(d int) bool { return d < 0 }) // the final pad may be missing
	add("FETCH", cp(b.Fetch(0, 0, []PMID{1, 2})), func(p *Parser) error { _, _, err := p.Fetch(nil); return err }, never)
	add("DESC_REQ", cp(b.DescReq(0, 1)), func(p *Parser) error { _, err := p.DescReq(); return err }, never)
	add("DESC", cp(b.Desc(0, Desc{})), func(p *Parser) error { _, err := p.Desc(); return err }, never)
	add("INSTANCE_REQ", cp(b.InstanceReq(0, 1, InNull, "cpu")), func(p *Parser) error { _, err := p.InstanceReq(); return err }, never)
	b.StartInstance(0, 1)
	b.AddInstance(0, "cpu0")
	b.AddInstance(1, "cpu1x")
	add("INSTANCE", fin(), func(p *Parser) error { _, _, err := p.Instance(nil); return err }, never)
	add("TEXT_REQ", cp(b.TextReq(0, 1, 5)), func(p *Parser) error { _, _, err := p.TextReq(); return err }, never)
	add("TEXT", cp(b.Text(0, 1, "hello")), func(p *Parser) error { _, _, err := p.Text(); return err },
		func(d int) bool { return d > 0 }) // trailing bytes are tolerated, as by libpcp
	add("PMNS_IDS", cp(b.IDs(0, 0, 5)), func(p *Parser) error { _, _, err := p.IDs(nil); return err }, never)
	b.StartNames(0, true)
	b.AddName("foo", 1)
	b.AddName("bar.x", 0)
	add("PMNS_NAMES", fin(), func(p *Parser) error { _, _, err := p.Names(nil); return err }, never)
	add("PMNS_CHILD", cp(b.NameReq(0, TypePMNSChild, 1, "abcde")), func(p *Parser) error { _, _, err := p.NameReq(); return err },
		func(d int) bool { return d == -1 }) // the name may end the PDU unpadded
	add("LABEL_REQ", cp(b.LabelReq(0, 1, 2)), func(p *Parser) error { _, _, err := p.LabelReq(); return err }, never)
	b.StartLabel(0, 1, LabelInstances)
	b.AddLabelSet(0, []byte(`{"cpu":0}`), LabelInstances)
	b.AddLabelSetError(1, ErrInst)
	add("LABEL", fin(), func(p *Parser) error { _, _, _, err := p.Label(nil); return err },
		func(d int) bool { return d == 1 }) // up to 3 stray bytes
	add("ATTR", cp(b.Attr(0, 5, []byte("bob\x00"))), func(p *Parser) error { _, _, err := p.Attr(); return err },
		func(int) bool { return true }) // unpadded by definition
	b.StartResult(0, 0)
	b.AddSet(1)
	b.AddInsitu(InNull, 3)
	b.AddSet(2)
	b.AddString(0, "abc")
	b.AddUint64(1, 9)
	b.AddSetError(3, ErrAgain)
	add("RESULT", fin(), func(p *Parser) error { var r Result; return p.Result(&r) }, never)
	return out
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

func TestResultLayoutRules(t *testing.T) {
	var b Builder
	b.StartResult(0, 0)
	b.AddSet(NewPMID(1, 0, 0))
	b.AddInt64(0, 5)
	b.AddInt64(1, 7)
	good, _ := b.Finish()
	good = append([]byte(nil), good...)
	mutate := func(f func(m []byte)) []byte { m := append([]byte(nil), good...); f(m); return m }
	for name, msg := range map[string][]byte{
		"index off by 2 words": mutate(func(m []byte) { m[51] += 2 }),
		"shared block":         mutate(func(m []byte) { m[51] = m[43] }),
		"index into the sets":  mutate(func(m []byte) { m[43] = 6 }),
		"index past the end":   mutate(func(m []byte) { m[43] = 0x40 }),
		"vlen below 4":         mutate(func(m []byte) { m[55] = 3 }),
		"vlen past the end":    mutate(func(m []byte) { m[67] = 0x20 }),
		"bad valfmt":           mutate(func(m []byte) { m[35] = 3 }),
		"numval too big":       mutate(func(m []byte) { m[31] = 9 }),
		"numpmid too big":      mutate(func(m []byte) { m[23] = 2 }),
		"gap after the blocks": append(mutate(func(m []byte) { m[3] = 80 }), 0, 0, 0, 0),
	} {
		var p Parser
		if _, err := p.Start(msg); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var r Result
		if err := p.Result(&r); err == nil {
			t.Errorf("%s: accepted", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}

func TestBuilderMistakes(t *testing.T) {
	var b Builder
	b.StartResult(0, 0)
	b.AddSet(1)
	b.AddInsitu(0, 1)
	b.AddInt64(1, 2)
	if _, err := b.Finish(); err == nil || !strings.Contains(err.Error(), "mixes in-situ and block values") {
		t.Errorf("mixed valfmt: %v", err)
	}
	b.StartResult(0, 0)
	b.AddInsitu(0, 1)
	if _, err := b.Finish(); err == nil {
		t.Error("value without a set accepted")
	}
	b.StartLabel(0, 1, LabelItem)
	b.AddLabelSet(InNull, []byte(`{"a":1,"a":2}`), LabelItem)
	if _, err := b.Finish(); err == nil || !strings.Contains(err.Error(), `duplicate label "a"`) {
		t.Errorf("duplicate label: %v", err)
	}
	for _, bad := range []string{`{"a b":1}`, `[1]`, `{"a":}`, `{"a":1`, `{"a":1}x`, `{"a":"x}`, `{"":1}`, strings.Repeat(`{"a":`, 40)} {
		b.StartLabel(0, 1, LabelItem)
		b.AddLabelSet(InNull, []byte(bad), LabelItem)
		if _, err := b.Finish(); err == nil {
			t.Errorf("label JSON %q accepted", bad)
		}
	}
	if _, err := b.Finish(); err == nil {
		t.Error("Finish without Start accepted")
	}
	// FailSet drops values and blocks already written for the set.
	b.StartResult(0, 0)
	b.AddSet(1)
	b.AddString(0, "dropped")
	b.FailSet(ErrAgain)
	b.AddSet(2)
	b.AddInt64(InNull, 1)
	msg, err := b.Finish()
	if err != nil || len(msg) != 24+8+20+12 {
		t.Fatalf("after FailSet: %d bytes, %v", len(msg), err)
	}
	var p Parser
	p.Start(msg)
	var r Result
	if err := p.Result(&r); err != nil || r.Sets[0].NumVal != int32(ErrAgain) {
		t.Fatalf("after FailSet: %+v %v", r.Sets, err)
	}
}

func TestProfileIn(t *testing.T) {
	pr := &Profile{GState: ProfileInclude, InDoms: []ProfileInDom{
		{InDom: 1, State: ProfileInclude, Insts: []int32{2}}, // all but 2
		{InDom: 2, State: ProfileExclude, Insts: []int32{7}}, // only 7
	}}
	for _, c := range []struct {
		indom InDom
		inst  int32
		want  bool
	}{{1, 1, true}, {1, 2, false}, {2, 7, true}, {2, 1, false}, {3, 1, true}} {
		if got := pr.In(c.indom, c.inst); got != c.want {
			t.Errorf("In(%d,%d) = %v", c.indom, c.inst, got)
		}
	}
	pr.GState = ProfileExclude
	if pr.In(3, 1) {
		t.Error("exclude-all profile selected an unlisted indom")
	}
	var nilp *Profile
	if !nilp.In(1, 1) {
		t.Error("nil profile must select everything")
	}
	var cp Profile
	cp.CopyFrom(pr)
	pr.InDoms[0].Insts[0] = 99
	if cp.InDoms[0].Insts[0] != 2 {
		t.Error("CopyFrom shares storage")
	}
}

func TestIdentifiers(t *testing.T) {
	p := NewPMID(127, 2, 0)
	if p != 0x1FC00800 || p.String() != "127.2.0" || p.Domain() != 127 || p.Cluster() != 2 || p.Item() != 0 {
		t.Errorf("PMID %#x %s", uint32(p), p)
	}
	if d := NewPMID(511, 4095, 1023); d.Domain() != 511 || d.Cluster() != 4095 || d.Item() != 1023 || d&0x80000000 != 0 {
		t.Errorf("max PMID %s", d)
	}
	if i := NewInDom(127, 1); i != 0x1FC00001 || i.String() != "127.1" {
		t.Errorf("InDom %#x %s", uint32(i), i)
	}
	if PMIDNull.String() != "PM_ID_NULL" || InDomNull.String() != "PM_INDOM_NULL" {
		t.Error("null names")
	}
	if UnitsCount != 0x00100000 || NewUnits(1, -1, 0, SpaceMByte, TimeSec, 0) != 0x1F023000 {
		t.Errorf("units %#x", uint32(NewUnits(1, -1, 0, SpaceMByte, TimeSec, 0)))
	}
	u := NewUnits(1, -1, -2, SpaceKByte, TimeMSec, -3)
	if u.DimSpace() != 1 || u.DimTime() != -1 || u.DimCount() != -2 || u.ScaleSpace() != 1 || u.ScaleTime() != 2 || u.ScaleCount() != -3 {
		t.Errorf("units fields of %#x", uint32(u))
	}
	if ErrPMID.Error() != "Unknown or illegal metric identifier" || ErrNotConn != -12391 || ErrPMID.Symbol() != "PM_ERR_PMID" {
		t.Errorf("ErrPMID %q %d", ErrPMID.Error(), int32(ErrNotConn))
	}
	if Err(-2).Error() != "errno 2" || Err(-99999).Error() != "PCP error -99999" {
		t.Errorf("unnamed codes: %q %q", Err(-2).Error(), Err(-99999).Error())
	}
	if TypeFetch.String() != "FETCH" || Type(0x700b).String() != "TYPE_0x700b" || ValueUint64.String() != "U64" {
		t.Error("type names")
	}
}

// The Parser and Builder agree on every sample: parse, rebuild, compare.
func TestRoundTrips(t *testing.T) {
	var b Builder
	for _, c := range samplePDUs() {
		var p Parser
		h, err := p.Start(c.msg)
		if err != nil {
			t.Fatal(err)
		}
		var again []byte
		switch h.Type {
		case TypeCreds:
			cr, _ := p.Creds(nil)
			again = b.Creds(h.From, cr...)
		case TypeError:
			code, _ := p.Error()
			again = b.Error(h.From, code)
		case TypeProfile:
			var pr Profile
			p.Profile(&pr)
			again = b.Profile(h.From, &pr)
		case TypeFetch:
			ctx, ids, _ := p.Fetch(nil)
			again = b.Fetch(h.From, ctx, ids)
		case TypeDescReq:
			id, _ := p.DescReq()
			again = b.DescReq(h.From, id)
		case TypeDesc:
			d, _ := p.Desc()
			again = b.Desc(h.From, d)
		case TypeInstanceReq:
			r, _ := p.InstanceReq()
			again = b.InstanceReq(h.From, r.InDom, r.Inst, string(r.Name))
		case TypeInstance:
			indom, list, _ := p.Instance(nil)
			b.StartInstance(h.From, indom)
			for _, e := range list {
				b.AddInstance(e.Inst, string(e.Name))
			}
			again, _ = b.Finish()
		case TypeTextReq:
			id, typ, _ := p.TextReq()
			again = b.TextReq(h.From, id, typ)
		case TypeText:
			id, s, _ := p.Text()
			again = b.Text(h.From, id, string(s))
		case TypePMNSIDs:
			sts, ids, _ := p.IDs(nil)
			again = b.IDs(h.From, sts, ids...)
		case TypePMNSNames:
			list, st, _ := p.Names(nil)
			b.StartNames(h.From, st)
			for _, n := range list {
				b.AddName(string(n.Name), n.Status)
			}
			again, _ = b.Finish()
		case TypePMNSChild:
			st, name, _ := p.NameReq()
			again = b.NameReq(h.From, h.Type, st, string(name))
		case TypeLabelReq:
			id, typ, _ := p.LabelReq()
			again = b.LabelReq(h.From, id, typ)
		case TypeLabel:
			id, typ, sets, _ := p.Label(nil)
			b.StartLabel(h.From, id, typ)
			for _, s := range sets {
				if s.NLabels < 0 {
					b.AddLabelSetError(s.Inst, Err(s.NLabels))
				} else {
					b.AddLabelSet(s.Inst, s.JSON, uint8(typ))
				}
			}
			again, _ = b.Finish()
		case TypeAttr:
			k, v, _ := p.Attr()
			again = b.Attr(h.From, k, v)
		case TypeResult:
			var r Result
			p.Result(&r)
			again, _ = rebuildResult(&b, h.From, &r)
		default:
			t.Fatalf("%s: no round trip for %s", c.name, h.Type)
		}
		if !bytes.Equal(again, c.msg) {
			t.Errorf("%s round trip:\n got % x\nwant % x", c.name, again, c.msg)
		}
	}
}

// rebuildResult encodes a decoded RESULT again, value by value, so that
// round-trip tests can compare the bytes.
func rebuildResult(b *Builder, from int32, r *Result) ([]byte, error) {
	b.StartResult(from, r.Flags)
	for _, s := range r.Sets {
		b.AddSet(s.PMID)
		if s.NumVal < 0 {
			b.FailSet(Err(s.NumVal))
		}
		for _, v := range s.Values {
			if s.ValFmt == ValInsitu {
				b.AddInsitu(v.Inst, v.Insitu)
			} else {
				b.AddBlock(v.Inst, v.VType, v.Block)
			}
		}
	}
	return b.Finish()
}

// A header that claims 48 MiB and then ends must not cost 48 MiB: the
// buffer grows only with the bytes that really arrive.
func TestReaderGrowsWithTheBody(t *testing.T) {
	claim := []byte{0x03, 0, 0, 0, 0, 0, 0x70, 4, 0, 0, 0, 0}
	r := NewReader(bytes.NewReader(append(claim, make([]byte, 100)...)))
	if _, _, err := r.Next(); !errors.Is(err, ErrTruncated) || !strings.Contains(err.Error(), "cut after 100 of 50331636") {
		t.Fatalf("Next = %v, want a truncation after 100 bytes", err)
	}
	if c := cap(r.buf); c > 2*growStep {
		t.Errorf("buffer capacity %d after 112 bytes of a 48 MiB claim", c)
	}

	// A real PDU several growth steps long, one byte per Read.
	var b Builder
	pmids := make([]PMID, 100000)
	for i := range pmids {
		pmids[i] = PMID(i)
	}
	big := b.Fetch(3, 4, pmids)
	r = NewReader(iotest.OneByteReader(bytes.NewReader(big)))
	h, msg, err := r.Next()
	if err != nil || h.Len != len(big) || !bytes.Equal(msg, big) {
		t.Fatalf("Next = %+v, %d bytes, %v; want the %d-byte FETCH back", h, len(msg), err, len(big))
	}
}

// Framing a request allocates nothing once the buffer has grown.
func TestReaderSteadyStateAllocs(t *testing.T) {
	var b Builder
	req := append([]byte(nil), b.Fetch(3, 1, []PMID{NewPMID(127, 0, 1), NewPMID(127, 2, 0)})...)
	r := NewReader(readerFunc(func(p []byte) (int, error) { return copy(p, req), nil }))
	if allocs := testing.AllocsPerRun(100, func() {
		if _, msg, err := r.Next(); err != nil || len(msg) != len(req) {
			t.Fatalf("Next = %d bytes, %v", len(msg), err)
		}
	}); allocs != 0 {
		t.Errorf("Next: %v allocations per request, want 0", allocs)
	}
}
