package qa

import (
	"encoding/csv"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestCompareWithCAgent runs PCP's C agent and ours side by side, each
// under its own lab pmcd with the same perfevent.conf (VMConfig), and
// compares what PCP's clients see: the metric table with descriptors,
// help and labels (pminfo -md -tT -l), the instances and values
// (pminfo -f), and rates over a second (pmrep).
//
// The differences it accepts are exactly these; any other fails it.
//
//  1. InDom numbers. Compared instead: which metrics share an InDom (a
//     .value and its .dutycycle do), and PM_INDOM_NULL or not. PMIDs are
//     compared (compareLabs): ours, told the C agent's configuration
//     (Agent.CLayout), gives every name of the C agent's its PMID.
//  2. Metrics that only the C agent lists, without values: it makes a
//     metric of every event of a [dynamic] PMU (software.*, msr.*) and
//     leaves those not configured empty. Ours serves those names too,
//     empty, when it knows the C agent's configuration; a lab without
//     it may lack them. Such a metric must have no value under the C
//     agent.
//  3. Long help (pminfo -T): ours says more (the configuration line, the
//     event, how the value is made). Ours must have one; the one-line
//     help (-t) must match the C agent's exactly.
//  4. The value of perfevent.version ("1.0.1" against ours).
//  5. The domain label "agent": the C agent takes it from its argv[0],
//     which the lab makes pmdaperfevent-lab-c ("perfevent-lab-c");
//     installed as pmdaperfevent it says "perfevent", as ours always does
//     (the C agent hands its program name to pmdaDaemon, which labels
//     the domain with it less the "pmda" prefix). Ours is checked to be
//     "perfevent"; the C one is mapped back before the comparison.
//  6. The order in which pminfo lists the names (each agent's namespace
//     traversal order); the comparison is by name.
//  7. Instance ids: ours are CPU numbers, the C agent's are indexes into
//     its CPU list. They coincide when CPUs 0..n-1 are all online (then
//     they are compared); otherwise only the names are.
//  8. Counter values: each agent counts from its own start, so the raw
//     numbers differ; compared instead are rates (cpu_clock and
//     task_clock about 1e9 ns/s per CPU in both, msr.tsc the same rate in
//     both), dutycycle (1 on both, no multiplexing of software events),
//     perfevent.active and perfevent.derived.active (equal), and the
//     derived rate against the sum of its parts, in each.
//  9. perfevent.ratio.*: ratios of counters read in one group,
//     which only ours serves; each must have its long help.
func TestCompareWithCAgent(t *testing.T) {
	goLab := StartLab(t, Agent{Go: true, Config: VMConfig, CLayout: true})
	cLab := StartLab(t, Agent{Go: false, Config: VMConfig})
	cpus := onlineCPUs(t)

	compareLabs(t, cLab, goLab, cpus)

	t.Run("rates", func(t *testing.T) {
		compareRates(t, goLab, cLab, cpus)
	})

	// What perfalloc does, to both at once: each must report 0 active
	// counters and serve the values it had, unchanged, until the lock
	// goes, then count again.
	t.Run("reservation", func(t *testing.T) {
		labs := map[string]*Lab{"C": cLab, "ours": goLab}
		probe := func(l *Lab) (active string, clock []string) {
			out := l.Run(t, "pmprobe", "-v", "perfevent.active", "perfevent.hwcounters.cpu_clock.value")
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				f := strings.Fields(line)
				switch {
				case len(f) == 3 && f[0] == "perfevent.active":
					active = f[2]
				case len(f) > 2 && f[0] == "perfevent.hwcounters.cpu_clock.value":
					clock = f[2:]
				}
			}
			return active, clock
		}
		var unlock []func()
		for _, l := range labs {
			unlock = append(unlock, l.ReadLock(t))
		}
		held := map[string][]string{}
		for name, l := range labs {
			waitFor(t, Settle, name+": perfevent.active 0 under a read lock", func() bool {
				a, _ := probe(l)
				return a == "0"
			})
			_, held[name] = probe(l)
		}
		time.Sleep(300 * time.Millisecond)
		for name, l := range labs {
			a, clock := probe(l)
			if a != "0" || strings.Join(clock, " ") != strings.Join(held[name], " ") || len(clock) != len(cpus) {
				t.Errorf("%s under a read lock: active %s, cpu_clock %v then %v; want 0 and the same %d values", name, a, held[name], clock, len(cpus))
			}
		}
		for _, u := range unlock {
			u()
		}
		for name, l := range labs {
			waitFor(t, Settle, name+": counting again after the lock went", func() bool {
				a, clock := probe(l)
				return a == strconv.Itoa(12*len(cpus)) && strings.Join(clock, " ") != strings.Join(held[name], " ")
			})
		}
	})
}

