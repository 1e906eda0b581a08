package catalog_test

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"perfevent/internal/catalog"
	"perfevent/internal/catalog/intelmetrics"
	"perfevent/internal/ratio"
)

// intelCounts are one interval's counts by Intel's event names, and its
// constants, for evaluating Intel's formulas and the catalog's alike: the
// PERF_METRICS fields add up to the slots, as the kernel reports them.
var intelCounts = map[string]float64{
	"CPU_CLK_UNHALTED.THREAD": 1000, "INST_RETIRED.ANY": 1500,
	"CPU_CLK_UNHALTED.REF_TSC": 800, "TSC": 2000,
	"IDQ_UOPS_NOT_DELIVERED.CORE": 800, "UOPS_ISSUED.ANY": 2600, "UOPS_RETIRED.RETIRE_SLOTS": 2000, "INT_MISC.RECOVERY_CYCLES": 50,
	"IDQ_UOPS_NOT_DELIVERED.CYCLES_0_UOPS_DELIV.CORE": 300,
	"BR_MISP_RETIRED.ALL_BRANCHES":                    30, "MACHINE_CLEARS.COUNT": 10,
	"CYCLE_ACTIVITY.STALLS_MEM_ANY": 300, "EXE_ACTIVITY.BOUND_ON_STORES": 100, "CYCLE_ACTIVITY.STALLS_TOTAL": 450,
	"EXE_ACTIVITY.1_PORTS_UTIL": 200, "EXE_ACTIVITY.2_PORTS_UTIL": 100,
	"L1D.REPLACEMENT": 45, "MEM_LOAD_RETIRED.L3_MISS": 3,
	"TOPDOWN.SLOTS:perf_metrics": 10000, "PERF_METRICS.FRONTEND_BOUND": 2000, "PERF_METRICS.BAD_SPECULATION": 1000,
	"PERF_METRICS.RETIRING": 4000, "PERF_METRICS.BACKEND_BOUND": 3000,
	"PERF_METRICS.HEAVY_OPERATIONS": 1000, "PERF_METRICS.BRANCH_MISPREDICTS": 600, "PERF_METRICS.FETCH_LATENCY": 1500, "PERF_METRICS.MEMORY_BOUND": 1800,
	"INT_MISC.UOP_DROPPING": 100, "INT_MISC.CLEARS_COUNT": 40,
	"UNC_M_CAS_COUNT.RD": 1e6, "UNC_M_CAS_COUNT.WR": 5e5,
	"UNC_M_CAS_COUNT_SCH0.RD": 1e6, "UNC_M_CAS_COUNT_SCH1.RD": 5e5, "UNC_M_CAS_COUNT_SCH0.WR": 2.5e5, "UNC_M_CAS_COUNT_SCH1.WR": 1e5,
	// Constants: the catalog takes Intel's formulas with SMT off.
	"HYPERTHREADING_ON": 0, "THREADS_PER_CORE": 1, "SYSTEM_TSC_FREQ": 2.5e9, "DURATIONTIMEINSECONDS": 2,
}

