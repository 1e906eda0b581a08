package pmda

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"testing"
	"time"

	"perfevent/internal/pdu"
)

// replyTo maps each request pmcd may send to the PDU types that answer it.
// PROFILE, ATTR, ERROR and CREDS get no reply; anything else is ignored.
var replyTo = map[pdu.Type][]pdu.Type{
	pdu.TypeFetch:        {pdu.TypeResult},
	pdu.TypeDescReq:      {pdu.TypeDesc},
	pdu.TypeInstanceReq:  {pdu.TypeInstance},
	pdu.TypeTextReq:      {pdu.TypeText},
	pdu.TypePMNSNames:    {pdu.TypePMNSIDs},
	pdu.TypePMNSIDs:      {pdu.TypePMNSNames},
	pdu.TypePMNSChild:    {pdu.TypePMNSNames},
	pdu.TypePMNSTraverse: {pdu.TypePMNSNames},
	pdu.TypeLabelReq:     {pdu.TypeLabel},
	pdu.TypeResult:       {}, // a store: always refused with an ERROR
}

// stream is the agent's end of a connection: it reads a fixed input and
// collects what the agent writes.
type stream struct {
	io.Reader
	out bytes.Buffer
}

func (s *stream) Write(p []byte) (int, error) { return s.out.Write(p) }

// FuzzServe plays pmcd with arbitrary bytes after a proper CREDS handshake
// (or, when the first input byte is odd, with none). The agent must not
// panic or stall; it must answer every complete request PDU with exactly
// one well-formed reply of the right type, in order; and it must end
// cleanly (nil) when the input ends between PDUs, and with an error when
// it ends inside one or a header is bad.
//
//	go test -run '^$' -fuzz '^FuzzServe$' ./internal/pmda
func FuzzServe(f *testing.F) {
	for _, s := range serveSeeds() {
		f.Add(s)
	}
	tab, err := NewTable(exampleSpec())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var b pdu.Builder
		input := in
		if len(in) == 0 || in[0]&1 == 0 {
			input = append(append([]byte(nil), b.Creds(4242, pdu.VersionCred(0))...), in...)
		}
		want, clean := requests(input)

		s := &stream{Reader: bytes.NewReader(input)}
		a := New(Config{Fetcher: &exampleFetcher{}, Log: NewLogger(io.Discard, "pmdafuzz")}, tab)
		done := make(chan error, 1)
		go func() {
			defer func() {
				if p := recover(); p != nil {
					done <- fmt.Errorf("panic: %v\n%s", p, debug.Stack())
				}
			}()
			done <- a.Serve(s)
		}()
		var serr error
		select {
		case serr = <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("agent still serving 10s after its input ended (%d requests)", len(want))
		}
		if serr != nil && bytes.HasPrefix([]byte(serr.Error()), []byte("panic: ")) {
			t.Fatal(serr)
		}
		if clean != (serr == nil) {
			t.Fatalf("input ends cleanly: %v, but Serve returned %v", clean, serr)
		}
		if serr != nil {
			var fe *pdu.FrameError
			if !errors.As(serr, &fe) && !errors.Is(serr, pdu.ErrTruncated) {
				t.Fatalf("Serve ended with %v, neither a framing error nor a truncated PDU", serr)
			}
		}
		checkReplies(t, s.out.Bytes(), want)
	})
}

// requests frames the input as the agent will, and returns the type of
// each request that must be answered, and whether the input ends on a PDU
// boundary. A first CREDS is the handshake.
func requests(input []byte) (want []pdu.Type, clean bool) {
	r := pdu.NewReader(bytes.NewReader(input))
	for first := true; ; first = false {
		h, _, err := r.Next()
		if err == io.EOF {
			return want, true
		}
		if err != nil {
			return want, false
		}
		if first && h.Type == pdu.TypeCreds {
			continue
		}
		if _, ok := replyTo[h.Type]; ok {
			want = append(want, h.Type)
		}
	}
}

// checkReplies checks the agent's output: its CREDS, then one reply per
// request, each a PDU from 0 of an answering type (or ERROR) that parses.
func checkReplies(t *testing.T, out []byte, want []pdu.Type) {
	t.Helper()
	r := pdu.NewReader(bytes.NewReader(out))
	h, msg, err := r.Next()
	if err != nil || h.Type != pdu.TypeCreds || h.Len != 20 {
		t.Fatalf("agent did not start with its CREDS: %+v %v", h, err)
	}
	var p pdu.Parser
	if _, err := p.Start(msg); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Creds(nil); err != nil {
		t.Fatalf("agent's CREDS: %v", err)
	}
	for i := 0; ; i++ {
		h, msg, err := r.Next()
		if err == io.EOF {
			if i != len(want) {
				t.Fatalf("agent answered %d of %d requests %v", i, len(want), want)
			}
			return
		}
		if err != nil {
			t.Fatalf("reply %d: %v", i, err)
		}
		if i >= len(want) {
			t.Fatalf("reply %d (%s) to no request; requests were %v", i, h.Type, want)
		}
		ok := h.Type == pdu.TypeError
		for _, rt := range replyTo[want[i]] {
			ok = ok || h.Type == rt
		}
		if !ok || h.From != 0 {
			t.Fatalf("reply %d to %s is %s from %d", i, want[i], h.Type, h.From)
		}
		if _, err := p.Start(msg); err != nil {
			t.Fatal(err)
		}
		if err := parseReply(&p, h.Type); err != nil {
			t.Fatalf("reply %d to %s: %s does not parse: %v", i, want[i], h.Type, err)
		}
	}
}

