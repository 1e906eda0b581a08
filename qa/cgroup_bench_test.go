package qa

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// What per-cgroup counting costs, measured from outside the agent: the
// tax on a workload's context switches, and the agent's own cost while
// cgroups come and go. qa/bench/run runs both (BENCH_CGROUP=0 skips them);
// BENCHMARKS.md has the figures.

// taxConf is what both agents count system-wide in the tax benchmark, and
// the events cgroups.conf names per cgroup.
const taxConf = "[perf]\ncpu-clock\ncontext-switches\n"

// taxRow is one configuration the ping-pong runs under.
type taxRow struct {
	name  string
	key   string // for the summary lines
	agent string // "", "c" or "go"
	mode  string // per-cgroup counting mode, for cgroups.conf's keyword; "" for none
	n     int    // cgroups counted
	na    string // why the row cannot be measured, once known
	modes []string
	ns    []float64 // wall time of a round trip, per round
	ratio []float64 // per round, to the no-agent row of that round
	cpu   []float64 // CPU time of a round trip (both processes), per round
	cpuR  []float64 // the same to the no-agent row
	load  []float64
	other []float64 // other processes' share of all CPUs, %
}

// BenchmarkLabCgroupTax times a ping-pong between two processes in two
// cgroups, both pinned to one CPU (qa/pingpong: one byte each way through
// pipes, so every round trip is two context switches from one cgroup to
// the other), with no agent, with the C agent counting system-wide (it
// has no per-cgroup counting), with ours counting system-wide only, and
// with ours counting 10, 100 and 1,000 cgroups (the two of the ping-pong
// among them) in each per-cgroup mode. Rounds alternate the rows; each row
// gives the median of its rounds and of its per-round ratios to the no-agent
// row. A mode this agent's cgroups.conf does not know (BENCH_CGROUP_KEYWORD
// MODE, the line it is asked with) prints n/a with the reason.
//
//	go test ./qa -run '^$' -bench LabCgroupTax -benchtime 1x
//
// BENCH_CGROUP_ROUNDS (else BENCH_ROUNDS, else 5), BENCH_CGROUP_RUNS (3 runs
// of a row per round, the least kept), BENCH_CGROUP_TRIPS (50000 round trips per run),
// BENCH_CGROUP_COUNTS (10,100,1000), BENCH_CGROUP_MODES (perf,bpf) and
// BENCH_CGROUP_KEYWORD (counting) size it; BENCH_CGROUP_NICE (-20) is the
// ping-pong's nice value.
func BenchmarkLabCgroupTax(b *testing.B) {
	Direct(b)
	h := v2Hierarchy(b)
	pp := buildPingpong(b)
	rounds := envInt("BENCH_CGROUP_ROUNDS", envInt("BENCH_ROUNDS", 5))
	trips := envInt("BENCH_CGROUP_TRIPS", 50000)
	runs := envInt("BENCH_CGROUP_RUNS", 3)
	keyword := envString("BENCH_CGROUP_KEYWORD", "counting")
	var counts []int
	for _, s := range strings.Split(envString("BENCH_CGROUP_COUNTS", "10,100,1000"), ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 2 {
			b.Fatalf("BENCH_CGROUP_COUNTS: %q is not a number of cgroups of at least 2", s)
		}
		counts = append(counts, n)
	}
	// At nice -20 the ping-pong keeps its CPU against other processes'
	// load there: what is left is the switches' own cost.
	nice := -20
	if v := os.Getenv("BENCH_CGROUP_NICE"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			b.Fatalf("BENCH_CGROUP_NICE=%q: want a nice value", v)
		}
		nice = n
	}
	cpus := onlineCPUs(b)
	cpu := cpus[len(cpus)-1]

	// The two ping-pong cgroups, then the others, all at the top of a
	// private subtree; cgroups.conf puts the ping-pong's first, so that
	// "max N" counts them and N-2 others.
	top := fmt.Sprintf("perfevent-bench-tax-%d", os.Getpid())
	root := filepath.Join(h.Mount, top)
	b.Cleanup(func() { removeCgroups(b, root) })
	pingA, pingB := filepath.Join(root, "pp-a"), filepath.Join(root, "pp-b")
	for _, d := range []string{pingA, pingB} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	for i := 2; i < slices.Max(counts); i++ {
		if err := os.Mkdir(filepath.Join(root, fmt.Sprintf("n-%04d", i)), 0o755); err != nil {
			b.Fatal(err)
		}
	}
	cgroupsConf := func(mode string, n int) string {
		return fmt.Sprintf("%s %s\ncgroup /%s/pp-*\ncgroup /%s/n-*\nevent cpu-clock\nevent context-switches\nmax %d\n", keyword, mode, top, top, n)
	}

	rows := []*taxRow{
		{name: "no agent", key: "none"},
		{name: "C agent, system-wide (no per-cgroup counting)", key: "c", agent: "c"},
		{name: "ours, system-wide, no cgroups", key: "go", agent: "go"},
	}
	for _, m := range strings.Split(envString("BENCH_CGROUP_MODES", "perf,bpf"), ",") {
		for _, n := range counts {
			rows = append(rows, &taxRow{name: fmt.Sprintf("ours, %s mode, %d cgroups", m, n), key: fmt.Sprintf("%s_%d", m, n), agent: "go", mode: m, n: n})
		}
	}

	// run measures one row once: the agent started and counting, then the
	// ping-pong; the agent is stopped after.
	run := func(row *taxRow) (ns, cpuNS, load, other float64, mode string, na string) {
		var l *Lab
		if row.agent != "" {
			a := Agent{Go: row.agent == "go", Config: taxConf}
			if row.mode != "" {
				a.Cgroups = cgroupsConf(row.mode, row.n)
			}
			l = StartLab(b, a)
			defer l.stop()
			if row.mode != "" {
				if why := modeUnknown(b, l, keyword, row.mode); why != "" {
					return 0, 0, 0, 0, "", why
				}
				prefix := "/" + top + "/"
				waitFor(b, Settle, fmt.Sprintf("%d cgroups counted, the ping-pong's among them", row.n), func() bool {
					vals := cgroupValues(b, l, "perfevent.cgroup.cpu_clock.value")
					got := 0
					for p := range vals {
						if strings.HasPrefix(p, prefix) {
							got++
						}
					}
					_, a := vals[prefix+"pp-a"]
					_, bb := vals[prefix+"pp-b"]
					return got == row.n && a && bb
				})
				if mode = countingOf(b, l); mode == "" {
					out := l.Run(b, "pminfo", "-h", l.HostSpec(), "-f", "perfevent.cgroup.mode")
					if m := regexp.MustCompile(`value "([^"]*)"`).FindStringSubmatch(out); m != nil {
						mode = m[1]
					}
				}
			}
		}
		own := func() time.Duration {
			if l == nil {
				return 0
			}
			return procCPU(b, l.AgentPID(b)) + procCPU(b, l.PMCDPID())
		}
		if l != nil {
			// The agent's start-up over: no CPU for a while.
			pid := l.AgentPID(b)
			waitFor(b, Settle, "the agent to go idle after its start", func() bool {
				c0 := procCPU(b, pid)
				time.Sleep(300 * time.Millisecond) // the window watched
				return procCPU(b, pid) == c0
			})
		}
		// Each of runs gives a value; the round keeps the least: other
		// processes' load only ever adds to a run.
		ns, cpuNS = math.Inf(1), math.Inf(1)
		var busy, total float64
		for range runs {
			own0 := own()
			busy0, total0 := cpuJiffies(b)
			// The last CPU online now: another job may take one offline.
			cpus := onlineCPUs(b)
			cpu = cpus[len(cpus)-1]
			args := []string{pp, pingA, pingB, strconv.Itoa(cpu), strconv.Itoa(trips)}
			if nice != 0 {
				args = append([]string{"nice", "-n", strconv.Itoa(nice)}, args...)
			}
			out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
			busy1, total1 := cpuJiffies(b)
			own1 := own()
			if err != nil {
				b.Fatalf("pingpong: %v\n%s", err, out)
			}
			var wall, ppCPU float64
			if _, err := fmt.Sscanf(string(out), "ns_per_round_trip %g cpu_ns %g", &wall, &ppCPU); err != nil {
				b.Fatalf("pingpong printed %q: %v", out, err)
			}
			ns, cpuNS = min(ns, wall), min(cpuNS, ppCPU/float64(trips))
			// Jiffies are 1/100 s; everything busy that was not the
			// ping-pong, the agent or its pmcd.
			busy += float64(busy1-busy0)*1e7 - ppCPU - float64(own1-own0)
			total += float64(total1-total0) * 1e7
		}
		return ns, cpuNS, loadAvg(b), 100 * max(busy, 0) / total, mode, ""
	}

	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for r := 0; r < rounds; r++ {
			var none, noneCPU float64
			for _, row := range rows {
				if row.na != "" {
					continue
				}
				ns, cpuNS, load, other, mode, na := run(row)
				if na != "" {
					row.na = na
					continue
				}
				if row.key == "none" {
					none, noneCPU = ns, cpuNS
				}
				row.ns = append(row.ns, ns)
				row.ratio = append(row.ratio, ns/none)
				row.cpu = append(row.cpu, cpuNS)
				row.cpuR = append(row.cpuR, cpuNS/noneCPU)
				row.load = append(row.load, load)
				row.other = append(row.other, other)
				if mode != "" && !slices.Contains(row.modes, mode) {
					row.modes = append(row.modes, mode)
				}
			}
		}
	}
	b.StopTimer()

	fmt.Printf("\nper-cgroup counting's tax on a ping-pong across two cgroups on CPU %d at nice %d: %d rounds, the least of %d runs of %d round trips each\n", cpu, nice, rounds, runs, trips)
	fmt.Printf("(wall: the round trip's time; CPU: what both processes used for it, which other processes' load blurs less)\n")
	fmt.Printf("%-48s %-24s %-22s %-24s %-22s %-16s %-9s %s\n", "row", "wall ns (min-max)", "to no agent", "CPU ns (min-max)", "to no agent", "load", "other_cpu", "perfevent.cgroup.counting, else .mode")
	byKey := map[string]*taxRow{}
	for _, row := range rows {
		byKey[row.key] = row
		if row.na != "" {
			fmt.Printf("%-48s n/a: %s\n", row.name, row.na)
			continue
		}
		fmt.Printf("%-48s %-24s %-22s %-24s %-22s %-16s %-9s %s\n", row.name, medianSpread(row.ns, "%.0f"), medianSpread(row.ratio, "%.3f"),
			medianSpread(row.cpu, "%.0f"), medianSpread(row.cpuR, "%.3f"), medianSpread(row.load, "%.1f"), fmt.Sprintf("%.0f %%", median(row.other)), strings.Join(row.modes, "; "))
		b.ReportMetric(median(row.ns), "ns/trip-"+row.key)
	}
	fmt.Println("\nsummary:")
	for _, row := range rows {
		if row.na != "" {
			fmt.Printf("cgroup_tax_%s n/a (%s)\n", row.key, row.na)
			continue
		}
		for _, m := range []struct {
			what  string
			v, to []float64
		}{{"ns", row.ns, row.ratio}, {"cpu_ns", row.cpu, row.cpuR}} {
			line := fmt.Sprintf("cgroup_tax_%s_%s value=%.0f ratio=%.3f spread=%.3f-%.3f rounds=%d", row.key, m.what, median(m.v), median(m.to), slices.Min(m.to), slices.Max(m.to), len(m.v))
			if row.key == "bpf_1000" {
				line += " target<=1.02 " + verdict(m.to, 1.02)
			}
			fmt.Printf("%s load=%.1f other_cpu=%.0f%%\n", line, median(row.load), median(row.other))
		}
	}
	if bpf, perf := byKey["bpf_1000"], byKey["perf_1000"]; bpf != nil && perf != nil && bpf.na == "" && perf.na == "" {
		for _, m := range []struct {
			what      string
			bpf, perf []float64
		}{{"ns", bpf.ns, perf.ns}, {"cpu_ns", bpf.cpu, perf.cpu}} {
			var r []float64
			for i := range min(len(m.bpf), len(m.perf)) {
				r = append(r, m.bpf[i]/m.perf[i])
			}
			fmt.Printf("cgroup_tax_bpf_1000_to_perf_%s ratio=%.3f spread=%.3f-%.3f target<=1 %s\n", m.what, median(r), slices.Min(r), slices.Max(r), verdict(r, 1))
		}
	}
}

