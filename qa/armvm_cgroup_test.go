package qa

import (
	"encoding/json"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

// cgroupVMInit mounts the cgroup filesystems as Ubuntu 20.04's hybrid
// layout does (cgroup2 at /sys/fs/cgroup/unified), and runs the agent
// three times, each with a busy loop alone in the cgroup /busy:
//
//   - v2: perf_event is on the v2 hierarchy, as the kernel boots;
//   - v1: a v1 hierarchy mounted at /sys/fs/cgroup/perf_event takes the
//     controller, as on RHEL 8, CentOS 7 and Ubuntu 20.04; a counter bound
//     to a v2 cgroup would now count nothing;
//   - gone: that hierarchy unmounted, but still holding the controller,
//     as it does while it has cgroups; then mounted again while the agent
//     runs, which must follow it.
//
// qa/armvm stops the loop for each fetch, so the loop's time on CPU
// (schedstat) and its cgroup's cpu-clock are read at the same instant.
const cgroupVMInit = vmPrelude + `mount -t tmpfs cgroup /sys/fs/cgroup
mkdir /sys/fs/cgroup/unified /sys/fs/cgroup/perf_event
mount -t cgroup2 none /sys/fs/cgroup/unified
# The kernel gives v2 cgroups the implicit controllers, perf_event among
# them, once the root's cgroup.subtree_control is first written, as
# systemd does at boot; until then a counter bound to a child fails with
# ENOENT, and --check must say that nothing would be counted.
mkdir /sys/fs/cgroup/unified/early
/bin/pmdaperfevent --check -c /s/v2/perfevent.conf | sed 's/^/early: /'
rmdir /sys/fs/cgroup/unified/early
echo +pids > /sys/fs/cgroup/unified/cgroup.subtree_control
run() { # hierarchy, scenario
	mkdir $1/busy $1/idle
	sh -c "echo \$\$ > $1/busy/cgroup.procs; while :; do :; done" & loop=$!
	/bin/armvm -dir /s/$2 -pid $loop -at 300ms,1800ms perfevent.cgroup
}
run /sys/fs/cgroup/unified v2
kill -9 $loop
mount -t cgroup -o perf_event none /sys/fs/cgroup/perf_event
run /sys/fs/cgroup/perf_event v1
kill -9 $loop # its cgroup stays, and with it the hierarchy
umount /sys/fs/cgroup/perf_event
grep perf_event /proc/cgroups
/bin/pmdaperfevent --check -c /s/gone/perfevent.conf | sed 's/^/check: /'
sh -c "while :; do :; done" & loop=$!
/bin/armvm -dir /s/gone -pid $loop -at 300ms,1500ms,3000ms -then "mount -t cgroup -o perf_event none /sys/fs/cgroup/perf_event && echo $loop > /sys/fs/cgroup/perf_event/busy/cgroup.procs" perfevent.cgroup
kill -9 $loop
echo "=== exit 0"
poweroff -f
`

// TestARMVMCgroups counts per cgroup on each hierarchy that can hold the
// perf_event controller, in a throwaway VM: binding perf_event to a v1
// hierarchy takes it from v2 for the whole machine, for minutes, which no
// shared machine can afford. The busy cgroup's cpu_clock must be the
// loop's own time on CPU within 2 %, the idle one's 0, and
// perfevent.cgroup.mode must name the hierarchy; with the hierarchy
// unmounted, the mode and a Warning must say why nothing is counted, and
// once it is mounted again the agent must count there.
func TestARMVMCgroups(t *testing.T) {
	vm := needARMVM(t)
	work := t.TempDir()
	agent, driver := filepath.Join(work, "pmdaperfevent"), filepath.Join(work, "armvm")
	buildARM64(t, "build", "-o", agent, "./pmda")
	buildARM64(t, "build", "-o", driver, "./qa/armvm")
	texts := map[string]string{}
	for _, s := range []string{"v2", "v1", "gone"} {
		texts["s/"+s+"/perfevent.conf"] = "[arm_n1]\ncpu-clock\n"
		texts["s/"+s+"/cgroups.conf"] = "cgroup /\ncgroup /*\nevent cpu-clock\nmax 8\n"
	}
	initrd := filepath.Join(work, "initrd.cpio")
	bins := map[string]string{"bin/busybox": vm.busybox, "bin/pmdaperfevent": agent, "bin/armvm": driver}
	if err := writeInitramfs(initrd, cgroupVMInit, bins, texts); err != nil {
		t.Fatal(err)
	}
	console := vm.boot(t, initrd, armShift)

	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the console, but for the reports:\n%s", withoutReports(console))
		}
	})
	reports := map[string]*cgroupReport{}
	for _, l := range strings.Split(console, "\n") {
		if strings.HasPrefix(l, "perf_event") {
			t.Logf("/proc/cgroups, unmounted: %s", strings.TrimSpace(l))
		}
		js, ok := strings.CutPrefix(strings.TrimSpace(l), "armvm: ")
		if !ok {
			continue
		}
		r := &cgroupReport{}
		if err := json.Unmarshal([]byte(js), r); err != nil {
			t.Fatalf("the driver's report: %v\n%s", err, js)
		}
		reports[path.Base(r.Dir)] = r
	}
	for s, fetches := range map[string]int{"v2": 2, "v1": 2, "gone": 3} {
		r := reports[s]
		switch {
		case r == nil:
			t.Fatalf("no report for %s; the console:\n%s", s, console)
		case r.Error != "" || len(r.Fetches) != fetches:
			t.Fatalf("%s: %s after %d fetches; the agent's log:\n%s", s, r.Error, len(r.Fetches), r.Log)
		}
	}
	t.Run("early", func(t *testing.T) {
		// Before the root's subtree_control is written, the probe sees
		// the child's counter fail, and --check says so as a problem.
		const why = "early: ! cgroups: nothing would be counted per cgroup: the cgroups below the root of the cgroup v2 hierarchy at /sys/fs/cgroup/unified have no perf_event controller (a counter bound to /early fails with ENOENT)"
		if !strings.Contains(console, why) || !strings.Contains(console, "> /sys/fs/cgroup/unified/cgroup.subtree_control") {
			t.Errorf("--check before subtree_control is written does not say %q and the remedy:\n%s", why, withoutReports(console))
		}
	})
	t.Run("v2", func(t *testing.T) { checkCgroupCounts(t, reports["v2"], "v2 /sys/fs/cgroup/unified") })
	t.Run("v1", func(t *testing.T) { checkCgroupCounts(t, reports["v1"], "v1 /sys/fs/cgroup/perf_event") })
	t.Run("gone", func(t *testing.T) {
		r := reports["gone"]
		f := r.Fetches[0]
		const why = "perf_event is bound to the cgroup v1 hierarchy "
		if mode := f.Strings["perfevent.cgroup.mode"]; !strings.HasPrefix(mode, "unavailable: "+why) {
			t.Errorf("perfevent.cgroup.mode = %q, want %q...", mode, "unavailable: "+why)
		}
		if n := f.Values["perfevent.cgroup.counted"][-1]; n != 0 {
			t.Errorf("perfevent.cgroup.counted = %v, want 0", n)
		}
		if !strings.Contains(r.Log, "Warning: cgroups: "+why) || !strings.Contains(r.Log, "which is not mounted") {
			t.Errorf("the agent's log has no Warning saying %q:\n%s", why, r.Log)
		}
		// --check marks it a problem ("! "), and counts it.
		if !strings.Contains(console, "check: ! cgroups: "+why) || !strings.Contains(console, "; 1 problem") {
			t.Errorf("--check does not say %q as its one problem:\n%s", why, withoutReports(console))
		}
		// Mounted again after the first fetch: the agent counts there,
		// from the second fetch on, without a restart.
		r.Fetches = r.Fetches[1:]
		checkCgroupCounts(t, r, "v1 /sys/fs/cgroup/perf_event")
	})
}