// compareLabs compares what pminfo shows of the two agents and fails
// the test on each difference beyond the accepted ones.
func compareLabs(t *testing.T, cLab, goLab *Lab, cpus []int) {
	t.Helper()
	info := []string{"-md", "-tT", "-l", "perfevent"}
	c := view{
		meta: parseMetadata(t, cLabelsAsInstalled(cLab.Run(t, "pminfo", info...))),
		vals: parseValues(t, cLab.Run(t, "pminfo", "-f", "perfevent")),
	}
	g := view{
		meta: parseMetadata(t, goLab.Run(t, "pminfo", info...)),
		vals: parseValues(t, goLab.Run(t, "pminfo", "-f", "perfevent")),
	}
	diffs, cOnly := compareViews(c, g, cpus)
	if goLab.Agent.CLayout {
		for name, m := range c.meta {
			if gm := g.meta[name]; gm == nil || gm.pmid != m.pmid {
				diffs = append(diffs, fmt.Sprintf("%s: PMID %s under the C agent, ours %v", name, m.pmid, gm))
			}
		}
	}
	if len(diffs) > 0 {
		t.Errorf("the C agent and ours differ (beyond the accepted differences listed in TestCompareWithCAgent):\n\t%s",
			strings.Join(diffs, "\n\t"))
	}
	t.Logf("compared %d metrics; only the C agent lists, without values: %s", len(g.meta), strings.Join(cOnly, " "))
}

// With -C both agents use the names of PCP before 3.10.8 (only ':'
// becomes '-', so perfevent.hwcounters.cpu-clock.value); the comparison
// is the same.
func TestCompareWithCAgentCompatNames(t *testing.T) {
	goLab := StartLab(t, Agent{Go: true, Config: VMConfig, Args: []string{"-C"}, CLayout: true})
	cLab := StartLab(t, Agent{Go: false, Config: VMConfig, Args: []string{"-C"}})
	compareLabs(t, cLab, goLab, onlineCPUs(t))
	for _, l := range []*Lab{cLab, goLab} {
		if r := l.RunErr(t, "pminfo", "perfevent.hwcounters.cpu-clock.value"); r.Err != nil {
			t.Errorf("-C: no perfevent.hwcounters.cpu-clock.value:\n%s", r)
		}
	}
}

// view is what the clients show of one agent.
type view struct {
	meta map[string]*metadata
	vals map[string]fetched
}

