package qa

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"perfevent/internal/cgroup"
	"perfevent/internal/cgroup/cgrouptest"
)

// TestLabCgroups counts two cgroups of the v2 hierarchy, one running a
// busy loop and one empty, and checks perfevent.cgroup.cpu_clock against
// 1 CPU and 0 and against perf stat -a -G; then that a cgroup created
// while the agent runs appears within 2 s, that one removed goes with its
// descriptors, and that pmlogger keeps logging across the change.
func TestLabCgroups(t *testing.T) {
	info, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	h, err := cgroup.FindHierarchy(info)
	if err != nil || h.Version != 2 {
		unmet(t, "needs a cgroup v2 hierarchy (pure or the hybrid /sys/fs/cgroup/unified): %v", err)
	}
	busy := mkCgroup(t, h, "perfevent-qa-busy")
	mkCgroup(t, h, "perfevent-qa-idle")

	loop := cgrouptest.Busy(t, busy) // after mkCgroup: its cleanup runs first

	l := StartLab(t, Agent{Go: true, Config: VMConfig, Cgroups: "cgroup /perfevent-qa-*\nevent cpu-clock\nevent context-switches\nmax 8\n"})
	needClient(t, l, "pminfo")
	cpus := len(onlineCPUs(t))
	t.Cleanup(func() {
		if t.Failed() {
			b, err := os.ReadFile(l.AgentLog)
			t.Logf("agent log (%v):\n%s\n%s", err, b, l.Logs())
		}
	})

	// Each pminfo fetches at some moment of its run, and on a busy machine
	// a run can take a good part of a second, so the clock and the loop's
	// time on CPU (schedstat) are read before and after each: the agent's
	// window lies between the inner and the outer pair of readings. The
	// cgroup's cpu-clock cannot be less than the loop's time on CPU, nor
	// more than the wall time (the loop is one thread). It may be more
	// than schedstat's figure: in a VM, time the host steals while the
	// loop is current is in cpu-clock and not in schedstat. perf stat -G
	// counts the same cgroups over the whole command, which runs the two
	// samples, so it sees what the agent saw and a little more.
	dir := t.TempDir()
	first, second, stats := filepath.Join(dir, "first"), filepath.Join(dir, "second"), filepath.Join(dir, "readings")
	sample := `log=$4
r() { echo $(date +%s%N) $(cat /proc/` + strconv.Itoa(loop) + `/schedstat) >> "$log"; }
r; "$0" -h "$1" -f perfevent.cgroup.cpu_clock.value > "$2"; r
sleep 2
r; "$0" -h "$1" -f perfevent.cgroup.cpu_clock.value > "$3"; r`
	args := []string{"sh", "-c", sample, l.lookPath("pminfo"), l.HostSpec(), first, second, stats}
	var perfOut []byte
	start := time.Now()
	if _, err := exec.LookPath("perf"); err == nil {
		cmd := exec.Command("perf", append([]string{"stat", "-a", "-x,", "-e", "cpu-clock", "-G", "perfevent-qa-busy", "-e", "cpu-clock", "-G", "perfevent-qa-idle", "--"}, args...)...)
		cmd.Env = l.Environ()
		perfOut, err = cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("perf stat: %v\n%s", err, perfOut)
		}
	} else if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("pminfo: %v\n%s", err, out)
	}
	command := float64(time.Since(start))
	var wall, onCPU [4]float64 // before and after each pminfo
	b, err := os.ReadFile(stats)
	if err != nil {
		t.Fatal(err)
	}
	for i, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		if i >= len(wall) || len(f) != 4 {
			t.Fatalf("%s: %q, want 4 lines of a time and schedstat's 3 fields", stats, b)
		}
		w, err1 := strconv.ParseUint(f[0], 10, 64)
		c, err2 := strconv.ParseUint(f[1], 10, 64)
		if err := errors.Join(err1, err2); err != nil {
			t.Fatalf("%s: %v", stats, err)
		}
		wall[i], onCPU[i] = float64(w), float64(c)
	}
	v0, v1 := parseCgroupValues(t, first), parseCgroupValues(t, second)
	busyNS, idleNS := float64(v1["/perfevent-qa-busy"]-v0["/perfevent-qa-busy"]), float64(v1["/perfevent-qa-idle"]-v0["/perfevent-qa-idle"])
	least, most := onCPU[2]-onCPU[1], wall[3]-wall[0]
	t.Logf("cpu_clock between the fetches: busy %.4g ns, idle %.4g ns; in that window the loop ran at least %.4g ns (%.2g of a CPU), and it lasted at most %.4g ns", busyNS, idleNS, least, least/(wall[2]-wall[1]), most)
	if busyNS < 0.9*least || busyNS > 1.02*most {
		t.Errorf("busy cgroup: cpu_clock grew %.4g ns between the fetches, want between the loop's time on CPU (%.4g ns) and the wall time (%.4g ns)", busyNS, least, most)
	}
	if idleNS > 0.1e9 {
		t.Errorf("idle cgroup: cpu_clock grew %.4g ns in 2 s, want ≈ 0", idleNS)
	}
	if perfOut == nil {
		unmet(t, "needs perf (Debian package linux-perf) to compare with perf stat -G")
	} else {
		// CSV lines: value,unit,event,cgroup,...; cpu-clock in msec.
		perf := map[string]float64{}
		for _, line := range strings.Split(string(perfOut), "\n") {
			f := strings.Split(line, ",")
			if len(f) >= 4 && f[2] == "cpu-clock" {
				v, _ := strconv.ParseFloat(f[0], 64)
				perf[f[3]] = v * 1e6
			}
		}
		t.Logf("perf stat -G over the same window: busy %.4g ns, idle %.4g ns", perf["perfevent-qa-busy"], perf["perfevent-qa-idle"])
		// perf's window holds the agent's and a little more: the
		// start of the first pminfo and the end of the second.
		if p := perf["perfevent-qa-busy"]; p < 0.9*busyNS || p > 1.02*command {
			t.Errorf("perf stat -G says %.4g ns for the busy cgroup, want between the agent's %.4g ns over part of its window and the command's %.4g ns of wall time:\n%s", p, busyNS, command, perfOut)
		}
		if p := perf["perfevent-qa-idle"]; p > 0.1e9 {
			t.Errorf("perf stat -G says %.4g ns for the idle cgroup:\n%s", p, perfOut)
		}
	}

	// pmlogger runs across a cgroup's arrival and departure.
	config := filepath.Join(dir, "config")
	writeFile(t, config, "log mandatory on 250 msec {\n    perfevent.cgroup\n}\n")
	archive := filepath.Join(dir, "cgroups")
	logger := make(chan Result, 1)
	go func() {
		logger <- l.RunErr(t, "pmlogger", "-h", l.HostSpec(), "-c", config, "-T", "6sec", "-l", filepath.Join(dir, "pmlogger.log"), archive)
	}()
	time.Sleep(time.Second)
	fdsBefore := perfFDs(t, l.AgentPID(t))
	late := mkCgroup(t, h, "perfevent-qa-late")
	start = time.Now()
	waitFor(t, 2*time.Second, "the new cgroup as an instance", func() bool {
		_, ok := cgroupValues(t, l, "perfevent.cgroup.cpu_clock.value")["/perfevent-qa-late"]
		return ok
	})
	t.Logf("a new cgroup appeared after %v", time.Since(start).Round(time.Millisecond))
	waitFor(t, time.Second, fmt.Sprintf("%d perf descriptors with the new cgroup (2 events × %d CPUs more than %d)", fdsBefore+2*cpus, cpus, fdsBefore), func() bool {
		return perfFDs(t, l.AgentPID(t)) == fdsBefore+2*cpus
	})
	time.Sleep(time.Second)
	if err := os.Remove(late); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	waitFor(t, 2*time.Second, "the removed cgroup to go", func() bool {
		_, ok := cgroupValues(t, l, "perfevent.cgroup.cpu_clock.value")["/perfevent-qa-late"]
		return !ok
	})
	t.Logf("a removed cgroup went after %v", time.Since(start).Round(time.Millisecond))
	if got := perfFDs(t, l.AgentPID(t)); got != fdsBefore {
		t.Errorf("%d perf descriptors after the cgroup went, want %d as before", got, fdsBefore)
	}

	// perfalloc's reservation stops the per-cgroup counters too: being
	// software events they are disabled, their descriptors kept
	// (internal/counter's kernel tests show that they stop counting),
	// and they count on after it.
	released := logCount(l, "counters released for perfalloc")
	unlock := l.ReadLock(t)
	waitLogCount(t, l, "counters released for perfalloc", released+1)
	frozen := cgroupValues(t, l, "perfevent.cgroup.cpu_clock.value")["/perfevent-qa-busy"]
	if got := perfFDs(t, l.AgentPID(t)); got != fdsBefore {
		t.Errorf("%d perf descriptors under perfalloc, want the %d kept, disabled", got, fdsBefore)
	}
	unlock()
	waitFor(t, 5*time.Second, "the busy cgroup to count again after perfalloc", func() bool {
		return cgroupValues(t, l, "perfevent.cgroup.cpu_clock.value")["/perfevent-qa-busy"] > frozen
	})
	if got := perfFDs(t, l.AgentPID(t)); got != fdsBefore {
		t.Errorf("%d perf descriptors after perfalloc, want %d as before", got, fdsBefore)
	}

	if r := <-logger; r.Err != nil {
		t.Fatalf("pmlogger: %s", r)
	}
	// SIGHUP rereads cgroups.conf: the idle cgroup goes, ids stay.
	ids := cgroupIDs(t, l)
	writeFile(t, filepath.Join(filepath.Dir(l.Conf), "cgroups.conf"), "cgroup /perfevent-qa-busy\nevent cpu-clock\n")
	if err := syscall.Kill(l.AgentPID(t), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the reload to drop the idle cgroup", func() bool {
		_, ok := cgroupValues(t, l, "perfevent.cgroup.cpu_clock.value")["/perfevent-qa-idle"]
		return !ok
	})
	if after := cgroupIDs(t, l); after["/perfevent-qa-busy"] != ids["/perfevent-qa-busy"] {
		t.Errorf("the busy cgroup's id changed across the reload: %v, then %v", ids, after)
	}

	out := l.Run(t, "pmdumplog", "-z", archive, "perfevent.cgroup.cpu_clock.value")
	for name, least := range map[string]int{"/perfevent-qa-busy": 10, "/perfevent-qa-late": 2} {
		re := fmt.Sprintf(`(?m)^\s+inst \[\d+ or "%s"\] value \d+$`, regexp.QuoteMeta(name))
		if n := len(regexp.MustCompile(re).FindAllString(out, -1)); n < least {
			t.Errorf("pmdumplog: %d values for %s, want at least %d:\n%s", n, name, least, out)
		}
	}
}

