package qa

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// perfevent.ratio.context_switches_per_cpu_second, a ratio of two software
// counters read in one group per CPU, agrees per CPU with perf stat's own
// counts of context-switches and cpu-clock over the same 10 s, within 5 %.
// pmval is the client: its second fetch gives the ratio over the 10 s
// since its first.
func TestRatioAgreesWithPerfStat(t *testing.T) {
	l := StartLab(t, Agent{Go: true})
	perf, err := exec.LookPath("perf")
	if err != nil {
		unmet(t, "needs perf (linux-perf, installed by scripts/setup): %v", err)
	}
	const metric = "perfevent.ratio.context_switches_per_cpu_second"
	const allMetric = "perfevent.ratio.all.context_switches_per_cpu_second"

	// A steady source of context switches on every CPU, so that the two
	// windows, a few milliseconds apart, see the same rate.
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	for range onlineCPUs(t) {
		go func() {
			for ctx.Err() == nil {
				time.Sleep(200 * time.Microsecond)
			}
		}()
	}

	var wg sync.WaitGroup
	var ours, all, short Result
	wg.Add(3)
	go func() {
		defer wg.Done()
		ours = l.RunErr(t, "pmval", "-t", "10", "-s", "2", "-f", "4", "-w", "16", metric)
	}()
	go func() {
		defer wg.Done()
		all = l.RunErr(t, "pmval", "-t", "10", "-s", "2", "-f", "4", "-w", "16", allMetric)
	}()
	// Meanwhile another client at pmval's default pace: one value per CPU
	// from its second sample, and its fetches leave the first client's
	// 10 s interval alone.
	go func() {
		defer wg.Done()
		time.Sleep(2 * time.Second)
		short = l.RunErr(t, "pmval", "-t", "1", "-s", "3", "-f", "4", "-w", "16", metric)
	}()
	out, err := exec.Command(perf, "stat", "-a", "-A", "-x,", "-e", "context-switches,cpu-clock", "--", "sleep", "10").CombinedOutput()
	wg.Wait()
	if err != nil {
		t.Fatalf("perf stat: %v\n%s", err, out)
	}
	if ours.Err != nil {
		t.Fatalf("pmval:\n%s\n%s", ours, l.Logs())
	}
	if short.Err != nil {
		t.Fatalf("pmval -t 1:\n%s", short)
	}
	for name, v := range pmvalLast(t, short.Stdout) {
		if !(v > 0) {
			t.Errorf("pmval -t 1: %s = %v, want context switches", name, v)
		}
	}
	theirs, theirAll := perfStatRatios(t, string(out))
	if all.Err != nil {
		t.Fatalf("pmval:\n%s", all)
	}
	allLines := strings.Fields(all.Stdout)
	if v, err := strconv.ParseFloat(allLines[len(allLines)-1], 64); err != nil || math.Abs(v-theirAll) > 0.05*theirAll {
		t.Errorf("%s: %s, perf stat %.1f: more than 5 %% apart\n%s", allMetric, allLines[len(allLines)-1], theirAll, all.Stdout)
	} else {
		t.Logf("whole machine: ours %.1f, perf stat %.1f", v, theirAll)
	}
	got := pmvalLast(t, ours.Stdout)
	t.Logf("context switches per CPU second: ours %v, perf stat %v", got, theirs)
	if len(got) != len(onlineCPUs(t)) {
		t.Fatalf("pmval gave %d instances, want one per online CPU:\n%s", len(got), ours.Stdout)
	}
	for cpu, want := range theirs {
		v, ok := got["cpu"+cpu]
		if !ok {
			t.Errorf("no value for cpu%s:\n%s", cpu, ours.Stdout)
			continue
		}
		if math.Abs(v-want) > 0.05*want {
			t.Errorf("cpu%s: %.1f context switches per CPU second, perf stat %.1f: more than 5 %% apart", cpu, v, want)
		}
	}
}

// perfStatRatios turns perf stat -A -x, lines ("CPU0,12346,,context-switches,…"
// and "CPU0,995.26,msec,cpu-clock,…") into context switches per second of
// cpu-clock, by CPU number, and for the whole machine (Σ/Σ).
func perfStatRatios(t *testing.T, out string) (map[string]float64, float64) {
	t.Helper()
	cs, clk := map[string]float64{}, map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Split(sc.Text(), ",")
		if len(f) < 4 || !strings.HasPrefix(f[0], "CPU") {
			continue
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			t.Fatalf("perf stat line %q: %v", sc.Text(), err)
		}
		switch cpu := strings.TrimPrefix(f[0], "CPU"); f[3] {
		case "context-switches":
			cs[cpu] = v
		case "cpu-clock":
			clk[cpu] = v / 1e3 // msec
		}
	}
	r := map[string]float64{}
	var sumCS, sumClk float64
	for cpu, c := range cs {
		if clk[cpu] <= 0 {
			t.Fatalf("perf stat: no cpu-clock for CPU%s:\n%s", cpu, out)
		}
		r[cpu] = c / clk[cpu]
		sumCS += c
		sumClk += clk[cpu]
	}
	if len(r) == 0 {
		t.Fatalf("perf stat printed no per-CPU counts:\n%s", out)
	}
	return r, sumCS / sumClk
}

