package qa

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"perfevent/internal/cgroup"
	"perfevent/internal/cgroup/cgrouptest"
	"perfevent/internal/cpulist"
)

// k8sPods is the shape of the Kubernetes node TestLabCgroupsKubernetes
// makes: pods of the three QoS classes, a container in each, as the
// kubelet's systemd driver names them.
const k8sPods = 150

// TestLabCgroupsKubernetes makes a Kubernetes-shaped hierarchy (150 pods
// with a container each) in a private subtree of the cgroup v2 tree and
// runs the agent with the shipped cgroups.conf: every pod and container
// is an instance, labelled with its pod UID and container id; no value
// goes back across a SIGHUP, a container's cgroup removed and made again
// at once, one made again while perfalloc holds the counters, and (with
// PERFEVENT_QA=1, under the qa lock) CPU 1 going offline and back. Then
// it makes and removes a thousand cgroups a second for a while and logs
// the agent's CPU time and perfalloc's confirmation meanwhile.
func TestLabCgroupsKubernetes(t *testing.T) {
	info, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	h, err := cgroup.FindHierarchy(info)
	if err != nil || h.Version != 2 {
		unmet(t, "needs a cgroup v2 hierarchy (pure or the hybrid /sys/fs/cgroup/unified): %v", err)
	}
	top := fmt.Sprintf("perfevent-qa-k8s-%d", os.Getpid())
	mkCgroup(t, h, top)
	base := "/" + top + "/kubepods.slice"
	var pods, ctrs []string
	for i := range k8sPods {
		qos := []string{"", "kubepods-burstable.slice/", "kubepods-besteffort.slice/"}[i%3]
		class := strings.TrimSuffix(strings.TrimPrefix(qos, "kubepods"), ".slice/")
		uid := fmt.Sprintf("%08x_1111_4222_8333_%012x", i, os.Getpid())
		pod := fmt.Sprintf("%s/%skubepods%s-pod%s.slice", base, qos, class, uid)
		pods = append(pods, pod)
		ctrs = append(ctrs, fmt.Sprintf("%s/cri-containerd-%064x.scope", pod, i))
	}
	for _, c := range ctrs {
		if err := os.MkdirAll(filepath.Join(h.Mount, c), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { removeCgroups(t, filepath.Join(h.Mount, top, "kubepods.slice")) })
	dir := func(p string) string { return filepath.Join(h.Mount, p) }
	busy := ctrs[0]
	_, stop := cgrouptest.BusyStop(t, dir(busy))

	shipped := readFile(t, "../cgroups.conf")
	l := StartLab(t, Agent{Go: true, Config: "[perf]\ncpu-clock\ncontext-switches\n", Cgroups: shipped})
	needClient(t, l, "pminfo")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agent log:\n%s", tail(l.AgentLog, 40))
		}
	})
	const metric = "perfevent.cgroup.cpu_clock.value"
	want := append(append([]string{}, pods...), ctrs...)
	var vals map[string]uint64
	waitFor(t, Settle, fmt.Sprintf("the %d pods and %d containers as instances", len(pods), len(ctrs)), func() bool {
		vals = cgroupValues(t, l, metric)
		for _, p := range want {
			if _, ok := vals[p]; !ok {
				return false
			}
		}
		return true
	})
	if _, ok := vals["/"]; ok {
		t.Errorf("the root cgroup is counted; the shipped cgroups.conf leaves it out")
	}
	labels := l.Run(t, "pminfo", "-h", l.HostSpec(), "-l", metric)
	uid0 := strings.ReplaceAll(strings.TrimSuffix(strings.TrimPrefix(filepath.Base(pods[0]), "kubepods-pod"), ".slice"), "_", "-")
	for _, l := range []string{`"pod_uid":"` + uid0 + `"`, fmt.Sprintf(`"container_id":"%064x"`, 0)} {
		if !strings.Contains(labels, l) {
			t.Errorf("no instance labelled %s:\n%.2000s", l, labels)
		}
	}

	// monotonic checks that no instance went back since prev, and that
	// the busy container counted on; it returns the values now.
	monotonic := func(prev map[string]uint64, what string) map[string]uint64 {
		t.Helper()
		var cur map[string]uint64
		waitFor(t, Settle, "the busy container to count on after "+what, func() bool {
			cur = cgroupValues(t, l, metric)
			return cur[busy] > prev[busy]+1e7
		})
		var back []string
		for p, v := range prev {
			if c, ok := cur[p]; ok && c < v {
				back = append(back, fmt.Sprintf("%s: %d → %d", p, v, c))
			}
		}
		sort.Strings(back)
		if len(back) > 0 {
			t.Errorf("%d values went back across %s: %.20q", len(back), what, back)
		}
		t.Logf("%s: the busy container's cpu_clock %d → %d", what, prev[busy], cur[busy])
		return cur
	}
	vals = monotonic(vals, "start")

	// SIGHUP rebuilds the per-cgroup counters.
	reloads := logCount(l, "reload done")
	ids := cgroupIDs(t, l)
	if err := syscall.Kill(l.AgentPID(t), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLogCount(t, l, "reload done", reloads+1)
	vals = monotonic(vals, "a SIGHUP")
	if after := cgroupIDs(t, l); after[busy] != ids[busy] || after[pods[7]] != ids[pods[7]] {
		t.Errorf("ids changed across the reload: %s %s → %s, %s %s → %s", busy, ids[busy], after[busy], pods[7], ids[pods[7]], after[pods[7]])
	}

	// The busy container restarted at once: removed and made again
	// under its path, a new cgroup the agent must count.
	recreate := func(p string) {
		t.Helper()
		if err := os.Remove(dir(p)); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	stop()
	vals = cgroupValues(t, l, metric)
	recreate(busy)
	_, stop = cgrouptest.BusyStop(t, dir(busy))
	vals = monotonic(vals, "the busy container's re-creation")
	if after := cgroupIDs(t, l); after[busy] != ids[busy] {
		t.Errorf("the re-created container's id: %s, want %s as before", after[busy], ids[busy])
	}

	// The same while perfalloc holds the counters, a second apart.
	released := logCount(l, "counters released for perfalloc")
	unlock := l.ReadLock(t)
	waitLogCount(t, l, "counters released for perfalloc", released+1)
	stop()
	vals = cgroupValues(t, l, metric)
	time.Sleep(time.Second) // the gap being tested, not a wait for a condition
	recreate(busy)
	_, stop = cgrouptest.BusyStop(t, dir(busy))
	unlock()
	vals = monotonic(vals, "a re-creation under perfalloc")

	if os.Getenv("PERFEVENT_QA") != "" {
		vals = cgroupHotplug(t, l, vals, monotonic)
	} else {
		t.Log("CPU 1 offline and back: skipped, set PERFEVENT_QA=1 (it takes the qa lock)")
	}

	pa := perfallocBinary(t, l)
	confirm := regexp.MustCompile(`after (\d+\.\d) ms`)
	confirmations := func() string {
		var waits []string
		for range 5 {
			time.Sleep(time.Second) // spaces the perfalloc runs through the churn
			r := l.Exec(Cmd{Args: []string{pa, "--verbose", "-f", l.Lock, "--", "true"}})
			if m := confirm.FindStringSubmatch(r.Stderr); m != nil {
				waits = append(waits, m[1])
			} else {
				t.Errorf("perfalloc: %s", r)
			}
		}
		return strings.Join(waits, ", ")
	}
	t.Logf("perfalloc's confirmations before the churn, %d cgroups counted: %s ms", len(cgroupValues(t, l, metric)), confirmations())

	// Churn: a thousand cgroups a second, each living 0.1 s, under a
	// pattern of the shipped file.
	churnDir := dir(base + "/kubepods-besteffort.slice")
	lines := logCount(l, "cgroups:")
	pid := l.AgentPID(t)
	idle0, idleStart := procCPU(t, pid), time.Now()
	time.Sleep(5 * time.Second) // the window measured, not a wait for a condition
	idle := float64(procCPU(t, pid)-idle0) / float64(time.Since(idleStart))
	cpu0, rss0 := procCPU(t, pid), procRSS(t, pid)
	start := time.Now()
	done := make(chan struct{})
	var made atomic.Int64
	go func() {
		defer close(done)
		var live []string
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for i := 0; time.Since(start) < 16*time.Second; i++ {
			<-tick.C
			p := filepath.Join(churnDir, fmt.Sprintf("kubepods-besteffort-pod%08x_0000_4000_8000_%012x.slice", i, os.Getpid()))
			if os.Mkdir(p, 0o755) == nil {
				made.Add(1)
				live = append(live, p)
			}
			for len(live) > 100 {
				os.Remove(live[0])
				live = live[1:]
			}
		}
		for _, p := range live {
			os.Remove(p)
		}
	}()
	// The agent's CPU over 10 s of churn alone, then perfalloc's
	// confirmations while the churn goes on.
	time.Sleep(10 * time.Second) // the window measured, not a wait for a condition
	wall := time.Since(start)
	used := procCPU(t, pid) - cpu0
	rate := float64(made.Load()) / wall.Seconds()
	rss1 := procRSS(t, pid)
	waits := confirmations()
	<-done
	t.Logf("churn: %.0f cgroups made and removed a second for %v: the agent used %v of CPU (%.1f %% of a core; %.1f %% before the churn), RSS %d → %d KiB; perfalloc's confirmations: %s ms",
		rate, wall.Round(time.Millisecond), used, 100*used.Seconds()/wall.Seconds(), 100*idle, rss0, rss1, waits)
	if n := logCount(l, "cgroups:") - lines; n > 6 {
		t.Errorf("%d log lines about cgroups during 10 s of churn, want a few (paced)", n)
	}
	vals = monotonic(vals, "the churn")
	// The agent's own share of each confirmation: its log times each
	// release, per-CPU and per-cgroup counters together.
	took := regexp.MustCompile(`counters released for perfalloc \(holders [^)]*\) in ([0-9.]+[µm]?s)`)
	var releases []string
	for _, m := range took.FindAllStringSubmatch(readFile(t, l.AgentLog), -1) {
		releases = append(releases, m[1])
	}
	t.Logf("the agent's releases, as it logged them: %s", strings.Join(releases, ", "))

	// One name under counting removed and made again without pause.
	flap := dir(pods[5] + "/flapping.scope")
	if err := os.Mkdir(flap, 0o755); err != nil {
		t.Fatal(err)
	}
	cpu0, start = procCPU(t, pid), time.Now()
	flaps := 0
	for time.Since(start) < 5*time.Second {
		if os.Remove(flap) == nil && os.Mkdir(flap, 0o755) == nil {
			flaps++
		}
	}
	used = procCPU(t, pid) - cpu0
	wall = time.Since(start)
	t.Logf("flapping: one cgroup removed and made again %.0f times a second for %v: the agent used %v of CPU (%.1f %% of a core)",
		float64(flaps)/wall.Seconds(), wall.Round(time.Millisecond), used, 100*used.Seconds()/wall.Seconds())
	waitFor(t, Settle, "the flapping cgroup counted once it stays", func() bool {
		_, ok := cgroupValues(t, l, metric)[pods[5]+"/flapping.scope"]
		return ok
	})
	monotonic(vals, "the flapping")
}

// cgroupHotplug offlines CPU 1 and brings it back, checking the values
// across both rebuilds; it takes the qa lock, as TestHotplugCPU1 does.
func cgroupHotplug(t *testing.T, l *Lab, vals map[string]uint64, monotonic func(map[string]uint64, string) map[string]uint64) map[string]uint64 {
	e := Direct(t)
	e.lock(t)
	marker := filepath.Join(e.PCP.Get("PCP_TMPFILE_DIR"), "perfevent-qa-cpu1-offline")
	if data, err := os.ReadFile(cpu1Online); err != nil || strings.TrimSpace(string(data)) != "1" {
		unmet(t, "needs CPU 1 online and able to go offline (%s: %q, %v)", cpu1Online, data, err)
	}
	back := func() {
		if os.WriteFile(cpu1Online, []byte("1"), 0o644) == nil {
			os.Remove(marker)
		}
	}
	defer back()
	t.Cleanup(back)
	all := onlineCPUs(t)
	var rest []int
	for _, c := range all {
		if c != 1 {
			rest = append(rest, c)
		}
	}
	writeFile(t, marker, "")
	if err := os.WriteFile(cpu1Online, []byte("0"), 0o644); err != nil {
		t.Fatalf("offlining CPU 1: %v", err)
	}
	waitLog(t, l, "CPUs online now: "+cpulist.Format(rest)+"; rebuilding the counters", Settle)
	vals = monotonic(vals, "CPU 1 going offline")
	back()
	waitLog(t, l, "CPUs online now: "+cpulist.Format(all)+"; rebuilding the counters", Settle)
	return monotonic(vals, "CPU 1 coming back")
}

// procCPU is the CPU time process pid has used (utime + stime).
func procCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	s := readFile(t, fmt.Sprintf("/proc/%d/stat", pid))
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseUint(f[11], 10, 64)
	st, _ := strconv.ParseUint(f[12], 10, 64)
	return time.Duration(ut+st) * (time.Second / 100)
}

// procRSS is process pid's resident set, in KiB.
func procRSS(t *testing.T, pid int) int {
	t.Helper()
	for _, line := range strings.Split(readFile(t, fmt.Sprintf("/proc/%d/status", pid)), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	t.Fatalf("/proc/%d/status has no VmRSS", pid)
	return 0
}

// removeCgroups removes the cgroup directory d and all below it, deepest
// first.
func removeCgroups(t *testing.T, d string) {
	ents, _ := os.ReadDir(d)
	for _, e := range ents {
		if e.IsDir() {
			removeCgroups(t, filepath.Join(d, e.Name()))
		}
	}
	if err := os.Remove(d); err != nil && !os.IsNotExist(err) {
		t.Errorf("removing %s: %v", d, err)
	}
}