// intelEvent is Intel's name of a catalog operand: the first of its
// alternatives that names one. libpfm4's EVENT:UMASK is Intel's
// EVENT.UMASK; the kernel's names, and APERF, MPERF and the TSC (which
// count what Intel's thread, reference and TSC clocks do), are listed.
func intelEvent(term string) (string, bool) {
	named := map[string]string{
		"cycles": "CPU_CLK_UNHALTED.THREAD", "CPU_CLK_UNHALTED:THREAD_P": "CPU_CLK_UNHALTED.THREAD",
		"instructions": "INST_RETIRED.ANY", "INST_RETIRED:ANY_P": "INST_RETIRED.ANY",
		"IDQ_UOPS_NOT_DELIVERED:CYCLES_0_UOPS_DELIV_CORE": "IDQ_UOPS_NOT_DELIVERED.CYCLES_0_UOPS_DELIV.CORE",
		"cpu.slots": "TOPDOWN.SLOTS:perf_metrics", "cpu.topdown-fe-bound": "PERF_METRICS.FRONTEND_BOUND",
		"cpu.topdown-bad-spec": "PERF_METRICS.BAD_SPECULATION", "cpu.topdown-retiring": "PERF_METRICS.RETIRING",
		"cpu.topdown-be-bound": "PERF_METRICS.BACKEND_BOUND", "cpu.topdown-heavy-ops": "PERF_METRICS.HEAVY_OPERATIONS",
		"cpu.topdown-br-mispredict": "PERF_METRICS.BRANCH_MISPREDICTS", "cpu.topdown-fetch-lat": "PERF_METRICS.FETCH_LATENCY",
		"cpu.topdown-mem-bound":       "PERF_METRICS.MEMORY_BOUND",
		"uncore_imc_*.cas_count_read": "UNC_M_CAS_COUNT.RD", "uncore_imc_*.cas_count_write": "UNC_M_CAS_COUNT.WR",
		"uncore_imc_*/event=0x05,umask=0xcf/": "UNC_M_CAS_COUNT_SCH0.RD", "uncore_imc_*/event=0x06,umask=0xcf/": "UNC_M_CAS_COUNT_SCH1.RD",
		"uncore_imc_*/event=0x05,umask=0xf0/": "UNC_M_CAS_COUNT_SCH0.WR", "uncore_imc_*/event=0x06,umask=0xf0/": "UNC_M_CAS_COUNT_SCH1.WR",
		"msr.aperf": "CPU_CLK_UNHALTED.THREAD", "msr.mperf": "CPU_CLK_UNHALTED.REF_TSC", "msr.tsc": "TSC",
	}
	for _, alt := range catalog.Alternatives(term) {
		if _, ev, ok := strings.Cut(alt, "::"); ok {
			alt = ev // a PMU-spelled copy of an event
		}
		if n, ok := named[alt]; ok {
			return n, true
		}
		if ev, umask, ok := strings.Cut(alt, ":"); ok && !strings.ContainsAny(alt, "./=") && !strings.Contains(umask, ":") {
			return ev + "." + umask, true
		}
	}
	return "", false
}

// vsIntel is, for each catalog metric, Intel's metric of the same
// meaning and what turns Intel's value into the catalog's unit; an empty
// name where Intel's file has no such metric.
func vsIntel(name string) (intel string, conv func(float64) float64) {
	same := func(v float64) float64 { return v }
	switch name {
	case "ipc":
		return "Info_Thread_IPC", same
	case "mem_read_bandwidth", "mem_write_bandwidth", "mem_bandwidth":
		// MB/s, the catalog bytes/s.
		intel := map[string]string{"mem_read_bandwidth": "memory_bandwidth_read", "mem_write_bandwidth": "memory_bandwidth_write", "mem_bandwidth": "memory_bandwidth_total"}
		return intel[name], func(v float64) float64 { return v * 1e6 }
	case "l1d_mpki": // per instruction
		return "l1d_mpi", func(v float64) float64 { return v * 1000 }
	case "llc_mpki":
		return "Info_Memory_L3MPKI", same
	case "branch_mpki": // instructions per mispredict
		return "Info_Bad_Spec_IpMispredict", func(v float64) float64 { return 1000 / v }
	case "busy_share": // percent
		return "cpu_utilization", func(v float64) float64 { return v / 100 }
	case "frequency_relative": // GHz
		return "cpu_operating_frequency", func(v float64) float64 { return v * 1e9 / intelCounts["SYSTEM_TSC_FREQ"] }
	case "frequency_average_hz", "energy_package_watts", "energy_dram_watts", "energy_cores_watts":
		return "", nil
	}
	if tma, ok := strings.CutPrefix(name, "topdown_"); ok { // percent of slots
		words := strings.Split(tma, "_")
		for i, w := range words {
			words[i] = strings.ToUpper(w[:1]) + w[1:]
		}
		return strings.Join(words, "_"), func(v float64) float64 { return v / 100 }
	}
	return "", nil
}

