package qa

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"perfevent/internal/cgroup"
	"perfevent/internal/cgroup/cgrouptest"
	"perfevent/internal/cpulist"
	"perfevent/internal/testwait"
)

// k8sPods is the shape of the Kubernetes node TestLabCgroupsKubernetes
// makes: pods of the three QoS classes, a container in each, as the
// kubelet's systemd driver names them.
const k8sPods = 150

// k8sNode is a Kubernetes-shaped cgroup tree in a private subtree of the
// v2 hierarchy, /TOP/kubepods.slice/…: the shipped cgroups.conf counts it
// by its "/*/kubepods*/**" pattern (a kubelet one level down, as in kind),
// so a test's tree stays apart from a real kubelet's and from other
// tests'.
type k8sNode struct {
	h    cgroup.Hierarchy
	top  string
	base string   // "/TOP/kubepods.slice"
	pods []string // cgroup paths, "/TOP/kubepods.slice/…-pod….slice"
	ctrs []string // ctrs[i] is pods[i]'s container
	uids []string // pod UIDs as Kubernetes writes them, with "-"
}

// v2Hierarchy is the cgroup v2 mount, from /proc/self/mountinfo.
func v2Hierarchy(tb testing.TB) cgroup.Hierarchy {
	tb.Helper()
	info, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		tb.Fatal(err)
	}
	h, err := cgroup.FindHierarchy(info)
	if err != nil || h.Version != 2 {
		unmet(tb, "needs a cgroup v2 hierarchy (pure or the hybrid /sys/fs/cgroup/unified): %v", err)
	}
	return h
}

// newK8sNode makes /top/kubepods.slice with no pod yet, and removes the
// whole tree when the test ends.
func newK8sNode(tb testing.TB, h cgroup.Hierarchy, top string) *k8sNode {
	tb.Helper()
	n := &k8sNode{h: h, top: top, base: "/" + top + "/kubepods.slice"}
	if err := os.MkdirAll(n.dir(n.base), 0o755); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { removeCgroups(tb, filepath.Join(h.Mount, top)) })
	return n
}

func (n *k8sNode) dir(p string) string { return filepath.Join(n.h.Mount, p) }

// grow makes pods, each with a container, until there are want: a third
// guaranteed (right below kubepods.slice), a third burstable, a third
// best-effort.
func (n *k8sNode) grow(tb testing.TB, want int) {
	tb.Helper()
	for i := len(n.pods); i < want; i++ {
		qos := []string{"", "kubepods-burstable.slice/", "kubepods-besteffort.slice/"}[i%3]
		class := strings.TrimSuffix(strings.TrimPrefix(qos, "kubepods"), ".slice/")
		uid := fmt.Sprintf("%08x_1111_4222_8333_%012x", i, os.Getpid())
		pod := fmt.Sprintf("%s/%skubepods%s-pod%s.slice", n.base, qos, class, uid)
		ctr := fmt.Sprintf("%s/cri-containerd-%064x.scope", pod, i)
		if err := os.MkdirAll(n.dir(ctr), 0o755); err != nil {
			tb.Fatal(err)
		}
		n.pods = append(n.pods, pod)
		n.ctrs = append(n.ctrs, ctr)
		n.uids = append(n.uids, strings.ReplaceAll(uid, "_", "-"))
	}
}

// all is the node's cgroups the shipped cgroups.conf counts: kubepods.slice,
// the two QoS slices, every pod and every container.
func (n *k8sNode) all() []string {
	out := []string{n.base, n.base + "/kubepods-burstable.slice", n.base + "/kubepods-besteffort.slice"}
	return append(append(out, n.pods...), n.ctrs...)
}

// TestLabCgroupsKubernetes makes a Kubernetes-shaped hierarchy in a
// private subtree of the cgroup v2 tree and runs the agent with the
// shipped cgroups.conf while it grows from 10 to 150 pods with a container
// each, once counting with perf cgroup counters and once as shipped
// (counting auto, BPF where the kernel allows it). Every pod and container
// is an instance, labelled with its pod UID and container id. Perf cgroup
// counters hold exactly events × CPUs descriptors per counted cgroup;
// BPF counting holds the same descriptors at 10 pods and at 150. Three
// busy containers count what perf stat -a -G counts for them, within 2 %.
// No value goes back across a SIGHUP, a container's cgroup removed and
// made again at once, one made again while perfalloc holds the counters,
// cgroups made and removed a thousand a second, and (with PERFEVENT_QA=1,
// under the qa lock) CPU 1 going offline and back. Last, in perf mode, a
// descriptor budget too small for the node is kept to, and each cgroup it
// leaves out is named once in the log. BenchmarkLabCgroupChurn measures
// the churn's cost.
func TestLabCgroupsKubernetes(t *testing.T) {
	t.Run("perf", func(t *testing.T) { testK8sNode(t, "perf") })
	t.Run("bpf", func(t *testing.T) { testK8sNode(t, "") })
}