// compareViews lists the differences between the C agent's view and
// ours beyond the accepted ones, and the metrics that only the C agent
// lists (accepted difference 2).
func compareViews(cv, gv view, cpus []int) (diffs, cOnly []string) {
	compareIDs := true // (7)
	for i, c := range cpus {
		compareIDs = compareIDs && c == i
	}
	diff := func(format string, args ...any) { diffs = append(diffs, fmt.Sprintf(format, args...)) }

	names := map[string]bool{}
	for n := range gv.meta {
		names[n] = true
	}
	for n := range cv.meta {
		names[n] = true
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted) // (6)

	dynamicEvent := regexp.MustCompile(`^perfevent\.hwcounters\.[a-z0-9_-]+\.[a-z0-9_-]+\.(value|dutycycle)$`)
	indomMap := map[string]string{} // C InDom -> ours (1)
	for _, n := range sorted {
		g, c := gv.meta[n], cv.meta[n]
		switch {
		case c == nil && strings.HasPrefix(n, "perfevent.ratio."): // (9)
			if g.longHelp == "" || strings.Contains(g.longHelp, "Error") {
				diff("%s: ours has no long help: %q", n, g.longHelp)
			}
			continue
		case c == nil:
			diff("%s: only ours has it", n)
			continue
		case g == nil:
			if dynamicEvent.MatchString(n) && len(cv.vals[n].insts) == 0 && !cv.vals[n].single { // (2)
				cOnly = append(cOnly, n)
				continue
			}
			diff("%s: only the C agent has it (with values %v, or not a [dynamic] event)", n, cv.vals[n])
			continue
		}
		if g.oneLine != c.oneLine {
			diff("%s: one-line help: C %q, ours %q", n, c.oneLine, g.oneLine)
		}
		if g.longHelp == "" || strings.Contains(g.longHelp, "Error") { // (3)
			diff("%s: ours has no long help: %q", n, g.longHelp)
		}
		if g.dataType != c.dataType {
			diff("%s: %q, C %q", n, g.dataType, c.dataType)
		}
		if g.semantics != c.semantics {
			diff("%s: %q, C %q", n, g.semantics, c.semantics)
		}
		if (g.indom == "PM_INDOM_NULL") != (c.indom == "PM_INDOM_NULL") {
			diff("%s: InDom: C %s, ours %s", n, c.indom, g.indom)
		} else if m, ok := indomMap[c.indom]; ok && m != g.indom {
			diff("%s: InDom: the C agent shares %s with another metric, ours has %s there and %s here", n, c.indom, m, g.indom)
		} else {
			indomMap[c.indom] = g.indom
		}
		if g.labels != c.labels {
			diff("%s: labels:\n\t    C %s\n\t ours %s", n, c.labels, g.labels)
		}
		if !strings.Contains(g.labels, `"agent":"perfevent",`) { // (5)
			diff("%s: ours has no domain label agent=perfevent: %s", n, g.labels)
		}
		if a, b := strings.Join(instLabels(c.instLabels, compareIDs), "\n\t"), strings.Join(instLabels(g.instLabels, compareIDs), "\n\t"); a != b {
			diff("%s: instance labels:\n\t    C %s\n\t ours %s", n, a, b)
		}

		gf, cf := gv.vals[n], cv.vals[n]
		if a, b := instNames(cf.insts, compareIDs), instNames(gf.insts, compareIDs); a != b || gf.single != cf.single {
			diff("%s: instances with values: C %s (single %v), ours %s (single %v)", n, a, cf.single, b, gf.single)
		}
		switch {
		case n == "perfevent.version": // (4)
			if !strings.HasPrefix(gf.value, `"`) || !strings.HasPrefix(cf.value, `"`) {
				diff("%s: want a string from both: C %s, ours %s", n, cf.value, gf.value)
			}
		case n == "perfevent.active" || n == "perfevent.derived.active":
			if gf.value != cf.value {
				diff("%s: C %s, ours %s", n, cf.value, gf.value)
			}
		case strings.HasSuffix(n, ".dutycycle"):
			for _, v := range append(values(gf.insts), values(cf.insts)...) {
				if f, err := strconv.ParseFloat(v, 64); err != nil || f < 0.99 || f > 1 {
					diff("%s: dutycycle %q, want 1 in both agents: C %v, ours %v", n, v, cf.insts, gf.insts)
					break
				}
			}
		}
	}
	// Values both agents must show, whatever the comparison above says.
	want := strconv.Itoa(12 * len(cpus)) // VMConfig: 12 counters per CPU
	for agent, vals := range map[string]map[string]fetched{"C": cv.vals, "ours": gv.vals} {
		if got := vals["perfevent.active"].value; got != want {
			diff("perfevent.active: %s %q, want %s (12 counters × %d CPUs)", agent, got, want, len(cpus))
		}
		if got := vals["perfevent.derived.active"].value; got != "1" {
			diff("perfevent.derived.active: %s %q, want 1", agent, got)
		}
		if _, ok := vals["perfevent.hwcounters.cycles.value"]; ok {
			diff("perfevent.hwcounters.cycles.value: %s has it, but cycles cannot count on this VM", agent)
		}
	}

	return diffs, cOnly
}

// cLabelsAsInstalled maps the C agent's domain label back to what it
// says when it runs as pmdaperfevent (accepted difference 5).
func cLabelsAsInstalled(out string) string {
	return strings.ReplaceAll(out, `"agent":"perfevent-lab-c"`, `"agent":"perfevent"`)
}

// metadata is one metric of `pminfo -md -tT -l`.
type metadata struct {
	pmid, oneLine, longHelp string
	dataType                string // "Data Type: ..." without the InDom
	indom                   string // "127.3" or "PM_INDOM_NULL"
	semantics               string // "Semantics: ...  Units: ..."
	labels                  string
	instLabels              []string // `inst [0 or "cpu0"] labels {...}`
}