// TestIntelFormulasAgree: on each Intel family, every catalog metric that
// Intel's perfmon metrics define gives, on the same counts, the value of
// Intel's own formula (intelmetrics, generated from perfmon). The
// deliberate differences: Intel's formulas are taken with SMT off (a
// thread's own clocks); Ice Lake and later divide the PERF_METRICS fields
// by their sum where the catalog divides by cpu.slots, which the kernel
// makes equal; Intel's max(0, …) clamps do not act on these counts; and
// Intel's units (percent, MB/s, per instruction, GHz) are converted.
func TestIntelFormulasAgree(t *testing.T) {
	for _, tc := range []struct{ pmu, dir string }{{"skx", "SKX"}, {"icx", "ICX"}, {"spr", "SPR"}, {"gnr", "GNR"}} {
		fam := catalog.Detect([]string{tc.pmu})
		compared := 0
		for _, d := range fam.Metrics {
			name, conv := vsIntel(d.Name)
			if name == "" {
				continue
			}
			m := intelmetrics.Find(tc.dir, name)
			if m == nil {
				t.Errorf("%s: %s: Intel's %s is not in intelmetrics", fam.Name, d.Name, name)
				continue
			}
			theirs, err := evalIntel(m)
			if err != nil {
				t.Errorf("%s: %s: %v", fam.Name, name, err)
				continue
			}
			ours, err := evalCatalog(d)
			if err != nil {
				t.Errorf("%s: %s: %v", fam.Name, d.Name, err)
				continue
			}
			if want := conv(theirs); math.Abs(ours-want) > 1e-9*math.Max(1, math.Abs(want)) {
				t.Errorf("%s: %s = %s = %g; Intel's %s = %s gives %g", fam.Name, d.Name, d.Formula(), ours, name, m.Formula, want)
			}
			compared++
		}
		if compared < 10 {
			t.Errorf("%s: only %d metrics compared with Intel's", fam.Name, compared)
		}
	}
}

// evalCatalog is d over intelCounts.
func evalCatalog(d ratio.Def) (float64, error) {
	var err error
	count := func(term string) float64 {
		n, ok := intelEvent(term)
		v, have := intelCounts[n]
		if !ok || !have {
			err = fmt.Errorf("no count for operand %s (Intel's %q)", term, n)
		}
		return v
	}
	if c := d.Compound; c != nil {
		poly := func(ps []ratio.Product) float64 {
			var sum float64
			for _, p := range ps {
				v := p.C
				for _, f := range p.Factors {
					var l float64
					for _, t := range f {
						l += t.W * count(t.Op)
					}
					v *= l
				}
				sum += v
			}
			return sum
		}
		return d.Scale * poly(c.Num) / poly(c.Den), err
	}
	var num float64
	for j, term := range d.Num {
		w := 1.0
		if j < len(d.Weights) {
			w = d.Weights[j]
		}
		if d.Bytes {
			w *= ratio.BytesPerCAS
		}
		num += w * count(term)
	}
	den := intelCounts["DURATIONTIMEINSECONDS"] * 1e9
	if d.Den != ratio.Elapsed {
		den = count(d.Den)
	}
	return d.Scale * num / den, err
}

// evalIntel is Intel's formula of m over intelCounts.
func evalIntel(m *intelmetrics.Metric) (float64, error) {
	p := &parser{toks: tokens(m.Formula), vars: func(id string) (float64, error) {
		name, ok := m.Events[id]
		if !ok {
			name, ok = m.Constants[id]
		}
		if !ok {
			name = id // DURATIONTIMEINSECONDS is written out
		}
		v, ok := intelCounts[name]
		if !ok {
			return 0, fmt.Errorf("no count for %s (%s)", id, name)
		}
		return v, nil
	}}
	v, err := p.expr(true)
	if err == nil && p.i < len(p.toks) {
		err = fmt.Errorf("%q: trailing %q", m.Formula, p.toks[p.i:])
	}
	return v, err
}