// BenchmarkLabCgroupChurn runs the agent with the shipped cgroups.conf on
// a Kubernetes-shaped node of 150 pods while cgroups are made under a QoS
// slice, BENCH_CGROUP_CHURN_RATE (1000) a second, each removed 0.1 s
// later, for BENCH_CGROUP_CHURN_SECONDS (30): the agent's CPU (utime +
// stime, % of a core) before and during the churn, its RSS before, during
// and after, perfalloc's confirmation (--verbose) every two seconds of it,
// and the agent's log lines about cgroups meanwhile. It does so once per
// mode of BENCH_CGROUP_CHURN_MODES (perf,bpf), set by cgroups.conf's
// BENCH_CGROUP_KEYWORD line; a mode the agent does not know prints n/a.
//
//	go test ./qa -run '^$' -bench LabCgroupChurn -benchtime 1x
func BenchmarkLabCgroupChurn(b *testing.B) {
	Direct(b)
	h := v2Hierarchy(b)
	rate := envInt("BENCH_CGROUP_CHURN_RATE", 1000)
	window := time.Duration(envInt("BENCH_CGROUP_CHURN_SECONDS", 30)) * time.Second
	keyword := envString("BENCH_CGROUP_KEYWORD", "counting")
	node := newK8sNode(b, h, fmt.Sprintf("perfevent-bench-churn-%d", os.Getpid()))
	node.grow(b, k8sPods)
	shipped, err := os.ReadFile("../cgroups.conf")
	if err != nil {
		b.Fatal(err)
	}
	modes := strings.Split(envString("BENCH_CGROUP_CHURN_MODES", "perf,bpf"), ",")
	var summary []string
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, mode := range modes {
			summary = append(summary, churnMode(b, node, withKeyword(string(shipped), keyword, mode), keyword, mode, rate, window)...)
		}
	}
	b.StopTimer()
	fmt.Println("\nsummary:")
	for _, line := range summary {
		fmt.Println(line)
	}
}

