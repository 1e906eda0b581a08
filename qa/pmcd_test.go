package qa

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// requireLines fails the test for each wanted line (a regular expression,
// matched against whole lines) that the output lacks.
func requireLines(t *testing.T, what, out string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !regexp.MustCompile(`(?m)^` + w + `$`).MatchString(out) {
			t.Errorf("%s: no line matching %q in:\n%s", what, w, out)
		}
	}
}

// checkAgentIsOurs asserts that pmcd runs the installed Go binary for
// domain 127, and returns its pid.
func checkAgentIsOurs(t *testing.T, e *Env) int {
	t.Helper()
	pid, exe := e.Agent(t)
	if exe != e.GoBinary() {
		t.Fatalf("domain 127 agent pid %d runs %q, want %q", pid, exe, e.GoBinary())
	}
	return pid
}

// checkClients runs the everyday clients against perfevent and checks
// what they print.
func checkClients(t *testing.T, e *Env) {
	t.Helper()
	out := e.Run(t, "pminfo", "-f", "perfevent")
	requireLines(t, "pminfo -f perfevent", out,
		`perfevent\.version`,
		`    value ".+"`,
		`perfevent\.active`,
		`    value [0-9]+`,
		`perfevent\.derived\.active`,
	)

	out = e.Run(t, "pminfo", "-dtTl", "perfevent")
	requireLines(t, "pminfo -dtTl perfevent", out,
		`perfevent\.version .*`,
		`    Data Type: string  InDom: PM_INDOM_NULL 0xffffffff`,
		`perfevent\.active .*`,
		`    Data Type: 32-bit int  InDom: PM_INDOM_NULL 0xffffffff`,
		`    Semantics: discrete  Units: none`,
		`    labels \{"agent":"perfevent",.*\}`,
	)

	out = e.Run(t, "pmprobe", "-v", "perfevent")
	requireLines(t, "pmprobe -v perfevent", out,
		`perfevent\.version 1 ".+"`,
		`perfevent\.active 1 [0-9]+`,
		`perfevent\.derived\.active 1 [0-9]+`,
	)

	out = e.Run(t, "pmval", "-s", "3", "-t", "0.2", "perfevent.active")
	requireLines(t, "pmval perfevent.active", out,
		`metric: +perfevent\.active`,
		`samples: +3`,
	)
	samples := regexp.MustCompile(`(?m)^ +[0-9]+$`).FindAllString(out, -1)
	if len(samples) != 3 {
		t.Errorf("pmval -s 3 perfevent.active: %d sample lines, want 3:\n%s", len(samples), out)
	}
}

func TestClientsSeeGoAgent(t *testing.T) {
	e := Setup(t)
	e.Baseline(t)
	pid := checkAgentIsOurs(t, e)
	checkClients(t, e)
	if after := checkAgentIsOurs(t, e); after != pid {
		t.Errorf("the agent restarted during the clients' requests: pid %d, then %d", pid, after)
	}

	t.Run("help", func(t *testing.T) {
		GoAgentOnly(t)
		out := e.Run(t, "pminfo", "-tT", "perfevent.version", "perfevent.active")
		if strings.Contains(out, "Error") || strings.Count(out, "Help:") != 2 {
			t.Errorf("pminfo -tT: want one-line and full help for both static metrics:\n%s", out)
		}
	})
}

func TestUnixSocket(t *testing.T) {
	e := Setup(t)
	e.Baseline(t)

	e.InstallGo(t, IPC{Kind: "unix"})
	sock := filepath.Join(e.PCP.Get("PCP_RUN_DIR"), "perfevent.sock")
	line := e.PMCDLine(t)
	bin, ipc, _ := ParseLine(line)
	if bin != e.GoBinary() || ipc != (IPC{Kind: "unix", Addr: sock}) {
		t.Fatalf("pmcd.conf after a unix-socket Install: %q", line)
	}
	if !strings.HasSuffix(line, " -d 127 -u "+sock) && !strings.Contains(line, " -u "+sock+" ") {
		t.Errorf("pmcd.conf line does not hand the socket to the agent (-u %s): %q", sock, line)
	}
	checkAgentIsOurs(t, e)
	if fi, err := os.Stat(sock); err != nil || fi.Mode()&os.ModeSocket == 0 {
		t.Errorf("%s: want a unix socket, got %v (err %v)", sock, fi, err)
	}
	checkClients(t, e)

	e.InstallGo(t, Pipe)
	if bin, ipc, _ := ParseLine(e.PMCDLine(t)); bin != e.GoBinary() || ipc != Pipe {
		t.Fatalf("pmcd.conf after going back to pipe: %q", e.PMCDLine(t))
	}
	checkAgentIsOurs(t, e)
	e.WaitForMetric(t, "perfevent.active", 10*time.Second)
}

func TestRemoveKeepsPMCD(t *testing.T) {
	e := Setup(t)
	e.Baseline(t)

	out := e.RemoveAgent(t)
	requireLines(t, "Remove", out, `Culling the Performance Metrics Name Space \.\.\.`)
	if line := e.PMCDLine(t); line != "" {
		t.Errorf("pmcd.conf still has a perfevent line after Remove: %q", line)
	}
	r := e.Try("pminfo", "perfevent")
	if r.Err == nil || !strings.Contains(r.Stdout+r.Stderr, "Unknown metric name") {
		t.Errorf("after Remove, pminfo perfevent should fail with Unknown metric name:\n%s", r)
	}
	waitFor(t, 10*time.Second, "the domain 127 agent to exit", func() bool { return len(AgentPIDs()) == 0 })

	requireLines(t, "pmcd after Remove", e.Run(t, "pminfo", "-f", "pmcd.version"), `    value ".+"`)
	requireLines(t, "linux agent after Remove", e.Run(t, "pminfo", "-f", "kernel.all.load"),
		`    inst \[1 or "1 minute"\] value .+`)
}

