package qa

// Faults under a lab pmcd: the agent keeps serving what it still can and
// logs one clear line per problem. perfalloc holders that die are in
// perfalloc_test.go (TestPerfallocReservation/killed); unknown PDUs and
// failing counter reads are unit tests of internal/pmda and
// internal/counter.

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"perfevent/internal/testwait"
)

// The lock file deleted, replaced, made unreadable or made a symbolic link
// under an agent that stays root (-U root): it logs each once, keeps
// serving, and puts a safe lock file back where it can, so that perfalloc
// works again.
func TestFaultLockFileRoot(t *testing.T) {
	l := StartLab(t, Agent{Go: true, Args: []string{"-U", "root"}})
	pa := perfallocBinary(t, l)
	want := activeAll(t, l)
	recreated := fmt.Sprintf("Warning: lock file %s was deleted: created it again", l.Lock)
	replaced := fmt.Sprintf("Warning: lock file %s was replaced: watching the new file", l.Lock)

	// reserveOK runs a reservation through our perfalloc and checks that
	// the agent released and took back its counters.
	reserveOK := func(t *testing.T) {
		t.Helper()
		r := l.Exec(Cmd{Args: []string{pa, "--verbose", "-f", l.Lock, "--", "pmprobe", "-v", "perfevent.active"}})
		if r.Err != nil || strings.TrimSpace(r.Stdout) != "perfevent.active 1 0" || !strings.Contains(r.Stderr, "counters released by pmdaperfevent") {
			t.Errorf("a reservation after the fault does not work:\n%s\n%s", r, l.Logs())
		}
		waitActive(t, l, want)
	}

	t.Run("deleted", func(t *testing.T) {
		n := logCount(l, recreated)
		if err := os.Remove(l.Lock); err != nil {
			t.Fatal(err)
		}
		waitLogCount(t, l, recreated, n+1)
		checkLockFile(t, l.Lock, 0)
		checkServing(t, l, want)
		reserveOK(t)
	})

	t.Run("replaced", func(t *testing.T) {
		// A new file renamed over it, as an editor or a package would.
		n := logCount(l, replaced)
		renameOver(t, l.Lock, func(tmp string) error { return os.WriteFile(tmp, nil, 0o600) })
		waitLogCount(t, l, replaced, n+1)
		checkLockFile(t, l.Lock, 0)
		checkServing(t, l, want)
		reserveOK(t)
	})

	t.Run("symlink", func(t *testing.T) {
		target := filepath.Join(l.Dir, "elsewhere")
		writeFile(t, target, "")
		line := fmt.Sprintf("Warning: lock file %s is a symbolic link: refusing to follow it (remove it and the agent will create the file)", l.Lock)
		renameOver(t, l.Lock, func(tmp string) error { return os.Symlink(target, tmp) })
		waitLogCount(t, l, line, 1)
		checkServing(t, l, want)
		if fi, err := os.Lstat(target); err != nil || fi.Mode().Perm() != 0o644 {
			t.Errorf("the symlink's target was touched: %v %v", fi.Mode(), err)
		}
		r := l.Exec(Cmd{Args: []string{pa, "-f", l.Lock, "--", "true"}})
		if exitCode(r.Err) != 1 || !strings.Contains(r.Stderr, "is a symbolic link: refusing to follow it") {
			t.Errorf("perfalloc through the symlink: want exit 1 and a refusal:\n%s", r)
		}
		// The administrator does as told: the agent recreates the file.
		n := logCount(l, recreated)
		if err := os.Remove(l.Lock); err != nil {
			t.Fatal(err)
		}
		waitLogCount(t, l, recreated, n+1)
		checkLockFile(t, l.Lock, 0)
		reserveOK(t)
	})

	t.Run("mode000", func(t *testing.T) {
		// A mode 000 file locks out every perfalloc user but root: the
		// agent puts the mode back and says so.
		if err := os.Chmod(l.Lock, 0); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(l.Lock, 0o644) })
		waitLogCount(t, l, fmt.Sprintf("Warning: lock file %s had mode 0000: put back 0644", l.Lock), 1)
		checkLockFile(t, l.Lock, 0)
		checkServing(t, l, want)
		r := l.Exec(Cmd{Args: append(asNobody(t), pa, "--verbose", "-f", l.Lock, "--", "true")})
		if r.Err != nil || !strings.Contains(r.Stderr, "counters released by pmdaperfevent") {
			t.Errorf("perfalloc as nobody after the agent repaired the mode:\n%s", r)
		}
		waitActive(t, l, want)
	})
}