// churnMode is BenchmarkLabCgroupChurn in one counting mode: it prints
// what it measured and returns the summary lines.
func churnMode(b *testing.B, node *k8sNode, conf, keyword, mode string, rate int, window time.Duration) []string {
	l := StartLab(b, Agent{Go: true, Config: taxConf, Cgroups: conf})
	defer l.stop()
	if why := modeUnknown(b, l, keyword, mode); why != "" {
		fmt.Printf("\nper-cgroup counting under churn, %s mode: n/a: %s\n", mode, why)
		return []string{fmt.Sprintf("cgroup_churn_%s n/a (%s)", mode, why)}
	}
	const metric = "perfevent.cgroup.cpu_clock.value"
	waitFor(b, Settle, "the node's pods and containers as instances", func() bool {
		vals := cgroupValues(b, l, metric)
		for _, p := range node.all() {
			if _, ok := vals[p]; !ok {
				return false
			}
		}
		return true
	})
	counted := len(cgroupValues(b, l, metric))
	pa := perfallocBinary(b, l)
	pid := l.AgentPID(b)
	confirmRE := regexp.MustCompile(`after (\d+\.\d) ms`)
	confirm := func() (float64, bool) {
		r := l.Exec(Cmd{Args: []string{pa, "--verbose", "-f", l.Lock, "--", "true"}})
		if m := confirmRE.FindStringSubmatch(r.Stderr); m != nil {
			ms, _ := strconv.ParseFloat(m[1], 64)
			return ms, true
		}
		b.Logf("perfalloc: %s", r)
		return 0, false
	}
	var quiet []float64
	for range 5 {
		if ms, ok := confirm(); ok {
			quiet = append(quiet, ms)
		}
		time.Sleep(time.Second) // spaces the perfalloc runs, not a wait for a condition
	}
	idle0, idleStart := procCPU(b, pid), time.Now()
	time.Sleep(5 * time.Second) // the window measured, not a wait for a condition
	idle := float64(procCPU(b, pid)-idle0) / float64(time.Since(idleStart))

	lines := logCount(l, "cgroups:")
	logBefore := len(readLog(l))
	rss0, cpu0 := procRSS(b, pid), procCPU(b, pid)
	var mu sync.Mutex
	var churning []float64
	rssMax, tick := rss0, 0
	start := time.Now()
	made := churnCgroups(node.dir(node.base+"/kubepods-besteffort.slice"), rate, 100*time.Millisecond, window, func() {
		rss := procRSS(b, pid)
		mu.Lock()
		rssMax = max(rssMax, rss)
		tick++
		even := tick%2 == 0
		mu.Unlock()
		if even {
			if ms, ok := confirm(); ok {
				mu.Lock()
				churning = append(churning, ms)
				mu.Unlock()
			}
		}
	})
	wall := time.Since(start)
	used := procCPU(b, pid) - cpu0
	rss1 := procRSS(b, pid)
	time.Sleep(5 * time.Second) // what the agent keeps once the churn is over, not a wait for a condition
	rss2 := procRSS(b, pid)
	churnLog := readLog(l)[logBefore:]
	n := logCount(l, "cgroups:") - lines

	mu.Lock()
	defer mu.Unlock()
	cpuPct := 100 * used.Seconds() / wall.Seconds()
	says := ""
	if c := countingOf(b, l); c != "" {
		says = fmt.Sprintf(" (perfevent.cgroup.counting %q)", c)
	}
	fmt.Printf("\nper-cgroup counting under churn, %s mode%s: the shipped cgroups.conf, %d pods with a container each, %d cgroups counted, 2 events × %d CPUs each\n",
		mode, says, k8sPods, counted, len(onlineCPUs(b)))
	fmt.Printf("churn: %d cgroups made and removed in %v (%.0f a second), each living 0.1 s; load %.1f\n", made, wall.Round(time.Millisecond), float64(made)/wall.Seconds(), loadAvg(b))
	fmt.Printf("agent CPU: %.2f %% of a core during the churn (%.2f %% before it)\n", cpuPct, 100*idle)
	fmt.Printf("agent RSS: %d KiB before, at most %d during, %d at the end, %d 5 s after\n", rss0, rssMax, rss1, rss2)
	fmt.Printf("perfalloc's confirmation, ms: before the churn %s; during it %s\n", msList(quiet), msList(churning))
	fmt.Printf("the agent's own releases for perfalloc, as it logs them (all its counters, per-CPU and per-cgroup): before the churn %s; during it %s\n",
		strings.Join(releases(readLog(l)[:logBefore]), " "), strings.Join(releases(churnLog), " "))
	fmt.Printf("log lines about cgroups during the churn: %d\n", n)
	for _, line := range strings.Split(churnLog, "\n") {
		if strings.Contains(line, "cgroups:") {
			fmt.Printf("    %.200s\n", line)
		}
	}
	out := []string{
		fmt.Sprintf("cgroup_churn_%s_rate_per_s value=%.0f seconds=%.0f", mode, float64(made)/wall.Seconds(), wall.Seconds()),
		fmt.Sprintf("cgroup_churn_%s_cpu_pct value=%.2f idle=%.2f target<=5 %s", mode, cpuPct, 100*idle, verdict([]float64{cpuPct}, 5)),
		fmt.Sprintf("cgroup_churn_%s_rss_kb before=%d max=%d end=%d after=%d", mode, rss0, rssMax, rss1, rss2),
	}
	if len(churning) > 0 {
		out = append(out, fmt.Sprintf("cgroup_churn_%s_perfalloc_ms median=%.1f max=%.1f n=%d target<50 %s", mode, median(churning), slices.Max(churning), len(churning), verdict(churning, 50)))
	} else {
		out = append(out, fmt.Sprintf("cgroup_churn_%s_perfalloc_ms none confirmed during the churn MISS", mode))
	}
	out = append(out, fmt.Sprintf("cgroup_churn_%s_log_lines value=%d", mode, n))
	b.ReportMetric(cpuPct, "cpu%-"+mode)
	b.ReportMetric(float64(rss1), "rss-KiB-"+mode)
	return out
}

