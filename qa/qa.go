// Package qa drives the installed perfevent agent under the machine's real
// pmcd, with PCP's own clients (pminfo, pmprobe, pmval, dbpmda, ...).
//
// The tests change system state: they run the agent's Install and Remove,
// restart pmcd and switch between the Go and the C agent. Each test puts
// back what it found, and the baseline the suite expects and leaves is the
// Go agent registered in pipe mode (what scripts/setup produces).
//
// Because they change the machine's pmcd, the tests that use it run only
// when PERFEVENT_QA is set (`make qa` and `make check` set it to 1): a
// plain `go test ./...` as root on a production host must not reinstall
// its agents. Tests that start a private pmcd (lab.go) need only root.
// Without root or a reachable pmcd the tests skip; with PERFEVENT_QA=1
// those skips are failures instead.
// Tests in different processes take turns through an flock(2) on
// $PCP_TMPFILE_DIR/perfevent-qa.lock; anything else that changes the
// system pmcd can join in with `flock -o` on the same file (-o, or a pmcd
// started under the lock inherits it and holds it for good).
// PERFEVENT_QA_LOCKED=1 says that the caller holds that lock already (a
// `flock -o LOCK sh -c 'make install && go test ...'`), which the test
// would otherwise wait for in vain.
//
// PERFEVENT_QA_STANDIN=1 says that the installed pmdaperfevent is another
// agent, such as a copy of the C one, to compare behaviour; tests that
// check what only the Go agent does call GoAgentOnly and skip then.
// PERFEVENT_QA_AGENT names the binary that dbpmda runs (default
// bin/pmdaperfevent).
package qa

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"perfevent/internal/pcpconf"
	"perfevent/internal/testwait"
)

// Domain is perfevent's performance metrics domain.
const Domain = 127

// CommandTimeout bounds every command a helper runs. Install waits for
// pmcd and the agent several times over; nothing else comes close.
var CommandTimeout = 2 * time.Minute

// Settle bounds a wait for what the agent, pmcd or a client does within
// milliseconds on an idle machine: a counter that moves, a log line, a
// record in an archive. A CI machine busy with other work can delay any of
// them by seconds, and a wait returns as soon as its condition holds, so
// the bound costs a passing run nothing; it only says when to give up.
// How fast these things happen is for the benchmarks (qa/bench), not for
// a test that fails when the machine is slow.
const Settle = testwait.Settle

// Env is the machine under test.
type Env struct {
	PCP   *pcpconf.Config
	Home  string // the Go agent's directory, $PCP_PMDAS_DIR/perfevent-go
	CHome string // the C agent's directory, $PCP_PMDAS_DIR/perfevent
	Repo  string // the repository root, for bin/ and install/
}

// Strict reports whether unmet prerequisites must fail rather than skip.
func Strict() bool { return os.Getenv("PERFEVENT_QA") == "1" }

// StandIn reports whether the installed agent is a stand-in for the Go one.
func StandIn() bool { return os.Getenv("PERFEVENT_QA_STANDIN") != "" }

// GoAgentOnly skips a test that checks behaviour of the Go agent that a
// stand-in does not have.
func GoAgentOnly(t testing.TB) {
	t.Helper()
	if StandIn() {
		t.Skip("needs the Go agent; PERFEVENT_QA_STANDIN says a stand-in is installed")
	}
}

// unmet skips, or fails in strict mode, naming what is missing.
func unmet(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if Strict() {
		t.Fatalf("PERFEVENT_QA=1 but %s", msg)
	}
	t.Skipf("%s (PERFEVENT_QA=1 makes this a failure)", msg)
}

