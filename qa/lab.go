package qa

// A lab is one perfevent agent, ours or the C one, under a private pmcd
// that the test starts and stops itself. Nothing of the machine's own
// PCP set-up is touched: the lab has its own pmcd.conf, PMNS, port, unix
// socket, run directory, logs, perfevent.conf, lock file and PMID map,
// all in t.TempDir(). So lab tests need neither the qa lock nor the
// system pmcd, and they can run while other tests reinstall agents.
//
// The facts it rests on (shared with qa/bench/pcpbench.py):
//   - the real pmcd binary runs in the foreground as root
//     (-f -A -U root), on 127.0.0.1 and a free port, with -c, -n, -s, -l;
//   - PMCD_ROOT_AGENT=0, or pmcd asks the system's pmdaroot to start
//     the agent, which then belongs to the system pmcd;
//   - pmcd and the agent run as copies with names of their own: PCP's
//     rc script waits for every process called pmcd, and Install and
//     Remove TERM every .../pmdaperfevent (and AgentPIDs, in qa.go,
//     counts those). One visible effect: the C agent takes its domain
//     label from argv[0], so in a lab it says "agent":"perfevent-lab-c";
//   - pmcd's own agent (pmcd.*, a DSO) is in the lab too, because
//     pmproxy and other clients look its metrics up;
//   - PCP_PMDAS_DIR in pmcd's environment (inherited by the agent)
//     points the C agent, which has no flags for them, at the lab's
//     perfevent.conf, perflock and help;
//   - PCP clients reach the lab through -h HostSpec(), or with no -h at
//     all: PMCD_SOCKET and PMCD_PORT in the clients' environment
//     redirect libpcp's default "local:" connection to the lab's pmcd.

import (
	_ "embed"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"perfevent/internal/reservation"
	"perfevent/internal/testwait"
)

// CAgent is the C agent as Debian's pcp package installs it.
const CAgent = "/var/lib/pcp/pmdas/perfevent/pmdaperfevent"

// VMConfig is the configuration a VM without a hardware PMU can serve in
// full, plus `cycles`: seven software events and cycles in [perf] (cycles fails
// on a VM without a hardware PMU, with ENOENT, and both agents leave it
// out), a derived section before [dynamic] (the C agent 6.0.3 ignores
// derived sections after it), and software events and msr.tsc from
// sysfs in [dynamic]. 12 counters on each CPU.
// It lives in testdata/vm.conf, which qa/bench/pcpbench.py reads too, so
// the benchmarks and the comparisons run the same configuration.
//
//go:embed testdata/vm.conf
var VMConfig string

// labPMNS is the lab pmcd's namespace: perfevent, with the numeric
// domain, so that it needs neither <stdpmid> nor the agent's domain.h,
// and pmcd's own metrics (pmcd.agent.status, ...), which clients such as
// pmproxy look up when they make a context.
const labPMNS = `root {
    perfevent
    pmcd
}

perfevent {
    version     127:0:0
    active      127:0:1
    hwcounters  127:*:*
    derived     127:*:*
    ratio       127:*:*
}
`

// Agent says which agent a lab runs, and how.
type Agent struct {
	// Go selects our agent (Env.AgentBinary: bin/pmdaperfevent or
	// $PERFEVENT_QA_AGENT); false selects the C agent, CAgent.
	Go bool
	// Config is the text of perfevent.conf; "" means VMConfig. (For an
	// empty file, pass a comment.)
	Config string
	// Args come after the lab's own agent arguments, and so win over
	// them where the agent takes the last of a repeated flag. The lab
	// passes ours -d 127 -l LOG -c CONF -lockfile LOCK -pmids PMIDS
	// -c-layout /dev/null (CONF with CLayout) and
	// the C agent -d 127 -l LOG.
	Args []string
	// Socket makes pmcd talk to the agent over a unix socket in the lab
	// (pmcd.conf "socket unix PATH", and -u PATH for the agent) instead
	// of a pipe.
	Socket bool
	// Inactive says that the agent is expected to open no counter: the
	// lab then waits only for perfevent.active to have a value, not for
	// it to be positive.
	Inactive bool
	// Env is added to pmcd's environment, and so to the agent's: a
	// fleet gives each lab its own PCP_SYSCONF_DIR, and with it its own
	// context labels.
	Env []string
	// PMCDArgs come after the lab's own pmcd arguments (-H NAME, say).
	PMCDArgs []string
	// Cgroups is the Go agent's cgroups.conf; empty counts no cgroup.
	Cgroups string
	// Reservation puts the Go agent's perfevent.reservation.* in the
	// lab's namespace; without it both agents serve the same names.
	Reservation bool
	// CLayout has our agent number the lab's configuration as the C
	// agent would (-c-layout CONF), so that a Go lab and a C lab of one
	// configuration serve the same names with the same PMIDs; without
	// it the agent keeps no C agent's numbers.
	CLayout bool
}