// withKeyword is cgroups.conf's text conf with its keyword line (such as
// "counting auto") set to mode, or the line added.
func withKeyword(conf, keyword, mode string) string {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(keyword) + `\s.*$`)
	if re.MatchString(conf) {
		return re.ReplaceAllString(conf, keyword+" "+mode)
	}
	return conf + "\n" + keyword + " " + mode + "\n"
}

// modeUnknown says why the lab's agent cannot count in mode, or "": its
// cgroups.conf has no such keyword (the perf mode, perf cgroup counters,
// is then the only one), or perfevent.cgroup.counting names another.
func modeUnknown(tb testing.TB, l *Lab, keyword, mode string) string {
	if strings.Contains(readLog(l), fmt.Sprintf("unknown keyword %q", keyword)) {
		if mode == "perf" {
			return ""
		}
		return fmt.Sprintf("this agent's cgroups.conf has no %q keyword, so no %s mode", keyword, mode)
	}
	if c := countingOf(tb, l); c != "" && c != mode && !strings.HasPrefix(c, mode+":") {
		return fmt.Sprintf("asked for %q, perfevent.cgroup.counting says %q", keyword+" "+mode, c)
	}
	return ""
}

// countingOf is perfevent.cgroup.counting's value, "" if the agent
// serves no such metric.
func countingOf(tb testing.TB, l *Lab) string {
	r := l.RunErr(tb, "pminfo", "-h", l.HostSpec(), "-f", "perfevent.cgroup.counting")
	if m := regexp.MustCompile(`value "([^"]*)"`).FindStringSubmatch(r.Stdout); r.Err == nil && m != nil {
		return m[1]
	}
	return ""
}