// testK8sNode is TestLabCgroupsKubernetes in one counting mode: "perf",
// or "" for the shipped file as it is.
func testK8sNode(t *testing.T, mode string) {
	Direct(t)
	h := v2Hierarchy(t)
	node := newK8sNode(t, h, fmt.Sprintf("perfevent-qa-k8s%s-%d", mode, os.Getpid()))
	node.grow(t, 10)
	// One busy container in each QoS class.
	var loops []int
	var stop func()
	for _, c := range node.ctrs[:3] {
		pid, s := cgrouptest.BusyStop(t, node.dir(c))
		loops = append(loops, pid)
		if stop == nil {
			stop = s
		}
	}
	busy := node.ctrs[0]

	// The descriptors checked below are what each mode promises. Perf
	// cgroup counters: events × CPUs for each cgroup counted, within the
	// budget. (An agent without the counting keyword counts so anyway,
	// and logs the line as unknown.) BPF: as many at 150 pods as at 10.
	orig := readFile(t, "../cgroups.conf")
	shipped := orig
	if mode != "" {
		shipped = withKeyword(orig, "counting", mode)
	}
	l := StartLab(t, Agent{Go: true, Config: "[perf]\ncpu-clock\ncontext-switches\n", Cgroups: shipped})
	needClient(t, l, "pminfo")
	bpf := mode == ""
	if bpf {
		counting := l.Run(t, "pminfo", "-h", l.HostSpec(), "-f", "perfevent.cgroup.counting")
		if !strings.Contains(counting, `value "bpf"`) {
			if strings.Contains(counting, `value "perf: `) {
				unmet(t, "needs BPF counting on this kernel:\n%s", counting)
			}
			t.Fatalf("perfevent.cgroup.counting:\n%s", counting)
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agent log:\n%s", tail(l.AgentLog, 40))
		}
	})
	const metric = "perfevent.cgroup.cpu_clock.value"
	cpus := len(onlineCPUs(t))
	per := 2 * cpus // descriptors a cgroup takes: 2 events × CPUs; so do the per-CPU counters
	budget := cgroup.DefaultDescriptors
	if cfg, errs := cgroup.ParseConfig("../cgroups.conf", []byte(orig)); len(errs) == 0 {
		budget = cfg.Descriptors
	} else {
		t.Fatalf("the shipped cgroups.conf: %v", errs)
	}

	// The node fills up. Descriptors are counted from /proc/PID/fd against
	// the instances served at the same moment: other tests make and remove
	// cgroups of their own that the shipped patterns match too.
	var vals map[string]uint64
	var bpfFDs, bpfAll int // in BPF mode, the agent's descriptors at 10 pods
	for _, size := range []int{10, 100, k8sPods} {
		node.grow(t, size)
		want := node.all()
		waitFor(t, Settle, fmt.Sprintf("the %d pods and %d containers as instances", size, size), func() bool {
			vals = cgroupValues(t, l, metric)
			for _, p := range want {
				if _, ok := vals[p]; !ok {
					return false
				}
			}
			return true
		})
		if bpf {
			// Read twice alike, so that a directory the agent is
			// scanning at that moment does not count.
			var fds, all int
			waitFor(t, Settle, "the agent's descriptors steady", func() bool {
				f, a := perfFDs(t, l.AgentPID(t)), allFDs(t, l.AgentPID(t))
				steady := f == fds && a == all && (bpfFDs == 0 || f == bpfFDs && a == bpfAll)
				fds, all = f, a
				return steady
			})
			t.Logf("%d pods: %d cgroups counted (%d of the node), the agent holds %d perf descriptors, %d descriptors in all",
				size, len(cgroupValues(t, l, metric)), len(want), fds, all)
			if bpfFDs == 0 {
				bpfFDs, bpfAll = fds, all
			}
			continue
		}
		var fds, counted int
		waitFor(t, Settle, fmt.Sprintf("%d descriptors per counted cgroup and as many for the per-CPU counters", per), func() bool {
			counted = len(cgroupValues(t, l, metric))
			fds = perfFDs(t, l.AgentPID(t))
			return fds == per*(1+counted) && len(cgroupValues(t, l, metric)) == counted
		})
		t.Logf("%d pods: %d cgroups counted (%d of the node), the agent holds %d perf descriptors (%d for the cgroups; budget %d)",
			size, counted, len(want), fds, fds-per, budget)
		if fds-per > budget {
			t.Errorf("%d pods: %d per-cgroup descriptors, over the budget of %d", size, fds-per, budget)
		}
	}
	if _, ok := vals["/"]; ok {
		t.Errorf("the root cgroup is counted; the shipped cgroups.conf leaves it out")
	}
	checkK8sLabels(t, l, metric, node)
	comparePerfStat(t, l, node.ctrs[:3], loops)

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
	vals = monotonic(cgroupValues(t, l, metric), "start")

	// SIGHUP rebuilds the per-cgroup counters.
	reloads := logCount(l, "reload done")
	ids := cgroupIDs(t, l)
	if err := syscall.Kill(l.AgentPID(t), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLogCount(t, l, "reload done", reloads+1)
	vals = monotonic(vals, "a SIGHUP")
	if after := cgroupIDs(t, l); after[busy] != ids[busy] || after[node.pods[7]] != ids[node.pods[7]] {
		t.Errorf("ids changed across the reload: %s %s → %s, %s %s → %s", busy, ids[busy], after[busy], node.pods[7], ids[node.pods[7]], after[node.pods[7]])
	}

	// The busy container restarted at once: removed and made again
	// under its path, a new cgroup the agent must count.
	recreate := func(p string) {
		t.Helper()
		if err := os.Remove(node.dir(p)); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(node.dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	stop()
	vals = cgroupValues(t, l, metric)
	recreate(busy)
	_, stop = cgrouptest.BusyStop(t, node.dir(busy))
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
	_, stop = cgrouptest.BusyStop(t, node.dir(busy))
	unlock()
	vals = monotonic(vals, "a re-creation under perfalloc")

	if os.Getenv("PERFEVENT_QA") != "" {
		vals = cgroupHotplug(t, l, vals, monotonic)
	} else {
		t.Log("CPU 1 offline and back: skipped, set PERFEVENT_QA=1 (it takes the qa lock)")
	}

	// Churn: a thousand cgroups a second, each living 0.1 s, under a
	// pattern of the shipped file. The agent's log says little about it.
	lines := logCount(l, "cgroups:")
	made := churnCgroups(node.dir(node.base+"/kubepods-besteffort.slice"), 1000, 100*time.Millisecond, 5*time.Second, nil)
	if made == 0 {
		t.Fatal("the churn made no cgroup")
	}
	if n := logCount(l, "cgroups:") - lines; n > 6 {
		t.Errorf("%d log lines about cgroups during 5 s of churn (%d cgroups), want a few (paced)", n, made)
	}
	vals = monotonic(vals, "the churn")

	// One name under counting removed and made again without pause.
	flap := node.pods[5] + "/flapping.scope"
	if err := os.Mkdir(node.dir(flap), 0o755); err != nil {
		t.Fatal(err)
	}
	for start := time.Now(); time.Since(start) < 2*time.Second; {
		os.Remove(node.dir(flap))
		os.Mkdir(node.dir(flap), 0o755)
	}
	waitFor(t, Settle, "the flapping cgroup counted once it stays", func() bool {
		_, ok := cgroupValues(t, l, metric)[flap]
		return ok
	})
	monotonic(vals, "the flapping")

	if !bpf {
		checkDescriptorBudget(t, l, node, shipped, per, metric)
	}
}

// checkK8sLabels checks every pod's and container's instance labels:
// pod_uid on both, container_id on the container.
func checkK8sLabels(t *testing.T, l *Lab, metric string, node *k8sNode) {
	t.Helper()
	out := l.Run(t, "pminfo", "-h", l.HostSpec(), "-l", metric)
	labels := map[string]map[string]any{}
	for _, m := range regexp.MustCompile(`(?m)inst \[\d+ or "([^"]+)"\] labels (\{.*\})$`).FindAllStringSubmatch(out, -1) {
		var v map[string]any
		if err := json.Unmarshal([]byte(m[2]), &v); err != nil {
			t.Fatalf("the labels of %s: %v: %s", m[1], err, m[2])
		}
		labels[m[1]] = v
	}
	bad := 0
	for i, pod := range node.pods {
		ctr := node.ctrs[i]
		id := fmt.Sprintf("%064x", i)
		if got := labels[pod]; got["pod_uid"] != node.uids[i] || got["container_id"] != nil {
			t.Errorf("%s: labels %v, want pod_uid %q and no container_id", pod, got, node.uids[i])
			bad++
		}
		if got := labels[ctr]; got["pod_uid"] != node.uids[i] || got["container_id"] != id {
			t.Errorf("%s: labels %v, want pod_uid %q and container_id %q", ctr, got, node.uids[i], id)
			bad++
		}
		if bad > 5 {
			t.Fatalf("pminfo -l:\n%.3000s", out)
		}
	}
}

// comparePerfStat counts the busy containers ctrs (the loops run in them,
// one each) with perf stat -a -G over a window that holds two fetches of
// the agent, and checks that each container's cpu_clock grew between the
// fetches by what perf counted, within 2 %. The loops are stopped
// (SIGSTOP) outside the span between the two fetches, so that perf's
// window, which also holds pminfo's start-up on either side, counts the
// same time of theirs as the agent's.
func comparePerfStat(t *testing.T, l *Lab, ctrs []string, loops []int) {
	t.Helper()
	if _, err := exec.LookPath("perf"); err != nil {
		unmet(t, "needs perf (Debian package linux-perf) to compare with perf stat -G")
	}
	for _, pid := range loops {
		syscall.Kill(pid, syscall.SIGSTOP)
	}
	defer func() {
		for _, pid := range loops {
			syscall.Kill(pid, syscall.SIGCONT)
		}
	}()
	for _, pid := range loops {
		waitFor(t, Settle, fmt.Sprintf("loop %d to stop", pid), func() bool { return stopped(pid) })
	}
	dir := t.TempDir()
	first, second, csv := filepath.Join(dir, "first"), filepath.Join(dir, "second"), filepath.Join(dir, "perf.csv")
	script := `pminfo=$1 host=$2 first=$3 second=$4; shift 4
"$pminfo" -h "$host" -f perfevent.cgroup.cpu_clock.value > "$first" || exit 1
kill -CONT "$@"
sleep 3
kill -STOP "$@"
for p; do
	n=0
	until grep -q '^State:.*stopped' "/proc/$p/status"; do
		n=$((n + 1)); [ $n -lt 1000 ] || exit 2; sleep 0.01
	done
done
"$pminfo" -h "$host" -f perfevent.cgroup.cpu_clock.value > "$second"`
	args := []string{"perf", "stat", "-a", "-x,", "-o", csv}
	for _, c := range ctrs {
		args = append(args, "-e", "cpu-clock", "-G", strings.TrimPrefix(c, "/"))
	}
	args = append(args, "--", "sh", "-c", script, "sh", l.lookPath("pminfo"), l.HostSpec(), first, second)
	for _, pid := range loops {
		args = append(args, strconv.Itoa(pid))
	}
	before := make([]uint64, len(loops))
	for i, pid := range loops {
		before[i] = cgrouptest.OnCPU(t, pid)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = l.Environ()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("perf stat: %v\n%s", err, out)
	}
	perfOut := readFile(t, csv)
	perf := map[string]uint64{}
	for _, line := range strings.Split(perfOut, "\n") {
		// value,unit,event,cgroup,...; cpu-clock in msec
		if f := strings.Split(line, ","); len(f) >= 4 && f[2] == "cpu-clock" {
			v, _ := strconv.ParseFloat(f[0], 64)
			perf["/"+f[3]] = uint64(v * 1e6)
		}
	}
	v0, v1 := parseCgroupValues(t, first), parseCgroupValues(t, second)
	for i, c := range ctrs {
		agent, p := v1[c]-v0[c], perf[c]
		ran := cgrouptest.OnCPU(t, loops[i]) - before[i]
		t.Logf("%s: the agent counted %d ns between its fetches, perf stat -G %d ns (%+.2f %%); the loop ran %d ns", c, agent, p, 100*(float64(agent)-float64(p))/float64(max(p, 1)), ran)
		if p < 1e7 {
			t.Errorf("%s: perf stat -G counted %d ns in 3 s of a busy loop, want at least 10 ms:\n%s", c, p, perfOut)
			continue
		}
		if d := int64(agent) - int64(p); d > int64(p/50) || -d > int64(p/50) {
			t.Errorf("%s: the agent counted %d ns, perf stat -G %d ns: more than 2 %% apart", c, agent, p)
		}
	}
}

// stopped says whether process pid is stopped by a signal.
func stopped(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	return err == nil && regexp.MustCompile(`(?m)^State:.*stopped`).Match(b)
}

// churnCgroups makes rate cgroups a second in dir for d, each removed
// after life (made to catch up when the machine lags), then removes the
// rest; each, if not nil, runs every second meanwhile. It returns how
// many it made.
func churnCgroups(dir string, rate int, life, d time.Duration, each func()) int {
	type cg struct {
		path string
		born time.Time
	}
	var live []cg
	made := 0
	start := time.Now()
	done := make(chan struct{})
	if each != nil {
		go func() {
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			for {
				select {
				case <-done:
					return
				case <-tick.C:
					each()
				}
			}
		}()
	}
	tick := time.NewTicker(time.Millisecond)
	for now := start; now.Sub(start) < d; now = <-tick.C {
		for due := int(now.Sub(start).Seconds() * float64(rate)); made < due; {
			p := filepath.Join(dir, fmt.Sprintf("kubepods-besteffort-pod%08x_0000_4000_8000_%012x.slice", made, os.Getpid()))
			made++
			if os.Mkdir(p, 0o755) == nil {
				live = append(live, cg{p, now})
			}
		}
		for len(live) > 0 && now.Sub(live[0].born) >= life {
			os.Remove(live[0].path)
			live = live[1:]
		}
	}
	tick.Stop()
	close(done)
	for _, c := range live {
		os.Remove(c.path)
	}
	return made
}

// checkDescriptorBudget reloads the shipped cgroups.conf with a
// descriptor budget that leaves some forty cgroups out: the agent must
// count as many cgroups as the budget holds, hold no more descriptors
// for them, and name each cgroup it leaves out once in its log, not
// again at every rescan.
func checkDescriptorBudget(t *testing.T, l *Lab, node *k8sNode, shipped string, per int, metric string) {
	t.Helper()
	counted := len(cgroupValues(t, l, metric))
	capN := counted - 40
	budget := per * capN
	conf := regexp.MustCompile(`(?m)^descriptors .*$`).ReplaceAllString(shipped, fmt.Sprintf("descriptors %d", budget))
	if conf == shipped {
		t.Fatal("the shipped cgroups.conf has no descriptors line to change")
	}
	writeFile(t, filepath.Join(filepath.Dir(l.Conf), "cgroups.conf"), conf)
	reloads := logCount(l, "reload done")
	if err := syscall.Kill(l.AgentPID(t), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLogCount(t, l, "reload done", reloads+1)
	var fds, now int
	waitFor(t, Settle, fmt.Sprintf("%d cgroups counted, as descriptors %d allows", capN, budget), func() bool {
		now = len(cgroupValues(t, l, metric))
		fds = perfFDs(t, l.AgentPID(t))
		return now == capN && fds == per*(1+capN)
	})
	t.Logf("descriptors %d: %d of %d cgroups counted, %d perf descriptors held for them", budget, now, counted, fds-per)
	why := fmt.Sprintf("matching cgroups not counted, the cap of %d cgroups (descriptors %d in cgroups.conf for 2 events × %d CPUs a cgroup)", capN, budget, per/2)
	// A line names the cgroups newly left out: other tests' cgroups,
	// coming and going, may add lines of their own.
	waitFor(t, Settle, "the log to name the cgroups left out", func() bool { return logCount(l, why) > 0 })
	// More pods, more rescans: each left out is named when it is first
	// left out, and not again.
	lines := logCount(l, why)
	node.grow(t, k8sPods+5)
	waitFor(t, Settle, "the log to name the new pods left out", func() bool { return logCount(l, why) > lines })
	if !testwait.Until(Settle, func() bool { return perfFDs(t, l.AgentPID(t)) == per*(1+capN) }) {
		t.Errorf("%d perf descriptors after more pods came, want %d: %d per cgroup within the budget and the per-CPU counters", perfFDs(t, l.AgentPID(t)), per*(1+capN), per)
	}
	named := map[string]int{}
	total := 0
	list := regexp.MustCompile(`not counted, .*: \[([^\]]*)\](?: and (\d+) more)?`)
	for _, line := range strings.Split(readFile(t, l.AgentLog), "\n") {
		if !strings.Contains(line, why) {
			continue
		}
		m := list.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("a left-out line without its list: %s", line)
		}
		for _, p := range strings.Fields(m[1]) {
			named[p]++
			total++
		}
		more, _ := strconv.Atoi(m[2])
		total += more
	}
	for p, n := range named {
		if n > 1 {
			t.Errorf("%s is named %d times as left out, want once", p, n)
		}
	}
	if total < counted-capN {
		t.Errorf("the log names %d cgroups left out, want at least the %d the budget left out", total, counted-capN)
	}
	t.Logf("%d lines name %d cgroups left out (%d of them by name)", logCount(l, why), total, len(named))
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
func procCPU(t testing.TB, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseUint(f[11], 10, 64)
	st, _ := strconv.ParseUint(f[12], 10, 64)
	return time.Duration(ut+st) * (time.Second / 100)
}

// procRSS is process pid's resident set, in KiB.
func procRSS(t testing.TB, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
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
func removeCgroups(t testing.TB, d string) {
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
