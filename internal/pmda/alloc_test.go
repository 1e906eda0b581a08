package pmda

import (
	"io"
	"testing"

	"perfevent/internal/pdu"
)

// fetchOnce answers one FETCH without a connection, as Serve would.
func fetchOnce(t testing.TB, a *Agent, msg []byte) {
	h, err := pdu.ParseHeader(msg)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.dispatch(h, msg); err != nil {
		t.Fatal(err)
	}
}

func newBareAgent(t testing.TB) *Agent {
	tab, err := NewTable(exampleSpec())
	if err != nil {
		t.Fatal(err)
	}
	a := New(Config{Fetcher: &exampleFetcher{quiet: true}}, tab)
	a.w = io.Discard
	return a
}

func TestFetchSteadyStateAllocs(t *testing.T) {
	a := newBareAgent(t)
	var b pdu.Builder
	// A profile makes the agent consult per-client state too.
	prof := b.Profile(0, &pdu.Profile{InDoms: []pdu.ProfileInDom{{InDom: indomCPU, State: pdu.ProfileInclude, Insts: []int32{3}}}})
	h, _ := pdu.ParseHeader(prof)
	a.dispatch(h, append([]byte(nil), prof...))
	// Every value kind, an unknown PMID and a per-PMID error code.
	msg := append([]byte(nil), b.Fetch(0, 0, []pdu.PMID{pmidVersion, pmidActive, pmidCounter, pmidDuty, pmidBytes, pmidUnknown})...)
	fetchOnce(t, a, msg)
	if n := testing.AllocsPerRun(20, func() { fetchOnce(t, a, msg) }); n != 0 {
		t.Errorf("a FETCH allocates %v times in steady state", n)
	}
}

func BenchmarkFetch(bm *testing.B) {
	a := newBareAgent(bm)
	var b pdu.Builder
	msg := append([]byte(nil), b.Fetch(0, 0, []pdu.PMID{pmidVersion, pmidActive, pmidCounter, pmidDuty})...)
	bm.ReportAllocs()
	for bm.Loop() {
		fetchOnce(bm, a, msg)
	}
}
