package agent

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"perfevent/internal/config"
	"perfevent/internal/config/configtest"
	"perfevent/internal/counter"
	"perfevent/internal/counter/countertest"
	"perfevent/internal/cpulist"
	"perfevent/internal/hostfs"
	"perfevent/internal/metrics"
	"perfevent/internal/pmu"
	"perfevent/internal/setup"
)

// fixtureFS is one of internal/pmu's sysfs trees and cpuinfo, which were
// taken from real machines, with tracing the tracefs; the rest of procfs
// is this machine's.
func fixtureFS(name, tracing string) *pmu.FS {
	root := filepath.Join("..", "pmu", "testdata", name)
	return &pmu.FS{FS: hostfs.FS{Sys: filepath.Join(root, "sys"), CPUInfo: filepath.Join(root, "proc", "cpuinfo")}, Tracing: []string{tracing}}
}

// machineOf is the machine of a fixture (fixtureFS).
func machineOf(t *testing.T, name string) setup.Machine {
	t.Helper()
	m, err := setup.ReadMachine(fixtureFS(name, filepath.Join("..", "pmu", "testdata", name, "tracing")))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func planOf(t *testing.T, m setup.Machine, conf string) *setup.Plan {
	t.Helper()
	f, err := config.Parse("test.conf", []byte(conf))
	return setup.Make(f, err, m, false)
}

// notesText is notes as the tests below compare them.
func notesText(notes []setup.Note) string {
	var b strings.Builder
	for _, n := range notes {
		sev := "info   "
		if n.Severity == setup.Problem {
			sev = "PROBLEM"
		}
		b.WriteString(sev + " " + n.String() + "\n")
	}
	return b.String()
}

// openWith opens the plan's counters through a fake opener and records
// what opened and which derived metrics that allows, as a build does.
func openWith(t *testing.T, p *setup.Plan, m setup.Machine, fake *countertest.Opener) (*opened, *counter.Set) {
	t.Helper()
	set, err := counter.New(p.Specs(), counter.Config{Opener: fake})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { set.Close() })
	sum, err := set.Open()
	if err != nil {
		t.Fatal(err)
	}
	o := recordOpen(p, set, sum)
	o.derive(p, set, m.PMU)
	return o, set
}