// The same faults under an agent running as the pcp user (the default) in
// a lock directory that belongs to root, as installed: it cannot put a lock
// file back, keeps serving, and says so once; perfalloc fails loudly
// rather than reserve nothing.
func TestFaultLockFileUser(t *testing.T) {
	// The PMID map elsewhere, as installed: the lab would otherwise give
	// the lock file's directory to the agent's user.
	pm := t.TempDir()
	for _, d := range []string{filepath.Dir(pm), pm} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	l := StartLab(t, Agent{Go: true, Args: []string{"-pmids", filepath.Join(pm, "pmids")}})
	pa := perfallocBinary(t, l)
	want := activeAll(t, l)
	if fi, err := os.Stat(filepath.Dir(l.Lock)); err != nil || fi.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Fatalf("the lock file's directory should belong to root: %v", err)
	}
	cannot := fmt.Sprintf("Warning: lock file %s was deleted, and the agent (uid ", l.Lock)

	for _, c := range []struct {
		name     string
		do       func(t *testing.T)
		logLine  string // "" when the agent cannot tell
		perfErr  string // what our perfalloc says then
		skipNote string
	}{
		{
			// The agent cannot create a file in root's directory: it says
			// so and how to fix it.
			name:    "deleted",
			do:      func(t *testing.T) { os.Remove(l.Lock) },
			logLine: cannot,
			perfErr: "perfalloc: lock file " + l.Lock + " does not exist: is pmdaperfevent running? (it creates the lock file)",
		},
		{
			// Root put a new file in place: the agent adopts it,
			// read-only, and reservations go on working.
			name: "replaced",
			do: func(t *testing.T) {
				renameOver(t, l.Lock, func(tmp string) error { return os.WriteFile(tmp, nil, 0o644) })
			},
			logLine: fmt.Sprintf("Warning: lock file %s was replaced: watching the new file", l.Lock),
		},
		{
			name: "symlink",
			do: func(t *testing.T) {
				target := filepath.Join(l.Dir, "elsewhere")
				writeFile(t, target, "")
				renameOver(t, l.Lock, func(tmp string) error { return os.Symlink(target, tmp) })
			},
			logLine: fmt.Sprintf("Warning: lock file %s is a symbolic link: refusing to follow it (remove it and the agent will create the file)", l.Lock),
			perfErr: "perfalloc: lock file " + l.Lock + " is a symbolic link: refusing to follow it",
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			// A fresh agent each time, which creates the lock file while
			// still root.
			os.Remove(l.Lock)
			l.RestartAgent(t)
			checkLockFile(t, l.Lock, 0)
			reserveWorks(t, l, pa, want)

			c.do(t)
			waitLogCount(t, l, c.logLine, 1)
			checkServing(t, l, want)
			if c.perfErr == "" {
				reserveWorks(t, l, pa, want)
				return
			}
			r := l.Exec(Cmd{Args: []string{pa, "-f", l.Lock, "--timeout", "500ms", "--", "true"}})
			if exitCode(r.Err) != 1 || !strings.Contains(r.Stderr, c.perfErr) {
				t.Errorf("perfalloc after the lock file was %s: want exit 1 and %q:\n%s", c.name, c.perfErr, r)
			}
			if got := active(t, l); got != want {
				t.Errorf("perfevent.active = %d after a failed reservation, want %d", got, want)
			}
		})
	}
}

