package qa

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"perfevent/internal/testwait"
)

// pmidsOf is pminfo -m's answer: each metric's PMID, by name.
func pmidsOf(t *testing.T, out string) map[string]string {
	t.Helper()
	re := regexp.MustCompile(`^(\S+) PMID: (127\.\d+\.\d+)$`)
	m := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if g := re.FindStringSubmatch(strings.TrimSpace(line)); g != nil {
			m[g[1]] = g[2]
		}
	}
	if len(m) == 0 {
		t.Fatalf("pminfo -m listed no perfevent metric:\n%s", out)
	}
	return m
}

// cStockConfig is the C agent's own perfevent.conf, as Debian's pcp
// installs it.
func cStockConfig(t *testing.T) (path, text string) {
	t.Helper()
	path = filepath.Join(filepath.Dir(CAgent), "perfevent.conf")
	data, err := os.ReadFile(path)
	if err != nil {
		unmet(t, "needs the C agent's perfevent.conf (%v): Debian's pcp installs it", err)
	}
	return path, string(data)
}

// Our default install serves every name the C agent's default install
// serves here with the C agent's PMID, and numbers what it adds where the
// C agent never does.
func TestDefaultsServeTheCAgentsPMIDs(t *testing.T) {
	cPath, cText := cStockConfig(t)
	ours, err := os.ReadFile(filepath.Join(repoRoot(), "perfevent.conf"))
	if err != nil {
		t.Fatal(err)
	}
	cLab := StartLab(t, Agent{Go: false, Config: cText})
	goLab := StartLab(t, Agent{Go: true, Config: string(ours), Args: []string{"-c-layout", cPath}})
	c := pmidsOf(t, cLab.Run(t, "pminfo", "-m", "perfevent"))
	g := pmidsOf(t, goLab.Run(t, "pminfo", "-m", "perfevent"))
	var missing []string
	for name, pmid := range c {
		if g[name] != pmid {
			missing = append(missing, name+" "+pmid+" (ours "+g[name]+")")
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("%d of the C agent's %d names are not served with its PMID by ours:\n\t%s", len(missing), len(c), strings.Join(missing, "\n\t"))
	}
	// The C agent's names with values there have values here too.
	cVals := cLab.Run(t, "pminfo", "-f", "perfevent.hwcounters")
	gVals := goLab.Run(t, "pminfo", "-f", "perfevent.hwcounters")
	for _, name := range []string{"perfevent.hwcounters.software.page_faults.value", "perfevent.hwcounters.software.context_switches.value"} {
		if !strings.Contains(cVals, name+"\n    inst [0") {
			continue // the C agent has none either
		}
		if !strings.Contains(gVals, name+"\n    inst [0") {
			t.Errorf("%s has values under the C agent, none under ours:\n%s", name, gVals)
		}
	}
	used := map[string]string{}
	for name, pmid := range c {
		used[clusterOf(pmid)] = name
	}
	for name, pmid := range g {
		if _, ok := c[name]; ok {
			continue
		}
		cl := clusterOf(pmid)
		if n, _ := strconv.Atoi(cl); n >= 2 && n < 2048 {
			t.Errorf("ours adds %s as %s: cluster %s is below 2048, where the C agent numbers its own", name, pmid, cl)
		}
		if other, ok := used[cl]; ok {
			t.Errorf("ours adds %s as %s, a cluster the C agent gives %s", name, pmid, other)
		}
	}
	t.Logf("the C agent serves %d names, ours %d", len(c), len(g))
}

func clusterOf(pmid string) string {
	f := strings.Split(pmid, ".")
	if len(f) != 3 {
		return ""
	}
	if f[1] == "0" || f[1] == "1" {
		return "static"
	}
	return f[1]
}

// fileSize is the size of the file at path, 0 if it cannot be read.
func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// agentEvents picks from pmcd's log, from the offset from on (from the
// start if the log was rotated since), what it says of domain 127's
// agent: each restart of pmcd (a SIGHUP) with the agent's pid in its
// table, each agent it cleaned up and why, and its restarts of dead ones.
func agentEvents(path string, from int64) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error() + "\n"
	}
	if from > int64(len(data)) {
		from = 0
	}
	var b strings.Builder
	for _, l := range strings.Split(string(data[from:]), "\n") {
		f := strings.Fields(l)
		if strings.TrimSpace(l) == `"perfevent" agent` {
			// Listed under "Restarting any deceased agents:".
			l = `restarting the dead "perfevent" agent`
		}
		if strings.HasPrefix(l, "pmcd RESTARTED at") || strings.Contains(l, "CleanupAgent") ||
			strings.Contains(l, "Auto-restarting") || strings.Contains(l, `"perfevent" agent`) ||
			len(f) > 3 && f[0] == "perfevent" && f[1] == "127" {
			b.WriteString("\t" + strings.TrimSpace(l) + "\n")
		}
	}
	return b.String()
}

