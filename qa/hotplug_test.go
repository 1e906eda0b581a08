package qa

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"perfevent/internal/cpulist"
	"perfevent/internal/testwait"
)

// perCPU fetches a per-CPU counter through the lab's pmcd: instance name
// → value. No values (PM_ERR_VALUE and the like) is an empty map.
func perCPU(t testing.TB, l *Lab, metric string) map[string]uint64 {
	t.Helper()
	out := l.Run(t, "pminfo", "-f", metric)
	vals := map[string]uint64{}
	re := regexp.MustCompile(`inst \[\d+ or "([^"]+)"\] value (\d+)`)
	for _, m := range re.FindAllStringSubmatch(out, -1) {
		v, _ := strconv.ParseUint(m[2], 10, 64)
		vals[m[1]] = v
	}
	return vals
}

// waitCounting waits until the metric's instances are exactly cpus, each
// counting (two fetches, every value larger in the second), and returns
// the later values.
func waitCounting(t testing.TB, l *Lab, metric string, cpus ...string) map[string]uint64 {
	t.Helper()
	prev := perCPU(t, l, metric)
	var last map[string]uint64
	if !testwait.Until(Settle, func() bool {
		cur := perCPU(t, l, metric)
		last, prev = prev, cur
		if len(cur) != len(cpus) {
			return false
		}
		for _, c := range cpus {
			if p, had := last[c]; !had || cur[c] <= p {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("%s: want %v counting; got %v then %v\n%s", metric, cpus, last, prev, l.Logs())
	}
	return prev
}

// cpuNames are the per-CPU instance names of cpus.
func cpuNames(cpus []int) []string {
	names := make([]string, len(cpus))
	for i, c := range cpus {
		names[i] = "cpu" + strconv.Itoa(c)
	}
	return names
}

const cpu1Online = "/sys/devices/system/cpu/cpu1/online"

// TestHotplugCPU1: CPU 1 offlined and brought back under a real pmcd.
// Before, every online CPU counts; while it is offline its instance is
// gone and the others keep counting; once it is back, cpu1 counts again,
// and cpu0's value has carried on. Offlining a CPU disturbs the whole machine, so
// the test takes the qa lock and always brings the CPU back.
func TestHotplugCPU1(t *testing.T) {
	if os.Getenv("PERFEVENT_QA") == "" {
		t.Skip("offlines CPU 1: set PERFEVENT_QA=1 to run it")
	}
	e := Direct(t)
	e.lock(t)
	// A run that died with CPU 1 offline (a test timeout panics without
	// running cleanups; a CI job can be cancelled) left this behind:
	// bring the CPU back before anything else, or this test would skip
	// from then on.
	marker := filepath.Join(e.PCP.Get("PCP_TMPFILE_DIR"), "perfevent-qa-cpu1-offline")
	if _, err := os.Stat(marker); err == nil {
		t.Logf("%s: an earlier run left CPU 1 offline; bringing it back", marker)
		if err := os.WriteFile(cpu1Online, []byte("1"), 0o644); err != nil {
			t.Fatalf("bringing CPU 1 back: %v", err)
		}
		os.Remove(marker)
	}
	data, err := os.ReadFile(cpu1Online)
	if err != nil {
		t.Skipf("needs a CPU 1 that can go offline (%s: %v)", cpu1Online, err)
	}
	if strings.TrimSpace(string(data)) != "1" {
		t.Skipf("needs CPU 1 online at the start (%s says %q)", cpu1Online, data)
	}
	back := func() {
		if os.WriteFile(cpu1Online, []byte("1"), 0o644) == nil {
			os.Remove(marker)
		}
	}
	defer back()
	t.Cleanup(back)

	all := onlineCPUs(t)
	rest := slices.DeleteFunc(slices.Clone(all), func(c int) bool { return c == 1 })
	l := StartLab(t, Agent{Go: true, Config: "[perf]\ncpu-clock\ncontext-switches\n"})
	const metric = "perfevent.hwcounters.cpu_clock.value"
	before := waitCounting(t, l, metric, cpuNames(all)...)
	// pmlogger records the whole sequence, instance domain changes
	// included; each step waits for its records, whenever a busy machine
	// lets pmlogger take them. Each record is with cpu1 (1) or without
	// it (0): 1…1 0…0 1…1.
	logger := l.StartLogger(t, "log mandatory on 100 msec {\n    "+metric+"\n}\n")
	withCPU1 := func(recs []Record) string {
		var seq strings.Builder
		for _, r := range recs {
			if _, ok := r["cpu1"]; ok {
				seq.WriteByte('1')
			} else if _, ok := r["cpu0"]; ok {
				seq.WriteByte('0')
			}
		}
		return seq.String()
	}
	logger.WaitRecords(t, metric, "record with cpu1", func(recs []Record) bool { return strings.HasPrefix(withCPU1(recs), "1") })

	writeFile(t, marker, "")
	if err := os.WriteFile(cpu1Online, []byte("0"), 0o644); err != nil {
		t.Skipf("needs a CPU 1 that can go offline: writing 0 to %s: %v", cpu1Online, err)
	}
	waitLog(t, l, "CPUs online now: "+cpulist.Format(rest)+"; rebuilding the counters", Settle)
	during := waitCounting(t, l, metric, cpuNames(rest)...)
	if during["cpu0"] <= before["cpu0"] {
		t.Errorf("cpu0 went from %d to %d while cpu1 was offline; it must carry on", before["cpu0"], during["cpu0"])
	}
	if n := active(t, l); n <= 0 {
		t.Errorf("perfevent.active = %d while cpu1 is offline", n)
	}
	logger.WaitRecords(t, metric, "record without cpu1", func(recs []Record) bool { return strings.Contains(withCPU1(recs), "10") })

	if err := os.WriteFile(cpu1Online, []byte("1"), 0o644); err != nil {
		t.Fatalf("bringing CPU 1 back: %v", err)
	}
	waitLog(t, l, "CPUs online now: "+cpulist.Format(all)+"; rebuilding the counters", Settle)
	after := waitCounting(t, l, metric, cpuNames(all)...)
	if after["cpu0"] <= during["cpu0"] {
		t.Errorf("cpu0 went from %d to %d when cpu1 came back", during["cpu0"], after["cpu0"])
	}
	if after["cpu1"] <= before["cpu1"] {
		t.Errorf("cpu1 was %d before it went offline and is %d after: it must continue, not restart", before["cpu1"], after["cpu1"])
	}
	waitLog(t, l, "running as pcp", Settle)
	waitCounting(t, l, "perfevent.hwcounters.context_switches.value", cpuNames(all)...)
	recs := logger.WaitRecords(t, metric, "record with cpu1 after it came back", func(recs []Record) bool {
		return regexp.MustCompile(`10+1`).MatchString(withCPU1(recs))
	})
	logger.Stop(t)
	seq := withCPU1(recs)
	t.Logf("pmlogger's records (1: with cpu1, 0: without): %s", seq)
	if !regexp.MustCompile(`^1+0+1+$`).MatchString(seq) {
		t.Errorf("pmlogger's records (1: with cpu1, 0: without): %q, want 1…0…1", seq)
	}
	if log := readFile(t, l.AgentLog); strings.Contains(log, "Error") || strings.Contains(log, "no kernel uevents") {
		t.Errorf("errors in the agent log, or no uevents as pcp:\n%s", tail(l.AgentLog, 30))
	}
}

// TestReloadRootOnlyConfig: the agent as pcp reloads a 0600 root config
// holding a tracepoint (tracefs is root's): the tracepoint keeps its values,
// a new software event is served, and a tracepoint new to the agent is
// refused with the reason and the remedy.
func TestReloadRootOnlyConfig(t *testing.T) {
	if _, err := os.Stat("/sys/kernel/tracing/events/sched/sched_switch/id"); err != nil {
		t.Skipf("needs tracefs at /sys/kernel/tracing with sched:sched_switch: %v", err)
	}
	l := StartLab(t, Agent{Go: true, Config: "[perf]\ncpu-clock\nsched:sched_switch\n"})
	waitLog(t, l, "running as ", Settle)
	const tp = "perfevent.hwcounters.sched_sched_switch.value"
	waitValuesMove(t, l, tp)

	writeFile(t, l.Conf, "[perf]\ncpu-clock\nsched:sched_switch\nsched:sched_wakeup\npage-faults\n")
	if err := os.Chmod(l.Conf, 0o600); err != nil {
		t.Fatal(err)
	}
	syscall.Kill(l.AgentPID(t), syscall.SIGHUP)
	waitLog(t, l, "reload done", Settle)
	waitValuesMove(t, l, tp)
	waitValues(t, l, "perfevent.hwcounters.page_faults.value")
	waitLog(t, l, `tracepoint sched:sched_wakeup is not resolvable after the privilege drop (/sys/kernel/tracing is readable by root only); restart the agent to add new tracepoints`, Settle)
	if log := readFile(t, l.AgentLog); strings.Contains(log, "no tracefs or debugfs is mounted") || strings.Contains(log, l.Conf+": permission denied") {
		t.Errorf("the reload could not read what start-up did:\n%s", tail(l.AgentLog, 30))
	}
}