// pmcd restarts, and a killed agent that pmcd starts again: the agent
// comes back with the same PMIDs, also for a reordered configuration.
func TestFaultRestart(t *testing.T) {
	l := StartLab(t, Agent{Go: true})
	want := activeAll(t, l)
	before := pmids(t, l)
	if len(before) < 20 {
		t.Fatalf("only %d perfevent metrics at the start:\n%v", len(before), before)
	}

	t.Run("pmcd", func(t *testing.T) {
		pid := l.AgentPID(t)
		l.Restart(t)
		if l.AgentPID(t) == pid {
			t.Fatalf("the agent pid %d survived the restart of pmcd", pid)
		}
		samePMIDs(t, before, pmids(t, l), false)
		if got := active(t, l); got != want {
			t.Errorf("perfevent.active = %d after the restart, want %d", got, want)
		}
	})

	t.Run("agent-killed", func(t *testing.T) {
		old := l.AgentPID(t)
		pid := l.RestartAgent(t) // SIGKILL, then SIGHUP to pmcd
		if pid == old {
			t.Fatalf("agent pid %d unchanged", pid)
		}
		samePMIDs(t, before, pmids(t, l), false)
		if got := active(t, l); got != want {
			t.Errorf("perfevent.active = %d after the agent's restart, want %d", got, want)
		}
		reserveWorks(t, l, perfallocBinary(t, l), want)
	})

	t.Run("reserved-across-restart", func(t *testing.T) {
		// A reservation outlives the agent: the new one starts with its
		// counters released and takes them when the holder lets go.
		pa := perfallocBinary(t, l)
		h := startHolder(t, l, pa, "-D", "--verbose", "-f", l.Lock)
		h.waitStderr(t, "counters released by pmdaperfevent", Settle)
		l.Agent.Inactive = true
		l.Restart(t)
		l.Agent.Inactive = false
		if got := active(t, l); got != 0 {
			t.Errorf("perfevent.active = %d from an agent started under a reservation", got)
		}
		out := l.Run(t, pa, "-f", l.Lock, "--status")
		if !regexp.MustCompile(fmt.Sprintf(`(?m)^agent: +pmdaperfevent, pid %d,`, l.AgentPID(t))).MatchString(out) ||
			!regexp.MustCompile(fmt.Sprintf(`(?m)^holders: +%d$`, h.pid())).MatchString(out) ||
			!regexp.MustCompile(`(?m)^counters: +released since `).MatchString(out) {
			t.Errorf("perfalloc --status from the new agent:\n%s", out)
		}
		if code := h.stop(t, syscall.SIGINT); code != 0 {
			t.Errorf("perfalloc: exit %d", code)
		}
		waitActive(t, l, want)
		waitValuesMove(t, l, "perfevent.hwcounters.cpu_clock.value")
	})

	t.Run("reordered-config", func(t *testing.T) {
		// The lines of [perf] reversed and one event dropped: the PMID map
		// keeps every remaining name where it was.
		lines := strings.Split(VMConfig, "\n")
		var perf []string
		for _, s := range lines[1:] {
			if s == "" {
				break
			}
			if s != "task-clock" {
				perf = append([]string{s}, perf...)
			}
		}
		conf := "[perf]\n" + strings.Join(perf, "\n") + "\n" + strings.Join(lines[1+9:], "\n")
		writeFile(t, l.Conf, conf)
		l.Restart(t)
		after := pmids(t, l)
		if _, ok := after["perfevent.hwcounters.task_clock.value"]; ok {
			t.Errorf("task_clock is still served after its line was removed:\n%s", conf)
		}
		samePMIDs(t, before, after, true)
	})
}