func tokens(s string) []string {
	var out []string
	for i := 0; i < len(s); {
		c := rune(s[i])
		switch {
		case unicode.IsSpace(c):
			i++
		case unicode.IsLetter(c) || c == '_' || unicode.IsDigit(c) || c == '.':
			j := i
			for j < len(s) && (unicode.IsLetter(rune(s[j])) || unicode.IsDigit(rune(s[j])) || s[j] == '_' || s[j] == '.') {
				j++
			}
			out = append(out, s[i:j])
			i = j
		default:
			out = append(out, s[i:i+1])
			i++
		}
	}
	return out
}

// parser evaluates Intel's formulas: numbers, aliases, + - * /,
// parentheses, max and min, and Python's "x if cond else y". With live
// false it only parses, so the branch not taken needs no counts.
type parser struct {
	toks []string
	i    int
	vars func(string) (float64, error)
}

func (p *parser) peek() string {
	if p.i < len(p.toks) {
		return p.toks[p.i]
	}
	return ""
}

func (p *parser) expect(tok string) error {
	if p.peek() != tok {
		return fmt.Errorf("want %q at %q", tok, p.toks[min(p.i, len(p.toks)):])
	}
	p.i++
	return nil
}

func (p *parser) expr(live bool) (float64, error) {
	// The value before "if" is only taken when the condition holds: it
	// is parsed first, and evaluated once the condition is known.
	start := p.i
	if _, err := p.sum(false); err != nil || p.peek() != "if" {
		p.i = start
		return p.sum(live)
	}
	p.i++
	cond, err := p.sum(live)
	if err == nil {
		err = p.expect("else")
	}
	if err != nil {
		return 0, err
	}
	w, err := p.expr(live && cond == 0)
	if err != nil || !live || cond == 0 {
		return w, err
	}
	after := p.i
	p.i = start
	v, err := p.sum(true)
	p.i = after
	return v, err
}

func (p *parser) sum(live bool) (float64, error) {
	v, err := p.product(live)
	for err == nil && (p.peek() == "+" || p.peek() == "-") {
		op := p.peek()
		p.i++
		var w float64
		w, err = p.product(live)
		if op == "+" {
			v += w
		} else {
			v -= w
		}
	}
	return v, err
}

func (p *parser) product(live bool) (float64, error) {
	v, err := p.unary(live)
	for err == nil && (p.peek() == "*" || p.peek() == "/") {
		op := p.peek()
		p.i++
		var w float64
		w, err = p.unary(live)
		if op == "*" {
			v *= w
		} else if live {
			v /= w
		}
	}
	return v, err
}

func (p *parser) unary(live bool) (float64, error) {
	if p.peek() == "-" {
		p.i++
		v, err := p.unary(live)
		return -v, err
	}
	tok := p.peek()
	p.i++
	switch {
	case tok == "(":
		v, err := p.expr(live)
		if err == nil {
			err = p.expect(")")
		}
		return v, err
	case tok == "max" || tok == "min":
		if err := p.expect("("); err != nil {
			return 0, err
		}
		a, err := p.expr(live)
		if err == nil {
			err = p.expect(",")
		}
		var b float64
		if err == nil {
			b, err = p.expr(live)
		}
		if err == nil {
			err = p.expect(")")
		}
		if tok == "max" {
			return math.Max(a, b), err
		}
		return math.Min(a, b), err
	case tok != "" && (unicode.IsDigit(rune(tok[0])) || tok[0] == '.'):
		return strconv.ParseFloat(tok, 64)
	case tok != "" && (unicode.IsLetter(rune(tok[0])) || tok[0] == '_'):
		if !live {
			return 0, nil
		}
		return p.vars(tok)
	}
	return 0, fmt.Errorf("unexpected %q", tok)
}