// Lab is a running private pmcd with one perfevent agent.
type Lab struct {
	Agent Agent
	Dir   string // the lab's root, a t.TempDir()
	Port  int    // pmcd's TCP port, on 127.0.0.1

	PMCDSocket string // pmcd's unix socket, for clients
	AgentLog   string // the agent's -l log
	PMCDLog    string
	Conf       string // perfevent.conf
	Lock       string // the perfalloc lock file the agent watches
	PMIDs      string // our agent's PMID map (the C agent has none)
	AgentSock  string // the agent's unix socket, with Agent.Socket

	env      *Env
	pmcdExe  string // the lab's copy of pmcd
	agentExe string // the lab's copy of the agent
	pmcd     *exec.Cmd
	exited   chan struct{} // closed when pmcd has exited
}

// StartLab starts a private pmcd running the agent, waits until the
// agent answers through it, and stops both when the test ends.
func StartLab(t testing.TB, a Agent) *Lab {
	t.Helper()
	e := Direct(t)
	agent := CAgent
	if a.Go {
		agent = e.AgentBinary(t)
	} else if _, err := os.Stat(CAgent); err != nil {
		unmet(t, "needs the C agent %s (Debian's pcp package): %v", CAgent, err)
	}
	if _, err := os.Stat(pmcdBinary(e)); err != nil {
		unmet(t, "needs pmcd at %s: %v", pmcdBinary(e), err)
	}
	dir := t.TempDir()
	// The C agent reads its help after it has become user pcp, and
	// t.TempDir() and its parent are 0700.
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	pmdas := filepath.Join(dir, "pmdas", "perfevent")
	l := &Lab{
		Agent:      a,
		Dir:        dir,
		PMCDSocket: filepath.Join(dir, "run", "pmcd.socket"),
		AgentLog:   filepath.Join(dir, "perfevent.log"),
		PMCDLog:    filepath.Join(dir, "pmcd.log"),
		Conf:       filepath.Join(pmdas, "perfevent.conf"),
		Lock:       filepath.Join(pmdas, "perflock"),
		PMIDs:      filepath.Join(pmdas, "pmids"),
		env:        e,
	}
	if a.Socket {
		l.AgentSock = filepath.Join(dir, "run", "perfevent.sock")
	}
	for _, d := range []string{pmdas, filepath.Join(dir, "run"), filepath.Join(dir, "bin"),
		filepath.Join(dir, "tmp", "pmie"), filepath.Join(dir, "tmp", "pmlogger")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	conf := a.Config
	if conf == "" {
		conf = VMConfig
	}
	writeFile(t, l.Conf, conf)
	pmns := labPMNS
	if a.Go {
		// Per-cgroup metrics are the Go agent's alone; a lab counts
		// them only when asked, so that both agents serve the same
		// names otherwise.
		cg := a.Cgroups
		if cg == "" {
			cg = "# no per-cgroup counting in this lab\n"
		} else {
			pmns = strings.Replace(pmns, "    derived     127:*:*\n", "    derived     127:*:*\n    cgroup      127:*:*\n", 1)
		}
		writeFile(t, filepath.Join(pmdas, "cgroups.conf"), cg)
		if a.Reservation {
			pmns = strings.Replace(pmns, "    ratio       127:*:*\n", "    ratio       127:*:*\n    reservation 127:*:*\n", 1)
		}
	}
	writeFile(t, filepath.Join(dir, "root"), pmns+pmcdPMNS(t, e))
	label := "c"
	if a.Go {
		label = "go"
	}
	l.agentExe = filepath.Join(dir, "bin", "pmdaperfevent-lab-"+label)
	copyFile(t, agent, l.agentExe)
	l.pmcdExe = filepath.Join(dir, "bin", "pmcd-lab-"+label)
	copyFile(t, pmcdBinary(e), l.pmcdExe)
	if !a.Go {
		l.buildCHelp(t)
	}
	l.writePMCDConf(t)
	l.Port = freePort(t)
	t.Cleanup(l.stop)
	l.start(t)
	return l
}

// pmcdPMNS is the system's namespace of pmcd's own metrics, without its
// root node (pmcd's PMNS loader runs it through pmcpp, so its #define
// stays as it is).
func pmcdPMNS(t testing.TB, e *Env) string {
	t.Helper()
	path := filepath.Join(e.PCP.Get("PCP_VAR_DIR"), "pmns", "root_pmcd")
	data, err := os.ReadFile(path)
	if err != nil {
		unmet(t, "needs pmcd's namespace %s (Debian's pcp package): %v", path, err)
	}
	root := regexp.MustCompile(`(?m)^root\s*\{[^}]*\}`)
	if !root.Match(data) {
		t.Fatalf("%s: no root node to take out", path)
	}
	return "\n" + root.ReplaceAllString(string(data), "")
}

func pmcdBinary(e *Env) string {
	return filepath.Join(e.PCP.Get("PCP_BINADM_DIR"), "pmcd")
}

// buildCHelp gives the C agent the help of its two static metrics, which
// it reads from $PCP_PMDAS_DIR/perfevent/help.{dir,pag} (Install builds
// them with newhelp; so does the lab, in its own PCP_PMDAS_DIR).
func (l *Lab) buildCHelp(t testing.TB) {
	t.Helper()
	src := filepath.Join(filepath.Dir(evalSymlinks(CAgent)), "help")
	if _, err := os.Stat(src); err != nil {
		unmet(t, "needs the C agent's help source %s: %v", src, err)
	}
	newhelp := filepath.Join(l.env.PCP.Get("PCP_BINADM_DIR"), "newhelp")
	l.env.Run(t, newhelp, "-n", filepath.Join(l.Dir, "root"), "-v", "2",
		"-o", filepath.Join(l.Dir, "pmdas", "perfevent", "help"), src)
}

func (l *Lab) agentArgv() []string {
	argv := []string{l.agentExe, "-d", strconv.Itoa(Domain), "-l", l.AgentLog}
	if l.Agent.Go {
		layout := "/dev/null" // none: pmcd.conf cannot carry an empty argument
		if l.Agent.CLayout {
			layout = l.Conf
		}
		argv = append(argv, "-c", l.Conf, "-lockfile", l.Lock, "-pmids", l.PMIDs, "-c-layout", layout)
	}
	if l.Agent.Socket {
		argv = append(argv, "-u", l.AgentSock)
	}
	return append(argv, l.Agent.Args...)
}

func (l *Lab) writePMCDConf(t testing.TB) {
	t.Helper()
	argv := l.agentArgv()
	for _, a := range argv {
		if a == "" || strings.ContainsAny(a, " \t\n\"#\\") {
			t.Fatalf("agent argument %q: a pmcd.conf line cannot carry it", a)
		}
	}
	ipc := "pipe binary"
	if l.Agent.Socket {
		ipc = "socket unix " + l.AgentSock
	}
	// pmcd's own agent is a DSO inside pmcd, named by the system's
	// path: PCP_PMDAS_DIR points elsewhere in the lab.
	pmcdDSO := filepath.Join(l.env.PCP.Get("PCP_PMDAS_DIR"), "pmcd", "pmda_pmcd.so")
	writeFile(t, filepath.Join(l.Dir, "pmcd.conf"), fmt.Sprintf(
		"# private pmcd for one qa test: pmcd's own metrics and the agent under test\n"+
			"pmcd 2 dso pmcd_init %s\nperfevent %d %s %s\n",
		pmcdDSO, Domain, ipc, strings.Join(argv, " ")))
}

// start runs pmcd and waits for the agent.
func (l *Lab) start(t testing.TB) {
	t.Helper()
	cmd := exec.Command(l.pmcdExe, "-f", "-A", "-U", "root",
		"-p", strconv.Itoa(l.Port), "-i", "127.0.0.1",
		"-c", filepath.Join(l.Dir, "pmcd.conf"), "-n", filepath.Join(l.Dir, "root"),
		"-s", l.PMCDSocket, "-l", l.PMCDLog, "-x", filepath.Join(l.Dir, "pmcd.fatal"))
	cmd.Args = append(cmd.Args, l.Agent.PMCDArgs...)
	cmd.Env = append(l.env.environ(),
		"PMCD_ROOT_AGENT=0",
		"PCP_RUN_DIR="+filepath.Join(l.Dir, "run"),
		"PCP_PMDAS_DIR="+filepath.Join(l.Dir, "pmdas"),
	)
	cmd.Env = append(cmd.Env, l.Agent.Env...)
	out, err := os.OpenFile(filepath.Join(l.Dir, "pmcd.stdout"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	// Its own process group: a ^C to go test must not reach pmcd before
	// the cleanup does. But if the test binary dies without its cleanups
	// (a test timeout panics), pmcd goes too, and takes its agent along.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", l.pmcdExe, err)
	}
	l.pmcd = cmd
	l.exited = make(chan struct{})
	go func(c *exec.Cmd, done chan struct{}) {
		c.Wait()
		close(done)
	}(cmd, l.exited)

	if !testwait.Until(30*time.Second, func() bool {
		select {
		case <-l.exited:
			t.Fatalf("lab pmcd exited at start-up: %v\n%s", cmd.ProcessState, l.Logs())
		default:
		}
		r := l.RunErr(t, "pmprobe", "-v", "perfevent.active")
		if r.Err != nil {
			return false
		}
		// "perfevent.active 1 24": the agent is up; both agents
		// open their counters a moment after they answer.
		f := strings.Fields(r.Stdout)
		return len(f) == 3 && f[1] == "1" && (l.Agent.Inactive || f[2] != "0")
	}) {
		t.Fatalf("lab: no value for perfevent.active through pmcd on port %d within 30s\n%s", l.Port, l.Logs())
	}
}

// stop ends pmcd and its agent, by pid.
func (l *Lab) stop() {
	if l.pmcd == nil {
		return
	}
	agents := l.agentPIDs()
	l.pmcd.Process.Signal(syscall.SIGTERM)
	select {
	case <-l.exited:
	case <-time.After(5 * time.Second):
		l.pmcd.Process.Kill()
		<-l.exited
	}
	// pmcd takes its agents down as it goes; make sure of it.
	for _, pid := range agents {
		for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
			if l.waitGone(pid, 2*time.Second) {
				break
			}
			syscall.Kill(pid, sig)
		}
	}
	l.pmcd = nil
}

// waitGone reports whether the process pid, running the lab's agent,
// has gone (or is a zombie) within the timeout.
func (l *Lab) waitGone(pid int, timeout time.Duration) bool {
	return testwait.Until(timeout, func() bool {
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		return err != nil || exe != l.agentExe
	})
}

// Restart stops pmcd and the agent and starts them again on the same
// port, with the same files: the lock file, the PMID map and
// perfevent.conf (which the test may have changed) stay.
func (l *Lab) Restart(t testing.TB) {
	t.Helper()
	l.stop()
	l.writePMCDConf(t)
	l.start(t)
}

// RestartAgent kills the agent and has pmcd start a new one (SIGHUP), as
// an administrator's `pmsignal -s HUP pmcd` after a crash would; pmcd
// keeps running. It returns the new agent's pid.
func (l *Lab) RestartAgent(t testing.TB) int {
	t.Helper()
	return l.StartAgent(t, l.StopAgent(t))
}

// StopAgent kills the agent, leaving pmcd without it (fetches of
// perfevent.* fail) until StartAgent; it returns the killed pid.
func (l *Lab) StopAgent(t testing.TB) int {
	t.Helper()
	old := l.AgentPID(t)
	syscall.Kill(old, syscall.SIGKILL)
	if !l.waitGone(old, 5*time.Second) {
		t.Fatalf("lab agent pid %d survived SIGKILL", old)
	}
	return old
}

// StartAgent has pmcd start the agent again after StopAgent killed the
// one with pid old, waits until the new one answers, and returns its pid.
func (l *Lab) StartAgent(t testing.TB, old int) int {
	t.Helper()
	var pid int
	waitFor(t, 15*time.Second, "pmcd to restart the lab agent", func() bool {
		l.pmcd.Process.Signal(syscall.SIGHUP)
		time.Sleep(100 * time.Millisecond)
		pids := l.agentPIDs()
		if len(pids) != 1 || pids[0] == old {
			return false
		}
		pid = pids[0]
		return true
	})
	waitFor(t, 15*time.Second, "the restarted lab agent to answer", func() bool {
		r := l.RunErr(t, "pmprobe", "-v", "perfevent.active")
		f := strings.Fields(r.Stdout)
		return r.Err == nil && len(f) == 3 && f[1] == "1" && (l.Agent.Inactive || f[2] != "0")
	})
	return pid
}

// agentPIDs lists pmcd's children that run the lab's copy of the agent.
func (l *Lab) agentPIDs() []int {
	if l.pmcd == nil {
		return nil
	}
	var pids []int
	for _, pid := range childPIDs(l.pmcd.Process.Pid) {
		if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err == nil && exe == l.agentExe {
			pids = append(pids, pid)
		}
	}
	return pids
}

// AgentPID returns the pid of the lab's agent, waiting briefly for
// exactly one to run.
func (l *Lab) AgentPID(t testing.TB) int {
	t.Helper()
	var pids []int
	waitFor(t, 10*time.Second, "exactly one lab agent process", func() bool {
		pids = l.agentPIDs()
		return len(pids) == 1
	})
	return pids[0]
}

// PMCDPID returns the lab pmcd's pid.
func (l *Lab) PMCDPID() int { return l.pmcd.Process.Pid }

// LockFile is the perfalloc lock file the agent watches; a read lock on
// its byte 0 asks the agent to give up its counters.
func (l *Lab) LockFile() string { return l.Lock }

// StateFile is where our agent tells perfalloc what it has done.
func (l *Lab) StateFile() string { return reservation.StatePath(l.Lock) }

// HostSpec names the lab's pmcd for a client's -h, or for pmproxy's
// hostspec parameter.
func (l *Lab) HostSpec() string { return fmt.Sprintf("127.0.0.1:%d", l.Port) }

// Environ is the environment of the lab's clients: the qa environment
// (Debian's python first on PATH, no PCP_DERIVED_CONFIG), with libpcp's
// default connection pointed at the lab's pmcd.
func (l *Lab) Environ() []string { return append(l.env.environ(), l.clientEnv()...) }

func (l *Lab) clientEnv() []string {
	return []string{
		"PMCD_SOCKET=" + l.PMCDSocket,
		"PMCD_PORT=" + strconv.Itoa(l.Port),
		// pmie's and pmlogger's own status files go into the lab, not
		// among the system's (where a killed client would leave them).
		"PCP_TMP_DIR=" + filepath.Join(l.Dir, "tmp"),
	}
}

// Exec runs a command in the lab's client environment (plus c.Env) and
// reports how it went, without failing the test.
func (l *Lab) Exec(c Cmd) Result {
	c.Env = append(l.clientEnv(), c.Env...)
	c.Args = append([]string{l.lookPath(c.Args[0])}, c.Args[1:]...)
	return l.env.Exec(c)
}

// lookPath finds a command on the clients' PATH, which has PCP's admin
// directory (pmproxy, pmcd_wait, ...) at its end; os/exec would look on
// the test's own PATH.
func (l *Lab) lookPath(name string) string {
	if strings.Contains(name, "/") {
		return name
	}
	for _, kv := range l.Environ() {
		if path, ok := strings.CutPrefix(kv, "PATH="); ok {
			for _, dir := range filepath.SplitList(path) {
				p := filepath.Join(dir, name)
				if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
					return p
				}
			}
		}
	}
	return name
}

