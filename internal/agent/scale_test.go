package agent

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"perfevent/internal/pdu"
	"perfevent/internal/pmda/pmcdtest"
)

// scaleConfig is 24 events of a Skylake host: 16 hardware and cache
// events, one descriptor each per CPU, and 8 software events, one group
// per CPU.
const scaleConfig = `[perf]
cycles
instructions
branch-instructions
branch-misses
cache-references
cache-misses
ref-cycles
bus-cycles
L1-dcache-loads
L1-dcache-load-misses
LLC-loads
LLC-load-misses
dTLB-loads
dTLB-load-misses
branch-loads
branch-load-misses
cpu-clock
task-clock
page-faults
context-switches
cpu-migrations
minor-faults
major-faults
alignment-faults
`

// scaleCPUs are the machine sizes measured: this VM's, and two-socket
// hosts of 2024-2026 (Sapphire Rapids, Zen 5 Turin with SMT).
var scaleCPUs = []int{2, 256, 768}

// BenchmarkScaleStartup is the agent's start-up at machine sizes this VM
// does not have: the skylake fixture's sysfs with N CPUs online, and the
// countertest fake for perf_event_open, so what is measured is the agent's
// own work (planning, opening, the metric table), not the kernel's. It
// reports the heap the started agent keeps, with the fake's record of each
// counter, where the real agent has a kernel descriptor instead.
func BenchmarkScaleStartup(b *testing.B) {
	for _, cpus := range scaleCPUs {
		b.Run(fmt.Sprintf("cpus=%d/events=24", cpus), func(b *testing.B) {
			b.ReportAllocs()
			var heap uint64
			b.StopTimer()
			for range b.N {
				base := liveHeap()
				// Only Start is timed: the fixture's copy comes before.
				h := newAgentOn(b, "skylake", online(cpus), scaleConfig, func(*Agent) { b.StartTimer() })
				b.StopTimer()
				if n := h.fake.OpenNow(); n < 24*cpus {
					b.Fatalf("%d counters open, want 24 events on %d CPUs\n%s", n, cpus, h.log)
				}
				heap = liveHeap() - base
				h.close()
			}
			b.ReportMetric(float64(heap)/(1<<20), "heap-MiB")
		})
	}
}

// BenchmarkScaleFetch is a FETCH answered by the whole agent at those
// sizes: every perfevent.hwcounters metric (value and dutycycle of the 24
// events on every CPU), and one metric.
func BenchmarkScaleFetch(b *testing.B) {
	for _, cpus := range scaleCPUs {
		h := newAgentOn(b, "skylake", online(cpus), scaleConfig, nil)
		all, one := hwcounterPMIDs(b, h)
		h.fake.AddAll(1000, 1000, 1000)
		for _, c := range []struct {
			name  string
			pmids []pdu.PMID
		}{{"all", all}, {"one", one}} {
			b.Run(fmt.Sprintf("cpus=%d/events=24/%s", cpus, c.name), func(b *testing.B) {
				var pb pdu.Builder
				r := pmcdtest.NewReplay(pb.Fetch(0, 0, c.pmids), b.N)
				b.ReportAllocs()
				b.ResetTimer()
				if err := h.a.Serve(r); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if r.Replies != b.N+1 {
					b.Fatalf("%d replies to %d FETCHes", r.Replies-1, b.N)
				}
				b.ReportMetric(float64(len(c.pmids)*cpus), "values/op")
			})
		}
	}
}

func online(cpus int) string { return fmt.Sprintf("0-%d", cpus-1) }

// hwcounterPMIDs asks the agent, as pmcd would, for the PMIDs of every
// perfevent.hwcounters leaf, and returns them and one of them.
func hwcounterPMIDs(b *testing.B, h *tester) (all, one []pdu.PMID) {
	b.Helper()
	c, err := pmcdtest.Connect(h.a.Serve)
	if err != nil {
		b.Fatal(err)
	}
	names, err := c.Traverse("perfevent.hwcounters")
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range names {
		id, err := c.PMID(n)
		if err != nil {
			b.Fatal(err)
		}
		all = append(all, id)
		if strings.HasSuffix(n, "cpu_clock.value") {
			one = []pdu.PMID{id}
		}
	}
	if err := c.Close(); err != nil {
		b.Fatal(err)
	}
	if len(all) != 48 || one == nil {
		b.Fatalf("%d perfevent.hwcounters leaves (want 48, cpu_clock.value among them): %v\n%s", len(all), names, h.log)
	}
	return all, one
}

// liveHeap is the heap in use after a collection.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