// pmvalLast reads pmval's last line of values by instance, from the line
// of instance names above it (pmval prints them above the first sample
// that has values).
func pmvalLast(t *testing.T, out string) map[string]float64 {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	var header, last []string
	for _, line := range lines {
		if f := strings.Fields(line); header == nil && len(f) > 0 && strings.HasPrefix(f[0], "cpu") {
			header = f
		}
	}
	if len(lines) > 0 {
		last = strings.Fields(lines[len(lines)-1])
	}
	if len(header) == 0 || len(last) != len(header) || !strings.HasPrefix(header[0], "cpu") {
		t.Fatalf("cannot read pmval's output:\n%s", out)
	}
	m := map[string]float64{}
	for j, name := range header {
		v, err := strconv.ParseFloat(last[j], 64)
		if err != nil {
			t.Fatalf("pmval value %q of %s: %v\n%s", last[j], name, err, out)
		}
		m[name] = v
	}
	return m
}

// The pmrep views that make install puts in $PCP_SYSCONF_DIR/pmrep work
// against the agent: on this machine at least the software ratio, per CPU
// and for the whole machine, from pmrep's second sample.
func TestRatioPmrepViews(t *testing.T) {
	l := StartLab(t, Agent{Go: true})
	for view, cols := range map[string]int{":perfevent-ratios": len(onlineCPUs(t)), ":perfevent-all": 1} {
		out := l.Run(t, "pmrep", "-c", "../install/pcp/pmrep-perfevent-go.conf", "-t", "1", "-s", "2", view)
		t.Logf("pmrep %s:\n%s", view, out)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		last := strings.Fields(lines[len(lines)-1])
		if !strings.Contains(out, "cs/cpu_s") || len(last) != 1+cols {
			t.Fatalf("pmrep %s: want a column of context switches per CPU second for each of %d instances:\n%s", view, cols, out)
		}
		for _, v := range last[1:] {
			if f, err := strconv.ParseFloat(v, 64); err != nil || !(f > 0) {
				t.Errorf("pmrep %s: value %q, want context switches per CPU second", view, v)
			}
		}
	}
}

// What PCP's own derived metrics (pminfo -c, pmval --derived) can make of
// the agent's counters, as docs/ratios.md records it for PCP 6.0.3: no
// ratio of two counters over an interval, per CPU or for the machine, so
// the agent computes them and no derived-metric file is shipped. Should a
// later PCP accept one of these, this test says so, and the note and the
// decision are due for a look.
func TestRatioDerivedMetricsPCP(t *testing.T) {
	l := StartLab(t, Agent{Go: true})
	conf := filepath.Join(t.TempDir(), "derived.conf")
	const cs, clk = "perfevent.hwcounters.context_switches.value", "perfevent.hwcounters.cpu_clock.value"
	writeFile(t, conf, strings.Join([]string{
		"qa.per_cpu = 1000000000 * delta(" + cs + ") / delta(" + clk + ")",
		"qa.sum_cs = sum(" + cs + ")",
		"qa.sum_clk = sum(" + clk + ")",
		"qa.all = 1000000000 * delta(qa.sum_cs) / delta(qa.sum_clk)",
		"qa.all_inline = 1000000000 * delta(sum(" + cs + ")) / delta(sum(" + clk + "))",
		"qa.cumulative = qa.sum_cs / qa.sum_clk",
		"qa.rate_of_sum = rate(qa.sum_cs)",
		"qa.scaled = 1000 * perfevent.ratio.context_switches_per_cpu_second",
	}, "\n")+"\n")
	for _, c := range []struct{ metric, want string }{
		// Each event has its own instance domain, as in the C agent.
		{"qa.per_cpu", "Operands should have the same instance domain"},
		// delta() and rate() take a metric's name, and fetch nothing
		// for a derived one.
		{"qa.all_inline", "Metric name expected to follow delta("},
		{"qa.all", "No PMCD agent for domain of request"},
		{"qa.rate_of_sum", "No PMCD agent for domain of request"},
		// Without delta(), a quotient of counters is refused.
		{"qa.cumulative", "Illegal operator for counters"},
	} {
		r := l.RunErr(t, "pmval", "--derived", conf, "-t", "0.5", "-s", "2", c.metric)
		if !strings.Contains(r.Stdout+r.Stderr, c.want) {
			t.Errorf("pmval %s: want PCP 6.0.3's %q, got:\n%s", c.metric, c.want, r)
		}
	}
	// Arithmetic on the agent's own ratios works.
	r := l.RunErr(t, "pmval", "--derived", conf, "-t", "0.5", "-s", "2", "qa.scaled")
	if got := pmvalLast(t, r.Stdout); r.Err != nil || len(got) != len(onlineCPUs(t)) {
		t.Errorf("pmval qa.scaled: want a value per CPU:\n%s", r)
	}
}

