package pdu

import (
	"bytes"
	"encoding/binary"
	"testing"
)

var parsedTypes = []Type{
	TypeCreds, TypeError, TypeProfile, TypeFetch, TypeDescReq, TypeDesc, TypeInstanceReq,
	TypeInstance, TypeTextReq, TypeText, TypePMNSIDs, TypePMNSNames, TypePMNSChild,
	TypePMNSTraverse, TypeLabelReq, TypeLabel, TypeAttr, TypeResult,
}

// FuzzParse feeds arbitrary bytes to every parser, each time with the
// header's type and length made to match, so that each body decoder sees
// the input. Parsers must never panic, and a RESULT they accept must
// survive being rebuilt and parsed again.
func FuzzParse(f *testing.F) {
	for _, s := range samplePDUs() {
		f.Add(s.msg)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var (
			p     Parser
			pr    Profile
			r     Result
			b     Builder
			names []Name
			sets  []LabelSet
		)
		if len(in) < HeaderLen {
			p.Start(in)
			return
		}
		msg := make([]byte, len(in))
		for _, typ := range parsedTypes {
			copy(msg, in)
			binary.BigEndian.PutUint32(msg[0:], uint32(len(msg)))
			binary.BigEndian.PutUint32(msg[4:], uint32(typ))
			if _, err := p.Start(msg); err != nil {
				t.Fatalf("Start rejected a consistent header: %v", err)
			}
			p.Creds(nil)
			p.Error()
			p.Profile(&pr)
			p.Fetch(nil)
			p.DescReq()
			p.Desc()
			p.InstanceReq()
			p.Instance(nil)
			p.TextReq()
			p.Text()
			p.IDs(nil)
			names, _, _ = p.Names(names)
			p.NameReq()
			p.LabelReq()
			_, _, sets, _ = p.Label(sets)
			p.Attr()
			if p.Result(&r) == nil {
				again, err := rebuildResult(&b, 0, &r)
				if err != nil {
					t.Fatalf("rebuilding an accepted RESULT: %v", err)
				}
				var q Parser
				var r2 Result
				q.Start(again)
				if err := q.Result(&r2); err != nil || len(r2.Sets) != len(r.Sets) {
					t.Fatalf("a rebuilt RESULT does not parse: %v", err)
				}
			}
		}
	})
}

// FuzzReader checks framing of arbitrary streams: no panic, and every PDU
// returned is exactly as long as its header says.
func FuzzReader(f *testing.F) {
	for _, s := range samplePDUs() {
		f.Add(s.msg)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		r := NewReader(bytes.NewReader(in))
		r.MaxLen = 1 << 16
		for {
			h, msg, err := r.Next()
			if err != nil {
				return
			}
			if len(msg) != h.Len || h.Len < HeaderLen {
				t.Fatalf("PDU of %d bytes with header len %d", len(msg), h.Len)
			}
		}
	})
}
