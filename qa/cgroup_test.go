package qa

import (
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
// the loop's own time on CPU and 0, and against perf stat -a -G; then that
// a cgroup created while the agent runs appears without waiting for a
// rescan, that one removed goes with its descriptors, and that pmlogger
// keeps logging across the change.
func TestLabCgroups(t *testing.T) {
	Direct(t) // root, before the test makes cgroups of its own
	info, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	h, err := cgroup.FindHierarchy(info)
	if err != nil || h.Version != 2 {
		unmet(t, "needs a cgroup v2 hierarchy (pure or the hybrid /sys/fs/cgroup/unified): %v", err)
	}
	// Names of this process's own: a qa run from another tree on the
	// machine (lab tests take no lock) must not put its loop in our cgroup.
	prefix := fmt.Sprintf("perfevent-qa-%d-", os.Getpid())
	busyName, idleName, lateName := prefix+"busy", prefix+"idle", prefix+"late"
	busy := mkCgroup(t, h, busyName)
	mkCgroup(t, h, idleName)

	loop := cgrouptest.Busy(t, busy) // after mkCgroup: its cleanup runs first

	// Perf cgroup counters, whose descriptors this test follows;
	// TestLabCgroupsBPF counts with BPF.
	l := StartLab(t, Agent{Go: true, Config: VMConfig, Cgroups: "cgroup /" + prefix + "*\nevent cpu-clock\nevent context-switches\nmax 8\ncounting perf\n"})
	needClient(t, l, "pminfo")
	cpus := len(onlineCPUs(t))
	t.Cleanup(func() {
		if t.Failed() {
			b, err := os.ReadFile(l.AgentLog)
			t.Logf("agent log (%v):\n%s\n%s", err, b, l.Logs())
		}
	})

	// The busy cgroup holds only the loop, so its cpu_clock is the loop's
	// own time on CPU (schedstat). The shell reads schedstat just before
	// and just after each pminfo, so each of the agent's reads lies
	// between two known values of the truth, and so does the difference
	// of the two reads: a bound that holds however long a loaded machine
	// takes to start pminfo, and however little CPU it leaves the loop.
	// perf stat -G counts the same cgroups over a window that holds the
	// whole script: it runs it as its command.
	dir := t.TempDir()
	sample := `s() { cut -d" " -f1 "/proc/$1/schedstat"; }
s "$1"; "$0" -h "$2" -f perfevent.cgroup.cpu_clock.value > "$3"; s "$1"
sleep 2
s "$1"; "$0" -h "$2" -f perfevent.cgroup.cpu_clock.value > "$4"; s "$1"`
	first, second := filepath.Join(dir, "first"), filepath.Join(dir, "second")
	args := []string{"sh", "-c", sample, l.lookPath("pminfo"), strconv.Itoa(loop), l.HostSpec(), first, second}
	_, havePerf := exec.LookPath("perf")
	if havePerf == nil {
		args = append([]string{"perf", "stat", "-a", "-x,", "-o", filepath.Join(dir, "perf.csv"),
			"-e", "cpu-clock", "-G", busyName, "-e", "cpu-clock", "-G", idleName, "--"}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = l.Environ()
	outer0, steal0 := cgrouptest.OnCPU(t, loop), stolen(t)
	out, err := cmd.Output()
	outer1, steal1 := cgrouptest.OnCPU(t, loop), stolen(t)
	if err != nil {
		t.Fatalf("%s: %v\n%s", args[0], err, out)
	}
	var s [4]uint64 // schedstat before and after the first pminfo, then the second
	if f := strings.Fields(string(out)); len(f) != len(s) {
		t.Fatalf("the sampling script printed %q, want %d schedstat readings", out, len(s))
	} else {
		for i := range s {
			s[i], _ = strconv.ParseUint(f[i], 10, 64)
		}
	}
	v0, v1 := parseCgroupValues(t, first), parseCgroupValues(t, second)
	busyNS, idleNS := v1["/"+busyName]-v0["/"+busyName], v1["/"+idleName]-v0["/"+idleName]
	steal := steal1 - steal0
	t.Logf("cpu_clock between the two fetches: busy %d ns, idle %d ns; the loop ran between %d and %d ns meanwhile, and the hypervisor stole %d ns", busyNS, idleNS, s[2]-s[1], s[3]-s[0], steal)
	if lo, hi := clockBounds(s[2]-s[1], s[3]-s[0], steal); busyNS < lo || busyNS > hi {
		t.Errorf("busy cgroup: cpu_clock grew %d ns between two fetches, want %d to %d: the loop ran %d to %d ns meanwhile (schedstat), and %d ns were stolen", busyNS, lo, hi, s[2]-s[1], s[3]-s[0], steal)
	}
	if idleNS > 1e8 {
		t.Errorf("idle cgroup: cpu_clock grew %d ns in 2 s, want ≈ 0", idleNS)
	}
	if havePerf != nil {
		unmet(t, "needs perf (Debian package linux-perf) to compare with perf stat -G")
	} else {
		// CSV lines: value,unit,event,cgroup,...; cpu-clock in msec.
		perfOut := readFile(t, filepath.Join(dir, "perf.csv"))
		perf := map[string]uint64{}
		for _, line := range strings.Split(perfOut, "\n") {
			f := strings.Split(line, ",")
			if len(f) >= 4 && f[2] == "cpu-clock" {
				v, _ := strconv.ParseFloat(f[0], 64)
				perf[f[3]] = uint64(v * 1e6)
			}
		}
		// perf's window holds the whole script, from the first schedstat
		// reading to the last, and lies within the test's own readings
		// around perf.
		p := perf[busyName]
		t.Logf("perf stat -G over the script: busy %d ns, idle %d ns; the loop ran between %d and %d ns meanwhile", p, perf[idleName], s[3]-s[0], outer1-outer0)
		if lo, hi := clockBounds(s[3]-s[0], outer1-outer0, steal); p < lo || p > hi {
			t.Errorf("perf stat -G says %d ns for the busy cgroup, want %d to %d: the loop ran %d to %d ns meanwhile (schedstat), and %d ns were stolen:\n%s", p, lo, hi, s[3]-s[0], outer1-outer0, steal, perfOut)
		}
		if p := perf[idleName]; p > 1e8 {
			t.Errorf("perf stat -G says %d ns for the idle cgroup:\n%s", p, perfOut)
		}
	}

	// pmlogger runs across a cgroup's arrival and departure: its records
	// have the late cgroup in none, then in some, then in none again.
	const metric = "perfevent.cgroup.cpu_clock.value"
	logger := l.StartLogger(t, "log mandatory on 250 msec {\n    perfevent.cgroup\n}\n")
	lateIn := func(recs []Record) string {
		var seq strings.Builder
		for _, r := range recs {
			if _, ok := r["/"+lateName]; ok {
				seq.WriteByte('1')
			} else if _, ok := r["/"+busyName]; ok {
				seq.WriteByte('0')
			}
		}
		return seq.String()
	}
	logger.WaitRecords(t, metric, "record of the busy cgroup", func(recs []Record) bool { return strings.HasPrefix(lateIn(recs), "0") })
	fdsBefore := perfFDs(t, l.AgentPID(t))
	late := mkCgroup(t, h, lateName)
	// inotify tells the agent at once; without it the periodic rescan
	// would find the cgroup only after cgroup.RescanNotified.
	start := time.Now()
	waitFor(t, cgroup.RescanNotified/3, "the new cgroup as an instance", func() bool {
		_, ok := cgroupValues(t, l, metric)["/"+lateName]
		return ok
	})
	t.Logf("a new cgroup appeared after %v", time.Since(start).Round(time.Millisecond))
	waitFor(t, Settle, fmt.Sprintf("%d perf descriptors with the new cgroup (2 events × %d CPUs more than %d)", fdsBefore+2*cpus, cpus, fdsBefore), func() bool {
		return perfFDs(t, l.AgentPID(t)) == fdsBefore+2*cpus
	})
	logger.WaitRecords(t, metric, "two records of the late cgroup", func(recs []Record) bool { return strings.Contains(lateIn(recs), "11") })
	if err := os.Remove(late); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	waitFor(t, cgroup.RescanNotified/3, "the removed cgroup to go", func() bool {
		_, ok := cgroupValues(t, l, metric)["/"+lateName]
		return !ok
	})
	t.Logf("a removed cgroup went after %v", time.Since(start).Round(time.Millisecond))
	if got := perfFDs(t, l.AgentPID(t)); got != fdsBefore {
		t.Errorf("%d perf descriptors after the cgroup went, want %d as before", got, fdsBefore)
	}
	recs := logger.WaitRecords(t, metric, "record after the late cgroup went, and ten of the busy one", func(recs []Record) bool {
		seq := lateIn(recs)
		return strings.Contains(seq, "10") && len(seq) >= 10
	})
	logger.Stop(t)
	if seq := lateIn(recs); !regexp.MustCompile(`^0+1{2,}0+$`).MatchString(seq) {
		t.Errorf("pmlogger's records (1: with the late cgroup, 0: with the busy one only): %s, want 0…1…0", seq)
	}

	// perfalloc's reservation stops the per-cgroup counters too: being
	// software events they are disabled, their descriptors kept
	// (internal/counter's kernel tests show that they stop counting),
	// and they count on after it.
	released := logCount(l, "counters released for perfalloc")
	unlock := l.ReadLock(t)
	waitLogCount(t, l, "counters released for perfalloc", released+1)
	frozen := cgroupValues(t, l, "perfevent.cgroup.cpu_clock.value")["/"+busyName]
	if got := perfFDs(t, l.AgentPID(t)); got != fdsBefore {
		t.Errorf("%d perf descriptors under perfalloc, want the %d kept, disabled", got, fdsBefore)
	}
	unlock()
	waitFor(t, Settle, "the busy cgroup to count again after perfalloc", func() bool {
		return cgroupValues(t, l, "perfevent.cgroup.cpu_clock.value")["/"+busyName] > frozen
	})
	if got := perfFDs(t, l.AgentPID(t)); got != fdsBefore {
		t.Errorf("%d perf descriptors after perfalloc, want %d as before", got, fdsBefore)
	}

	// SIGHUP rereads cgroups.conf: the idle cgroup goes, ids stay.
	ids := cgroupIDs(t, l)
	writeFile(t, filepath.Join(filepath.Dir(l.Conf), "cgroups.conf"), "cgroup /"+busyName+"\nevent cpu-clock\n")
	if err := syscall.Kill(l.AgentPID(t), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, Settle, "the reload to drop the idle cgroup", func() bool {
		_, ok := cgroupValues(t, l, "perfevent.cgroup.cpu_clock.value")["/"+idleName]
		return !ok
	})
	if after := cgroupIDs(t, l); after["/"+busyName] != ids["/"+busyName] {
		t.Errorf("the busy cgroup's id changed across the reload: %v, then %v", ids, after)
	}

}

// clockBounds turns bounds on a task's time on CPU, from its schedstat,
// into bounds on a cgroup's cpu-clock count of the same time. In a VM the
// kernel leaves the time the hypervisor stole from a vCPU out of a task's
// runtime (CONFIG_PARAVIRT_TIME_ACCOUNTING), while cpu-clock, which reads
// the clock as the task is switched in and out, counts it: the count may
// exceed the runtime by at most what was stolen from every CPU meanwhile
// (/proc/stat, to a tick on either side). 2 % and a millisecond cover the
// rest (the switch itself, and interrupts on kernels that account them
// apart).
func clockBounds(lo, hi, stolen uint64) (uint64, uint64) {
	return lo - min(lo, lo/50+1e6), hi + hi/50 + 1e6 + stolen + 2*1e7
}

// stolen is the time the hypervisor has taken from this machine's CPUs
// since boot (the steal column of /proc/stat, in USER_HZ = 100 ticks), in
// nanoseconds.
func stolen(t *testing.T) uint64 {
	t.Helper()
	for _, line := range strings.Split(readFile(t, "/proc/stat"), "\n") {
		if f := strings.Fields(line); len(f) > 8 && f[0] == "cpu" {
			ticks, err := strconv.ParseUint(f[8], 10, 64)
			if err != nil {
				t.Fatalf("/proc/stat: steal %q: %v", f[8], err)
			}
			return ticks * 1e7
		}
	}
	t.Fatal("/proc/stat has no cpu line")
	return 0
}

// mkCgroup makes a cgroup at the top of h and removes it when the test ends.
func mkCgroup(t testing.TB, h cgroup.Hierarchy, name string) string {
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
func cgroupValues(t testing.TB, l *Lab, metric string) map[string]uint64 {
	t.Helper()
	return cgroupValuesIn(l.Run(t, "pminfo", "-h", l.HostSpec(), "-f", metric))
}

// parseCgroupValues reads a file of pminfo -f output.
func parseCgroupValues(t testing.TB, file string) map[string]uint64 {
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
func cgroupIDs(t testing.TB, l *Lab) map[string]string {
	t.Helper()
	out := l.Run(t, "pminfo", "-h", l.HostSpec(), "-f", "perfevent.cgroup.cpu_clock.value")
	ids := map[string]string{}
	for _, m := range regexp.MustCompile(`inst \[(\d+) or "([^"]+)"\]`).FindAllStringSubmatch(out, -1) {
		ids[m[2]] = m[1]
	}
	return ids
}

// allFDs is how many descriptors process pid holds.
func allFDs(t testing.TB, pid int) int {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// perfFDs counts the perf event descriptors a process holds.
func perfFDs(t testing.TB, pid int) int {
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