// needClient skips (fails, with PERFEVENT_QA=1) when a PCP client is not
// on the lab's PATH.
func needClient(t testing.TB, l *Lab, name string) {
	t.Helper()
	if !strings.Contains(l.lookPath(name), "/") {
		unmet(t, "needs PCP's %s (Debian package pcp)", name)
	}
}

// RunErr runs a PCP client (or any command) against the lab and returns
// what happened, without failing the test. The client needs no -h: its
// default connection reaches the lab's pmcd.
func (l *Lab) RunErr(t testing.TB, name string, args ...string) Result {
	return l.Exec(Cmd{Args: append([]string{name}, args...)})
}

// Run runs a client against the lab and returns its standard output; a
// non-zero exit fails the test, with the output and the lab's logs.
func (l *Lab) Run(t testing.TB, name string, args ...string) string {
	t.Helper()
	r := l.RunErr(t, name, args...)
	if r.Err != nil {
		t.Fatalf("command failed:\n%s\n%s", r, l.Logs())
	}
	return r.Stdout
}

// Background starts a long-running command (pmproxy, pmie, ...) in the
// lab's client environment plus c.Env, in c.Dir or the lab's directory,
// with its standard output and error in the file out. The command gets
// SIGTERM when the test ends, and SIGKILL if it is still there 10 s
// later; it also gets SIGTERM if the test binary dies first.
func (l *Lab) Background(t testing.TB, c Cmd, out string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(l.lookPath(c.Args[0]), c.Args[1:]...)
	cmd.Env = append(l.Environ(), c.Env...)
	cmd.Dir = c.Dir
	if cmd.Dir == "" {
		cmd.Dir = l.Dir
	}
	cmd.Stdin = strings.NewReader(c.Stdin)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	startStopped(t, cmd, out)
	return cmd
}