var (
	metaHead  = regexp.MustCompile(`^(perfevent\.\S+) PMID: (\S+) (?:\[(.*)\]|One-line Help: (.*))$`)
	metaDesc  = regexp.MustCompile(`^    (Data Type: .*)  InDom: (\S+) 0x[0-9a-f]+$`)
	metaInst  = regexp.MustCompile(`^    (inst \[.*\] labels .*)$`)
	valueLine = regexp.MustCompile(`^    (?:inst \[(\d+) or "([^"]*)"\] )?value (.*)$`)
	instLabel = regexp.MustCompile(`^inst \[(\d+) or ("[^"]*")\] labels (.*)$`)
)

func parseMetadata(t *testing.T, out string) map[string]*metadata {
	t.Helper()
	all := map[string]*metadata{}
	var m *metadata
	inHelp := false
	for _, line := range strings.Split(out, "\n") {
		if h := metaHead.FindStringSubmatch(line); h != nil {
			m = &metadata{pmid: h[2], oneLine: h[3]}
			if h[4] != "" {
				m.oneLine = "ERROR: " + h[4]
			}
			all[h[1]] = m
			inHelp = false
			continue
		}
		if m == nil {
			if strings.TrimSpace(line) != "" {
				t.Fatalf("pminfo -md -tT -l: unexpected line %q before the first metric:\n%s", line, out)
			}
			continue
		}
		switch d := metaDesc.FindStringSubmatch(line); {
		case d != nil:
			m.dataType, m.indom = d[1], d[2]
		case strings.HasPrefix(line, "    Semantics: "):
			m.semantics = strings.TrimSpace(line)
		case strings.HasPrefix(line, "    labels "):
			m.labels = strings.TrimPrefix(line, "    labels ")
		case metaInst.MatchString(line):
			m.instLabels = append(m.instLabels, metaInst.FindStringSubmatch(line)[1])
			inHelp = false
		case line == "Help:":
			inHelp = true
		case strings.HasPrefix(line, "Full Help: "):
			m.longHelp = "ERROR: " + strings.TrimPrefix(line, "Full Help: ")
		case inHelp:
			m.longHelp = strings.TrimSpace(m.longHelp + "\n" + line)
		case strings.TrimSpace(line) != "":
			t.Fatalf("pminfo -md -tT -l: unexpected line %q:\n%s", line, out)
		}
	}
	if len(all) == 0 {
		t.Fatalf("pminfo -md -tT -l: no metrics:\n%s", out)
	}
	return all
}

// fetched is one metric of `pminfo -f`.
type fetched struct {
	single bool   // a value without instances
	value  string // of a single value
	insts  []inst
}

type inst struct {
	id    int
	name  string
	value string
}

func (f fetched) String() string {
	if f.single {
		return f.value
	}
	return fmt.Sprint(f.insts)
}

func parseValues(t *testing.T, out string) map[string]fetched {
	t.Helper()
	all := map[string]fetched{}
	name := ""
	for _, line := range strings.Split(out, "\n") {
		switch v := valueLine.FindStringSubmatch(line); {
		case strings.HasPrefix(line, "perfevent."):
			name = line
			all[name] = fetched{}
		case v != nil && name != "":
			f := all[name]
			if v[1] == "" {
				f.single, f.value = true, v[3]
			} else {
				id, _ := strconv.Atoi(v[1])
				f.insts = append(f.insts, inst{id, v[2], v[3]})
			}
			all[name] = f
		case line == "No value(s) available!" || strings.TrimSpace(line) == "":
		default:
			t.Fatalf("pminfo -f: unexpected line %q:\n%s", line, out)
		}
	}
	return all
}

func instNames(insts []inst, ids bool) string {
	var s []string
	for _, i := range insts {
		if ids {
			s = append(s, fmt.Sprintf("%d:%s", i.id, i.name))
		} else {
			s = append(s, i.name)
		}
	}
	sort.Strings(s)
	return strings.Join(s, " ")
}

func values(insts []inst) []string {
	var s []string
	for _, i := range insts {
		s = append(s, i.value)
	}
	return s
}

// instLabels drops the instance ids when they are not to be compared
// (accepted difference 7).
func instLabels(lines []string, ids bool) []string {
	var s []string
	for _, l := range lines {
		if m := instLabel.FindStringSubmatch(l); m != nil && !ids {
			l = m[2] + " " + m[3]
		}
		s = append(s, l)
	}
	sort.Strings(s)
	return s
}