func TestPMCDRestartBringsAgentBack(t *testing.T) {
	e := Setup(t)
	e.Baseline(t)
	before := checkAgentIsOurs(t, e)

	e.RestartPMCD(t)
	e.WaitForMetric(t, "perfevent.active", 15*time.Second)
	after := checkAgentIsOurs(t, e)
	if after == before {
		t.Errorf("agent pid %d survived a pmcd restart; want a new process", before)
	}
	if bin, ipc, _ := ParseLine(e.PMCDLine(t)); bin != e.GoBinary() || ipc != Pipe {
		t.Errorf("pmcd.conf changed across a restart: %q", e.PMCDLine(t))
	}
}

func TestDbpmda(t *testing.T) {
	e := Direct(t)
	out := e.Dbpmda(t, `getdesc on
desc perfevent.version
desc perfevent.active
fetch perfevent.version perfevent.active
children perfevent
traverse perfevent.derived
pmid perfevent.derived.active
name 127.1.0
desc perfevent.derived.active
fetch perfevent.derived.active
label domain
`)
	requireLines(t, "dbpmda", out,
		// desc perfevent.version
		`PMID: 127\.0\.0`,
		`    Data Type: string  InDom: PM_INDOM_NULL 0xffffffff`,
		// desc perfevent.active
		`PMID: 127\.0\.1`,
		`    Data Type: 32-bit int  InDom: PM_INDOM_NULL 0xffffffff`,
		`    Semantics: discrete  Units: none`,
		// fetch
		`PMID\(s\): 127\.0\.0 127\.0\.1`,
		`  127\.0\.0 \(perfevent\.version\): numval: 1 valfmt: 1 vlist\[\]:`,
		`   value ".+"`,
		`  127\.0\.1 \(perfevent\.active\): numval: 1 valfmt: 0 vlist\[\]:`,
		`   value [0-9]+`,
		// children, traverse, pmid, name
		`Metric: perfevent`,
		`   non-leaf hwcounters`,
		`   non-leaf derived`,
		`Metric: perfevent\.derived`,
		`   perfevent\.derived\.active`,
		`Metric: perfevent\.derived\.active`,
		`   127\.1\.0`,
		`PMID: 127\.1\.0`,
		`  127\.1\.0 \(.*\): numval: 1 valfmt: 0 vlist\[\]:`,
		// label domain
		`    agent="perfevent"`,
	)
	if strings.Contains(out, "Error PDU") {
		t.Errorf("dbpmda: an answer was an error:\n%s", out)
	}

	t.Run("counters", func(t *testing.T) {
		GoAgentOnly(t)
		// The names under hwcounters come from the configuration; take
		// the first counter the agent offers and follow it through.
		out := e.Dbpmda(t, "traverse perfevent.hwcounters\n")
		m := regexp.MustCompile(`(?m)^   (perfevent\.hwcounters\.\S+\.value)$`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("traverse perfevent.hwcounters: no .value leaf:\n%s", out)
		}
		name := m[1]
		out = e.Dbpmda(t, "desc "+name+"\n")
		d := regexp.MustCompile(`(?m)^PMID: (127\.[0-9]+\.0)\n    Data Type: 64-bit (?:unsigned )?int  InDom: (127\.[0-9]+) 0x[0-9a-f]+\n    Semantics: counter  Units: count$`).FindStringSubmatch(out)
		if d == nil {
			t.Fatalf("desc %s: want a 64-bit counter over a 127.N indom:\n%s", name, out)
		}
		out = e.Dbpmda(t, strings.Join([]string{
			"text " + name,
			"instance " + d[2],
			"fetch " + name,
			"label indom " + d[2],
		}, "\n")+"\n")
		requireLines(t, "dbpmda "+name, out,
			`\[  0\] inst: 0 name: "cpu0"`,
			`  `+regexp.QuoteMeta(d[1])+` \(.*\): numval: [1-9][0-9]* valfmt: [01] vlist\[\]:`,
			`    inst \[0 or .*\] value [0-9]+`,
			`    device_type="cpu"`,
		)
		if strings.Contains(out, "Error PDU") {
			t.Errorf("dbpmda: an answer was an error:\n%s", out)
		}
	})
}

func TestSwitchToCAgentAndBack(t *testing.T) {
	e := Setup(t)
	e.Baseline(t)
	cBinary, err := filepath.EvalSymlinks(filepath.Join(e.CHome, "pmdaperfevent"))
	if err != nil {
		unmet(t, "needs the C agent in %s: %v", e.CHome, err)
	}

	e.InstallC(t)
	if bin, ipc, _ := ParseLine(e.PMCDLine(t)); bin != filepath.Join(e.CHome, "pmdaperfevent") || ipc != Pipe {
		t.Fatalf("pmcd.conf after the C agent's Install: %q", e.PMCDLine(t))
	}
	if _, exe := e.Agent(t); exe != cBinary {
		t.Fatalf("after the C agent's Install, domain 127 runs %q, want %q", exe, cBinary)
	}
	e.WaitForMetric(t, "perfevent.active", 10*time.Second)

	e.InstallGo(t, Pipe)
	checkAgentIsOurs(t, e)
	e.WaitForMetric(t, "perfevent.active", 10*time.Second)
}