// cgroupReport is what qa/armvm prints with -pid (its Report).
type cgroupReport struct {
	Dir     string
	Fetches []struct {
		Values  map[string]map[int32]float64
		Strings map[string]string
		Cgroups map[string]map[string]float64
		LoopNS  float64
	}
	Log   string
	Error string
}

func checkCgroupCounts(t *testing.T, r *cgroupReport, mode string) {
	if got := r.Fetches[1].Strings["perfevent.cgroup.mode"]; got != mode {
		t.Errorf("perfevent.cgroup.mode = %q, want %q", got, mode)
	}
	const m = "perfevent.cgroup.cpu_clock.value"
	a, b := r.Fetches[0].Cgroups[m], r.Fetches[1].Cgroups[m]
	for _, cg := range []string{"/", "/busy", "/idle"} {
		if _, ok := b[cg]; !ok {
			t.Fatalf("no %s[%s] in %v; the agent's log:\n%s", m, cg, b, r.Log)
		}
	}
	if n := r.Fetches[1].Values["perfevent.cgroup.counted"][-1]; n != 3 {
		t.Errorf("perfevent.cgroup.counted = %v, want 3", n)
	}
	loop := r.Fetches[1].LoopNS - r.Fetches[0].LoopNS
	if loop < 5e8 {
		t.Fatalf("the loop ran %.0f ns between the fetches; want over half the 1.5 s", loop)
	}
	near(t, "Δcpu_clock of /busy against the loop's Δschedstat", b["/busy"]-a["/busy"], loop, 0.02)
	if d := b["/idle"] - a["/idle"]; d != 0 {
		t.Errorf("Δcpu_clock of /idle = %v, want 0: no task runs there", d)
	}
	// The root cgroup holds every task, the loop's too.
	if d := b["/"] - a["/"]; d < loop {
		t.Errorf("Δcpu_clock of / = %v, less than the loop's %v", d, loop)
	}
}

func withoutReports(console string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(console, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "armvm: ") {
			b.WriteString(l)
		}
	}
	return b.String()
}
