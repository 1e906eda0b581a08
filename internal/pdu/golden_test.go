package pdu

import (
	"bytes"
	"encoding/hex"
	"math"
	"strings"
	"testing"
)

// unhex reads hex dumps: hex pairs, with spaces, newlines and '|' as
// separators.
func unhex(t testing.TB, s string) []byte {
	t.Helper()
	s = strings.NewReplacer(" ", "", "\n", "", "\t", "", "|", "").Replace(s)
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("bad hex in test: %v", err)
	}
	return b
}

func same(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		t.Fatalf("%s:\n got % x\nwant % x", what, got, want)
	}
}

func parse(t *testing.T, msg []byte) *Parser {
	t.Helper()
	var p Parser
	if _, err := p.Start(msg); err != nil {
		t.Fatalf("Start: %v", err)
	}
	return &p
}

// A DESC as perfevent sends it: 127.2.0, a 64-bit counter in indom 127.1,
// counted in ones.
func TestGoldenDesc(t *testing.T) {
	want := unhex(t, `00 00 00 20  00 00 70 05  00 00 00 00  1f c0 08 00
	                  00 00 00 02  1f c0 00 01  00 00 00 01  00 10 00 00`)
	d := Desc{NewPMID(127, 2, 0), ValueInt64, NewInDom(127, 1), SemCounter, UnitsCount}
	var b Builder
	same(t, "DESC", b.Desc(0, d), want)
	got, err := parse(t, want).Desc()
	if err != nil || got != d {
		t.Fatalf("Desc() = %+v, %v; want %+v", got, err, d)
	}
	// Captured from pmdasample: 64-bit counter, indom 29.2, Kbyte.
	cap := unhex(t, `00 00 00 20 00 00 70 05 00 00 00 00 07 40 00 6e | 00 00 00 02 | 07 40 00 02 | 00 00 00 01 | 10 01 00 00`)
	d2 := Desc{NewPMID(29, 0, 110), ValueInt64, NewInDom(29, 2), SemCounter, NewUnits(1, 0, 0, SpaceKByte, 0, 0)}
	same(t, "DESC sample", b.Desc(0, d2), cap)
}

// A RESULT with two 64-bit values of 127.2.0 (the example of package doc
// and of docs/pdu-protocol.md).
func TestGoldenResult64(t *testing.T) {
	want := unhex(t, `00 00 00 4c  00 00 70 01  00 00 00 00  00 00 00 00
		00 00 00 00  00 00 00 01  1f c0 08 00  00 00 00 02
		00 00 00 01  00 00 00 00  00 00 00 0d  00 00 00 01
		00 00 00 10  02 00 00 0c  00 00 00 00  00 00 00 05
		02 00 00 0c  00 00 00 00  00 00 00 07`)
	var b Builder
	b.StartResult(0, 0)
	b.AddSet(NewPMID(127, 2, 0))
	b.AddInt64(0, 5)
	b.AddInt64(1, 7)
	got, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	same(t, "RESULT", got, want)

	var r Result
	if err := parse(t, want).Result(&r); err != nil {
		t.Fatal(err)
	}
	if len(r.Sets) != 1 || r.Sets[0].NumVal != 2 || r.Sets[0].ValFmt != ValDPtr {
		t.Fatalf("sets = %+v", r.Sets)
	}
	for i, w := range []uint64{5, 7} {
		v := r.Sets[0].Values[i]
		if got, ok := v.Uint64(); !ok || got != w || v.VType != ValueInt64 || v.Inst != int32(i) {
			t.Errorf("value %d = %+v", i, v)
		}
	}
}

