package agent

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestReloadReadsThePMUsAgain: the agent reads each PMU's sysfs directory
// once per reading of its configuration (pmu.FS.Pass), and a reload reads
// it again, so that a PMU's cpumask that changed since the start, as the
// kernel changes it when a CPU goes offline, decides where the reloaded
// counters count.
func TestReloadReadsThePMUsAgain(t *testing.T) {
	var cpumask string
	h := startAgentWith(t, "0-1", "[dynamic]\nmsr.tsc\n", func(a *Agent) {
		cpumask = filepath.Join(a.o.FS.Sys, "bus", "event_source", "devices", "msr", "cpumask")
		if err := os.WriteFile(cpumask, []byte("0\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	})
	h.fake.AddAll(5, 1, 1)
	instances := func(metric string) []int32 {
		return slices.Sorted(maps.Keys(h.values(t, metric)))
	}
	const tsc = "perfevent.hwcounters.msr.tsc.value"
	if got := instances(tsc); !slices.Equal(got, []int32{0}) {
		t.Errorf("%s at the start: instances %v, want the cpumask's [0]", tsc, got)
	}

	if err := os.WriteFile(cpumask, []byte("1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h.a.Reload()
	h.waitLog(t, "reload done")
	h.fake.AddAll(5, 1, 1)
	if got := instances(tsc); !slices.Equal(got, []int32{1}) {
		t.Errorf("%s after the reload: instances %v, want the new cpumask's [1]", tsc, got)
	}
}
