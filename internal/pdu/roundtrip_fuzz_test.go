package pdu

import (
	"bytes"
	"encoding/binary"
	"slices"
	"strings"
	"testing"
)

// FuzzBuildParse builds every PDU the Builder knows from fuzzed field
// values and parses it back: what the Builder writes, the Parser must read
// as the same values. FuzzParse goes the other way (bytes first); this
// target finds fields the two sides lay out differently, strings that are
// padded wrongly and counts that disagree.
//
//	go test -run '^$' -fuzz '^FuzzBuildParse$' ./internal/pdu
func FuzzBuildParse(f *testing.F) {
	f.Add(int32(0), uint32(0x1fc00001), uint32(0x1fc00002), int32(-1), "cpu0,cpu1", []byte(`{"agent":"perfevent"}`), []byte{0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, from int32, a, b uint32, c int32, s string, raw []byte, list []byte) {
		var bl Builder
		var p Parser
		words := make([]uint32, len(list)/4)
		for i := range words {
			words[i] = binary.BigEndian.Uint32(list[4*i:])
		}
		pmids := make([]PMID, len(words))
		for i, w := range words {
			pmids[i] = PMID(w)
		}
		// ATTR and LABEL end unpadded; every other PDU is whole words.
		start := func(msg []byte, typ Type) {
			t.Helper()
			h, err := p.Start(msg)
			if err != nil || h.Type != typ || h.From != from || h.Len != len(msg) || h.Len%4 != 0 && typ != TypeAttr && typ != TypeLabel {
				t.Fatalf("%s built as %x: header %+v, %v", typ, msg, h, err)
			}
		}
		fail := func(typ Type, got, want any, err error) {
			t.Helper()
			t.Fatalf("%s: parsed %+v (%v), built from %+v", typ, got, err, want)
		}

		if len(words) > 0 && len(words) <= 1024 {
			creds := make([]Cred, len(words))
			for i, w := range words {
				creds[i] = credFromWord(w)
			}
			start(bl.Creds(from, creds...), TypeCreds)
			if got, err := p.Creds(nil); err != nil || !slices.Equal(got, creds) {
				fail(TypeCreds, got, creds, err)
			}
		}

		start(bl.Error(from, Err(c)), TypeError)
		if got, err := p.Error(); err != nil || got != Err(c) {
			fail(TypeError, got, c, err)
		}

		d := Desc{PMID: PMID(a), Type: ValueType(c), InDom: InDom(b), Sem: Sem(^c), Units: Units(a ^ b)}
		start(bl.Desc(from, d), TypeDesc)
		if got, err := p.Desc(); err != nil || got != d {
			fail(TypeDesc, got, d, err)
		}

		start(bl.DescReq(from, PMID(a)), TypeDescReq)
		if got, err := p.DescReq(); err != nil || got != PMID(a) {
			fail(TypeDescReq, got, a, err)
		}

		start(bl.Text(from, a, s), TypeText)
		if id, txt, err := p.Text(); err != nil || id != a || string(txt) != s {
			fail(TypeText, string(txt), s, err)
		}

		start(bl.TextReq(from, a, c), TypeTextReq)
		if id, typ, err := p.TextReq(); err != nil || id != a || typ != c {
			fail(TypeTextReq, []any{id, typ}, []any{a, c}, err)
		}

		start(bl.LabelReq(from, a, c), TypeLabelReq)
		if id, typ, err := p.LabelReq(); err != nil || id != a || typ != c {
			fail(TypeLabelReq, []any{id, typ}, []any{a, c}, err)
		}

		// Attribute values of 4096 bytes or more are refused, as by
		// pmcd's decoder; the Builder, playing pmcd, writes them anyway.
		start(bl.Attr(from, c, raw), TypeAttr)
		if key, val, err := p.Attr(); len(raw) >= 4096 && err == nil || len(raw) < 4096 && (err != nil || key != c || !bytes.Equal(val, raw)) {
			fail(TypeAttr, len(val), len(raw), err)
		}

		start(bl.IDs(from, c, pmids...), TypePMNSIDs)
		if sts, ids, err := p.IDs(nil); err != nil || sts != c || !slices.Equal(ids, pmids) {
			fail(TypePMNSIDs, ids, pmids, err)
		}

		// pmcd never sends an empty FETCH, and libpcp refuses one.
		start(bl.Fetch(from, c, pmids), TypeFetch)
		if ctx, ids, err := p.Fetch(nil); len(pmids) == 0 && err == nil || len(pmids) > 0 && (err != nil || ctx != c || !slices.Equal(ids, pmids)) {
			fail(TypeFetch, ids, pmids, err)
		}

		start(bl.InstanceReq(from, InDom(a), c, s), TypeInstanceReq)
		if req, err := p.InstanceReq(); err != nil || req.InDom != InDom(a) || req.Inst != c || string(req.Name) != s {
			fail(TypeInstanceReq, req, s, err)
		}

		for _, typ := range []Type{TypePMNSChild, TypePMNSTraverse} {
			start(bl.NameReq(from, typ, c, s), typ)
			if sub, name, err := p.NameReq(); err != nil || sub != c || string(name) != s {
				fail(typ, string(name), s, err)
			}
		}

		// Profiles: the words split between two indoms; the states must be
		// include or exclude, anything else is refused by design.
		if c >= 0 {
			half := len(words) / 2
			insts := make([]int32, len(words))
			for i, w := range words {
				insts[i] = int32(w)
			}
			pr := &Profile{Ctx: c, GState: c & 1}
			if len(words) > 0 {
				pr.InDoms = []ProfileInDom{
					{InDom: InDom(a), State: (c >> 1) & 1, Insts: insts[:half]},
					{InDom: InDom(b), State: (c >> 2) & 1, Insts: insts[half:]},
				}
			}
			start(bl.Profile(from, pr), TypeProfile)
			var got Profile
			if err := p.Profile(&got); err != nil || !sameProfile(&got, pr) {
				fail(TypeProfile, got, pr, err)
			}
		}

		// INSTANCE: one entry per word, named by the comma-separated parts
		// of s (missing names are empty).
		names := strings.Split(s, ",")
		bl.StartInstance(from, InDom(a))
		for i, w := range words {
			bl.AddInstance(int32(w), part(names, i))
		}
		msg, err := bl.Finish()
		if err != nil {
			t.Fatalf("INSTANCE: %v", err)
		}
		start(msg, TypeInstance)
		indom, list2, err := p.Instance(nil)
		if err != nil || indom != InDom(a) || len(list2) != len(words) {
			fail(TypeInstance, list2, words, err)
		}
		for i, in := range list2 {
			if in.Inst != int32(words[i]) || string(in.Name) != part(names, i) {
				fail(TypeInstance, in, words[i], nil)
			}
		}

		// PMNS_NAMES: the parts of s; an empty part must be refused.
		for _, status := range []bool{false, true} {
			bl.StartNames(from, status)
			for i, n := range names {
				bl.AddName(n, int32(i))
			}
			msg, err := bl.Finish()
			if slices.Contains(names, "") {
				if err == nil {
					t.Fatalf("PMNS_NAMES with an empty name in %q built", names)
				}
				continue
			}
			if err != nil {
				t.Fatalf("PMNS_NAMES %q: %v", names, err)
			}
			start(msg, TypePMNSNames)
			got, hasStatus, err := p.Names(nil)
			if err != nil || hasStatus != status || len(got) != len(names) {
				fail(TypePMNSNames, got, names, err)
			}
			for i, n := range got {
				want := int32(0)
				if status {
					want = int32(i)
				}
				if string(n.Name) != names[i] || n.Status != want {
					fail(TypePMNSNames, n, names[i], nil)
				}
			}
		}

		// LABEL: raw as the JSON of one set; the Builder judges it.
		bl.StartLabel(from, a, c)
		bl.AddLabelSet(c, raw, uint8(b))
		if msg, err := bl.Finish(); err == nil {
			start(msg, TypeLabel)
			id, typ, sets, err := p.Label(nil)
			if err != nil || id != a || typ != c || len(sets) != 1 || sets[0].Inst != c {
				fail(TypeLabel, sets, string(raw), err)
			}
			// A set without labels is sent without its JSON.
			if j := sets[0].JSON; sets[0].NLabels == 0 && len(j) != 0 || sets[0].NLabels != 0 && !bytes.Equal(j, raw) {
				fail(TypeLabel, string(j), string(raw), nil)
			}
		}

		// RESULT: one set per word, alternating in-situ, 64-bit, string
		// and error sets.
		bl.StartResult(from, c)
		for i, w := range words {
			bl.AddSet(PMID(w))
			switch i % 4 {
			case 0:
				bl.AddInsitu(int32(i), w)
			case 1:
				bl.AddUint64(int32(i), uint64(w)<<32|uint64(a))
				bl.AddUint64(InNull, uint64(b))
			case 2:
				bl.AddString(int32(i), part(names, i))
			case 3:
				bl.FailSet(Err(c | -0x10000))
			}
		}
		msg, err = bl.Finish()
		if err != nil {
			t.Fatalf("RESULT: %v", err)
		}
		start(msg, TypeResult)
		var r Result
		if err := p.Result(&r); err != nil || r.Flags != c || len(r.Sets) != len(words) {
			fail(TypeResult, r, words, err)
		}
		for i, set := range r.Sets {
			w := words[i]
			ok := set.PMID == PMID(w)
			switch i % 4 {
			case 0:
				ok = ok && set.NumVal == 1 && set.ValFmt == ValInsitu && set.Values[0].Inst == int32(i) && set.Values[0].Insitu == w
			case 1:
				v0, ok0 := set.Values[0].Uint64()
				v1, ok1 := set.Values[len(set.Values)-1].Uint64()
				ok = ok && set.NumVal == 2 && ok0 && ok1 && v0 == uint64(w)<<32|uint64(a) && v1 == uint64(b) &&
					set.Values[0].VType == ValueUint64 && set.Values[1].Inst == InNull
			case 2:
				ok = ok && set.NumVal == 1 && set.Values[0].VType == ValueString && strings.TrimSuffix(string(set.Values[0].Block), "\x00") == part(names, i)
			case 3:
				ok = ok && set.NumVal == int32(c|-0x10000) && len(set.Values) == 0
			}
			if !ok {
				fail(TypeResult, set, w, nil)
			}
		}
	})
}

func part(names []string, i int) string {
	if i < len(names) {
		return names[i]
	}
	return ""
}

func sameProfile(got, want *Profile) bool {
	if got.Ctx != want.Ctx || got.GState != want.GState || len(got.InDoms) != len(want.InDoms) {
		return false
	}
	for i, e := range want.InDoms {
		g := got.InDoms[i]
		if g.InDom != e.InDom || g.State != e.State || !slices.Equal(g.Insts, e.Insts) {
			return false
		}
	}
	return true
}