// A descriptor limit that the agent cannot raise: it opens what fits,
// serves that, and logs one line per event that did not fit, with advice.
func TestFaultFileLimit(t *testing.T) {
	if _, err := os.Stat("/usr/bin/prlimit"); err != nil {
		unmet(t, "needs /usr/bin/prlimit (util-linux)")
	}
	var conf strings.Builder
	conf.WriteString("[perf]\n")
	events := []string{"cpu-clock", "task-clock", "page-faults", "context-switches", "cpu-migrations", "minor-faults", "major-faults", "alignment-faults", "emulation-faults"}
	for _, e := range events {
		conf.WriteString(e + "\n")
	}
	conf.WriteString("\n[dynamic]\n")
	dyn := []string{"software.cpu-clock", "software.task-clock", "software.page-faults", "software.context-switches", "software.cpu-migrations", "msr.tsc"}
	for _, e := range dyn {
		conf.WriteString(e + "\n")
	}
	events = append(events, dyn...)
	l := StartLab(t, Agent{Go: true, Config: conf.String()})
	full := activeAll(t, l)
	ncpu := len(onlineCPUs(t))
	if full != len(events)*ncpu {
		t.Fatalf("perfevent.active = %d without a limit, want %d events × %d CPUs", full, len(events), ncpu)
	}
	before := pmids(t, l)

	// 30 descriptors: the agent's own (about 10), the 8 it keeps back
	// while the counters open, and room for about a third of them.
	const limit = 30
	pmcdConf := filepath.Join(l.Dir, "pmcd.conf")
	data := readFile(t, pmcdConf)
	limited := strings.Replace(data, " pipe binary ", fmt.Sprintf(" pipe binary /usr/bin/prlimit --nofile=%d:%d ", limit, limit), 1)
	if limited == data {
		t.Fatalf("no pipe agent line in %s:\n%s", pmcdConf, data)
	}
	writeFile(t, pmcdConf, limited)
	// Two lines swapped: only the PMID map keeps their PMIDs apart.
	writeFile(t, l.Conf, strings.Replace(conf.String(), "cpu-clock\ntask-clock\n", "task-clock\ncpu-clock\n", 1))
	started := l.RestartAgent(t)
	// Once, in a run of the whole suite, that agent was gone a moment
	// later and another one ran: take whichever runs now.
	pid := l.AgentPID(t)
	if pid != started {
		t.Logf("pmcd started agent %d, and then %d", started, pid)
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d/limits", pid)); err != nil {
		t.Fatalf("agent %d is gone: %v\n%s\n--- %s.prev\n%s", pid, err, l.Logs(), l.AgentLog, tail(l.AgentLog+".prev", 15))
	}
	if lim := procLimit(t, pid, "Max open files"); lim != fmt.Sprintf("%d %d", limit, limit) {
		t.Fatalf("the agent's descriptor limit is %q, want %d:%d", lim, limit, limit)
	}
	log := readFile(t, l.AgentLog)

	got := active(t, l)
	if got <= 0 || got >= full {
		t.Fatalf("perfevent.active = %d under RLIMIT_NOFILE=%d, want some but not all of %d\n%s", got, limit, full, log)
	}
	// Each event has its values, on the CPUs where it opened, or one
	// warning that names its line and gives the advice.
	advice := fmt.Sprintf("descriptor limit reached (RLIMIT_NOFILE soft=%d, hard=%d) (EMFILE)", limit, limit)
	sum, skipped := 0, 0
	for i, e := range events {
		metric := "perfevent.hwcounters." + strings.ReplaceAll(e, "-", "_") + ".value"
		v, err := probe(t, l, metric)
		if err == nil {
			sum += len(v)
		}
		lineNo := i + 2
		switch e {
		case "cpu-clock":
			lineNo = 3
		case "task-clock":
			lineNo = 2
		}
		if i >= 9 {
			lineNo = i + 4 // past the blank line and [dynamic]
		}
		warn := regexp.MustCompile(fmt.Sprintf(`(?m)^.* Warning: %s:%d: %s: .*; cannot count on (cpus [-0-9,]+|cpu\d+): %s; (skipped|counting on (?:cpus [-0-9,]+|cpu\d+))$`,
			regexp.QuoteMeta(l.Conf), lineNo, regexp.QuoteMeta(e), regexp.QuoteMeta(advice)))
		warnings := warn.FindAllStringSubmatch(log, -1)
		switch {
		case err == nil && len(v) == ncpu:
			if len(warnings) != 0 {
				t.Errorf("%s opened on every CPU, but the log says %q", e, warnings[0][0])
			}
		case err == nil:
			if len(warnings) != 1 || warnings[0][2] == "skipped" {
				t.Errorf("%s counts on %d of %d CPUs; want one warning saying so, got %q", e, len(v), ncpu, warnings)
			}
		default:
			skipped++
			if len(warnings) != 1 || warnings[0][2] != "skipped" {
				t.Errorf("%s has no values (%v); want one warning with the advice, got %q", e, err, warnings)
			}
		}
	}
	if sum != got || skipped == 0 {
		t.Errorf("perfevent.active = %d, but the events have %d values and %d have none", got, sum, skipped)
	}
	if t.Failed() {
		t.Logf("the agent's log:\n%s", log)
	}
	waitValuesMove(t, l, "perfevent.hwcounters.cpu_clock.value")

	// The counters take what is left after everything else the agent
	// needs: it still runs as pcp, perfalloc still works, and the PMID
	// map still keeps every name's PMID.
	if st := readFile(t, fmt.Sprintf("/proc/%d/status", pid)); regexp.MustCompile(`(?m)^Uid:\s+0\s`).MatchString(st) {
		t.Errorf("the agent stays root under the descriptor limit:\n%s", log)
	}
	r := l.Exec(Cmd{Args: []string{perfallocBinary(t, l), "--verbose", "-f", l.Lock, "--timeout", "2s", "--", "true"}})
	if r.Err != nil || !strings.Contains(r.Stderr, "counters released by pmdaperfevent") {
		t.Errorf("perfalloc under the agent's descriptor limit: %s\n%s", r, log)
	}
	var moved []string
	for name, id := range pmids(t, l) {
		if before[name] != id {
			moved = append(moved, fmt.Sprintf("%s %s (was %s)", name, id, before[name]))
		}
	}
	if len(moved) > 0 {
		t.Errorf("under the descriptor limit metrics changed PMIDs: %s", strings.Join(moved, ", "))
	}
}