// rateMetrics are sampled by pmrep from both agents over one second.
var rateMetrics = []string{
	"perfevent.active",
	"perfevent.hwcounters.cpu_clock.value",
	"perfevent.hwcounters.task_clock.value",
	"perfevent.hwcounters.software.cpu_clock.value",
	"perfevent.hwcounters.software.task_clock.value",
	"perfevent.hwcounters.msr.tsc.value",
	"perfevent.hwcounters.page_faults.value",
	"perfevent.hwcounters.context_switches.value",
	"perfevent.derived.sw_faults_cs.value",
}

// sampleRates runs pmrep for two samples a second apart and returns the
// second row (rates for counters), keyed by pmrep's column names
// ("perfevent.hwcounters.cpu_clock.value-cpu0", "perfevent.active").
func sampleRates(l *Lab, metrics []string) (map[string]float64, error) {
	args := append([]string{"-h", l.HostSpec(), "-t", "1", "-s", "2", "-o", "csv"}, metrics...)
	r := l.Exec(Cmd{Args: append([]string{"pmrep"}, args...)})
	if r.Err != nil {
		return nil, fmt.Errorf("%s\n%s", r, l.Logs())
	}
	rows, err := csv.NewReader(strings.NewReader(r.Stdout)).ReadAll()
	if err != nil || len(rows) != 3 {
		return nil, fmt.Errorf("pmrep -o csv: want a header and 2 rows (%v):\n%s", err, r)
	}
	out := map[string]float64{}
	for i, col := range rows[0][1:] {
		v, err := strconv.ParseFloat(rows[2][i+1], 64)
		if err != nil {
			return nil, fmt.Errorf("pmrep -o csv: column %s: %q: %v\n%s", col, rows[2][i+1], err, r)
		}
		out[col] = v
	}
	return out, nil
}

