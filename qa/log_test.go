package qa

import (
	"os"
	"strings"
	"syscall"
	"testing"

	"perfevent/internal/pmda"
)

// The agent's log under pmcd, with the VM configuration (whose cycles
// cannot open here) and the shipped cgroups.conf: start-up logs the plan,
// each reload of the same configuration one line, and an edit a summary
// that names the change, followed by the new line alone.
func TestReloadLogIsQuiet(t *testing.T) {
	cg, err := os.ReadFile("../cgroups.conf")
	if err != nil {
		t.Fatal(err)
	}
	l := StartLab(t, Agent{Go: true, Cgroups: string(cg)})
	logText := func() string {
		b, err := os.ReadFile(l.AgentLog)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	waitFor(t, Settle, "the start-up summary", func() bool { return strings.Contains(logText(), "Info: serving ") })
	start := strings.Count(logText(), "\n")
	pid := l.AgentPID(t)
	// As many as the log takes of one message in a minute: more would be
	// counted, not written (pmda.RepeatBurst).
	const reloads = pmda.RepeatBurst
	for i := 1; i <= reloads; i++ {
		syscall.Kill(pid, syscall.SIGHUP)
		waitFor(t, Settle, "a reload", func() bool { return strings.Count(logText(), "reload done") == i })
	}
	text := logText()
	added := strings.Count(text, "\n") - start
	t.Logf("start-up: %d lines; %d reloads of the same configuration: %d lines", start, reloads, added)
	if added > reloads {
		t.Errorf("%d reloads of the same configuration logged %d lines, want one each:\n%s", reloads, added, tail(l.AgentLog, added+2))
	}
	if n := strings.Count(text, "; the plan is unchanged"); n != reloads {
		t.Errorf("%d reloads say the plan is unchanged, want %d", n, reloads)
	}
	if n := strings.Count(text, "cycles: "); n != 1 {
		t.Errorf("why cycles cannot count is in the log %d times, want once", n)
	}

	conf, err := os.ReadFile(l.Conf)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(conf), "[perf]\n", "[perf]\nalignment-faults\n", 1)
	if edited == string(conf) {
		t.Fatal("the lab's configuration has no [perf] line to add an event after")
	}
	writeFile(t, l.Conf, edited)
	before := strings.Count(logText(), "\n")
	syscall.Kill(pid, syscall.SIGHUP)
	// The lines after the summary are written just after it: wait for
	// the one about the new event rather than for a moment.
	waitFor(t, Settle, "the reload of the edited configuration and its line about alignment-faults", func() bool {
		text := logText()
		return strings.Count(text, "reload done") == reloads+1 && strings.Contains(text, "perfevent.conf:2: alignment-faults: ")
	})
	lines := strings.Split(strings.TrimSpace(logText()), "\n")[before:]
	t.Logf("a reload that adds one event: %d lines", len(lines))
	if len(lines) < 2 || !strings.Contains(lines[0], "reload done: the new configuration is served: 13 counters") || !strings.Contains(lines[0], "new line") ||
		!strings.Contains(strings.Join(lines[1:], "\n"), "perfevent.conf:2: alignment-faults: ") {
		t.Errorf("the reload that adds alignment-faults logged:\n%s", strings.Join(lines, "\n"))
	}
	if len(lines) > 12 {
		t.Errorf("the reload that adds one event logged %d lines, want its summary and the lines it changed", len(lines))
	}
}