// mkCgroup makes a cgroup at the top of h and removes it when the test ends.
func mkCgroup(t *testing.T, h cgroup.Hierarchy, name string) string {
	t.Helper()
	p := filepath.Join(h.Mount, name)
	if err := os.Mkdir(p, 0o755); err != nil && !os.IsExist(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			t.Errorf("removing %s: %v", p, err)
		}
	})
	return p
}

// cgroupValues is one pminfo -f of a per-cgroup metric: path → value.
func cgroupValues(t *testing.T, l *Lab, metric string) map[string]uint64 {
	t.Helper()
	return cgroupValuesIn(l.Run(t, "pminfo", "-h", l.HostSpec(), "-f", metric))
}

// parseCgroupValues reads a file of pminfo -f output.
func parseCgroupValues(t *testing.T, file string) map[string]uint64 {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return cgroupValuesIn(string(b))
}

func cgroupValuesIn(out string) map[string]uint64 {
	vals := map[string]uint64{}
	for _, m := range regexp.MustCompile(`inst \[\d+ or "([^"]+)"\] value (\d+)`).FindAllStringSubmatch(out, -1) {
		v, _ := strconv.ParseUint(m[2], 10, 64)
		vals[m[1]] = v
	}
	return vals
}

// cgroupIDs is the instance id of each counted cgroup, from pminfo.
func cgroupIDs(t *testing.T, l *Lab) map[string]string {
	t.Helper()
	out := l.Run(t, "pminfo", "-h", l.HostSpec(), "-f", "perfevent.cgroup.cpu_clock.value")
	ids := map[string]string{}
	for _, m := range regexp.MustCompile(`inst \[(\d+) or "([^"]+)"\]`).FindAllStringSubmatch(out, -1) {
		ids[m[2]] = m[1]
	}
	return ids
}

// perfFDs counts the perf event descriptors a process holds.
func perfFDs(t *testing.T, pid int) int {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if target, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && target == "anon_inode:[perf_event]" {
			n++
		}
	}
	return n
}