// compareRates checks rates from both agents. pmrep divides by the
// interval between pmcd's timestamps, which on a loaded machine can be a
// fifth away from the interval between the agent's reads (seen with both
// agents, at a load of 13 on 2 CPUs: cpu_clock and msr.tsc both 0.83 of
// their rate). So rates are checked against each other within one
// fetch, where that skew cancels, and cpu_clock against the test's own
// clock.
func compareRates(t *testing.T, goLab, cLab *Lab, cpus []int) {
	type sample struct {
		rates map[string]float64
		err   error
	}
	goCh, cCh := make(chan sample), make(chan sample)
	// At the same time, so that both see the same second of the machine.
	go func() { r, err := sampleRates(goLab, rateMetrics); goCh <- sample{r, err} }()
	go func() { r, err := sampleRates(cLab, rateMetrics); cCh <- sample{r, err} }()
	gs, cs := <-goCh, <-cCh
	for _, s := range []sample{gs, cs} {
		if s.err != nil {
			t.Fatal(s.err)
		}
	}
	tsc := map[string]map[int]float64{}
	for agent, r := range map[string]map[string]float64{"C": cs.rates, "ours": gs.rates} {
		if got, want := r["perfevent.active"], float64(12*len(cpus)); got != want {
			t.Errorf("%s: perfevent.active %v, want %v", agent, got, want)
		}
		tsc[agent] = map[int]float64{}
		for _, cpu := range cpus {
			at := fmt.Sprintf("-cpu%d", cpu)
			// System-wide per-CPU clocks count wall-clock nanoseconds,
			// idle or not.
			clock := r["perfevent.hwcounters.cpu_clock.value"+at]
			if clock < 0.5e9 || clock > 1.5e9 {
				t.Errorf("%s: cpu_clock on cpu%d = %v/s, want about 1e9 ns/s", agent, cpu, clock)
				continue
			}
			for _, other := range []string{"task_clock", "software.cpu_clock", "software.task_clock"} {
				col := "perfevent.hwcounters." + other + ".value" + at
				// Read in the same fetch, but an agent preempted between
				// the two reads of one fetch skews them by its delay
				// over the second: 5% leaves room for 50 ms.
				if v, ok := r[col]; !ok || math.Abs(v/clock-1) > 0.05 {
					t.Errorf("%s: %s = %v/s, want cpu_clock's %v/s", agent, col, v, clock)
				}
			}
			tsc[agent][cpu] = r["perfevent.hwcounters.msr.tsc.value"+at] / clock
			pf := r["perfevent.hwcounters.page_faults.value"+at]
			cs := r["perfevent.hwcounters.context_switches.value"+at]
			derived, ok := r["perfevent.derived.sw_faults_cs.value"+at]
			if !ok || math.Abs(derived-(pf+cs)) > 0.02*(pf+cs)+20 {
				t.Errorf("%s: derived sw_faults_cs on cpu%d = %v/s, want page_faults %v + context_switches %v", agent, cpu, derived, pf, cs)
			}
			if cs <= 0 {
				t.Errorf("%s: context_switches on cpu%d = %v/s, want some", agent, cpu, cs)
			}
		}
	}
	for _, cpu := range cpus {
		// TSC ticks per nanosecond: the TSC's frequency in GHz.
		g, c := tsc["ours"][cpu], tsc["C"][cpu]
		if c <= 0 || math.Abs(g/c-1) > 0.05 {
			t.Errorf("msr.tsc/cpu_clock on cpu%d: C %.4f GHz, ours %.4f GHz; want the same TSC frequency", cpu, c, g)
		}
	}

	// cpu_clock between two fetches a second apart, against the time
	// that passed between the requests (at least) and around them (at
	// most).
	type reading struct {
		clock         []float64
		before, after time.Time
	}
	read := func(l *Lab) reading {
		before := time.Now()
		r := l.Exec(Cmd{Args: []string{"pmprobe", "-v", "perfevent.hwcounters.cpu_clock.value"}})
		after := time.Now()
		f := strings.Fields(r.Stdout)
		if r.Err != nil || len(f) != 2+len(cpus) || f[1] != strconv.Itoa(len(cpus)) {
			t.Fatalf("pmprobe: want %d values of cpu_clock:\n%s", len(cpus), r)
		}
		var v []float64
		for _, s := range f[2:] {
			x, err := strconv.ParseFloat(s, 64)
			if err != nil {
				t.Fatalf("pmprobe: %q: %v", s, err)
			}
			v = append(v, x)
		}
		return reading{v, before, after}
	}
	labs := map[string]*Lab{"C": cLab, "ours": goLab}
	first := map[string]reading{}
	for name, l := range labs {
		first[name] = read(l)
	}
	time.Sleep(time.Second)
	for name, l := range labs {
		a, b := first[name], read(l)
		lo, hi := 0.98*float64(b.before.Sub(a.after)), 1.02*float64(b.after.Sub(a.before))
		for i := range cpus {
			if d := b.clock[i] - a.clock[i]; d < lo || d > hi {
				t.Errorf("%s: cpu_clock on cpu%d went up %.0f ns, want between %.0f and %.0f by the test's clock", name, cpus[i], d, lo, hi)
			}
		}
	}
}

