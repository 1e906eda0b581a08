package pfm

import (
	"sync"
	"syscall"
	"testing"
	"time"
)

// The agent's start-up with the catalog: resolving the events of a
// perfevent.conf decodes the index and the tables they need, then encodes
// each name. The target is under 100 ms of CPU for 100 catalog
// events; BENCHMARKS.md records the figures.

// skxStartupNames are 100 names of skx's table as a configuration would
// write them (no PMU prefix, an event and one of its unit masks), each
// one that libpfm4 encodes on a Skylake-X.
func skxStartupNames(tb testing.TB, env Env, active []string) []string {
	tb.Helper()
	p, err := LoadArch("amd64", "skx")
	if err != nil {
		tb.Fatal(err)
	}
	var names []string
	// Each event with its first unit mask, then with its second, ...
	for k, more := 0, true; more; k++ {
		more = false
		for i := range p.Events {
			ev := &p.Events[i]
			n := ev.Name
			switch {
			case k < len(ev.Umasks):
				n += ":" + ev.Umasks[k].Name
				more = true
			case k > 0:
				continue
			}
			if _, err := Encode(n, env, active); err != nil {
				continue // another model's event or unit mask
			}
			if names = append(names, n); len(names) == 100 {
				return names
			}
		}
	}
	tb.Fatalf("skx has only %d encodable names", len(names))
	return nil
}

// resetCatalog forgets everything decoded, as a new process starts.
func resetCatalog() {
	catalog.mu.Lock()
	catalog.once = sync.Once{}
	catalog.pmus, catalog.byArch, catalog.loaded, catalog.tables = nil, nil, nil, nil
	catalog.mu.Unlock()
}

// cpuTime is the process's user and system time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func benchmarkStartup(b *testing.B, fresh bool) {
	env := Env{Arch: "amd64"}
	active := []string{"skx", "perf", "perf_raw"}
	names := skxStartupNames(b, env, active)
	b.ReportAllocs()
	cpu0 := cpuTime()
	for b.Loop() {
		if fresh {
			resetCatalog()
		}
		for _, n := range names {
			if _, err := Encode(n, env, active); err != nil {
				b.Fatal(err)
			}
		}
	}
	// CPU, not wall time, is the target: the garbage collector's work on
	// other threads counts.
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
	b.Cleanup(resetCatalog)
}

// BenchmarkStartup100SKX is a start-up: the catalog decoded afresh (the
// index, skx's table, perf's and perf_raw's), then 100 skx names encoded.
func BenchmarkStartup100SKX(b *testing.B) { benchmarkStartup(b, true) }

// BenchmarkEncode100SKX is the same 100 names with the tables decoded.
func BenchmarkEncode100SKX(b *testing.B) { benchmarkStartup(b, false) }