// unplannedCleanups returns the lines of events (agentEvents) in which pmcd
// cleaned up the perfevent agent for another reason than a change of
// pmcd.conf ("unconfigured", which every switch makes), joined by "; ".
func unplannedCleanups(events string) string {
	var found []string
	for _, l := range strings.Split(events, "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, `Cleanup "perfevent" agent`) && !strings.Contains(l, "unconfigured") {
			found = append(found, l)
		}
	}
	return strings.Join(found, "; ")
}

// Switching agents with default installs, C → ours → C, with a pmlogger
// logging throughout: every name the C agent serves keeps its PMID, the C
// agent serves the same after the round trip, and pmlogger keeps logging.
// Before that, Install with an earlier map says what it does with it; the
// switch then installs ours with --c-pmids, which sets that map aside, and
// the map the machine had is put back at the end.
func TestSwitchKeepsNamesPMIDsAndLogger(t *testing.T) {
	e := Setup(t)
	e.Keep(t)
	pmids := filepath.Join(e.PCP.Get("PCP_VAR_DIR"), "config", "perfevent", "pmids")
	saved, err := os.ReadFile(pmids)
	hadMap := err == nil
	t.Cleanup(func() {
		os.Remove(pmids + ".prev")
		if hadMap {
			os.WriteFile(pmids, saved, 0o644)
		} else {
			os.Remove(pmids)
		}
	})
	pminfo := func() map[string]string { return pmidsOf(t, e.Run(t, "pminfo", "-m", "perfevent")) }
	// What pmcd did with the agents while the test ran, for the failure
	// messages: an agent it cleaned up and restarted is the first suspect
	// when pmlogger dies.
	pmcdLog := filepath.Join(e.PCP.Get("PCP_LOG_DIR"), "pmcd", "pmcd.log")
	logFrom := fileSize(pmcdLog)
	pmcdSaid := func() string { return agentEvents(pmcdLog, logFrom) }

	e.InstallC(t)
	c1 := pminfo()

	// Install with an earlier map that gives a C agent's number to
	// another name says that it keeps the map, and which names differ.
	taken := ""
	for name, pmid := range c1 {
		if cl := clusterOf(pmid); cl != "static" && strings.HasSuffix(name, ".value") {
			taken = cl
			break
		}
	}
	writeFile(t, pmids, taken+" hwcounters.cpu_clock\n")
	out := e.script(t, Cmd{Dir: e.Home, Args: []string{"./Install", "--pipe"}}, "Check perfevent metrics have appeared")
	for _, want := range []string{"Install: keeping the PMID map " + pmids + ": the names in it keep their PMIDs",
		"Install: the PMID map " + pmids + " numbers 1 of the names PCP's C agent serves here"} {
		if !strings.Contains(out, want) {
			t.Errorf("Install with an earlier map: its transcript lacks %q:\n%s", want, out)
		}
	}
	e.InstallC(t)

	dir := t.TempDir()
	const logged = "perfevent.hwcounters.software.context_switches.value"
	writeFile(t, filepath.Join(dir, "config"), "log mandatory on 200 msec {\n\t"+logged+"\n\tperfevent.hwcounters.msr.tsc.value\n}\n")
	archive := filepath.Join(dir, "archive")
	logger := exec.Command("pmlogger", "-c", filepath.Join(dir, "config"), "-l", filepath.Join(dir, "pmlogger.log"), archive)
	logger.Env = e.environ()
	if err := logger.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- logger.Wait() }()
	t.Cleanup(func() { logger.Process.Signal(syscall.SIGTERM); <-exited })
	records := func() int {
		r := e.Exec(Cmd{Args: []string{"pmdumplog", "-z", archive, logged}})
		return strings.Count(r.Stdout, logged)
	}
	// Install's own check passes once the new agent answers, but pmcd may
	// still clean it up and start it again (its log then says why), and a
	// pmlogger request in flight fails with it. So pmlogger is judged only
	// once pmcd reports the agent running (pmcd.agent.status 0) and the
	// agent answers a fetch, and its failures quote pmcd's log.
	agentUp := func(step string) {
		t.Helper()
		var last string
		ok := testwait.Until(Settle, func() bool {
			r := e.Try("pminfo", "-f", "pmcd.agent.status", "perfevent.active")
			last = r.Stdout + r.Stderr
			return r.Err == nil && strings.Contains(r.Stdout, `inst [127 or "perfevent"] value 0`+"\n") &&
				strings.Contains(r.Stdout, "perfevent.active\n    value ")
		})
		if !ok {
			t.Fatalf("after %s pmcd did not report the perfevent agent running within %v:\n%s\npmcd's log of the agents since the test began:\n%s",
				step, Settle, last, pmcdSaid())
		}
	}
	alive := func(step string) {
		t.Helper()
		agentUp(step)
		n := records()
		waitFor(t, Settle, "pmlogger to log "+logged+" after "+step, func() bool {
			select {
			case err := <-exited:
				exited <- err
				said := pmcdSaid()
				why := "pmcd's log shows no cleanup of the agent but those of the switches"
				if c := unplannedCleanups(said); c != "" {
					why = "pmcd cleaned up the agent on its own, not for a switch: " + c
				}
				t.Fatalf("pmlogger exited after %s: %v; %s\n%s\npmcd's log of the agents since the test began:\n%s",
					step, err, why, tail(filepath.Join(dir, "pmlogger.log"), 20), said)
			default:
			}
			return records() > n
		})
	}
	alive("the C agent's install")

	out = e.script(t, Cmd{Dir: e.Home, Args: []string{"./Install", "--pipe", "--c-pmids"}}, "Check perfevent metrics have appeared")
	if !strings.Contains(out, "the names PCP's C agent serves take its PMIDs") {
		t.Errorf("Install --c-pmids does not say what it did with the map:\n%s", out)
	}
	g := pminfo()
	var lost []string
	for name, pmid := range c1 {
		if g[name] != pmid {
			lost = append(lost, name+" "+pmid+" (ours "+g[name]+")")
		}
	}
	sort.Strings(lost)
	if len(lost) > 0 {
		t.Errorf("after the switch to ours, %d of the C agent's %d names lost their PMID:\n\t%s", len(lost), len(c1), strings.Join(lost, "\n\t"))
	}
	alive("the switch to ours")

	e.InstallC(t)
	c2 := pminfo()
	if len(c2) != len(c1) {
		t.Errorf("the C agent serves %d names after the round trip, %d before", len(c2), len(c1))
	}
	for name, pmid := range c1 {
		if c2[name] != pmid {
			t.Errorf("after the round trip the C agent serves %s as %q, before as %s", name, c2[name], pmid)
		}
	}
	alive("the switch back to the C agent")

	// The archive holds the logged metric under one PMID throughout.
	r := e.Exec(Cmd{Args: []string{"pminfo", "-m", "-a", archive, logged}})
	if want := logged + " PMID: " + c1[logged]; !strings.Contains(r.Stdout, want) {
		t.Errorf("the archive's %s: %s; want %q", logged, r, want)
	}
}