// The comparison itself must notice what it is there for; canned
// pminfo output, trimmed from a real run, stands in for the agents.
func TestCompareViewsCatches(t *testing.T) {
	const labels = `{"agent":"perfevent","device_type":"cpu","hostname":"vm","indom_name":"per cpu"}`
	meta := func(help, pmid, indom, dutyType string) string {
		return `
perfevent.active PMID: 127.0.1 [The number of active counters.]
    Data Type: 32-bit int  InDom: PM_INDOM_NULL 0xffffffff
    Semantics: discrete  Units: none
    labels {"agent":"perfevent","hostname":"vm"}
Help:
` + help + `

perfevent.hwcounters.cpu_clock.value PMID: 127.` + pmid + `.0 [The values of the counter]
    Data Type: 64-bit int  InDom: 127.` + indom + ` 0x1fc00000
    Semantics: counter  Units: count
    labels ` + labels + `
Help:
` + help + `

A second paragraph.
    inst [0 or "cpu0"] labels {"cpu":0}

perfevent.hwcounters.cpu_clock.dutycycle PMID: 127.` + pmid + `.1 [The ratio of the time that the hardware counter was enabled to the total run time]
    Data Type: ` + dutyType + `  InDom: 127.` + indom + ` 0x1fc00000
    Semantics: instant  Units: none
    labels ` + labels + `
Help:
` + help + `
    inst [0 or "cpu0"] labels {"cpu":0}
`
	}
	const vals = `
perfevent.active
    value 12

perfevent.derived.active
    value 1

perfevent.hwcounters.cpu_clock.value
    inst [0 or "cpu0"] value 301861394

perfevent.hwcounters.cpu_clock.dutycycle
    inst [0 or "cpu0"] value 1
`
	const emptyDynamic = `
perfevent.hwcounters.software.alignment_faults.value PMID: 127.10.0 [The values of the counter]
    Data Type: 64-bit int  InDom: 127.8 0x1fc00008
    Semantics: counter  Units: count
    labels ` + labels + `
Help:
The values of the counter
`
	c := view{parseMetadata(t, meta("The values of the counter", "8", "6", "double")+emptyDynamic),
		parseValues(t, vals+"\nperfevent.hwcounters.software.alignment_faults.value\nNo value(s) available!\n")}
	cpus := []int{0}
	for _, tc := range []struct {
		name     string
		meta     string
		vals     string
		wantDiff string // "" for none
	}{
		{"accepted differences only", meta("Longer help.", "2", "0", "double"), vals, ""},
		{"data type", meta("Longer help.", "2", "0", "float"), vals, `perfevent.hwcounters.cpu_clock.dutycycle: "Data Type: float", C "Data Type: double"`},
		{"no long help", meta("", "2", "0", "double"), vals, "ours has no long help"},
		{"InDom not shared", strings.Replace(meta("Help.", "2", "0", "double"), "InDom: 127.0 ", "InDom: 127.5 ", 1), vals, "InDom: the C agent shares 127.6"},
		{"active", meta("Help.", "2", "0", "double"), strings.Replace(vals, "value 12", "value 11", 1), "perfevent.active: C 12, ours 11"},
		{"instances", meta("Help.", "2", "0", "double"), strings.Replace(vals, `[0 or "cpu0"] value 301861394`, `[1 or "cpu0"] value 301861394`, 1), "instances with values: C 0:cpu0 (single false), ours 1:cpu0"},
		{"dutycycle", meta("Help.", "2", "0", "double"), strings.Replace(vals, `"cpu0"] value 1`, `"cpu0"] value 0.5`, 1), `dutycycle "0.5"`},
		{"labels", strings.Replace(meta("Help.", "2", "0", "double"), `"indom_name":"per cpu"`, `"indom_name":"cpus"`, 1), vals, "labels:"},
		{"extra metric", meta("Help.", "2", "0", "double") + strings.Replace(emptyDynamic, "alignment", "emulation", 1), vals, "emulation_faults.value: only ours has it"},
	} {
		g := view{parseMetadata(t, tc.meta), parseValues(t, tc.vals)}
		diffs, cOnly := compareViews(c, g, cpus)
		if len(cOnly) != 1 || cOnly[0] != "perfevent.hwcounters.software.alignment_faults.value" {
			t.Errorf("%s: C-only metrics %q, want the empty [dynamic] one", tc.name, cOnly)
		}
		got := strings.Join(diffs, "\n")
		if tc.wantDiff == "" && got != "" || tc.wantDiff != "" && !strings.Contains(got, tc.wantDiff) {
			t.Errorf("%s: differences\n%s\nwant one containing %q", tc.name, got, tc.wantDiff)
		}
	}
}

// A difference the README promises, held to: a derived section after
// [dynamic] is ignored by the C agent 6.0.3 and served by ours.
func TestCompareDerivedAfterDynamic(t *testing.T) {
	const conf = `[perf]
page-faults
context-switches

[dynamic]
software.cpu-clock

[late:derived]
page-faults
context-switches
`
	goLab := StartLab(t, Agent{Go: true, Config: conf, CLayout: true})
	cLab := StartLab(t, Agent{Go: false, Config: conf})
	for _, tc := range []struct {
		name string
		l    *Lab
		want string
	}{{"C", cLab, "0"}, {"ours", goLab, "1"}} {
		out := tc.l.Run(t, "pmprobe", "-v", "perfevent.derived.active")
		if got := strings.TrimSpace(out); got != "perfevent.derived.active 1 "+tc.want {
			t.Errorf("%s: %q, want %s derived metric(s)", tc.name, got, tc.want)
		}
		r := tc.l.RunErr(t, "pminfo", "perfevent.derived.late.value")
		if has := r.Err == nil; has != (tc.want == "1") {
			t.Errorf("%s: perfevent.derived.late.value known: %v, want %v:\n%s", tc.name, has, tc.want == "1", r)
		}
	}
}