// On a fake kernel without a hardware PMU, cycles is refused the way a VM
// refuses it: the record drops it, says so once as Info, and the derived
// metrics adapt. The plan is left as setup made it.
func TestOpenedOnVM(t *testing.T) {
	m := machineOf(t, "vm")
	p := planOf(t, m, configtest.VMConf)
	planned := notesText(p.Notes)
	counters := len(p.Counters)
	fake := countertest.New()
	fake.FailOpen("cycles", countertest.AnyCPU, unix.ENOENT)
	fake.FailOpen("instructions", countertest.AnyCPU, unix.ENOENT)
	o, _ := openWith(t, p, m, fake)
	if notesText(p.Notes) != planned || len(p.Counters) != counters {
		t.Errorf("opening changed the plan: %d counters, was %d; notes\n%s\nwere\n%s", len(p.Counters), counters, notesText(p.Notes), planned)
	}
	text := notesText(o.notes)
	for _, c := range o.counters {
		if c.Metric == "cycles" {
			t.Error("cycles is still served after failing to open")
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
	if len(o.derived) != 1 || o.derived[0].Metric != "ipc" {
		t.Fatalf("derived = %+v\n%s", o.derived, text)
	}
	if !strings.Contains(text, "info    test.conf:13: [ipc:derived]: perfevent.derived.ipc.value = cpu-clock × 1 (group at line 17)") {
		t.Errorf("no note for ipc:\n%s", text)
	}
	if !strings.Contains(text, "PROBLEM test.conf:19: derived metric faults is unavailable") {
		t.Errorf("no problem for faults:\n%s", text)
	}
}

func TestOpenedPartialFailureIsAProblem(t *testing.T) {
	m := machineOf(t, "vm")
	p := planOf(t, m, "[perf]\ncpu-clock\n")
	fake := countertest.New()
	fake.FailOpen("cpu-clock", 0, unix.EACCES)
	o, _ := openWith(t, p, m, fake)
	text := notesText(o.notes)
	want := "PROBLEM test.conf:2: cpu-clock: libpfm4 perf::PERF_COUNT_SW_CPU_CLOCK:u=1:k=1:excl=0:mg=0:mh=1: type 1 config 0x0 exclude hv,guest -> perfevent.hwcounters.cpu_clock; cannot count on cpu0: permission denied"
	if !strings.Contains(text, want) || !strings.Contains(text, "(EACCES); counting on cpu1\n") {
		t.Errorf("notes lack %q … counting on cpu1:\n%s", want, text)
	}
	if len(o.counters) != 1 || cpulist.Format(o.counters[0].CPUs) != "1" {
		t.Errorf("counters %+v", o.counters)
	}
	if cpulist.Format(p.Counters[0].CPUs) != "0-1" {
		t.Errorf("the plan's counter now counts on %s: opening changed it", cpulist.Format(p.Counters[0].CPUs))
	}
}

// TestCheckShowsLibpfm4: what --check prints of a libpfm4 name, on a
// machine whose kernel refuses it: libpfm4's full name, the encoding, the
// exclude bits and the metric; an uncore event counts on its PMU's cpumask.
func TestCheckShowsLibpfm4(t *testing.T) {
	m := machineOf(t, "snbep")
	p := planOf(t, m, "[snb_ep]\nMEM_LOAD_UOPS_RETIRED:L1_HIT\nsnbep_unc_imc0::UNC_M_CAS_COUNT:RD\n")
	fake := countertest.New()
	for cpu := 0; cpu < 32; cpu++ {
		fake.FailOpen("MEM_LOAD_UOPS_RETIRED:L1_HIT", cpu, unix.ENOENT)
	}
	o, _ := openWith(t, p, m, fake)
	text := notesText(o.notes)
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

// What --check accepts (the plan and what opened, as it reports them)
// must be exactly what the agent's table serves: a name the plan keeps
// but the table refuses used to leave the agent serving nothing at all.
func TestCheckAndTableAgreeOnTheCorpus(t *testing.T) {
	machines := map[string]setup.Machine{"vm": machineOf(t, "vm"), "skylake": machineOf(t, "skylake")}
	for path, src := range configtest.Corpus(t) {
		for mname, m := range machines {
			for _, compat := range []bool{false, true} {
				f, perr := config.Parse(filepath.Base(path), src)
				p := setup.Make(f, perr, m, compat)
				o, set := openWith(t, p, m, countertest.New())

				want := []string{"perfevent.active", "perfevent.cgroup.counted", "perfevent.cgroup.counting", "perfevent.cgroup.mode", "perfevent.derived.active", "perfevent.version"} // the agent's own
				spec := metrics.Spec{Version: "test", Set: set, Clusters: metrics.NewClusters()}
				for _, c := range o.counters {
					ev, _ := set.Lookup(c.Event.Name)
					spec.Counters = append(spec.Counters, metrics.Counter{Event: ev, Metric: c.Metric})
					want = append(want, "perfevent.hwcounters."+c.Metric+".value", "perfevent.hwcounters."+c.Metric+".dutycycle")
				}
				for i, d := range o.derived {
					spec.Derived = append(spec.Derived, metrics.Derived{Derived: i, Metric: d.Metric})
					want = append(want, "perfevent.derived."+d.Metric+".value")
				}
				table, _, err := metrics.Build(spec)
				if err != nil {
					notes := notesText(append(slices.Clone(p.Notes), o.notes...))
					t.Errorf("%s on %s (compat %v): --check reports %d problems, but the table is refused: %v\n%s", path, mname, compat, strings.Count(notes, "PROBLEM "), err, notes)
					continue
				}
				var got []string
				for _, m := range table.Metrics() {
					got = append(got, m.Name)
				}
				slices.Sort(got)
				slices.Sort(want)
				if !slices.Equal(got, want) {
					t.Errorf("%s on %s (compat %v): the table serves\n%s\nbut the plan has\n%s", path, mname, compat, strings.Join(got, "\n"), strings.Join(want, "\n"))
				}
			}
		}
	}
}

// readySkylake plans confDir's files on the skylake fixture, with the
// C agent's numbering of the same configuration.
func readySkylake(t *testing.T) (*Options, *readied) {
	t.Helper()
	dir := confDir(t)
	o := &Options{Config: filepath.Join(dir, "perfevent.conf"), CLayout: filepath.Join(dir, "perfevent.conf"),
		FS: fixtureFS("skylake", filepath.Join(dir, "none"))}
	files := holdFiles(o)
	t.Cleanup(func() { files.Close() })
	r, err := ready(o, files)
	if err != nil {
		t.Fatal(err)
	}
	return o, r
}

// A build leaves the plan as ready made it: opening the counters, the
// derived metrics, the ratios, the table and the C agent's numbering
// are recorded beside it.
func TestBuildLeavesThePlan(t *testing.T) {
	o, r := readySkylake(t)
	before := fmt.Sprintf("%+v", *r.plan)
	fake := countertest.New()
	fake.FailOpen("cpu-clock", 1, unix.EACCES)
	c, err := r.open(o, counter.Config{Opener: fake})
	if err != nil {
		t.Fatal(err)
	}
	defer c.set.Close()
	cLayout(c, fake)
	if _, _, err := buildTable(o, c, metrics.NewClusters(), nil, nil); err != nil {
		t.Fatal(err)
	}
	if after := fmt.Sprintf("%+v", *c.plan); after != before {
		t.Errorf("the build changed the plan:\n%s\nwas\n%s", after, before)
	}
	if len(c.opened.notes) == 0 || len(c.opened.derived) != 1 || len(c.ratioNotes) == 0 {
		t.Errorf("the record: %d notes, derived %v, %d ratio notes", len(c.opened.notes), c.opened.derived, len(c.ratioNotes))
	}
}

// countingOpener counts the opens of each event it passes on.
type countingOpener struct {
	counter.Opener
	opens map[string]int
}

func (o *countingOpener) Open(event string, attr *unix.PerfEventAttr, cpu int, leader counter.Source) (counter.Source, error) {
	o.opens[event]++
	return o.Opener.Open(event, attr, cpu, leader)
}

// The C agent's numbering asks whether each of its events opens: one the
// agent planned on those CPUs and could open on none is answered from
// that failure, not opened again on every CPU.
func TestCLayoutReusesFailedOpens(t *testing.T) {
	o, r := readySkylake(t)
	fake := countertest.New()
	fake.FailOpen("page-faults", countertest.AnyCPU, unix.ENOENT)
	opener := &countingOpener{Opener: fake, opens: map[string]int{}}
	c, err := r.open(o, counter.Config{Opener: opener})
	if err != nil {
		t.Fatal(err)
	}
	defer c.set.Close()
	before := opener.opens["page-faults"]
	if before == 0 {
		t.Fatal("page-faults was never opened")
	}
	keys, extra := cLayout(c, opener)
	if n := opener.opens["page-faults"] - before; n != 0 {
		t.Errorf("the C layout opened page-faults %d more times", n)
	}
	// The C agent leaves out what it cannot open, and numbers the rest.
	if !slices.Equal(keys, []string{"hwcounters.cpu_clock"}) || len(extra) != 0 {
		t.Errorf("the C layout's keys %q, extra %+v; want hwcounters.cpu_clock alone", keys, extra)
	}
}