// Across a reload (SIGHUP) a client sampling a ratio every second sees a
// value at every sample: its first, and its first after the reload, get
// the agent's own interval (since the counters were opened, for the
// latter), the others the client's.
func TestRatioAcrossReload(t *testing.T) {
	l := StartLab(t, Agent{Go: true})
	out := filepath.Join(l.Dir, "pmval.out")
	cmd := l.Background(t, Cmd{Args: []string{"pmval", "-t", "1", "-s", "7", "-f", "2", "perfevent.ratio.all.context_switches_per_cpu_second"}}, out)
	samples := func() []string {
		data, _ := os.ReadFile(out)
		var s []string
		started := false
		for _, line := range strings.Split(string(data), "\n") {
			line = strings.TrimSpace(line)
			started = started || strings.HasPrefix(line, "interval:")
			if started && line != "" && !strings.HasPrefix(line, "interval:") {
				s = append(s, line)
			}
		}
		return s
	}
	waitFor(t, 10*time.Second, "pmval's third sample", func() bool { return len(samples()) >= 3 })
	if err := syscall.Kill(l.AgentPID(t), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLog(t, l, "reload done", Settle)
	cmd.Wait()
	got := samples()
	t.Logf("pmval across the reload:\n%s", strings.Join(got, "\n"))
	for _, s := range got {
		if v, err := strconv.ParseFloat(s, 64); err != nil || !(v > 0) {
			t.Errorf("pmval sample %q, want context switches per CPU second", s)
		}
	}
	if len(got) != 7 {
		t.Errorf("want 7 samples, each with a value")
	}
}

// A ratio over duration_time, the wall-clock time between a client's
// fetches, agrees with PCP's own rate conversion of the same counter in
// the same fetches: pmrep asks for both at once, so both cover the same
// interval (the agent's clock against pmcd's timestamps, microseconds
// apart), and the values agree per CPU and summed, within 1 %.
func TestRatioOverWallClock(t *testing.T) {
	l := StartLab(t, Agent{Go: true})
	writeFile(t, filepath.Join(filepath.Dir(l.Conf), "ratios.conf"),
		"cs_wall = context-switches / duration_time * 1e9 per-second\n")
	if err := syscall.Kill(l.AgentPID(t), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLog(t, l, "reload done", Settle)
	out := l.Run(t, "pmrep", "-o", "csv", "-t", "1", "-s", "4", "-P", "6",
		"perfevent.hwcounters.context_switches.value", "perfevent.ratio.cs_wall", "perfevent.ratio.all.cs_wall")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	header := strings.Split(lines[0], ",")
	last := strings.Split(lines[len(lines)-1], ",")
	if len(header) != len(last) {
		t.Fatalf("cannot read pmrep's output:\n%s", out)
	}
	col := map[string]float64{}
	for i, h := range header {
		if v, err := strconv.ParseFloat(last[i], 64); err == nil {
			col[strings.Trim(h, `"`)] = v
		}
	}
	t.Logf("pmrep:\n%s", out)
	var sum float64
	for _, cpu := range onlineCPUs(t) {
		rate, ours := col[fmt.Sprintf("perfevent.hwcounters.context_switches.value-cpu%d", cpu)], col[fmt.Sprintf("perfevent.ratio.cs_wall-cpu%d", cpu)]
		if !(rate > 0) || math.Abs(ours-rate) > 0.01*rate {
			t.Errorf("cpu%d: cs_wall %v, pmrep's rate of context_switches %v: more than 1 %% apart", cpu, ours, rate)
		}
		sum += rate
	}
	if all := col["perfevent.ratio.all.cs_wall"]; math.Abs(all-sum) > 0.01*sum {
		t.Errorf("all.cs_wall %v, the sum of the per-CPU rates %v: more than 1 %% apart", all, sum)
	}
}