// startStopped starts cmd with its standard output and error in the file
// out, and stops it when the test ends: SIGTERM, then SIGKILL 10 s later.
func startStopped(t testing.TB, cmd *exec.Cmd, out string) {
	t.Helper()
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", cmd.Path, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
}

// ReadLock does what perfalloc does, with perfalloc's own code
// (reservation.Reserve): it takes a read lock on byte 0 of the lock file,
// from the test process, and returns the function that lets go of it
// (also called when the test ends). POSIX record locks belong to the
// process: closing any other descriptor of the lock file in the test
// process would drop this lock too.
func (l *Lab) ReadLock(t testing.TB) (unlock func()) {
	t.Helper()
	r, err := reservation.Reserve(l.Lock)
	if err != nil {
		t.Fatal(err)
	}
	unlock = func() { r.Release() }
	t.Cleanup(unlock)
	return unlock
}

// Logs returns the tails of the lab's pmcd and agent logs, for failure
// messages.
func (l *Lab) Logs() string {
	var b strings.Builder
	for _, p := range []string{l.PMCDLog, filepath.Join(l.Dir, "pmcd.stdout"), l.AgentLog} {
		fmt.Fprintf(&b, "--- %s\n%s", p, tail(p, 20))
	}
	return b.String()
}

func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error() + "\n"
	}
	lines := strings.SplitAfter(string(data), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "")
}

// childPIDs lists the processes whose parent is ppid.
func childPIDs(ppid int) []int {
	var pids []int
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range dirs {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces and parentheses.
		s := string(data)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 || f[1] != strconv.Itoa(ppid) {
			continue
		}
		if pid, err := strconv.Atoi(strings.Fields(s)[0]); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func writeFile(t testing.TB, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func copyFile(t testing.TB, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o755); err != nil {
		t.Fatal(err)
	}
}

func evalSymlinks(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}