// make install says which perfalloc a shell finds first, and why, when a
// distribution's is on PATH too (scripts/which-perfalloc).
func TestWhichPerfallocSaysWhichComesFirst(t *testing.T) {
	root := t.TempDir()
	local, usr, home := filepath.Join(root, "local"), filepath.Join(root, "usr"), filepath.Join(root, "home")
	for _, d := range []string{local, usr, home} {
		os.Mkdir(d, 0o755)
	}
	for _, c := range []string{"perfalloc", "pmdaperfevent"} {
		writeFile(t, filepath.Join(home, c), "#! /bin/sh\n")
		os.Chmod(filepath.Join(home, c), 0o755)
		os.Symlink(filepath.Join(home, c), filepath.Join(local, c))
	}
	writeFile(t, filepath.Join(usr, "perfalloc"), "#! /bin/sh\n") // the distribution's
	os.Chmod(filepath.Join(usr, "perfalloc"), 0o755)
	script := filepath.Join(repoRoot(), "scripts", "which-perfalloc")
	run := func(path string) string {
		cmd := exec.Command(script, local, home)
		cmd.Env = append(os.Environ(), "PERFEVENT_STD_PATH="+path)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", script, err, out)
		}
		return string(out)
	}
	out := run(local + ":" + usr)
	if want := "note: perfalloc on PATH is ours (" + local + "/perfalloc -> " + home + "/perfalloc), found before " + usr + "/perfalloc, because " + local + " comes first in PATH"; !strings.Contains(out, want) {
		t.Errorf("ours first:\n%s\nwant %q", out, want)
	}
	if want := "note: pmdaperfevent on PATH is ours: " + local + "/pmdaperfevent"; !strings.Contains(out, want) {
		t.Errorf("ours alone:\n%s\nwant %q", out, want)
	}
	out = run(usr + ":" + local)
	if want := "note: perfalloc on PATH is " + usr + "/perfalloc, found before ours (" + local + "/perfalloc) because its directory comes first in PATH"; !strings.Contains(out, want) {
		t.Errorf("the distribution's first:\n%s\nwant %q", out, want)
	}
}