// Setup checks the prerequisites of an end-to-end test (root, PCP, a
// reachable pmcd, our agent's files), and serialises the test against
// other processes running this suite. It leaves pmcd.conf alone: call
// Baseline or Keep for that.
func Setup(t testing.TB) *Env {
	t.Helper()
	if os.Getenv("PERFEVENT_QA") == "" {
		t.Skip("changes the system pmcd's agents: set PERFEVENT_QA=1 (make qa does) to run it")
	}
	if os.Geteuid() != 0 {
		unmet(t, "needs root (it installs agents and restarts pmcd)")
	}
	e := Direct(t)
	e.lock(t)
	if !e.PMCDUp() {
		unmet(t, "needs a running pmcd (pminfo -f pmcd.version fails; scripts/setup starts it)")
	}
	if fi, err := os.Stat(filepath.Join(e.Home, "pmdaperfevent")); err != nil || fi.Mode()&0o111 == 0 {
		unmet(t, "needs the agent installed in %s (run scripts/setup)", e.Home)
	}
	return e
}

// Direct returns the Env for a test that runs the agent itself, without
// pmcd (dbpmda); it needs root, because the agent opens perf events
// system-wide, and PCP's clients.
func Direct(t testing.TB) *Env {
	t.Helper()
	if os.Geteuid() != 0 {
		unmet(t, "needs root (the agent opens system-wide perf events)")
	}
	c := pcpconf.Load()
	e := &Env{
		PCP:   c,
		Home:  filepath.Join(c.Get("PCP_PMDAS_DIR"), "perfevent-go"),
		CHome: filepath.Join(c.Get("PCP_PMDAS_DIR"), "perfevent"),
		Repo:  repoRoot(),
	}
	for _, tool := range []string{"pminfo", "dbpmda"} {
		if _, err := os.Stat("/usr/bin/" + tool); err != nil {
			if _, err := exec.LookPath(tool); err != nil {
				unmet(t, "needs PCP's %s (scripts/setup installs it)", tool)
			}
		}
	}
	return e
}

// repoRoot is the directory holding go.mod, found from this source file
// (go test runs tests in the package directory, which is qa/).
func repoRoot() string {
	if wd, err := os.Getwd(); err == nil {
		for d := wd; d != "/"; d = filepath.Dir(d) {
			if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
				return d
			}
		}
	}
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}

// lock takes an exclusive flock that the test holds until its cleanup.
func (e *Env) lock(t testing.TB) {
	t.Helper()
	if os.Getenv("PERFEVENT_QA_LOCKED") == "1" {
		return
	}
	path := filepath.Join(e.PCP.Get("PCP_TMPFILE_DIR"), "perfevent-qa.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatalf("qa lock: %v", err)
	}
	deadline := time.Now().Add(15 * time.Minute)
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			f.Close()
			t.Fatalf("qa lock %s: %v (another qa run holds it?)", path, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Cleanup(func() { f.Close() })
}

// environ is the environment of every command: PCP's Python tools need
// Debian's python3 ahead of any other on PATH, PCP's admin tools (pmsignal,
// pmcd_wait) are added at the end, and PCP's own derived metrics are kept
// out of pminfo's output.
func (e *Env) environ() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "PATH=") || strings.HasPrefix(kv, "PCP_DERIVED_CONFIG=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env,
		"PATH=/usr/bin:/bin:/usr/sbin:/sbin:"+os.Getenv("PATH")+":"+e.PCP.Get("PCP_BINADM_DIR"),
		"PCP_DERIVED_CONFIG=",
	)
}

// Result is what a finished command left behind.
type Result struct {
	Cmd    string
	Stdout string
	Stderr string
	Err    error // nil on exit status 0
}

func (r Result) String() string {
	return fmt.Sprintf("$ %s\n%s%s(exit: %v)", r.Cmd, r.Stdout, r.Stderr, r.Err)
}

// Cmd describes a command to run; the zero Dir is the current directory.
type Cmd struct {
	Dir   string
	Stdin string
	Env   []string // added to the QA environment
	Args  []string
}

