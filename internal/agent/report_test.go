package agent

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"perfevent/internal/config"
	"perfevent/internal/setup"
)

// logSince returns the log's lines after the first n bytes.
func logSince(s string, n int) []string {
	rest := strings.TrimSpace(s[n:])
	if rest == "" {
		return nil
	}
	return strings.Split(rest, "\n")
}

// Start-up logs the whole plan; a reload of the same configuration logs
// one line; a changed one says what changed, and a line this agent has
// explained before is not explained again.
func TestReloadLogsWhatChanged(t *testing.T) {
	const first = "[perf]\ncpu-clock\nno-such-event\n"
	h := startAgent(t, "0-1", first)
	start := h.log.String()
	for _, want := range []string{"perfevent.conf:1: [perf] chosen", "perfevent.conf:2: cpu-clock:", "perfevent.conf:3: event \"no-such-event\"", "Info: serving 1 counters on 2 descriptors and 0 derived metrics"} {
		if !strings.Contains(start, want) {
			t.Errorf("start-up's log lacks %q", want)
		}
	}

	reload := func(conf string) []string {
		t.Helper()
		if conf != "" {
			if err := os.WriteFile(h.conf, []byte(conf), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		n := len(h.log.String())
		h.a.Reload()
		h.waitLog(t, "reload done")
		lines := logSince(h.log.String(), n)
		// The next reload's lines are told apart by the log's length.
		h.log.Write([]byte("--\n"))
		return lines
	}

	for i := range 3 {
		lines := reload("")
		if len(lines) != 1 || !strings.HasSuffix(lines[0], "Info: reload done: the new configuration is served: 1 counters on 2 descriptors and 0 derived metrics; the plan is unchanged") {
			t.Fatalf("reload %d of the same configuration logged %d lines, want 1 that says nothing changed:\n%s", i, len(lines), strings.Join(lines, "\n"))
		}
	}

	lines := reload("[perf]\ncpu-clock\npage-faults\n")
	if len(lines) != 3 ||
		!strings.HasSuffix(lines[0], "reload done: the new configuration is served: 2 counters on 4 descriptors and 0 derived metrics; 1 new line in the plan, 1 line gone from it, below") ||
		!strings.Contains(lines[1], "Info: "+h.conf+":3: page-faults:") ||
		!strings.HasSuffix(lines[2], "Info: no longer: "+h.conf+":3: event \"no-such-event\"") {
		t.Fatalf("a reload that swaps a line logged:\n%s", strings.Join(lines, "\n"))
	}

	lines = reload(first)
	if len(lines) != 2 ||
		!strings.HasSuffix(lines[0], "; 1 new line in the plan (1 of them logged before, not repeated), 1 line gone from it, below") ||
		!strings.HasSuffix(lines[1], "Info: no longer: "+h.conf+":3: page-faults") {
		t.Fatalf("a reload back to the first configuration logged:\n%s", strings.Join(lines, "\n"))
	}
	if n := strings.Count(h.log.String(), "event \"no-such-event\": not an event"); n != 1 {
		t.Errorf("the bad line was explained %d times, want once for the agent's life", n)
	}
}

// A CPU going offline changes no line of the plan but its CPU list: the
// rebuild logs its summary alone, and the event that cannot open is not
// explained again.
func TestRebuildForACPULogsTheSummary(t *testing.T) {
	h := startAgent(t, "0-1", "[perf]\ncpu-clock\nno-such-event\n")
	n := len(h.log.String())
	writeOnline(t, h.online, "0")
	h.waitLog(t, "reload done")
	lines := logSince(h.log.String(), n)
	if len(lines) != 2 || !strings.HasSuffix(lines[0], "Info: CPUs online now: 0; rebuilding the counters") ||
		!strings.HasSuffix(lines[1], "reload done: the new configuration is served: 1 counters on 1 descriptors and 0 derived metrics; the plan is unchanged") {
		t.Errorf("CPU 1 going offline logged:\n%s", strings.Join(lines, "\n"))
	}
}

// TestMaskCPULists compares maskCPULists with the regular expression it
// stands for, on the notes' kinds of text and on every short string over
// the letters that matter.
func TestMaskCPULists(t *testing.T) {
	re := regexp.MustCompile(`\bcpus? ?[0-9][0-9,-]*`)
	cases := []string{
		"",
		"cpu",
		"cpus",
		"perf.conf:3: cycles: type 0 config 0x0 -> perfevent.hwcounters.cycles, on cpus 0-1",
		"cannot count on cpus 0-1,4: not supported (ENOENT); on cpu 3 counting",
		"cpus0-3 and cpu7, xcpu 3, _cpu 4, cpuss 5, cpus x, cpu -1, cpu,3",
		"msr.tsc: on cpus 0-1; perfevent.ratio.x = a / b, on 2 CPUs",
	}
	alphabet := "cpus 0,-x"
	var gen func(prefix string, n int)
	gen = func(prefix string, n int) {
		cases = append(cases, prefix)
		if n == 0 {
			return
		}
		for i := range len(alphabet) {
			gen(prefix+alphabet[i:i+1], n-1)
		}
	}
	gen("", 6)
	for _, s := range cases {
		if got, want := maskCPULists(s), re.ReplaceAllString(s, "cpus *"); got != want {
			t.Errorf("maskCPULists(%q) = %q; the regular expression gives %q", s, got, want)
		}
	}
	if got := maskCPULists(cases[3]); got != "perf.conf:3: cycles: type 0 config 0x0 -> perfevent.hwcounters.cycles, on cpus *" {
		t.Errorf("a note's CPU list: %q", got)
	}
}

// A note's line is its String, at its severity's level, compared without
// its CPU list and named by its position and text up to the first ": ".
func TestReportNote(t *testing.T) {
	notes := []setup.Note{
		{Pos: config.Pos{File: "perfevent.conf", Line: 3}, Text: "cycles: type 0 -> perfevent.hwcounters.cycles, on cpus 0-1"},
		{Pos: config.Pos{Line: 7}, Severity: setup.Problem, Text: "bogus: no such event"},
		{Text: "catalog ipc: perfevent.ratio.ipc: not usable here"},
	}
	var r report
	for _, n := range notes {
		r.note(n)
	}
	want := []reportLine{
		{"Info", notes[0].String(), "Info\x00cycles: type 0 -> perfevent.hwcounters.cycles, on cpus *", "perfevent.conf:3: cycles"},
		{"Warning", "line 7: bogus: no such event", "Warning\x00bogus: no such event", "line 7: bogus"},
		{"Info", "catalog ipc: perfevent.ratio.ipc: not usable here", "Info\x00catalog ipc: perfevent.ratio.ipc: not usable here", "catalog ipc"},
	}
	if len(r.lines) != len(want) {
		t.Fatalf("%d lines, want %d", len(r.lines), len(want))
	}
	for i := range want {
		if r.lines[i] != want[i] {
			t.Errorf("line %d: %+v, want %+v", i, r.lines[i], want[i])
		}
	}
}
