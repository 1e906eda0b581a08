package main

import (
	"os"
	"strings"
	"testing"

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
	if _, err := os.Stat("/sys/bus/event_source/devices/software"); err != nil {
		t.Skip("needs perf_event support (/sys/bus/event_source/devices/software)")
	}
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
	if _, err := os.Stat("/sys/bus/event_source/devices/software"); err != nil {
		t.Skip("needs perf_event support (/sys/bus/event_source/devices/software)")
	}
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
