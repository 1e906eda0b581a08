package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"perfevent/internal/hostfs"
	"perfevent/internal/pmu"
	"perfevent/internal/testneed"

	"golang.org/x/sys/unix"
)

// hostMark is the mark --list-events should give an event, derived from
// opening it here the way the probe does: system-wide on CPU 0, disabled.
func hostMark(t *testing.T, typ uint32, config uint64) string {
	t.Helper()
	attr := unix.PerfEventAttr{Type: typ, Config: config, Size: unix.PERF_ATTR_SIZE_VER0, Bits: unix.PerfBitDisabled,
		Read_format: unix.PERF_FORMAT_TOTAL_TIME_ENABLED | unix.PERF_FORMAT_TOTAL_TIME_RUNNING}
	fd, err := unix.PerfEventOpen(&attr, -1, 0, -1, unix.PERF_FLAG_FD_CLOEXEC)
	if err != nil {
		return "(" + unix.ErrnoName(err.(unix.Errno)) + ")]"
	}
	unix.Close(fd)
	return "[ok]"
}

// listedLine is the line of --list-events output naming event first.
func listedLine(out, event string) string {
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, event+" ") {
			return line
		}
	}
	return ""
}

func TestListEventsProbe(t *testing.T) {
	testneed.PerfEvents(t)
	bin := agentBinary(t)
	for _, c := range []struct {
		match, event string
		typ          uint32
		config       uint64
	}{
		{"cpu-clock", "cpu-clock", unix.PERF_TYPE_SOFTWARE, unix.PERF_COUNT_SW_CPU_CLOCK},
		{"cpu-cycles", "cpu-cycles", unix.PERF_TYPE_HARDWARE, unix.PERF_COUNT_HW_CPU_CYCLES},
	} {
		out, _, code := runAgent(t, bin, "--list-events", "--match", c.match)
		line := listedLine(out, c.event)
		want := hostMark(t, c.typ, c.config)
		if code != 0 || !strings.HasSuffix(line, want) {
			t.Errorf("--match %s: exit %d, line %q; want it to end %q", c.match, code, line, want)
		}
		if c.event == "cpu-cycles" && want == "(ENOENT)]" && !strings.HasSuffix(line, "[cannot open: not supported on this machine (e.g. a VM without a hardware PMU) (ENOENT)]") {
			t.Errorf("cycles, which this machine has no PMU for: %q", line)
		}

		out, _, _ = runAgent(t, bin, "--list-events", "--no-probe", "--match", c.match)
		if line := listedLine(out, c.event); line == "" || strings.HasSuffix(line, want) {
			t.Errorf("--no-probe --match %s: %q; want the line, unmarked", c.match, line)
		}
	}
}

// An unfiltered listing probes everything but the tracepoints, whose first
// opens cost the kernel milliseconds each; a filtered one probes them too.
func TestListEventsLeavesTracepointsUnprobedUnfiltered(t *testing.T) {
	testneed.PerfEvents(t)
	bin := agentBinary(t)
	out, _, code := runAgent(t, bin, "--list-events")
	if code != 0 {
		t.Fatalf("--list-events exit %d", code)
	}
	if !strings.Contains(out, "sched:sched_switch ") {
		t.Skip("needs tracefs readable by this user (sched:sched_switch is not listed)")
	}
	if got, want := listedLine(out, "sched:sched_switch"), "sched:sched_switch [tracepoint] [not probed: tracepoints are probed with --match or --pmu]"; got != want {
		t.Errorf("unfiltered: %q, want %q", got, want)
	}
	if got := listedLine(out, "cpu-clock"); !strings.HasSuffix(got, " "+hostMark(t, unix.PERF_TYPE_SOFTWARE, unix.PERF_COUNT_SW_CPU_CLOCK)) {
		t.Errorf("unfiltered cpu-clock is not probed: %q", got)
	}
	out, _, _ = runAgent(t, bin, "--list-events", "--match", "sched_switch")
	if got := listedLine(out, "sched:sched_switch"); strings.Contains(got, "not probed") || !strings.HasSuffix(got, "]") {
		t.Errorf("filtered: %q, want a probe mark", got)
	}
}