// releases are the times the agent's log gives its releases for perfalloc.
func releases(log string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`counters released for perfalloc \(holders .*?\) in ([0-9.]+[µm]?s):`).FindAllStringSubmatch(log, -1) {
		out = append(out, m[1])
	}
	return out
}

// buildPingpong compiles qa/pingpong/pingpong.c.
func buildPingpong(tb testing.TB) string {
	tb.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		unmet(tb, "gcc is not installed (scripts/setup installs it)")
	}
	bin := filepath.Join(tb.TempDir(), "pingpong")
	if out, err := exec.Command("gcc", "-O2", "-Wall", "-o", bin, "pingpong/pingpong.c").CombinedOutput(); err != nil {
		tb.Fatalf("building qa/pingpong: %v\n%s", err, out)
	}
	return bin
}

func envString(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func readLog(l *Lab) string {
	b, _ := os.ReadFile(l.AgentLog)
	return string(b)
}

// cpuJiffies is the busy and total time of all CPUs, from /proc/stat.
func cpuJiffies(tb testing.TB) (busy, total uint64) {
	tb.Helper()
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		tb.Fatal(err)
	}
	f := strings.Fields(strings.SplitN(string(b), "\n", 2)[0])
	for i, s := range f[1:] {
		v, _ := strconv.ParseUint(s, 10, 64)
		if i >= 8 { // guest and guest_nice are within user and nice
			break
		}
		total += v
		if i != 3 && i != 4 { // idle, iowait
			busy += v
		}
	}
	return busy, total
}

// loadAvg is the 1-minute load average.
func loadAvg(tb testing.TB) float64 {
	tb.Helper()
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		tb.Fatal(err)
	}
	v, _ := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
	return v
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func medianSpread(v []float64, f string) string {
	return fmt.Sprintf(f+" ("+f+"-"+f+")", median(v), slices.Min(v), slices.Max(v))
}

// verdict is qa/bench's: ok when every value meets the target (≤), MISS
// when none does, NOISY when the spread straddles it, with the median's
// verdict in brackets.
func verdict(v []float64, target float64) string {
	meet := 0
	for _, x := range v {
		if x <= target {
			meet++
		}
	}
	switch {
	case meet == len(v):
		return "ok"
	case meet == 0:
		return "MISS"
	case median(v) <= target:
		return "NOISY(median ok)"
	}
	return "NOISY(median MISS)"
}

func msList(v []float64) string {
	if len(v) == 0 {
		return "none"
	}
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.FormatFloat(x, 'f', 1, 64)
	}
	return fmt.Sprintf("%s (median %.1f, max %.1f)", strings.Join(s, " "), median(v), slices.Max(v))
}