// A configuration that is garbage, or missing: the agent starts anyway,
// serves perfevent.version and perfevent.active, and logs where the
// problems are; a fixed file and a SIGHUP bring the counters.
func TestFaultConfig(t *testing.T) {
	t.Run("garbage", func(t *testing.T) {
		garbage := "this is not a config\n[perf\ncycles cpux\n\x00\x01\x7f\xfe binary\n[]\n"
		l := StartLab(t, Agent{Go: true, Config: garbage, Inactive: true})
		checkStatic(t, l)
		for _, re := range []string{
			regexp.QuoteMeta(l.Conf) + `:1: `,
			regexp.QuoteMeta(l.Conf) + `:2: `,
			regexp.QuoteMeta(l.Conf) + `:5: `,
			`Warning: no counter could be opened; serving perfevent.version and perfevent.active only`,
		} {
			if !regexp.MustCompile(re).MatchString(readFile(t, l.AgentLog)) {
				t.Errorf("the agent's log lacks %s:\n%s", re, tail(l.AgentLog, 20))
			}
		}
		writeFile(t, l.Conf, "[perf]\ncpu-clock\n")
		syscall.Kill(l.AgentPID(t), syscall.SIGHUP)
		waitActive(t, l, len(onlineCPUs(t)))
	})

	t.Run("missing", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		conf := filepath.Join(dir, "perfevent.conf")
		l := StartLab(t, Agent{Go: true, Args: []string{"-c", conf}, Inactive: true})
		checkStatic(t, l)
		waitLog(t, l, "Error: open "+conf+": no such file or directory; serving perfevent.version and perfevent.active only until this is fixed and the agent gets SIGHUP", 0)
		writeFile(t, conf, "[perf]\ncpu-clock\ntask-clock\n")
		syscall.Kill(l.AgentPID(t), syscall.SIGHUP)
		waitActive(t, l, 2*len(onlineCPUs(t)))
	})
}

// By default the agent runs as the pcp user with CAP_PERFMON alone, and
// that is enough to reopen its counters after a reservation.
func TestFaultLeastPrivilege(t *testing.T) {
	l := StartLab(t, Agent{Go: true})
	want := activeAll(t, l)
	u, err := user.Lookup("pcp")
	if err != nil {
		unmet(t, "needs the pcp user: %v", err)
	}
	// Credentials are per thread: every thread of the agent must have
	// dropped, not only the one /proc/PID/status speaks for.
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", l.AgentPID(t)))
	if err != nil || len(tasks) < 2 {
		t.Fatalf("the agent's threads: %v %v", tasks, err)
	}
	const capPerfmon = "0000004000000000" // bit 38
	for _, path := range tasks {
		status := readFile(t, path)
		field := func(name string) string {
			m := regexp.MustCompile(`(?m)^` + name + `:\s*(.*)$`).FindStringSubmatch(status)
			if m == nil {
				t.Fatalf("%s has no %s:\n%s", path, name, status)
			}
			return strings.Join(strings.Fields(m[1]), " ")
		}
		for name, w := range map[string]string{
			"Uid":        strings.Repeat(u.Uid+" ", 3) + u.Uid,
			"Gid":        strings.Repeat(u.Gid+" ", 3) + u.Gid,
			"CapEff":     capPerfmon,
			"CapPrm":     capPerfmon,
			"CapInh":     "0000000000000000",
			"CapAmb":     "0000000000000000",
			"NoNewPrivs": "1",
		} {
			if got := field(name); got != w {
				t.Errorf("agent thread %s: %s %q, want %q", path, name, got, w)
			}
		}
	}
	reserveWorks(t, l, perfallocBinary(t, l), want)
	waitValuesMove(t, l, "perfevent.hwcounters.cpu_clock.value")
	if n := logCount(l, "reopening counters:"); n != 0 {
		t.Errorf("the agent could not reopen its counters:\n%s", tail(l.AgentLog, 10))
	}
}

// reserveWorks runs a reservation through perfalloc and checks that the
// agent gave up its counters during it and took them back after.
func reserveWorks(t *testing.T, l *Lab, pa string, want int) {
	t.Helper()
	r := l.Exec(Cmd{Args: []string{pa, "--verbose", "-f", l.Lock, "--", "pmprobe", "-v", "perfevent.active"}})
	if r.Err != nil || strings.TrimSpace(r.Stdout) != "perfevent.active 1 0" || !strings.Contains(r.Stderr, "counters released by pmdaperfevent") {
		t.Fatalf("a reservation does not work:\n%s\n%s", r, l.Logs())
	}
	waitActive(t, l, want)
}