// fixtureFS is one of package pmu's machine trees.
func fixtureFS(name string) *pmu.FS {
	root := filepath.Join("..", "internal", "pmu", "testdata", name)
	return &pmu.FS{FS: hostfs.FS{Sys: filepath.Join(root, "sys"), Proc: filepath.Join(root, "proc")}, Tracing: []string{filepath.Join(root, "tracing")}}
}

func listOn(fixture, pmuName, pattern string) (string, string, int) {
	var out, errOut strings.Builder
	code := listEvents(fixtureFS(fixture), pmuName, pattern, false, &out, &errOut)
	return out.String(), errOut.String(), code
}

// Listings answer: an unknown PMU is an error naming the known ones, a
// pattern that matches nothing says so, and both exit 1 with nothing on
// stdout. A listing says where each PMU's events come from.
func TestListEventsAnswers(t *testing.T) {
	skylakePMUs := fixtureFS("skylake").KnownPMUs()
	for _, want := range []string{"perf", "skx", "skx_unc_imc0", "uncore_imc_0", "software", "msr"} {
		if !slices.Contains(skylakePMUs, want) {
			t.Errorf("skylake's PMUs %v lack %s", skylakePMUs, want)
		}
	}
	for _, c := range []struct {
		fixture, pmu, match string
		code                int
		stdout, stderr      string // contained in the output; "" for no output
	}{
		{"skylake", "nosuch", "", 1, "", "pmdaperfevent: --pmu nosuch: no PMU of that name on this machine; its PMUs are " + strings.Join(boxRuns(skylakePMUs), ", ") + "\n"},
		{"sierraforest", "srf_unc_imx", "", 1, "", "--pmu srf_unc_imx: no PMU of that name on this machine (did you mean srf_unc_imc, srf_unc_cha?); its PMUs are "},
		{"sierraforest", "srf_unc_imx", "", 1, "", "perf_raw, software, srf, srf_unc_cha, srf_unc_imc, tracepoint, uncore_cha_0..2, uncore_imc_0..3\n"},
		{"skylake", "", "no_such_event", 1, "", `pmdaperfevent: nothing matched "no_such_event" among this machine's events` + "\n"},
		{"skylake", "skx", "no_such_event", 1, "", `pmdaperfevent: nothing matched "no_such_event" among the events of PMU skx` + "\n"},
		{"skylake", "breakpoint", "", 1, "", "pmdaperfevent: nothing matched: PMU breakpoint has no events to list\n"},
		{"sierraforest", "srf_unc_imc", "*.UNC_M_CAS_COUNT_SCH0.RD", 1, "", `pmdaperfevent: nothing matched "*.UNC_M_CAS_COUNT_SCH0.RD" among the events of PMU srf_unc_imc` + "\n"},
		// The shipped perfevent.conf's hint, on a machine with memory controllers.
		{"skylake", "", "cas_count", 0, "\n# dynamic uncore_imc_0 (from the kernel's ../internal/pmu/testdata/skylake/sys/bus/event_source/devices/uncore_imc_0/events)\n" +
			"uncore_imc_0.cas_count_read [dynamic: event=0x04,umask=0x03; scale 6.103515625e-05 MiB]\n", ""},
		// docs/ratios.md's hint.
		{"skylake", "uncore_imc_0", "", 0, "\n# dynamic uncore_imc_0 (from the kernel's ../internal/pmu/testdata/skylake/sys/bus/event_source/devices/uncore_imc_0/events)\n" +
			"uncore_imc_0.cas_count_read [dynamic: event=0x04,umask=0x03; scale 6.103515625e-05 MiB]\n", ""},
		{"skylake", "SKX", "INST_RETIRED", 0, "\n# libpfm4 skx (from " + pmu.LibpfmCatalog + ")\nskx::BR_INST_RETIRED ", ""},
		{"sierraforest", "srf_unc_imc", "*::UNC_M_CAS_COUNT_SCH0.RD", 0,
			"\n# vendor srf_unc_imc (from github.com/intel/perfmon 6dadedf3aa48 v1.18: Intel Sierra Forest uncore IMC (uncore_imc boxes), on uncore_imc_0..uncore_imc_3, 4 boxes)\n" +
				"srf_unc_imc::UNC_M_CAS_COUNT_SCH0.RD OR UNC_M_CAS_COUNT_SCH0.RD [vendor: CAS count for SubChannel 0, all reads]\n", ""},
		{"cortex-a78", "arm_ac78", "l1d_cache_refill", 0,
			"\n# vendor arm_ac78 (from github.com/ARM-software/data 6aeb4c89a62b: Arm Cortex-A78, on armv8_cortex_a78)\narm_ac78::L1D_CACHE_REFILL OR L1D_CACHE_REFILL [vendor: ", ""},
		{"meteorlake", "mtl_atom", "inst_retired.any", 0, "\n# vendor mtl_atom (from github.com/intel/perfmon 6dadedf3aa48 v1.22: Intel Meteor Lake Crestmont cores (cpu_atom), on cpu_atom)\n", ""},
	} {
		out, errOut, code := listOn(c.fixture, c.pmu, c.match)
		// The fixtures have no tracefs, which the listing reports first.
		var kept []string
		for _, l := range strings.SplitAfter(errOut, "\n") {
			if !strings.Contains(l, "tracepoints: no tracefs") {
				kept = append(kept, l)
			}
		}
		errOut = strings.Join(kept, "")
		if code != c.code || !strings.Contains(out, c.stdout) || (c.stdout == "") != (out == "") || !strings.Contains(errOut, c.stderr) || (c.stderr == "") != (errOut == "") {
			t.Errorf("%s --pmu %q --match %q: exit %d\nstdout %q\nstderr %q\nwant exit %d, stdout with %q, stderr with %q",
				c.fixture, c.pmu, c.match, code, out, errOut, c.code, c.stdout, c.stderr)
		}
	}
}

