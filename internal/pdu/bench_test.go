package pdu

import "testing"

// buildResult10000 builds a RESULT of 10,000 values: 1,000 PMIDs of 10
// instances, mostly 64-bit counters in value blocks, some in-situ.
func buildResult10000(b *Builder) ([]byte, error) {
	b.StartResult(0, 0)
	for m := range 1000 {
		b.AddSet(NewPMID(127, 2+m/2, m%2))
		for i := range int32(10) {
			if m%10 == 0 {
				b.AddInsitu(i, uint32(m))
			} else {
				b.AddUint64(i, uint64(m)<<32|uint64(i))
			}
		}
	}
	return b.Finish()
}

func BenchmarkResult10000(bm *testing.B) {
	var b Builder
	buildResult10000(&b) // grow the buffers once
	bm.ReportAllocs()
	for bm.Loop() {
		if _, err := buildResult10000(&b); err != nil {
			bm.Fatal(err)
		}
	}
}

func TestResultSteadyStateAllocs(t *testing.T) {
	var b Builder
	msg, err := buildResult10000(&b)
	if err != nil {
		t.Fatal(err)
	}
	var p Parser
	var r Result
	p.Start(msg)
	if err := p.Result(&r); err != nil {
		t.Fatalf("the benchmark's RESULT does not parse: %v", err)
	}
	if n := testing.AllocsPerRun(5, func() { buildResult10000(&b) }); n != 0 {
		t.Errorf("building a RESULT allocates %v times in steady state", n)
	}
	if n := testing.AllocsPerRun(5, func() { p.Start(msg); p.Result(&r) }); n != 0 {
		t.Errorf("parsing a RESULT allocates %v times in steady state", n)
	}
}