func parseReply(p *pdu.Parser, typ pdu.Type) error {
	var err error
	switch typ {
	case pdu.TypeError:
		_, err = p.Error()
	case pdu.TypeResult:
		var r pdu.Result
		err = p.Result(&r)
	case pdu.TypeDesc:
		_, err = p.Desc()
	case pdu.TypeInstance:
		_, _, err = p.Instance(nil)
	case pdu.TypeText:
		_, _, err = p.Text()
	case pdu.TypePMNSIDs:
		_, _, err = p.IDs(nil)
	case pdu.TypePMNSNames:
		_, _, err = p.Names(nil)
	case pdu.TypeLabel:
		_, _, _, err = p.Label(nil)
	}
	return err
}

// serveSeeds returns request streams for the example table: each request
// type alone, a whole session, and some broken framing.
func serveSeeds() [][]byte {
	// A Builder reuses its buffer, so every PDU is copied out of it.
	var b pdu.Builder
	cp := func(m []byte) []byte { return append([]byte(nil), m...) }
	cat := func(msgs ...[]byte) []byte {
		var out []byte
		for _, m := range msgs {
			out = append(out, m...)
		}
		return out
	}
	names := func(t pdu.Type, status bool, list ...string) []byte {
		if t != pdu.TypePMNSNames {
			return cp(b.NameReq(0, t, 1, list[0]))
		}
		b.StartNames(0, status)
		for _, n := range list {
			b.AddName(n, 0)
		}
		m, _ := b.Finish()
		return cp(m)
	}
	ids := func(pmids ...pdu.PMID) []byte { return cp(b.IDs(0, 0, pmids...)) }
	result := func() []byte {
		b.StartResult(0, 0)
		b.AddSet(pmidActive)
		b.AddInsitu(pdu.InNull, 7)
		m, _ := b.Finish()
		return cp(m)
	}
	all := []pdu.PMID{pmidVersion, pmidActive, pmidCounter, pmidDuty, pmidBytes, pmidBroken, pmidUnknown}
	profile := &pdu.Profile{GState: pdu.ProfileExclude, InDoms: []pdu.ProfileInDom{{InDom: indomCPU, State: pdu.ProfileInclude, Insts: []int32{0, 3}}}}
	session := [][]byte{
		cp(b.Profile(1, profile)),
		cp(b.Attr(1, 2, []byte("pcp\x00"))),
		cp(b.Fetch(1, 0, all)),
		cp(b.DescReq(1, pmidCounter)),
		cp(b.DescReq(1, pmidUnknown)),
		cp(b.InstanceReq(1, indomCPU, pdu.InNull, "")),
		cp(b.InstanceReq(1, indomCPU, pdu.InNull, "cpu3")),
		cp(b.InstanceReq(1, indomUnknown, 0, "")),
		cp(b.TextReq(1, uint32(pmidVersion), pdu.TextOneLine|pdu.TextPMID)),
		cp(b.TextReq(1, uint32(indomCPU), pdu.TextHelp|pdu.TextInDom)),
		names(pdu.TypePMNSNames, false, "example.dyn.counter.value"),
		names(pdu.TypePMNSNames, false, "example.nonesuch"),
		names(pdu.TypePMNSNames, false, "a", "b"),
		ids(pmidCounter, pmidDuty),
		names(pdu.TypePMNSChild, false, "example"),
		names(pdu.TypePMNSTraverse, false, "example.dyn"),
		cp(b.LabelReq(1, 0, pdu.LabelDomain)),
		cp(b.LabelReq(1, uint32(indomCPU), pdu.LabelInstances)),
		cp(b.LabelReq(1, uint32(pmidCounter), pdu.LabelItem)),
		result(),
		cp(b.Error(1, pdu.ErrNotConn)),
		cp(b.Fetch(1, 0, all)),
	}
	seeds := [][]byte{cat(session...)}
	seeds = append(seeds, session...)
	whole := cat(session...)
	seeds = append(seeds,
		whole[:len(whole)-3],                                      // cut inside the last PDU
		[]byte{0, 0, 0, 4, 0, 0, 0x70, 1},                         // cut inside a header
		[]byte{0, 0, 0, 8, 0, 0, 0x70, 3, 0, 0, 0, 0},             // length below the header
		[]byte{0x7f, 0xff, 0xff, 0xff, 0, 0, 0x70, 3, 0, 0, 0, 0}, // over the limit
		[]byte{0, 0, 0, 12, 0xff, 0, 0, 0, 0, 0, 0, 0},            // negative type
		cp(b.Creds(99, pdu.VersionCred(0))),                       // a second CREDS
	)
	return seeds
}