// Captured from pmdasample: INSITU value 42 of 29.0.14.
func TestGoldenResultInsitu(t *testing.T) {
	want := unhex(t, `00 00 00 2c 00 00 70 01 00 00 00 00 | 00 00 00 00 00 00 00 00 | 00 00 00 01 |
		07 40 00 0e  00 00 00 01  00 00 00 00  ff ff ff ff  00 00 00 2a`)
	// The captured dump's tv_sec/tv_usec/numpmid is 12 bytes after the
	// header: tv_sec 0, tv_usec 0, numpmid 1. The dump groups them oddly.
	want = append(want[:12], append([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, want[24:]...)...)
	want = want[:44]
	var b Builder
	b.StartResult(0, 0)
	b.AddSet(NewPMID(29, 0, 14))
	b.AddInsitu(InNull, 42)
	got, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	same(t, "RESULT insitu", got, want)
}

// Captured: string and double blocks, and an error value set.
func TestGoldenResultStringDouble(t *testing.T) {
	var b Builder
	b.StartResult(0, StateNamesChange)
	b.AddSet(NewPMID(29, 0, 31))
	b.AddString(InNull, "hello world!")
	b.AddSet(NewPMID(29, 0, 32))
	b.AddDouble(InNull, 1.0)
	b.AddSetError(NewPMID(29, 9, 9), ErrPMID)
	b.AddSet(NewPMID(29, 9, 10)) // no values: numval 0, no valfmt
	got, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	// 24 fixed + 20 + 20 + 8 + 8 = 80: blocks start at word 20 (0x14).
	want := unhex(t, `00 00 00 70 00 00 70 01 00 00 00 00 | 00 00 00 10 00 00 00 00 00 00 00 04
		07 40 00 1f 00 00 00 01 00 00 00 01 ff ff ff ff 00 00 00 14
		07 40 00 20 00 00 00 01 00 00 00 01 ff ff ff ff 00 00 00 19
		07 40 24 09 ff ff cf ba
		07 40 24 0a 00 00 00 00
		06 00 00 11 68 65 6c 6c 6f 20 77 6f 72 6c 64 21 00 7e 7e 7e
		05 00 00 0c 3f f0 00 00 00 00 00 00`)
	same(t, "RESULT", got, want)
	var r Result
	if err := parse(t, got).Result(&r); err != nil {
		t.Fatal(err)
	}
	if r.Flags != StateNamesChange || len(r.Sets) != 4 {
		t.Fatalf("flags %#x sets %d", r.Flags, len(r.Sets))
	}
	if s := string(r.Sets[0].Values[0].Block); s != "hello world!\x00" {
		t.Errorf("string = %q", s)
	}
	if v, _ := r.Sets[1].Values[0].Uint64(); math.Float64frombits(v) != 1.0 {
		t.Errorf("double bits = %#x", v)
	}
	if r.Sets[2].NumVal != int32(ErrPMID) || r.Sets[3].NumVal != 0 {
		t.Errorf("numvals %d %d", r.Sets[2].NumVal, r.Sets[3].NumVal)
	}
	// The empty string: vlen 5.
	b.StartResult(0, 0)
	b.AddSet(NewPMID(29, 0, 31))
	b.AddString(InNull, "")
	got, _ = b.Finish()
	same(t, "empty string block", got[len(got)-8:], unhex(t, "06 00 00 05 00 7e 7e 7e"))
}

func TestGoldenCreds(t *testing.T) {
	var b Builder
	agent := unhex(t, `00 00 00 14  00 00 70 0c  00 00 32 05  00 00 00 01  01 02 00 04`)
	same(t, "agent CREDS", b.Creds(0x3205, VersionCred(FlagAuth)), agent)
	pmcd := unhex(t, `00 00 00 14  00 00 70 0c  00 00 38 97  00 00 00 01  01 02 00 04`)
	p := parse(t, pmcd)
	creds, err := p.Creds(nil)
	if err != nil || len(creds) != 1 || creds[0] != (Cred{1, 2, 4}) || p.Header().From != 0x3897 {
		t.Fatalf("Creds = %+v, %v from %d", creds, err, p.Header().From)
	}
	perf := unhex(t, `00 00 00 14 | 00 00 70 0c | 00 00 40 01 | 00 00 00 01 | 01 02 00 00`)
	same(t, "perfevent CREDS", b.Creds(16385, VersionCred(0)), perf)
}

func TestGoldenRequests(t *testing.T) {
	var b Builder
	profile := unhex(t, `00 00 00 1c 00 00 70 02 00 00 00 00 | 00 00 00 00 | 00 00 00 00 | 00 00 00 00 | 00 00 00 00`)
	same(t, "PROFILE", b.Profile(0, &Profile{}), profile)
	var pr Profile
	if err := parse(t, profile).Profile(&pr); err != nil || !pr.In(NewInDom(1, 1), 5) {
		t.Fatalf("Profile: %v %+v", err, pr)
	}

	fetch := unhex(t, `00 00 00 20 00 00 70 03 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 01 1f c0 08 00`)
	same(t, "FETCH", b.Fetch(0, 0, []PMID{0x1fc00800}), fetch)
	ctx, ids, err := parse(t, fetch).Fetch(nil)
	if err != nil || ctx != 0 || len(ids) != 1 || ids[0] != NewPMID(127, 2, 0) {
		t.Fatalf("Fetch = %d %v %v", ctx, ids, err)
	}

	descReq := unhex(t, `00 00 00 10 00 00 70 04 00 00 00 00 1f c0 08 00`)
	same(t, "DESC_REQ", b.DescReq(0, NewPMID(127, 2, 0)), descReq)
	if id, err := parse(t, descReq).DescReq(); err != nil || id != 0x1fc00800 {
		t.Fatalf("DescReq = %v %v", id, err)
	}

	notconn := unhex(t, `00 00 00 10 00 00 70 00 00 00 00 00 ff ff cf 99`)
	same(t, "NOTCONN", b.Error(0, ErrNotConn), notconn)
	if code, err := parse(t, notconn).Error(); err != nil || code != ErrNotConn {
		t.Fatalf("Error = %v %v", code, err)
	}
	same(t, "PM_ERR_PMID reply", b.Error(0, ErrPMID), unhex(t, `00 00 00 10 00 00 70 00 00 00 00 00 ff ff cf ba`))
	same(t, "PM_ERR_IPC reply", b.Error(0, ErrIPC)[12:], unhex(t, `ff ff cf b2`))

	attr := unhex(t, `00 00 00 16 00 00 70 11 00 00 00 00 00 00 00 0e 31 35 30 38 32 00`)
	same(t, "ATTR", b.Attr(0, AttrProcessID, []byte("15082\x00")), attr)
	if k, v, err := parse(t, attr).Attr(); err != nil || k != AttrProcessID || string(v) != "15082\x00" {
		t.Fatalf("Attr = %d %q %v", k, v, err)
	}
	ctr := unhex(t, `00 00 00 14 00 00 70 11 00 00 00 00 00 00 00 0f 66 6f 6f 00`)
	if k, v, err := parse(t, ctr).Attr(); err != nil || k != AttrContainer || string(v) != "foo\x00" {
		t.Fatalf("Attr = %d %q %v", k, v, err)
	}

	ireq := unhex(t, `00 00 00 20 00 00 70 06 00 00 00 00 1f c0 00 06 00 00 00 00 00 00 00 00 ff ff ff ff 00 00 00 00`)
	same(t, "INSTANCE_REQ all", b.InstanceReq(0, NewInDom(127, 6), InNull, ""), ireq)
	r, err := parse(t, ireq).InstanceReq()
	if err != nil || r.InDom != NewInDom(127, 6) || r.Inst != InNull || r.Name != nil {
		t.Fatalf("InstanceReq = %+v %v", r, err)
	}
	byName := b.InstanceReq(3, NewInDom(127, 6), InNull, "cpu10")
	same(t, "INSTANCE_REQ by name", byName[24:], unhex(t, `ff ff ff ff 00 00 00 05 63 70 75 31 30 7e 7e 7e`))
	r, err = parse(t, byName).InstanceReq()
	if err != nil || string(r.Name) != "cpu10" {
		t.Fatalf("InstanceReq = %+v %v", r, err)
	}

	treq := unhex(t, `00 00 00 14 00 00 70 08 00 00 00 00 1f c0 20 00 00 00 00 05`)
	same(t, "TEXT_REQ", b.TextReq(0, uint32(NewPMID(127, 8, 0)), TextOneLine|TextPMID), treq)
	if id, typ, err := parse(t, treq).TextReq(); err != nil || id != 0x1fc02000 || typ != 5 {
		t.Fatalf("TextReq = %#x %d %v", id, typ, err)
	}

	lreq := unhex(t, `00 00 00 14 00 00 70 12 00 00 00 00 00 00 00 7f 00 00 00 02`)
	same(t, "LABEL_REQ", b.LabelReq(0, 127, LabelDomain), lreq)
	if id, typ, err := parse(t, lreq).LabelReq(); err != nil || id != 127 || typ != LabelDomain {
		t.Fatalf("LabelReq = %d %d %v", id, typ, err)
	}

	trav := b.NameReq(0, TypePMNSTraverse, 0, "perfevent.derived")
	same(t, "PMNS_TRAVERSE", trav, unhex(t, `00 00 00 28 00 00 70 10 00 00 00 00 00 00 00 00 00 00 00 11`+hex.EncodeToString([]byte("perfevent.derived~~~"))))
	if st, name, err := parse(t, trav).NameReq(); err != nil || st != 0 || string(name) != "perfevent.derived" {
		t.Fatalf("NameReq = %d %q %v", st, name, err)
	}
}

func TestGoldenPMNS(t *testing.T) {
	var b Builder
	ids := unhex(t, `00 00 00 18 00 00 70 0d 00 00 00 00 | 00 00 00 00 | 00 00 00 01 | 1f c0 0c 00`)
	same(t, "PMNS_IDS", b.IDs(0, 0, NewPMID(127, 3, 0)), ids)
	if sts, got, err := parse(t, ids).IDs(nil); err != nil || sts != 0 || len(got) != 1 || got[0] != 0x1fc00c00 {
		t.Fatalf("IDs = %d %v %v", sts, got, err)
	}

	names := unhex(t, `00 00 00 30 00 00 70 0e 00 00 00 00 | 00 00 00 12 | 00 00 00 00 | 00 00 00 01 | 00 00 00 11`+
		hex.EncodeToString([]byte("sample.secret.bar~~~")))
	b.StartNames(0, false)
	b.AddName("sample.secret.bar", PMNSLeaf)
	got, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	same(t, "PMNS_NAMES", got, names)

	child := unhex(t, `00 00 00 30 00 00 70 0e 00 00 00 00 | 00 00 00 08 | 00 00 00 02 | 00 00 00 02 |
		00 00 00 01  00 00 00 03  66 6f 6f 7e
		00 00 00 00  00 00 00 03  62 61 72 7e`)
	b.StartNames(0, true)
	b.AddName("foo", PMNSNonLeaf)
	b.AddName("bar", PMNSLeaf)
	got, err = b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	same(t, "PMNS_NAMES with status", got, child)
	list, st, err := parse(t, child).Names(nil)
	if err != nil || !st || len(list) != 2 || string(list[0].Name) != "foo" || list[0].Status != PMNSNonLeaf || string(list[1].Name) != "bar" {
		t.Fatalf("Names = %+v %v %v", list, st, err)
	}

	b.StartNames(0, false)
	got, _ = b.Finish()
	same(t, "empty PMNS_NAMES", got, unhex(t, `00 00 00 18 00 00 70 0e 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00`))

	// A 32-byte name takes no padding.
	b.StartNames(0, false)
	b.AddName("sample.secret.foo.bar.grunt.five", 0)
	got, _ = b.Finish()
	if len(got) != 24+4+32 {
		t.Fatalf("len = %d", len(got))
	}
}

func TestGoldenLabel(t *testing.T) {
	want := unhex(t, `00 00 00 5f 00 00 70 13 00 00 00 00 | 00 00 00 1d | 00 00 00 02 | 00 00 00 00 | 00 00 00 01 |
		ff ff ff ff  00 00 00 02  00 00 00 3c  00 00 00 23
		00 02 05 02 00 09 00 08
		00 13 04 02 00 19 00 09`)
	want = append(want, `{"agent":"sample","role":"testing"}`...)
	var b Builder
	b.StartLabel(0, 0x1d, LabelDomain)
	b.AddLabelSet(InNull, []byte(`{"agent":"sample","role":"testing"}`), LabelDomain)
	got, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	same(t, "LABEL", got, want)

	ident, typ, sets, err := parse(t, want).Label(nil)
	if err != nil || ident != 0x1d || typ != LabelDomain || len(sets) != 1 {
		t.Fatalf("Label = %#x %d %+v %v", ident, typ, sets, err)
	}
	s := sets[0]
	if s.Inst != InNull || s.NLabels != 2 || string(s.JSON) != `{"agent":"sample","role":"testing"}` ||
		s.Labels[1] != (Label{19, 4, LabelDomain, 25, 9}) {
		t.Fatalf("set = %+v", s)
	}

	// Empty reply: 28 bytes, ident and type echoed.
	b.StartLabel(0, uint32(NewPMID(127, 8, 0)), LabelCluster)
	got, _ = b.Finish()
	same(t, "empty LABEL", got, unhex(t, `00 00 00 1c 00 00 70 13 00 00 00 00 1f c0 20 00 00 00 00 08 00 00 00 00 00 00 00 00`))

	// Entries are sorted by name even when the JSON is not.
	b.StartLabel(0, 1, LabelInstances)
	b.AddLabelSet(0, []byte(`{"z":1,"a":{"b":2}}`), LabelInstances)
	b.AddLabelSet(1, nil, LabelInstances)
	got, err = b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	_, _, sets, err = parse(t, got).Label(nil)
	if err != nil || len(sets) != 2 || sets[0].Labels[0] != (Label{8, 1, LabelInstances | LabelCompound, 11, 7}) || sets[1].NLabels != 0 {
		t.Fatalf("sets = %+v %v", sets, err)
	}
}

func TestGoldenInstanceText(t *testing.T) {
	var b Builder
	want := unhex(t, `00 00 00 2c 00 00 70 07 00 00 00 00 1f c0 00 06 00 00 00 02
		00 00 00 00 00 00 00 04 63 70 75 30
		00 00 00 01 00 00 00 04 63 70 75 31`)
	b.StartInstance(0, NewInDom(127, 6))
	b.AddInstance(0, "cpu0")
	b.AddInstance(1, "cpu1")
	got, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	same(t, "INSTANCE", got, want)
	indom, list, err := parse(t, want).Instance(nil)
	if err != nil || indom != NewInDom(127, 6) || len(list) != 2 || string(list[1].Name) != "cpu1" {
		t.Fatalf("Instance = %v %+v %v", indom, list, err)
	}
	b.StartInstance(0, NewInDom(29, 2))
	b.AddInstance(100, "bin-100")
	got, _ = b.Finish()
	same(t, "INSTANCE bin-100", got[12:], unhex(t, `07 40 00 02 | 00 00 00 01 | 00 00 00 64 00 00 00 07 62 69 6e 2d 31 30 30 7e`))

	text := b.Text(0, 0x1fc02000, "The values of the counter")
	same(t, "TEXT", text[:20], unhex(t, `00 00 00 30 00 00 70 09 00 00 00 00 1f c0 20 00 00 00 00 19`))
	if _, s, err := parse(t, text).Text(); err != nil || string(s) != "The values of the counter" {
		t.Fatalf("Text = %q %v", s, err)
	}
}
