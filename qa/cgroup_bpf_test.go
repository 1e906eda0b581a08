package qa

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"perfevent/internal/cgroup"
	"perfevent/internal/cgroup/cgrouptest"
)

// TestLabCgroupsBPF runs the agent with cgroups.conf's default counting
// (auto), which is BPF on this kernel as root: perfevent.cgroup.counting
// says so, a busy loop's cgroup counts the loop's time on CPU and an idle
// one nothing, the agent's descriptors stay as many while 200 cgroups are
// made and removed, and perfalloc's reservation freezes the values, which
// count on after it.
func TestLabCgroupsBPF(t *testing.T) {
	Direct(t)
	info, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	h, err := cgroup.FindHierarchy(info)
	if err != nil || h.Version != 2 {
		unmet(t, "needs a cgroup v2 hierarchy (pure or the hybrid /sys/fs/cgroup/unified): %v", err)
	}
	top := fmt.Sprintf("perfevent-qa-bpf-%d", os.Getpid())
	mkCgroup(t, h, top)
	busy := mkCgroup(t, h, top+"/busy")
	mkCgroup(t, h, top+"/idle")
	t.Cleanup(func() { removeCgroups(t, filepath.Join(h.Mount, top)) })
	loop := cgrouptest.Busy(t, busy)

	l := StartLab(t, Agent{Go: true, Config: VMConfig, Cgroups: "cgroup /" + top + "/*\nevent cpu-clock\nevent context-switches\nmax 256\n"})
	needClient(t, l, "pminfo")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agent log:\n%s", tail(l.AgentLog, 30))
		}
	})
	counting := l.Run(t, "pminfo", "-h", l.HostSpec(), "-f", "perfevent.cgroup.counting")
	if !strings.Contains(counting, `value "bpf"`) {
		if strings.Contains(counting, `value "perf: `) {
			unmet(t, "needs BPF counting on this kernel:\n%s", counting)
		}
		t.Fatalf("perfevent.cgroup.counting:\n%s", counting)
	}
	const metric = "perfevent.cgroup.cpu_clock.value"
	busyName, idleName := "/"+top+"/busy", "/"+top+"/idle"

	// Each fetch lies between two readings of the loop's time on CPU,
	// so the difference of two fetches lies between the inner and the
	// outer difference of those.
	pre0 := cgrouptest.OnCPU(t, loop)
	v0 := cgroupValues(t, l, metric)
	post0 := cgrouptest.OnCPU(t, loop)
	waitFor(t, Settle, "the loop to run a second", func() bool { return cgrouptest.OnCPU(t, loop) > post0+1e9 })
	pre1 := cgrouptest.OnCPU(t, loop)
	v1 := cgroupValues(t, l, metric)
	post1 := cgrouptest.OnCPU(t, loop)
	got := float64(v1[busyName] - v0[busyName])
	lo, hi := float64(pre1-post0), float64(post1-pre0)
	t.Logf("busy: cpu-clock grew %.4g ns; the loop ran %.4g to %.4g ns", got, lo, hi)
	// schedstat lags a running task by up to a tick: 5% of a second.
	if got < 0.95*lo || got > 1.05*hi {
		t.Errorf("busy: cpu-clock grew %.4g ns while the loop ran %.4g to %.4g ns", got, lo, hi)
	}
	if d := v1[idleName] - v0[idleName]; d != 0 {
		t.Errorf("idle: cpu-clock grew %d ns, want 0", d)
	}

	pid := l.AgentPID(t)
	fds := func() int { return allFDs(t, pid) }
	counted := func() string {
		return strings.TrimSpace(l.Run(t, "pmprobe", "-h", l.HostSpec(), "-v", "perfevent.cgroup.counted"))
	}
	before := fds()
	for i := range 200 {
		mkCgroup(t, h, fmt.Sprintf("%s/c%d", top, i))
	}
	waitFor(t, Settle, "202 cgroups counted", func() bool { return counted() == "perfevent.cgroup.counted 1 202" })
	if got := fds(); got != before {
		t.Errorf("the agent holds %d descriptors counting 202 cgroups, %d counting 2", got, before)
	}
	for i := range 200 {
		if err := os.Remove(filepath.Join(h.Mount, top, fmt.Sprintf("c%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, Settle, "2 cgroups counted", func() bool { return counted() == "perfevent.cgroup.counted 1 2" })
	if got := fds(); got != before {
		t.Errorf("the agent holds %d descriptors after 200 cgroups came and went, %d before", got, before)
	}

	released := logCount(l, "counters released for perfalloc")
	unlock := l.ReadLock(t)
	waitLogCount(t, l, "counters released for perfalloc", released+1)
	frozen := cgroupValues(t, l, metric)[busyName]
	waitFor(t, Settle, "the loop to run a tenth of a second", func() bool { return cgrouptest.OnCPU(t, loop) > post1+1e8 })
	if v := cgroupValues(t, l, metric)[busyName]; v != frozen {
		t.Errorf("busy: cpu-clock went from %d to %d under perfalloc, want it frozen", frozen, v)
	}
	unlock()
	waitFor(t, Settle, "the busy cgroup to count again after perfalloc", func() bool {
		return cgroupValues(t, l, metric)[busyName] > frozen
	})
}