// After scripts/setup (make install), both commands are on the usual PATH
// and work from any directory: perfalloc --version, and pmdaperfevent
// --check, which finds the configuration pmcd runs the agent with.
func TestCommandsOnPath(t *testing.T) {
	e := Direct(t)
	std := "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	for _, c := range []string{"perfalloc", "pmdaperfevent"} {
		r := e.Exec(Cmd{Dir: "/", Args: []string{"sh", "-c", "PATH=" + std + "; command -v " + c}})
		got := strings.TrimSpace(r.Stdout)
		if got == "" {
			unmet(t, "needs %s on PATH (make install links it into /usr/local/bin)", c)
		}
		if real, err := filepath.EvalSymlinks(got); err != nil || real != filepath.Join(e.Home, c) {
			t.Errorf("%s on PATH is %s (%s, %v); want a link to %s", c, got, real, err, filepath.Join(e.Home, c))
		}
	}
	r := e.Exec(Cmd{Dir: "/", Args: []string{"sh", "-c", "PATH=" + std + "; perfalloc --version"}})
	if r.Err != nil || !strings.HasPrefix(r.Stdout, "perfalloc ") {
		t.Errorf("perfalloc --version from /: %s", r)
	}
	r = e.Exec(Cmd{Dir: "/", Args: []string{"sh", "-c", "PATH=" + std + "; pmdaperfevent --check"}})
	if conf := filepath.Join(e.Home, "perfevent.conf"); !strings.Contains(r.Stdout, conf+": ") || strings.Contains(r.Stderr+r.Stdout, "no such file") {
		t.Errorf("pmdaperfevent --check from / does not check %s: %s", conf, r)
	}
}

// An earlier install's PMID map wins over the C agent's numbers: its names
// keep their PMIDs, a C agent's name whose number the map gives another
// name gets one of its own, and the log says so once.
func TestEarlierMapKeepsItsNumbers(t *testing.T) {
	cPath, cText := cStockConfig(t)
	ours, err := os.ReadFile(filepath.Join(repoRoot(), "perfevent.conf"))
	if err != nil {
		t.Fatal(err)
	}
	c := pmidsOf(t, StartLab(t, Agent{Go: false, Config: cText}).Run(t, "pminfo", "-m", "perfevent"))
	// Two of the C agent's counters: a's number goes to our cpu_clock, b
	// keeps a number the C agent does not give it.
	var names []string
	for name := range c {
		if strings.HasSuffix(name, ".value") && clusterOf(c[name]) != "static" {
			names = append(names, name)
		}
	}
	sort.Slice(names, func(i, j int) bool { return c[names[i]] < c[names[j]] })
	if len(names) < 3 {
		t.Fatalf("the C agent serves %d counters here, want 3 or more: %v", len(names), c)
	}
	a, b := names[0], names[1]
	key := func(n string) string { return strings.TrimSuffix(strings.TrimPrefix(n, "perfevent."), ".value") }
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	mapPath := filepath.Join(dir, "perfevent", "pmids")
	os.MkdirAll(filepath.Dir(mapPath), 0o755)
	writeFile(t, mapPath, clusterOf(c[a])+" hwcounters.cpu_clock\n999 "+key(b)+"\n")

	l := StartLab(t, Agent{Go: true, Config: string(ours), Args: []string{"-pmids", mapPath, "-c-layout", cPath}})
	g := pmidsOf(t, l.Run(t, "pminfo", "-m", "perfevent"))
	if want := "127." + clusterOf(c[a]) + ".0"; g["perfevent.hwcounters.cpu_clock.value"] != want {
		t.Errorf("cpu_clock is %s; want %s, the map's", g["perfevent.hwcounters.cpu_clock.value"], want)
	}
	if g[b] != "127.999.0" {
		t.Errorf("%s is %s; want 127.999.0, the map's", b, g[b])
	}
	if n, _ := strconv.Atoi(clusterOf(g[a])); n < 2048 {
		t.Errorf("%s is %s; want a number of its own, from 127.2048: the map gives its 127.%s to cpu_clock", a, g[a], clusterOf(c[a]))
	}
	for _, n := range names[2:] {
		if g[n] != c[n] {
			t.Errorf("%s is %s; want the C agent's %s, which the map leaves free", n, g[n], c[n])
		}
	}
	const said = "numbers 2 of the names PCP's C agent serves here"
	waitLogCount(t, l, said, 1)
	syscall.Kill(l.AgentPID(t), syscall.SIGHUP)
	waitLog(t, l, "reload done", Settle)
	if n := logCount(l, said); n != 1 {
		t.Errorf("after a reload the log has %d lines about the map's numbers, want the one of start-up", n)
	}
}