// checkServing checks that the agent still serves every counter, and that
// they count.
func checkServing(t *testing.T, l *Lab, want int) {
	t.Helper()
	if got := active(t, l); got != want {
		t.Errorf("perfevent.active = %d, want %d", got, want)
	}
	waitValuesMove(t, l, "perfevent.hwcounters.cpu_clock.value")
}

// checkStatic checks that an agent without counters still answers.
func checkStatic(t *testing.T, l *Lab) {
	t.Helper()
	if v, err := probe(t, l, "perfevent.version"); err != nil || len(v) != 1 || !regexp.MustCompile(`^"\d+\.\d+\.\d+"$`).MatchString(v[0]) {
		t.Errorf("perfevent.version: %v %v", v, err)
	}
	if got := active(t, l); got != 0 {
		t.Errorf("perfevent.active = %d without counters", got)
	}
}

// checkLockFile checks that the lock file is a regular file of mode 0644
// owned by uid.
func checkLockFile(t *testing.T, path string, uid uint32) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatalf("lock file: %v", err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o644 || fi.Sys().(*syscall.Stat_t).Uid != uid {
		t.Errorf("lock file %s: %v owned by uid %d, want a regular file 0644 of uid %d", path, fi.Mode(), fi.Sys().(*syscall.Stat_t).Uid, uid)
	}
}

// renameOver makes a new entry with make at a temporary name beside path
// and renames it over path, so that the path never goes missing (a
// missing lock file would be recreated by the agent at once).
func renameOver(t *testing.T, path string, make func(tmp string) error) {
	t.Helper()
	tmp := path + ".tmp"
	os.Remove(tmp)
	if err := make(tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// waitLogCount waits until the agent's log has n lines containing s, then
// checks for a while that no more come: one line per problem, not one per
// poll.
func waitLogCount(t *testing.T, l *Lab, s string, n int) {
	t.Helper()
	if !testwait.Until(Settle, func() bool { return logCount(l, s) >= n }) {
		t.Fatalf("the agent's log has %d lines with %q after %v, want %d\n%s", logCount(l, s), s, Settle, n, tail(l.AgentLog, 15))
	}
	time.Sleep(300 * time.Millisecond) // three polls
	if got := logCount(l, s); got != n {
		t.Errorf("the agent's log has %d lines with %q, want %d:\n%s", got, s, n, tail(l.AgentLog, 15))
	}
}

// pmids maps each perfevent metric to its PMID, from pminfo -m.
func pmids(t *testing.T, l *Lab) map[string]string {
	t.Helper()
	out := l.Run(t, "pminfo", "-m", "perfevent")
	m := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		name, id, ok := strings.Cut(line, " PMID: ")
		if !ok {
			t.Fatalf("pminfo -m: unexpected line %q", line)
		}
		m[name] = id
	}
	return m
}

// samePMIDs compares two pminfo -m maps; with subset, after may lack names.
func samePMIDs(t *testing.T, before, after map[string]string, subset bool) {
	t.Helper()
	if !subset && len(after) != len(before) {
		t.Errorf("%d metrics before, %d after", len(before), len(after))
	}
	common := 0
	for name, id := range before {
		got, ok := after[name]
		switch {
		case !ok && !subset:
			t.Errorf("%s (PMID %s) is gone", name, id)
		case ok && got != id:
			t.Errorf("%s: PMID %s, was %s", name, got, id)
		case ok:
			common++
		}
	}
	for name := range after {
		if _, ok := before[name]; !ok {
			t.Errorf("%s (PMID %s) is new", name, after[name])
		}
	}
	if common < 10 {
		t.Errorf("only %d metrics in common", common)
	}
}

// procLimit returns the soft and hard values of one limit of a process.
func procLimit(t *testing.T, pid int, name string) string {
	t.Helper()
	for _, line := range strings.Split(readFile(t, fmt.Sprintf("/proc/%d/limits", pid)), "\n") {
		if rest, ok := strings.CutPrefix(line, name); ok {
			f := strings.Fields(rest)
			if len(f) >= 2 {
				return f[0] + " " + f[1]
			}
		}
	}
	t.Fatalf("/proc/%d/limits has no %q", pid, name)
	return ""
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
