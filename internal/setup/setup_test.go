package setup

import (
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"perfevent/internal/config"
	"perfevent/internal/config/configtest"
	"perfevent/internal/cpulist"
	"perfevent/internal/hostfs"
	"perfevent/internal/pmu"
)

// fixture returns a machine from internal/pmu's sysfs trees, which were
// taken from real machines.
func fixture(t *testing.T, name string) Machine {
	t.Helper()
	root := "../pmu/testdata/" + name
	fs := &pmu.FS{FS: hostfs.FS{Sys: root + "/sys", Proc: root + "/proc"}, Tracing: []string{root + "/tracing"}}
	m, err := ReadMachine(fs)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func plan(t *testing.T, m Machine, conf string) *Plan {
	t.Helper()
	f, err := config.Parse("test.conf", []byte(conf))
	return Make(f, err, m, false)
}

func notes(p *Plan) string {
	var b strings.Builder
	for _, n := range p.Notes {
		sev := "info   "
		if n.Severity == Problem {
			sev = "PROBLEM"
		}
		b.WriteString(sev + " " + n.String() + "\n")
	}
	return b.String()
}

// vmConf is configtest's, with metrics of the dynamic PMUs the "vm"
// fixture has.
const vmConf = configtest.VMConf + `
[dynamic]
msr.tsc
software.page-faults
`

func TestPlanOnVM(t *testing.T) {
	m := fixture(t, "vm")
	p := plan(t, m, vmConf)
	if p.Section == nil || p.Section.Header() != "[perf]" {
		t.Fatalf("section = %v\n%s", p.Section, notes(p))
	}
	var got []string
	for _, c := range p.Counters {
		got = append(got, c.Metric+"@"+cpulist.Format(c.CPUs))
	}
	want := "cpu_clock@0-1 cycles@0-1 page_faults@1 sched_sched_switch@0-1 RAW_r1@0-1 msr.tsc@0-1 software.page_faults@0-1"
	if strings.Join(got, " ") != want {
		t.Errorf("counters:\n got %s\nwant %s", strings.Join(got, " "), want)
	}

	attr := func(metric string) unix.PerfEventAttr {
		for _, c := range p.Counters {
			if c.Metric == metric {
				return c.Event.Attr
			}
		}
		t.Fatalf("no counter %s", metric)
		return unix.PerfEventAttr{}
	}
	if a := attr("cpu_clock"); a.Type != unix.PERF_TYPE_SOFTWARE || a.Config != unix.PERF_COUNT_SW_CPU_CLOCK {
		t.Errorf("cpu-clock attr type %d config %d", a.Type, a.Config)
	}
	if a := attr("sched_sched_switch"); a.Type != unix.PERF_TYPE_TRACEPOINT || a.Config != 312 {
		t.Errorf("tracepoint attr type %d config %d", a.Type, a.Config)
	}
	if a := attr("RAW_r1"); a.Type != unix.PERF_TYPE_RAW || a.Config != 0x1234 {
		t.Errorf("raw attr type %d config %#x", a.Type, a.Config)
	}

	text := notes(p)
	for _, line := range []string{
		"info    test.conf:2: [hsw] skipped: no PMU named hsw on this machine",
		"info    test.conf:5: [perf] chosen: PMU perf is present",
		"PROBLEM test.conf:9: event \"no-such-event\": not an event of the libpfm4 PMUs found here",
	} {
		if !strings.Contains(text, line) {
			t.Errorf("notes lack %q:\n%s", line, text)
		}
	}
	if p.Problems() != 1 {
		t.Errorf("Problems() = %d, want 1 (the unknown event)\n%s", p.Problems(), text)
	}
}

func TestPlanUncoreUsesCPUMask(t *testing.T) {
	m := fixture(t, "skylake")
	p := plan(t, m, "[dynamic]\nuncore_imc_0.cas_count_read\nuncore_imc_0.clockticks 3\n")
	if len(p.Counters) != 2 {
		t.Fatalf("counters %+v\n%s", p.Counters, notes(p))
	}
	if got := cpulist.Format(p.Counters[0].CPUs); got != "0,18" {
		t.Errorf("cas_count_read on %s, want the cpumask 0,18", got)
	}
	if got := cpulist.Format(p.Counters[1].CPUs); got != "3" {
		t.Errorf("an explicit CPU index overrides the cpumask: got %s", got)
	}
	if c := p.Counters[0]; c.Event.Scale != 6.103515625e-5 || c.Event.Unit != "MiB" {
		t.Errorf("scale %g unit %q", c.Event.Scale, c.Event.Unit)
	}
}

func TestPlanConfigErrorsAndCollisions(t *testing.T) {
	m := fixture(t, "vm")
	p := plan(t, m, "[perf]\ncpu-clock\ncpu-clock cpux\npage-faults 7\nRAW:a-b rawcode=0x1\nRAW:a_b rawcode=0x2\n")
	text := notes(p)
	for _, line := range []string{
		"PROBLEM test.conf:3: ",
		"PROBLEM test.conf:6: RAW:a_b: metric perfevent.hwcounters.RAW_a_b is already defined at line 5; line skipped",
		"PROBLEM test.conf:4: page-faults: CPU index 7 is out of range: this machine has 2 online CPUs (0-1), so the index must be 0 to 1; line skipped",
	} {
		if !strings.Contains(text, line) {
			t.Errorf("notes lack %q:\n%s", line, text)
		}
	}
	if len(p.Counters) != 2 || p.Counters[0].Metric != "cpu_clock" || p.Counters[1].Metric != "RAW_a_b" {
		t.Errorf("counters %+v", p.Counters)
	}
}

func TestPlanWithoutConfig(t *testing.T) {
	p := Make(nil, config.ErrorList{}, fixture(t, "vm"), false)
	if len(p.Counters) != 0 || p.Problems() != 0 {
		t.Errorf("%+v", p)
	}
}

func TestPlanDynamicPMUAbsentIsInfo(t *testing.T) {
	p := plan(t, fixture(t, "vm"), "[dynamic]\npower.energy-pkg\nmsr.no-such-event\n")
	text := notes(p)
	if !strings.Contains(text, "info    test.conf:2: power.energy-pkg: this machine has no PMU power; line skipped\n") {
		t.Errorf("absent PMU not noted as info:\n%s", text)
	}
	// A PMU that exists but lacks the event is a mistake in the config.
	if !strings.Contains(text, "PROBLEM test.conf:3: event \"msr.no-such-event\": PMU msr has no event no-such-event") || p.Problems() != 1 {
		t.Errorf("missing event not a problem:\n%s", text)
	}
}

// Each online CPU's socket comes from its topology; a tree without it
// gives none, and the plan passes them on for the instances' labels.
func TestReadMachineSockets(t *testing.T) {
	m := fixture(t, "snbep")
	if len(m.Sockets) != 32 {
		t.Errorf("snbep: %d CPUs with a socket, want 32", len(m.Sockets))
	}
	for cpu, want := range map[int]int{0: 0, 7: 0, 8: 1, 15: 1, 16: 0, 24: 1, 31: 1} {
		if got, ok := m.Sockets[cpu]; !ok || got != want {
			t.Errorf("snbep cpu%d: socket %d, %v; want %d", cpu, got, ok, want)
		}
	}
	if p := plan(t, m, "[perf]\ncpu-clock\n"); p.Sockets[8] != 1 {
		t.Errorf("the plan's sockets %v; want cpu8 on socket 1", p.Sockets)
	}
	if m := fixture(t, "vm"); len(m.Sockets) != 0 {
		t.Errorf("vm, which has no topology directory: sockets %v", m.Sockets)
	}
}

// WithOperands makes a new plan; the one it is given stays as it was, so
// that whoever holds it sees what setup made.
func TestWithOperandsLeavesThePlan(t *testing.T) {
	p := plan(t, fixture(t, "vm"), "[perf]\ncpu-clock\n")
	before := len(p.Notes)
	q := p.WithOperands([]Operand{{Term: "page-faults", For: []string{"faults"}}, {Term: "no-such-event", For: []string{"none"}}},
		Note{Text: "catalog: chosen"})
	if len(p.Counters) != 1 || len(p.Notes) != before {
		t.Errorf("the plan changed: %d counters, %d notes (was 1, %d)", len(p.Counters), len(p.Notes), before)
	}
	if len(q.Counters) != 2 || q.Counters[1].Event.Name != "page-faults" || q.Counters[1].For != "for perfevent.ratio.faults" {
		t.Errorf("the new plan's counters: %+v", q.Counters)
	}
	text := notes(q)
	if len(q.Notes) != before+2 || !strings.Contains(text, "info    catalog: chosen\n") ||
		!strings.Contains(text, "info    catalog: no-such-event: ") {
		t.Errorf("the new plan's notes:\n%s", text)
	}
	// The names the first new plan took are not taken in the plan.
	if r := p.WithOperands([]Operand{{Term: "page-faults", For: []string{"again"}}}); len(r.Counters) != 2 {
		t.Errorf("a second plan from p: %+v", r.Counters)
	}
}