// The binary's exit status and messages, on this machine.
func TestListEventsExitStatus(t *testing.T) {
	bin := agentBinary(t)
	out, errOut, code := runAgent(t, bin, "--list-events", "--no-probe", "--pmu", "nosuch")
	if code != 1 || out != "" || !strings.Contains(errOut, "--pmu nosuch: no PMU of that name on this machine; its PMUs are ") || !strings.Contains(errOut, "perf, perf_raw") {
		t.Errorf("--pmu nosuch: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	out, errOut, code = runAgent(t, bin, "--list-events", "--no-probe", "--match", "no_such_event_anywhere")
	if code != 1 || out != "" || !strings.Contains(errOut, `nothing matched "no_such_event_anywhere"`) {
		t.Errorf("--match no_such_event_anywhere: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	out, _, code = runAgent(t, bin, "--list-events", "--no-probe", "--pmu", "perf", "--match", "cpu-clock")
	if code != 0 || !strings.Contains(out, "\n# software (from the kernel's generic events)\ncpu-clock ") {
		t.Errorf("--pmu perf --match cpu-clock: exit %d, stdout %q", code, out)
	}
}

func TestBoxRuns(t *testing.T) {
	in := []string{"breakpoint", "cpu", "msr", "uncore_cha_0", "uncore_cha_1", "uncore_cha_10", "uncore_cha_11", "uncore_cha_2", "uncore_cha_3",
		"uncore_cha_4", "uncore_cha_5", "uncore_cha_6", "uncore_cha_7", "uncore_cha_8", "uncore_cha_9", "uncore_imc_0", "uncore_imc_2", "uncore_upi_0", "uncore_upi_1"}
	want := "breakpoint, cpu, msr, uncore_cha_0..11, uncore_imc_0, uncore_imc_2, uncore_upi_0, uncore_upi_1"
	if got := strings.Join(boxRuns(in), ", "); got != want {
		t.Errorf("boxRuns: %s\nwant %s", got, want)
	}
}
