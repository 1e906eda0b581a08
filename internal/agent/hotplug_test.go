package agent

import (
	"slices"
	"strings"
	"testing"

	"perfevent/internal/reservation"
	"perfevent/internal/testlog"
	"perfevent/internal/testwait"
)

// hotplugAgent is an agent in this process over the vm fixture's sysfs,
// whose online list the test rewrites, and the countertest fake.
func hotplugAgent(t *testing.T, online string) (*Agent, *fakes, string, *testlog.Buffer) {
	t.Helper()
	h := startAgent(t, online, "[perf]\ncpu-clock\n")
	return h.a, h.fake, h.online, h.log
}

// instances is what the served generation offers for cpu-clock: the
// counter's CPUs and its indom's instance names.
func instances(t *testing.T, a *Agent) ([]int, []string) {
	t.Helper()
	g := a.gen.Load()
	ev, ok := g.set.Lookup("cpu-clock")
	if !ok {
		t.Fatal("cpu-clock is not served")
	}
	var names []string
	for _, m := range g.table.Metrics() {
		if m.Name == "hwcounters.cpu_clock.value" || strings.HasSuffix(m.Name, "cpu_clock.value") {
			d, ok := g.table.InDom(m.Desc.InDom)
			if !ok {
				t.Fatalf("no indom for %s", m.Name)
			}
			for _, in := range d.Instances {
				names = append(names, in.Name)
			}
		}
	}
	return g.set.CPUs(ev), names
}

func waitCPUs(t *testing.T, a *Agent, want []int) {
	t.Helper()
	if !testwait.Until(testwait.Settle, func() bool {
		cpus, _ := instances(t, a)
		return slices.Equal(cpus, want)
	}) {
		cpus, _ := instances(t, a)
		t.Fatalf("cpu-clock on %v after %v, want %v", cpus, testwait.Settle, want)
	}
}

// value reads cpu-clock on one CPU through the served generation.
func value(a *Agent, cpu int) (uint64, bool) {
	set := a.gen.Load().set
	ev, _ := set.Lookup("cpu-clock")
	f := set.Begin()
	defer f.End()
	f.Need(ev)
	f.Read()
	for i, c := range set.CPUs(ev) {
		if c == cpu {
			return f.Value(ev, i), true
		}
	}
	return 0, false
}

// TestCPUComesBackAfterStartingWithoutIt: an agent started while CPU 1
// was offline counts on it, and offers its instance, once it is back;
// cpu0's value carries on.
func TestCPUComesBackAfterStartingWithoutIt(t *testing.T) {
	a, fake, online, log := hotplugAgent(t, "0")
	if cpus, names := instances(t, a); !slices.Equal(cpus, []int{0}) || !slices.Equal(names, []string{"cpu0"}) {
		t.Fatalf("at start-up: %v %v", cpus, names)
	}
	fake.AddAll(100, 1, 1)
	before, _ := value(a, 0)

	writeOnline(t, online, "0-1")
	waitCPUs(t, a, []int{0, 1})
	if _, names := instances(t, a); !slices.Equal(names, []string{"cpu0", "cpu1"}) {
		t.Errorf("instances after cpu1 came back: %v", names)
	}
	fake.AddAll(7, 1, 1)
	if v, _ := value(a, 0); v != before+7 {
		t.Errorf("cpu0 = %d after the rebuild, want %d: its value must carry on", v, before+7)
	}
	if v, ok := value(a, 1); !ok || v != 7 {
		t.Errorf("cpu1 = %d, %v; want 7", v, ok)
	}
	if !strings.Contains(log.String(), "CPUs online now: 0-1; rebuilding the counters") {
		t.Errorf("the log does not say why the counters were rebuilt")
	}
}

// TestCPUOfflineAndBack: the counters of an offlined CPU are closed and
// its instance leaves the indom; when it is back they are open again. While
// perfalloc holds the counters nothing is opened: the change waits for the
// release.
func TestCPUOfflineAndBack(t *testing.T) {
	a, fake, online, log := hotplugAgent(t, "0-1")
	waitCPUs(t, a, []int{0, 1})
	fake.AddAll(50, 1, 1)
	frozen, _ := value(a, 1)
	writeOnline(t, online, "0")
	waitCPUs(t, a, []int{0})
	// The new generation is served before the old one's counters close
	// (a fetch in flight finishes with them), so wait for the close.
	testwait.Until(testwait.Settle, func() bool { return fake.OpenNow() == 1 })
	if n := fake.OpenNow(); n != 1 {
		t.Errorf("%d fake counters open with cpu1 offline, want 1", n)
	}

	a.reservationChanged(reservation.Status{Reserved: true})
	if n := fake.CountingNow(); n != 0 {
		t.Fatalf("%d counters counting while reserved", n)
	}
	writeOnline(t, online, "0-1")
	testwait.Eventually(t, testwait.Settle, "the deferred rebuild to be logged", func() bool {
		return strings.Contains(log.String(), "CPUs online now: 0-1; the counters follow when perfalloc releases them")
	})
	if n := fake.OpenNow(); n != 1 {
		t.Errorf("%d counters open during the reservation, want cpu0's disabled one", n)
	}
	a.reservationChanged(reservation.Status{Reserved: false})
	waitCPUs(t, a, []int{0, 1})
	if n := fake.OpenNow(); n != 2 {
		t.Errorf("%d counters open after the release, want 2", n)
	}
	// cpu1 continues from its value when it went offline.
	fake.AddAll(3, 1, 1)
	if v, _ := value(a, 1); frozen != 50 || v != frozen+3 {
		t.Errorf("cpu1 = %d when back, %d when it went offline; want %d", v, frozen, frozen+3)
	}
}