// Exec runs c with CommandTimeout and reports how it went; it never fails
// the test.
func (e *Env) Exec(c Cmd) Result {
	ctx, cancel := context.WithTimeout(context.Background(), CommandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.Args[0], c.Args[1:]...)
	cmd.Dir = c.Dir
	cmd.Env = append(e.environ(), c.Env...)
	cmd.Stdin = strings.NewReader(c.Stdin)
	name := strings.Join(c.Args, " ")
	if c.Dir != "" {
		name = "(cd " + c.Dir + " && " + name + ")"
	}
	// Output goes to files, not pipes: pmcd's rc script leaves a
	// background job (its agent set-up) holding the parent's stdout, and
	// a pipe would keep Wait waiting for that job too.
	out, err := os.CreateTemp("", "qa-stdout-")
	if err != nil {
		return Result{Cmd: name, Err: err}
	}
	defer os.Remove(out.Name())
	defer out.Close()
	errf, err := os.CreateTemp("", "qa-stderr-")
	if err != nil {
		return Result{Cmd: name, Err: err}
	}
	defer os.Remove(errf.Name())
	defer errf.Close()
	cmd.Stdout, cmd.Stderr = out, errf
	err = cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("timed out after %v: %w", CommandTimeout, err)
	}
	stdout, _ := os.ReadFile(out.Name())
	stderr, _ := os.ReadFile(errf.Name())
	return Result{Cmd: name, Stdout: string(stdout), Stderr: string(stderr), Err: err}
}

// Try runs a command with stdin from nothing and returns its result.
func (e *Env) Try(args ...string) Result { return e.Exec(Cmd{Args: args}) }

// Run runs a command and fails the test unless it exits 0; it returns
// the standard output.
func (e *Env) Run(t testing.TB, args ...string) string {
	t.Helper()
	r := e.Try(args...)
	if r.Err != nil {
		t.Fatalf("command failed:\n%s", r)
	}
	return r.Stdout
}

// PMCDUp reports whether pmcd answers a fetch.
func (e *Env) PMCDUp() bool {
	return e.Try("pminfo", "-f", "pmcd.version").Err == nil
}

// IPC is how pmcd talks to the agent.
type IPC struct {
	Kind string // "pipe", "unix", "inet" or "ipv6"
	Addr string // the socket path or port; "" takes Install's default
}

// Pipe is the default IPC, and the baseline.
var Pipe = IPC{Kind: "pipe"}

// PMCDLine returns pmcd.conf's perfevent line with its white space
// squeezed to single spaces, or "" if there is none.
func (e *Env) PMCDLine(t testing.TB) string {
	t.Helper()
	path := e.PCP.Get("PCP_PMCDCONF_PATH")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading pmcd.conf: %v", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) > 1 && f[0] == "perfevent" {
			return strings.Join(f, " ")
		}
	}
	return ""
}

// ParseLine tells which agent a pmcd.conf perfevent line runs, and how.
func ParseLine(line string) (binary string, ipc IPC, ok bool) {
	f := strings.Fields(line)
	switch {
	case len(f) >= 5 && f[2] == "pipe":
		// pipe binary [notready...] command args
		i := 3
		for i < len(f) && (f[i] == "binary" || f[i] == "notready") {
			i++
		}
		if i < len(f) {
			return f[i], Pipe, true
		}
	case len(f) >= 6 && f[2] == "socket":
		return f[5], IPC{Kind: f[3], Addr: f[4]}, true
	}
	return "", IPC{}, false
}

// GoBinary is the installed Go agent, as pmcd.conf names it.
func (e *Env) GoBinary() string { return filepath.Join(e.Home, "pmdaperfevent") }

// InstallGo registers the Go agent with pmcd over the given IPC, by
// running its Install as an administrator would, and returns the
// transcript.
func (e *Env) InstallGo(t testing.TB, ipc IPC) string {
	t.Helper()
	c := Cmd{Dir: e.Home, Args: []string{"./Install"}}
	if ipc.Kind == "pipe" {
		c.Args = append(c.Args, "--pipe")
	} else {
		c.Args = append(c.Args, "--socket="+ipc.Kind)
		if ipc.Addr != "" {
			c.Env = []string{"PERFEVENT_SOCKET=" + ipc.Addr, "PERFEVENT_PORT=" + ipc.Addr}
		}
	}
	return e.script(t, c, "Check perfevent metrics have appeared")
}

