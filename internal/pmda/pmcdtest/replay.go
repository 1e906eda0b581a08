package pmcdtest

import (
	"io"

	"perfevent/internal/pdu"
)

// Replay is pmcd on a loop, for benchmarks and allocation counts: it
// answers the agent's CREDS, then sends one request n times, all from
// memory, and counts and drops the agent's replies. An agent's Serve
// returns when the requests run out.
type Replay struct {
	in      []byte
	Replies int // replies written, the agent's CREDS included
}

// NewReplay returns a Replay of req, a whole PDU such as a FETCH that
// pdu.Builder made, n times.
func NewReplay(req []byte, n int) *Replay {
	var b pdu.Builder
	in := append([]byte(nil), b.Creds(1, pdu.VersionCred(0))...)
	for range n {
		in = append(in, req...)
	}
	return &Replay{in: in}
}

func (r *Replay) Read(p []byte) (int, error) {
	if len(r.in) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.in)
	r.in = r.in[n:]
	return n, nil
}

func (r *Replay) Write(p []byte) (int, error) { r.Replies++; return len(p), nil }
