package setup

import (
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"perfevent/internal/config"
	"perfevent/internal/counter"
	"perfevent/internal/counter/countertest"
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

const vmConf = `# a VM: no core PMU, so [hsw] cannot be chosen
[hsw]
UNHALTED_CORE_CYCLES

[perf]
cpu-clock
cycles
page-faults 1
no-such-event
sched:sched_switch
RAW:r1 rawcode=0x1234

[ipc:derived]
instructions
cycles 2
||
cpu-clock

[faults:derived]
page-faults
cpu-clock

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

	// Open on a fake kernel without a hardware PMU: cycles is refused the
	// way a VM refuses it, and the derived metrics adapt.
	fake := countertest.New()
	fake.FailOpen("cycles", countertest.AnyCPU, unix.ENOENT)
	fake.FailOpen("instructions", countertest.AnyCPU, unix.ENOENT)
	set, err := counter.New(p.Specs(), counter.Config{Opener: fake})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := set.Open()
	if err != nil {
		t.Fatal(err)
	}
	p.Opened(set, sum)
	derived := p.AddDerived(set, m.PMU)
	text = notes(p)

	for _, c := range p.Counters {
		if c.Metric == "cycles" {
			t.Error("cycles is still planned after failing to open")
		}
	}
	for _, line := range []string{
		"info    test.conf:6: cpu-clock: libpfm4 perf::PERF_COUNT_SW_CPU_CLOCK:u=1:k=1:excl=0:mg=0:mh=1: type 1 config 0x0 exclude hv,guest -> perfevent.hwcounters.cpu_clock, on cpus 0-1\n",
		"info    test.conf:7: cycles: libpfm4 perf::PERF_COUNT_HW_CPU_CYCLES:u=1:k=1:h=0:precise=0:excl=0:mg=0:mh=1: type 0 config 0x0 exclude hv,guest -> perfevent.hwcounters.cycles; cannot count on cpus 0-1: not supported on this machine (e.g. a VM without a hardware PMU) (ENOENT); skipped\n",
		"info    test.conf:8: page-faults: libpfm4 perf::PERF_COUNT_SW_PAGE_FAULTS:u=1:k=1:excl=0:mg=0:mh=1: type 1 config 0x2 exclude hv,guest -> perfevent.hwcounters.page_faults, on cpu1\n",
		"info    test.conf:10: sched:sched_switch: tracepoint sched/sched_switch id 312: type 2 config 0x138 exclude hv,guest -> perfevent.hwcounters.sched_sched_switch, on cpus 0-1\n",
	} {
		if !strings.Contains(text, line) {
			t.Errorf("notes lack %q:\n%s", line, text)
		}
	}
	if strings.Count(text, "test.conf:7:") != 1 {
		t.Errorf("want one note for the cycles line:\n%s", text)
	}
	// ipc falls back to its second group; faults has members on
	// different CPUs, which the C agent also refuses.
	if len(derived) != 1 || derived[0].Metric != "ipc" {
		t.Fatalf("derived = %+v\n%s", derived, text)
	}
	if !strings.Contains(text, "info    test.conf:13: [ipc:derived]: perfevent.derived.ipc.value = cpu-clock × 1 (group at line 17)") {
		t.Errorf("no note for ipc:\n%s", text)
	}
	if !strings.Contains(text, "PROBLEM test.conf:19: derived metric faults is unavailable") {
		t.Errorf("no problem for faults:\n%s", text)
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

func TestOpenedPartialFailureIsAProblem(t *testing.T) {
	m := fixture(t, "vm")
	p := plan(t, m, "[perf]\ncpu-clock\n")
	fake := countertest.New()
	fake.FailOpen("cpu-clock", 0, unix.EACCES)
	text := openWith(t, p, fake)
	want := "PROBLEM test.conf:2: cpu-clock: libpfm4 perf::PERF_COUNT_SW_CPU_CLOCK:u=1:k=1:excl=0:mg=0:mh=1: type 1 config 0x0 exclude hv,guest -> perfevent.hwcounters.cpu_clock; cannot count on cpu0: permission denied"
	if !strings.Contains(text, want) || !strings.Contains(text, "(EACCES); counting on cpu1\n") {
		t.Errorf("notes lack %q … counting on cpu1:\n%s", want, text)
	}
	if len(p.Counters) != 1 || cpulist.Format(p.Counters[0].CPUs) != "1" {
		t.Errorf("counters %+v", p.Counters)
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

// TestCheckShowsLibpfm4: what --check prints of a libpfm4 name, on a
// machine whose kernel refuses it: libpfm4's full name, the encoding, the
// exclude bits and the metric; an uncore event counts on its PMU's cpumask.
func TestCheckShowsLibpfm4(t *testing.T) {
	p := plan(t, fixture(t, "snbep"), "[snb_ep]\nMEM_LOAD_UOPS_RETIRED:L1_HIT\nsnbep_unc_imc0::UNC_M_CAS_COUNT:RD\n")
	fake := countertest.New()
	for cpu := 0; cpu < 32; cpu++ {
		fake.FailOpen("MEM_LOAD_UOPS_RETIRED:L1_HIT", cpu, unix.ENOENT)
	}
	text := openWith(t, p, fake)
	for _, want := range []string{
		"info    test.conf:2: MEM_LOAD_UOPS_RETIRED:L1_HIT: libpfm4 snb_ep::MEM_LOAD_UOPS_RETIRED:L1_HIT:e=0:i=0:c=0:t=0:u=1:k=1:precise=0:excl=0:mg=0:mh=1: " +
			"type 4 config 0x1d1 exclude guest -> perfevent.hwcounters.MEM_LOAD_UOPS_RETIRED_L1_HIT; cannot count on cpus 0-31",
		"info    test.conf:3: snbep_unc_imc0::UNC_M_CAS_COUNT:RD: libpfm4 snbep_unc_imc0::UNC_M_CAS_COUNT:RD:e=0:i=0:t=0:excl=0: " +
			"type 18 config 0x304 exclude none (scale 6.103515625e-05 MiB) -> perfevent.hwcounters.snbep_unc_imc0__UNC_M_CAS_COUNT_RD, on cpus 0,8\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("notes lack %q:\n%s", want, text)
		}
	}
}

// openWith opens the plan's counters through a fake opener and returns
// the notes, what --check prints.
func openWith(t *testing.T, p *Plan, fake *countertest.Opener) string {
	t.Helper()
	set, err := counter.New(p.Specs(), counter.Config{Opener: fake})
	if err != nil {
		t.Fatal(err)
	}
	sum, _ := set.Open()
	p.Opened(set, sum)
	return notes(p)
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