// InstallC registers the C agent, with its own Install and the answers a
// non-interactive run gets (pipe).
func (e *Env) InstallC(t testing.TB) string {
	t.Helper()
	return e.script(t, Cmd{Dir: e.CHome, Args: []string{"./Install"}}, "Check perfevent metrics have appeared")
}

// RemoveAgent unregisters whichever perfevent agent is registered.
func (e *Env) RemoveAgent(t testing.TB) string {
	t.Helper()
	return e.script(t, Cmd{Dir: e.Home, Args: []string{"./Remove"}}, "Check perfevent metrics have gone away ... OK")
}

// script runs an Install or Remove and checks its exit status and that
// its own final check passed (pmdaproc.sh exits 0 even when it did not).
func (e *Env) script(t testing.TB, c Cmd, want string) string {
	t.Helper()
	r := e.Exec(c)
	if r.Err != nil {
		t.Fatalf("%s failed:\n%s", c.Args[0], r)
	}
	if !strings.Contains(r.Stdout, want) || strings.Contains(r.Stdout, "0 metrics and 0 values") {
		t.Fatalf("%s: its transcript lacks %q:\n%s", c.Args[0], want, r)
	}
	return r.Stdout
}

// RestartPMCD restarts pmcd with its rc script and waits until it answers
// and its background agent set-up has finished.
func (e *Env) RestartPMCD(t testing.TB) {
	t.Helper()
	rc := filepath.Join(e.PCP.Get("PCP_RC_DIR"), "pmcd")
	e.Run(t, rc, "start")
	e.Run(t, filepath.Join(e.PCP.Get("PCP_BINADM_DIR"), "pmcd_wait"), "-t", "30")
	e.WaitAutoUpdate(t)
}

// WaitAutoUpdate waits for the rc script's background agent set-up,
// which holds $PCP_TMPFILE_DIR/pmda.auto.update, to finish.
func (e *Env) WaitAutoUpdate(t testing.TB) {
	t.Helper()
	path := filepath.Join(e.PCP.Get("PCP_TMPFILE_DIR"), "pmda.auto.update")
	waitFor(t, 60*time.Second, "pmcd's agent set-up to release "+path, func() bool {
		_, err := os.Stat(path)
		return os.IsNotExist(err)
	})
}

// waitFor polls cond every 100 ms until it holds, or fails the test.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	testwait.Eventually(t, timeout, what, cond)
}

// AgentPIDs lists the live processes that run a perfevent agent for
// domain 127: pmdaperfevent (Go or C) with "-d 127" among its arguments.
func AgentPIDs() []int {
	var pids []int
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(d + "/cmdline")
		if err != nil || len(raw) == 0 { // gone, or a zombie
			continue
		}
		argv := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		if filepath.Base(argv[0]) != "pmdaperfevent" {
			continue
		}
		for i, a := range argv {
			if a == "-d"+strconv.Itoa(Domain) || (a == "-d" && i+1 < len(argv) && argv[i+1] == strconv.Itoa(Domain)) {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// Agent waits until exactly one domain-127 agent runs and returns its pid
// and the binary it runs (/proc/<pid>/exe).
func (e *Env) Agent(t testing.TB) (pid int, exe string) {
	t.Helper()
	var pids []int
	waitFor(t, 10*time.Second, "exactly one domain 127 agent process", func() bool {
		pids = AgentPIDs()
		return len(pids) == 1
	})
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pids[0]))
	if err != nil {
		t.Fatalf("agent pid %d: %v", pids[0], err)
	}
	return pids[0], exe
}

// WaitForMetric waits until pminfo -f shows a value for the metric.
func (e *Env) WaitForMetric(t testing.TB, name string, timeout time.Duration) string {
	t.Helper()
	var out string
	waitFor(t, timeout, "a value for "+name, func() bool {
		r := e.Try("pminfo", "-f", name)
		out = r.Stdout
		return r.Err == nil && strings.Contains(out, "value ")
	})
	return out
}

// Keep records which perfevent agent pmcd runs now, and how, and puts
// that back when the test ends.
func (e *Env) Keep(t testing.TB) {
	t.Helper()
	before := e.PMCDLine(t)
	t.Cleanup(func() {
		if !e.PMCDUp() {
			e.RestartPMCD(t)
		}
		if e.PMCDLine(t) == before && (before == "" || len(AgentPIDs()) == 1) {
			return
		}
		e.restore(t, before)
	})
}

func (e *Env) restore(t testing.TB, line string) {
	t.Helper()
	t.Logf("restoring pmcd.conf's perfevent line: %q", line)
	if line == "" {
		e.RemoveAgent(t)
		return
	}
	bin, ipc, ok := ParseLine(line)
	switch {
	case !ok:
		t.Errorf("cannot restore pmcd.conf's perfevent line %q: not understood", line)
	case bin == e.GoBinary():
		e.InstallGo(t, ipc)
	case filepath.Dir(bin) == e.CHome && ipc == Pipe:
		e.InstallC(t)
	default:
		t.Errorf("cannot restore pmcd.conf's perfevent line %q: neither the Go agent nor the C agent in pipe mode", line)
	}
}

// Baseline makes the Go agent the registered perfevent agent, in pipe
// mode, and restores the prior state when the test ends (see Keep).
func (e *Env) Baseline(t testing.TB) {
	t.Helper()
	e.Keep(t)
	bin, ipc, _ := ParseLine(e.PMCDLine(t))
	if bin != e.GoBinary() || ipc != Pipe || !e.runningInstalled() {
		e.InstallGo(t, Pipe)
	}
	e.WaitForMetric(t, "perfevent.active", 10*time.Second)
}

// runningInstalled reports whether exactly one domain-127 agent runs, and
// runs the Go agent's installed binary as it is now (after a reinstall of
// the binary, an older agent's exe reads "... (deleted)").
func (e *Env) runningInstalled() bool {
	pids := AgentPIDs()
	if len(pids) != 1 {
		return false
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pids[0]))
	return err == nil && exe == e.GoBinary()
}

// AgentBinary is the agent that tests run directly (dbpmda): the
// repository's bin/pmdaperfevent, or $PERFEVENT_QA_AGENT.
func (e *Env) AgentBinary(t testing.TB) string {
	t.Helper()
	bin := os.Getenv("PERFEVENT_QA_AGENT")
	if bin == "" {
		bin = filepath.Join(e.Repo, "bin", "pmdaperfevent")
	}
	if _, err := os.Stat(bin); err != nil {
		unmet(t, "needs the agent binary %s (make build)", bin)
	}
	return bin
}

// Dbpmda runs a dbpmda script against the agent binary with the
// repository's install/root as the namespace, and returns the transcript
// (commands echoed, each followed by its answer). A script that does not
// open the agent itself gets an "open pipe" line first.
func (e *Env) Dbpmda(t testing.TB, script string) string {
	t.Helper()
	if !strings.HasPrefix(script, "open ") {
		script = fmt.Sprintf("open pipe %s -d %d\n%s", e.AgentBinary(t), Domain, script)
	}
	r := e.Exec(Cmd{
		// The agent writes its log into the current directory.
		Dir:   t.TempDir(),
		Stdin: script,
		Args:  []string{"dbpmda", "-e", "-n", filepath.Join(e.Repo, "install", "root")},
	})
	if r.Err != nil {
		t.Fatalf("dbpmda failed:\n%s\nscript:\n%s", r, script)
	}
	return r.Stdout + r.Stderr
}
