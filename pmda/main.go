// Command pmdaperfevent is PCP's perfevent agent (domain 127) in pure Go:
// it counts the perf events that perfevent.conf names on every CPU and
// serves them to pmcd as perfevent.hwcounters.* and perfevent.derived.*.
// It gives the counters up while perfalloc holds the lock file, and says so
// in a state file beside it.
//
// Usage (pmcd starts it; the flags are the C agent's, plus a few):
//
//	pmdaperfevent [-C] [-d domain] [-l logfile] [-c config] [-U user]
//	              [-p | -u socket | -i port | -6 port] [-D debug]
//	              [--lockfile file] [--pmids file] [--poll interval] [--no-inotify]
//	pmdaperfevent --check [--c-compatible] [-c config]
//	pmdaperfevent --list-events
//	pmdaperfevent --version
package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"perfevent/internal/cgroup"
	"perfevent/internal/config"
	"perfevent/internal/counter"
	"perfevent/internal/cpuhotplug"
	"perfevent/internal/metrics"
	"perfevent/internal/pcpconf"
	"perfevent/internal/pdu"
	"perfevent/internal/pmda"
	"perfevent/internal/pmu"
	"perfevent/internal/privilege"
	"perfevent/internal/ratio"
	"perfevent/internal/release"
	"perfevent/internal/reservation"
	"perfevent/internal/setup"
)

// version is what perfevent.version reports. The C agent says "1.0.1".
const version = release.Version

const prog = "pmdaperfevent"

// The range of -poll.
const (
	minPoll = 10 * time.Millisecond
	maxPoll = 10 * time.Second
)

type options struct {
	compat     bool
	debug      string
	domain     int
	logfile    string
	config     string
	user       string
	pipe       bool
	socket     string
	inet       int
	ipv6       int
	check      bool
	listEvents bool
	listPMU    string
	listMatch  string
	noProbe    bool
	lockfile   string
	pmids      string
	// defaultPMIDs is where the PMID map lives unless --pmids says
	// otherwise: the agent's own directory.
	defaultPMIDs string
	poll         time.Duration
	noInotify    bool
	version      bool
	cCompatible  bool
	// held is the configuration as opened at start-up, for reloads
	// after the privilege drop (nil for --check).
	held *config.Held
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func parseFlags(args []string, pcp *pcpconf.Config, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet(prog, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.BoolVar(&o.compat, "C", false, "compatibility names: only ':' becomes '-' (the pre-3.10.8 names)")
	fs.StringVar(&o.debug, "D", "", "debug `options` (accepted for compatibility; any value logs each start-up step in detail)")
	fs.IntVar(&o.domain, "d", metrics.Domain, "PMDA `domain` number; perfevent is 127")
	// Relative, as the C agent's: pmcd starts agents in $PCP_LOG_DIR/pmcd,
	// and an agent run by hand elsewhere leaves the live agent's log alone.
	fs.StringVar(&o.logfile, "l", "perfevent.log", "write the log to `file` (- for stderr)")
	fs.StringVar(&o.config, "c", defaultConfig(pcp), "read the configuration from `file`")
	fs.StringVar(&o.user, "U", pcp.Get("PCP_USER"), "after start-up, run as `user`, keeping only the capability to open counters (root: stay root)")
	fs.BoolVar(&o.pipe, "p", false, "talk to pmcd on stdin and stdout (the default)")
	fs.StringVar(&o.socket, "u", "", "listen for pmcd on the unix socket `path`")
	fs.IntVar(&o.inet, "i", 0, "listen for pmcd on 127.0.0.1:`port`")
	fs.IntVar(&o.ipv6, "6", 0, "listen for pmcd on [::1]:`port`")
	fs.BoolVar(&o.check, "check", false, "explain what the configuration means on this machine, line by line, and exit (1 if anything is wrong)")
	fs.BoolVar(&o.listEvents, "list-events", false, "list the events this machine offers, as they are written in perfevent.conf, and exit")
	fs.StringVar(&o.listPMU, "pmu", "", "with --list-events: only the events of this `PMU` (libpfm4's name, e.g. skx, or the kernel's, e.g. uncore_imc_0; perf for the generic events)")
	fs.StringVar(&o.listMatch, "match", "", "with --list-events: only the events whose name or unit mask contains `pattern` (ignoring case; *, ? and [...] make it a glob over the whole name)")
	fs.BoolVar(&o.noProbe, "no-probe", false, "with --list-events: do not try to open each event to mark whether it works here")
	fs.StringVar(&o.lockfile, "lockfile", reservation.DefaultLockPath(), "the perfalloc lock `file`")
	o.defaultPMIDs = filepath.Join(pcp.Get("PCP_VAR_DIR"), "config", "perfevent", "pmids")
	fs.StringVar(&o.pmids, "pmids", o.defaultPMIDs, "where metric names keep their PMIDs across restarts (`file`)")
	fs.DurationVar(&o.poll, "poll", reservation.DefaultPoll, "how often to check the lock file even without an inotify hint")
	fs.BoolVar(&o.noInotify, "no-inotify", false, "check the lock file by polling only")
	fs.BoolVar(&o.cCompatible, "c-compatible", false, "with --check, also flag what PCP's C agent (6.0.3) would reject or read differently in the file")
	fs.BoolVar(&o.version, "version", false, "print the version and exit")
	fs.Usage = func() { usage(fs, stderr) }
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if o.domain != metrics.Domain {
		return nil, fmt.Errorf("-d %d: perfevent's domain is %d (PERFEVENT in stdpmid); its PMNS and pmcd.conf line must use it", o.domain, metrics.Domain)
	}
	if o.poll < minPoll || o.poll > maxPoll {
		// Below this the poll alone keeps a core busy; above it, without
		// inotify, perfalloc's release could go unnoticed for minutes.
		return nil, fmt.Errorf("-poll %v: choose an interval from %v to %v", o.poll, minPoll, maxPoll)
	}
	n := 0
	for _, set := range []bool{o.pipe, o.socket != "", o.inet != 0, o.ipv6 != 0} {
		if set {
			n++
		}
	}
	if n > 1 {
		return nil, errors.New("choose one of -p, -u, -i and -6")
	}
	return o, nil
}

// defaultConfig is the configuration that pmcd runs this agent with, so
// that --check and a run by hand see what pmcd's agent sees: the one beside
// the binary (Install registers the agent with -c of that file), else the
// one in the installed agent's directory. Without either, the files where
// PCP keeps the C agent's: Debian and Fedora put it in
// $PCP_SYSCONF_DIR/perfevent, older layouts in the C agent's directory.
func defaultConfig(pcp *pcpconf.Config) string {
	var candidates []string
	if exe, err := os.Executable(); err == nil {
		candidates = append(candidates, filepath.Join(filepath.Dir(exe), "perfevent.conf"))
	}
	candidates = append(candidates,
		filepath.Join(pcp.Get("PCP_PMDAS_DIR"), "perfevent-go", "perfevent.conf"),
		filepath.Join(pcp.Get("PCP_SYSCONF_DIR"), "perfevent", "perfevent.conf"))
	for _, c := range candidates {
		if _, err := os.Stat(c); err == nil {
			return c
		}
	}
	return filepath.Join(pcp.Get("PCP_PMDAS_DIR"), "perfevent", "perfevent.conf")
}

func (o *options) endpoint(pcp *pcpconf.Config) pmda.Endpoint {
	switch {
	case o.socket != "":
		return pmda.Endpoint{Transport: pmda.Unix, Path: o.socket, SocketOwner: pcp.Get("PCP_USER")}
	case o.inet != 0:
		return pmda.Endpoint{Transport: pmda.Inet, Port: o.inet}
	case o.ipv6 != 0:
		return pmda.Endpoint{Transport: pmda.IPv6, Port: o.ipv6}
	}
	return pmda.Endpoint{Transport: pmda.Pipe}
}

func run(args []string, stdout, stderr io.Writer) int {
	pcp := pcpconf.Load()
	o, err := parseFlags(args, pcp, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", prog, err)
		return 1
	}
	switch {
	case o.version:
		fmt.Fprintf(stdout, "%s version %s\n", prog, version)
		return 0
	case o.listEvents:
		return listEvents(pmu.Default(), o.listPMU, o.listMatch, !o.noProbe, stdout, stderr)
	case o.check:
		return check(o, stdout, stderr)
	}
	return serve(o, pcp, stderr)
}

// errTracepointProbe marks the tracepoints of an unfiltered listing.
var errTracepointProbe = errors.New("tracepoints are probed with --match or --pmu")

func listEvents(fs *pmu.FS, pmuName, pattern string, probe bool, stdout, stderr io.Writer) int {
	ls, err := fs.ListEvents()
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", prog, err)
	}
	ls, err = pmu.FilterListings(ls, pmuName, pattern)
	if err != nil {
		fmt.Fprintf(stderr, "%s: --match: %v\n", prog, err)
		return 1
	}
	if probe {
		// Opening a tracepoint costs the kernel about 10 ms, and there
		// are thousands: an unfiltered listing leaves them unprobed.
		if pmuName == "" && pattern == "" {
			for i := range ls {
				if ls[i].Kind == pmu.KindTracepoint {
					ls[i].Probe = pmu.ProbeResult{State: pmu.Skipped, Err: errTracepointProbe}
				}
			}
		}
		fs.Probe(ls, counter.KernelOpener{})
	}
	var kind pmu.Kind
	group := ""
	for _, l := range ls {
		if l.Kind != kind || l.Group != group {
			kind, group = l.Kind, l.Group
			title := string(kind)
			if group != "" {
				title += " " + group
			}
			fmt.Fprintf(stdout, "\n# %s\n", title)
		}
		fmt.Fprintln(stdout, l.String())
	}
	return 0
}

// generation is everything one reading of the configuration produced: a
// SIGHUP builds a new one and swaps it in whole.
type generation struct {
	plan  *setup.Plan
	set   *counter.Set
	table *pmda.Table
	src   *metrics.Source
	cg    *cgroup.Tracker // per-cgroup counters; nil when none
}

// agent is the running perfevent agent. It is the pmda.Fetcher: each fetch
// is answered by the generation whose table pmcd's request was served from.
type agent struct {
	o   *options
	fs  *pmu.FS
	log *pmda.Logger
	pm  *pmda.Agent

	gen  atomic.Pointer[generation]
	prev atomic.Pointer[generation] // the one before a reload, for a fetch in flight
	cur  *generation                // the fetch being answered; Serve's goroutine only

	// mu serialises reloads and reservation changes; reserved is what the
	// lock file said last. lastReopen and told pace and quieten reopens.
	mu         sync.Mutex
	reserved   bool
	reloadDue  bool            // a SIGHUP came while reserved
	reopens    float64         // tokens for reopens, at most reopenBurst
	lastReopen time.Time       // when the tokens were last counted
	told       map[string]bool // failure lines already in the log
	state      *reservation.StateFile
	stateDir   *reservation.Directory
	published  atomic.Pointer[reservation.StateFile] // state, for exitOnHangup

	pcpUser string            // $PCP_USER
	trusted []int             // uids whose files in the agent's directories it adopts (agentUsers)
	fresh   *metrics.Clusters // the PMIDs used while the map cannot be read
	lock    *reservation.LockFile
	watcher *reservation.Watcher
	cpus    *cpuhotplug.Watcher   // CPUs going offline and coming back
	opener  func() counter.Opener // one per generation; nil: the kernel's
}

// Prepare implements pmda.Fetcher.
func (a *agent) Prepare(req *pmda.FetchRequest) error {
	g := a.gen.Load()
	if g.table != req.Table {
		if p := a.prev.Load(); p != nil && p.table == req.Table {
			g = p
		} else {
			return pdu.ErrAgain
		}
	}
	a.cur = g
	return g.src.Prepare(req)
}

// endContext forgets a client that went away; it runs on Serve's goroutine,
// as Prepare does.
func (a *agent) endContext(client int32) {
	for _, g := range [2]*generation{a.gen.Load(), a.prev.Load()} {
		if g != nil {
			g.src.Forget(client)
		}
	}
}

// Values implements pmda.Fetcher.
func (a *agent) Values(m *pmda.Metric, w *pmda.ValueWriter) error {
	return a.cur.src.Values(m, w)
}

func (a *agent) logNote(n setup.Note) {
	if n.Severity == setup.Problem {
		a.log.Warningf("%s", n)
	} else {
		a.log.Infof("%s", n)
	}
}

// build reads the configuration and turns it into open counters and the
// table that serves them. Problems with single lines are logged and
// skipped; only a configuration that cannot be read at all is an error.
// seamless is for a reload with no reservation between the old counters
// and these: their first fetch counts in perfevent.active.
func (a *agent) build(seamless bool) (*generation, error) {
	// Counters take descriptors until the limit; keep a few back for the
	// state file, inotify and the PMID map, which come after.
	defer releaseFDs(holdFDs(spareFDs))

	// The PMID map first: counters can take every descriptor there is,
	// and without the map names would get other PMIDs than they had.
	clusters, cerrs := metrics.LoadClusters(a.o.pmids)
	for _, e := range cerrs {
		a.log.Warningf("%v", e)
	}
	if clusters == nil {
		// Numbers that differ from the archives' beat serving nothing.
		// They are not saved over the map, so that fixing it and
		// restarting brings the old numbers back.
		if a.fresh == nil {
			a.fresh = metrics.NewClusters()
		}
		clusters = a.fresh
		a.log.Errorf("the PMID map %s cannot be used: metrics get fresh PMIDs for this run, unlike those in existing archives; fix or remove the map and restart the agent", a.o.pmids)
	}
	var opener counter.Opener
	if a.opener != nil {
		opener = a.opener()
	}
	plan, set, sum, derived, err := count(a.o, a.fs, counter.Config{
		Opener:         opener,
		Logf:           func(format string, args ...any) { a.log.Warningf(format, args...) },
		ReadFailed:     a.checkCPUs,
		CountFirstRead: seamless,
	})
	if err != nil {
		return nil, err
	}
	// The plan's notes report these failures; a reopen repeats only new ones.
	a.told = map[string]bool{}
	for _, line := range sum.FailureLines() {
		a.told[line] = true
	}
	cg, cgSpec := a.startCgroups(plan)
	table, src, err := buildTable(a.o, plan, set, derived, clusters, cgSpec)
	if err != nil {
		set.Close()
		if cg != nil {
			cg.Stop()
		}
		return nil, err
	}
	for _, e := range src.Skipped() {
		a.log.Warningf("%v; not served", e)
	}
	if err := clusters.Save(); err != nil {
		a.log.Warningf("saving the PMID map: %v; new metrics may get other PMIDs after a restart", err)
	}
	for _, n := range plan.Notes {
		a.logNote(n)
	}
	a.log.Infof("serving %d counters on %d descriptors and %d derived metrics", len(plan.Counters), sum.FDs, len(derived))
	if len(plan.Counters) == 0 {
		a.log.Warningf("no counter could be opened; serving perfevent.version and perfevent.active only (see the lines above, or run %s --check)", prog)
	}
	return &generation{plan: plan, set: set, table: table, src: src, cg: cg}, nil
}

// Reopens of the counters after perfalloc: reopenBurst in a row, then one
// per minReopen.
const (
	minReopen   = 100 * time.Millisecond
	reopenBurst = 3
)

// pace waits, if need be, until a reopen is allowed: a token bucket
// holding reopenBurst tokens, refilled at one per minReopen.
func (a *agent) pace() {
	now := time.Now()
	if a.lastReopen.IsZero() {
		a.reopens = reopenBurst
	} else {
		a.reopens = min(reopenBurst, a.reopens+float64(now.Sub(a.lastReopen))/float64(minReopen))
	}
	if a.reopens < 1 {
		wait := time.Duration((1 - a.reopens) * float64(minReopen))
		time.Sleep(wait)
		now = now.Add(wait)
		a.reopens = 1
	}
	a.reopens--
	a.lastReopen = now
}

// spareFDs is how many descriptors build keeps back from the counters.
const spareFDs = 8

// holdFDs opens up to n descriptors of /dev/null to keep them from the
// counters; releaseFDs gives them back.
func holdFDs(n int) []*os.File {
	var held []*os.File
	for range n {
		f, err := os.Open(os.DevNull)
		if err != nil {
			break
		}
		held = append(held, f)
	}
	return held
}

func releaseFDs(held []*os.File) {
	for _, f := range held {
		f.Close()
	}
}

// reload rereads the configuration (SIGHUP). If it cannot be read at all,
// the agent keeps serving the old one. While perfalloc holds the counters
// the reload waits for their release: building opens counters, and the
// holder was promised the PMU to itself.
func (a *agent) reload() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.reserved {
		a.reloadDue = true
		a.log.Infof("reload of %s deferred: perfalloc holds the counters; it happens when they are released", a.o.config)
		return
	}
	a.reloadLocked(false)
}

// reloadLocked does the reload and says whether the new configuration is
// served; the caller holds a.mu and the counters are not reserved.
// afterRelease says that perfalloc has just let go of the old counters.
func (a *agent) reloadLocked(afterRelease bool) bool {
	a.reloadDue = false
	a.log.Infof("reloading %s", a.o.config)
	g, err := a.build(!afterRelease)
	if err != nil {
		a.log.Errorf("reload: %v; still serving the previous configuration", err)
		return false
	}
	old := a.gen.Load()
	g.set.Carry(old.set)
	a.prev.Store(old)
	a.gen.Store(g)
	if a.pm != nil {
		a.pm.SetTable(g.table)
	}
	if err := old.set.Close(); err != nil {
		a.log.Warningf("closing the previous counters: %v", err)
	}
	old.stopCgroups()
	a.updateState(nil)
	a.log.Infof("reload done: the new configuration is served")
	return true
}

// count reads the configuration, plans it for this machine and opens the
// counters: the steps --check and the agent share. Only a configuration
// that cannot be read at all is an error; everything else is in the notes.
func count(o *options, fs *pmu.FS, cfg counter.Config) (*setup.Plan, *counter.Set, counter.Summary, []setup.Derived, error) {
	f, perr := o.parseConfig()
	if f == nil && perr != nil {
		return nil, nil, counter.Summary{}, nil, perr
	}
	m, err := setup.ReadMachine(fs)
	if err != nil {
		return nil, nil, counter.Summary{}, nil, fmt.Errorf("reading the CPU topology: %w", err)
	}
	plan := setup.Make(f, perr, m, o.compat)
	specs := plan.Specs()
	defs, _, _ := ratio.Defs(ratiosPath(o)) // chooseRatios notes the file's errors
	ratio.Group(specs, defs)
	set, err := counter.New(specs, cfg)
	if err != nil {
		return nil, nil, counter.Summary{}, nil, err
	}
	sum, err := set.Open()
	if err != nil {
		return nil, nil, counter.Summary{}, nil, err
	}
	plan.Opened(set, sum)
	return plan, set, sum, plan.AddDerived(set, fs), nil
}

// buildTable is the table that serves what the plan kept: the last step
// that --check and the agent share.
func buildTable(o *options, plan *setup.Plan, set *counter.Set, derived []setup.Derived, clusters *metrics.Clusters, cgroups *metrics.Cgroups) (*pmda.Table, *metrics.Source, error) {
	spec := metrics.Spec{Version: version, Set: set, Clusters: clusters, Cgroups: cgroups}
	for _, c := range plan.Counters {
		ev, _ := set.Lookup(c.Event.Name)
		spec.Counters = append(spec.Counters, metrics.Counter{
			Event:  ev,
			Metric: c.Metric,
			About:  fmt.Sprintf("Configured as %q at %s: %s.", c.Event.Name, c.Pos, c.Event.Source),
		})
	}
	for i, d := range derived {
		spec.Derived = append(spec.Derived, metrics.Derived{
			Derived: i,
			Metric:  d.Metric,
			About:   fmt.Sprintf("Defined by %s at %s.", d.Section.Header(), d.Section.Pos),
		})
	}
	spec.Ratios = chooseRatios(ratiosPath(o), plan, set)
	return metrics.Build(spec)
}

// ratiosPath is the user's ratios file, beside perfevent.conf.
func ratiosPath(o *options) string { return filepath.Join(filepath.Dir(o.config), "ratios.conf") }

// chooseRatios are the ratios served (ratio.Choose), with notes for the log
// and --check.
func chooseRatios(path string, plan *setup.Plan, set *counter.Set) []ratio.Chosen {
	chosen, problems, info := ratio.Choose(path, set, plan.Scale)
	for _, e := range problems {
		plan.Notes = append(plan.Notes, setup.Note{Severity: setup.Problem, Text: e.Error()})
	}
	for _, line := range info {
		plan.Notes = append(plan.Notes, setup.Note{Severity: setup.Info, Text: line})
	}
	return chosen
}

func check(o *options, stdout, stderr io.Writer) int {
	plan, set, sum, derived, err := count(o, pmu.Default(), counter.Config{})
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", prog, err)
		return 1
	}
	// The table too, with the PMIDs of a fresh map (the real one is the
	// agent's): whatever it refuses, the agent would not serve.
	_, src, err := buildTable(o, plan, set, derived, metrics.NewClusters(), nil)
	set.Close()
	if err != nil {
		plan.Notes = append(plan.Notes, setup.Note{Severity: setup.Problem, Text: "the metric table: " + err.Error()})
	} else {
		for _, e := range src.Skipped() {
			plan.Notes = append(plan.Notes, setup.Note{Severity: setup.Problem, Text: e.Error() + "; not served"})
		}
	}

	plan.Notes = append(plan.Notes, cNotes(o, plan.Config)...)
	plan.Notes = append(plan.Notes, planCgroups(o.config, plan).notes...)
	for _, n := range sortedNotes(plan.Notes) {
		mark := "  "
		if n.Severity == setup.Problem {
			mark = "! "
		}
		fmt.Fprintln(stdout, mark+n.String())
	}
	fmt.Fprintf(stdout, "\n%s: %s served on %s, %s; %s\n", o.config,
		plural(sum.Served, "event"), plural(sum.FDs, "counter"), plural(len(derived), "derived metric"), plural(plan.Problems(), "problem"))
	if plan.Problems() > 0 {
		return 1
	}
	return 0
}

// sortedNotes orders notes by line, keeping the order of notes about the
// same line (what the line resolved to, then whether it opened); notes
// about the whole file come last.
func sortedNotes(notes []setup.Note) []setup.Note {
	out := slices.Clone(notes)
	key := func(n setup.Note) int {
		if n.Pos.Line == 0 {
			return math.MaxInt
		}
		return n.Pos.Line
	}
	slices.SortStableFunc(out, func(a, b setup.Note) int { return cmp.Compare(key(a), key(b)) })
	return out
}

// openLog opens the agent's log as libpcp does for an agent pmcd starts:
// the previous log is kept as .prev. If the file cannot be opened the log
// goes to stderr, which pmcd points at its own log.
//
// The log directory belongs to the pcp user while the agent is still root
// here, so nothing at the path is followed or reused: whatever is there (a
// symlink included) is renamed out of the way, and the new file must be
// created by this open.
func openLog(path string, stderr io.Writer) (io.Writer, func(), error) {
	if path == "-" {
		return stderr, func() {}, nil
	}
	if _, err := os.Lstat(path); err == nil {
		if err := os.Rename(path, path+".prev"); err != nil {
			return stderr, func() {}, err
		}
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return stderr, func() {}, err
	}
	// Later panics and runtime errors land in the log too. Dup3, because
	// dup2 has no system call on arm64, riscv64 and loong64; it refuses
	// equal descriptors, which happen when the agent was started without
	// a stderr, and then the log is fd 2 already.
	if fd := int(f.Fd()); fd != 2 {
		unix.Dup3(fd, 2, 0)
	}
	return f, func() { f.Close() }, nil
}

func serve(o *options, pcp *pcpconf.Config, stderr io.Writer) int {
	// pmcd connects to a socket agent 2 s after starting it and wants
	// CREDS within 3 s of that, so listen before anything slow.
	ln, err := pmda.Listen(o.endpoint(pcp))
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", prog, err)
		return 1
	}
	defer ln.Close()

	w, closeLog, lerr := openLog(o.logfile, stderr)
	defer closeLog()
	a := &agent{o: o, fs: pmu.Default(), log: pmda.NewLogger(w, prog)}
	a.pcpUser = pcp.Get("PCP_USER")
	host, _ := os.Hostname()
	a.log.Start(host)
	defer a.log.Finish()
	if lerr != nil {
		a.log.Warningf("cannot open the log file: %v; logging to stderr", lerr)
	}
	if err := pcp.Err(); err != nil {
		a.log.Warningf("pcp.conf: %v", err)
	}
	signal.Ignore(syscall.SIGPIPE)
	if o.endpoint(pcp).Transport == pmda.Pipe {
		exitOnHangup(func(s string) { a.log.Infof("%s", s) }, func() {
			if st := a.published.Load(); st != nil {
				st.Close()
			}
			a.log.Finish()
		})
	}

	soft, hard, err := counter.RaiseFileLimit()
	if err != nil {
		a.log.Warningf("raising the descriptor limit: %v", err)
	}
	a.log.Infof("perfevent version %s (maxfiles=%d of %d), config %s", version, soft, hard, o.config)

	// What needs a descriptor or root besides the counters comes first:
	// the counters may use up the descriptor limit. The state file's and
	// PMID map's directories are given to the user the agent will run as.
	o.held = config.Hold(o.config)
	defer o.held.Close()
	uid, gid, drop := a.runAs()
	if err := a.openLock(uid, gid); err != nil {
		a.log.Errorf("perfalloc lock file: %v; counters stay open and perfalloc cannot reserve them", err)
	}
	defer a.stopReservation()

	g, err := a.build(false)
	if err != nil {
		// An unreadable configuration: serve the static metrics and say
		// why, rather than leave pmcd without an agent (the C agent exits).
		a.log.Errorf("%v; serving perfevent.version and perfevent.active only until this is fixed and the agent gets SIGHUP", err)
		g, err = a.empty()
		if err != nil {
			a.log.Errorf("%v", err)
			return 1
		}
	}
	a.gen.Store(g)

	if a.lock != nil {
		if err := a.watchLock(); err != nil {
			a.log.Errorf("perfalloc lock file: %v; counters stay open and perfalloc cannot reserve them", err)
		}
	}
	if drop {
		a.dropPrivileges(uid, gid)
	}

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGUSR1)
	// Reloads run beside the signal loop, so that SIGTERM and pmcd's
	// hangup are never kept waiting by one; SIGHUPs that come during a
	// reload make one more.
	reloads := make(chan struct{}, 1)
	go func() {
		for range reloads {
			a.reload()
		}
	}()
	done := make(chan error, 1)
	a.pm = pmda.New(pmda.Config{Fetcher: a, Log: a.log, OnEndContext: a.endContext}, g.table)
	a.watchCPUs(cpuhotplug.Options{}) // a change from now on swaps the table
	defer a.cpus.Close()
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		ln.Close()
		done <- a.pm.Serve(conn)
	}()
	for {
		select {
		case err := <-done:
			if err != nil {
				a.log.Errorf("talking to pmcd: %v", err)
				return 1
			}
			a.log.Infof("pmcd closed the connection")
			return 0
		case s := <-sigs:
			switch s {
			case syscall.SIGHUP:
				select {
				case reloads <- struct{}{}:
				default:
				}
				continue
			case syscall.SIGUSR1:
				a.logRuntime()
				continue
			}
			a.log.Infof("caught %v, exiting", s)
			return 0
		}
	}
}

// empty is a generation with no counters.
func (a *agent) empty() (*generation, error) {
	set, err := counter.New(nil, counter.Config{})
	if err != nil {
		return nil, err
	}
	if _, err := set.Open(); err != nil {
		return nil, err
	}
	clusters, _ := metrics.LoadClusters(a.o.pmids)
	table, src, err := metrics.Build(metrics.Spec{Version: version, Set: set, Clusters: clusters})
	if err != nil {
		return nil, err
	}
	return &generation{plan: &setup.Plan{}, set: set, table: table, src: src}, nil
}

// runAs says which user the agent will run as after start-up: -U, by
// default $PCP_USER. drop is false when it stays as it is: already not
// root, told to stay root, or the user does not exist.
func (a *agent) runAs() (uid, gid int, drop bool) {
	uid, gid = os.Geteuid(), os.Getegid()
	a.trusted = a.agentUsers()
	metrics.TrustOwners(a.trusted...)
	if uid != 0 || a.o.user == "" || a.o.user == "root" {
		return uid, gid, false
	}
	u, g, _, err := privilege.Lookup(a.o.user)
	if err != nil {
		a.log.Warningf("-U %s: %v; staying root", a.o.user, err)
		return uid, gid, false
	}
	a.trusted = append(a.trusted, u)
	metrics.TrustOwners(a.trusted...)
	// The PMID map is rewritten when a reload adds names, as that user:
	// its directory becomes the user's if it is the agent's own (the
	// default one, or one it makes now), never some existing directory
	// that --pmids happens to name.
	dir := filepath.Dir(a.o.pmids)
	_, statErr := os.Stat(dir)
	if err := metrics.PrepareMapDir(a.o.pmids, u, g, statErr != nil || dir == filepath.Dir(a.o.defaultPMIDs)); err != nil {
		a.log.Warningf("%v; the agent may not be able to save new PMIDs after a reload", err)
	}
	return u, g, true
}

// agentUsers are the uids that an earlier run of the agent may have left
// its files to: $PCP_USER's and the -U user's. Root adopts what they own in
// the agent's own directories, so that a change of -U in pmcd.conf (to
// root, or to another user) keeps the PMIDs and the state directory.
func (a *agent) agentUsers() []int {
	var uids []int
	for _, name := range []string{a.pcpUser, a.o.user} {
		if name == "" || name == "root" {
			continue
		}
		if u, _, _, err := privilege.Lookup(name); err == nil && u != 0 {
			uids = append(uids, u)
		}
	}
	return uids
}

// dropPrivileges makes the agent run as the -U user with only the
// capability it needs to reopen counters, as a modern kernel allows; the C
// agent gives up everything and can never reopen them. If that cannot be
// done the agent stays root and says why.
func (a *agent) dropPrivileges(uid, gid int) {
	c := privilege.CounterCapability()
	id, err := privilege.Drop(a.o.user, c)
	if err != nil {
		if os.Geteuid() == 0 {
			a.log.Warningf("cannot run as %s with %s: %v; staying root", a.o.user, privilege.Name(c), err)
		} else {
			a.log.Errorf("dropping privileges failed part way: %v; counters may not reopen after perfalloc", err)
		}
		return
	}
	st, err := privilege.ReadStatus(0)
	if err != nil || !st.Only(uid, c) {
		a.log.Warningf("after dropping privileges /proc/self/status shows uids %v CapEff %#x CapPrm %#x (err %v)", st.UIDs, st.CapEff, st.CapPrm, err)
		return
	}
	a.log.Infof("running as %s (uid %d, gid %d) with %s only", id.User, uid, gid, privilege.Name(c))
}

// openLock opens (or creates) the lock file and prepares the directory of
// the state file for the user the agent will run as.
func (a *agent) openLock(uid, gid int) error {
	lf, err := reservation.Open(a.o.lockfile)
	if err != nil {
		return err
	}
	a.lock = lf
	if err := reservation.CheckLockDir(a.o.lockfile); err != nil {
		a.log.Warningf("%v", err)
	}
	// A refused directory is never written: without it there is no state
	// file at all.
	d, err := reservation.PrepareStateDir(a.o.lockfile, uid, gid, a.trusted...)
	if err != nil {
		a.log.Warningf("%v; perfalloc will not be able to confirm releases", err)
	}
	a.stateDir = d
	return nil
}

// watchLock starts watching the lock file: counters are closed while
// someone holds a read lock on it and reopened when the last holder lets
// go. The state file beside it tells perfalloc when that has happened.
func (a *agent) watchLock() error {
	lf := a.lock
	if a.stateDir != nil {
		st, err := reservation.NewStateFileIn(a.stateDir, reservation.State{
			Program:  prog,
			Config:   a.o.config,
			LockFile: a.o.lockfile,
			Counters: reservation.CountersOpen,
			Since:    time.Now(),
			Holders:  []int{},
			Events:   a.events(),
		}, 0)
		switch {
		case errors.Is(err, reservation.ErrStateOwned):
			a.log.Warningf("%v; this agent leaves it alone and perfalloc cannot confirm its releases", err)
		case err != nil:
			a.log.Warningf("state file: %v; perfalloc will not be able to confirm releases", err)
		default:
			a.state = st
			a.published.Store(st)
		}
	}
	w, err := reservation.Watch(lf, reservation.Options{
		Poll:     a.o.poll,
		NoNotify: a.o.noInotify,
		Logf:     func(format string, args ...any) { a.log.Warningf(format, args...) },
	}, a.reservationChanged)
	if err != nil {
		return err
	}
	a.watcher = w
	return nil
}

func (a *agent) stopReservation() {
	if a.watcher != nil {
		a.watcher.Close()
	}
	if a.state != nil {
		a.state.Close() // removes the file: no agent, no state
	}
	if a.stateDir != nil {
		a.stateDir.Close()
	}
	if a.lock != nil {
		a.lock.Close()
	}
}

// reservationChanged runs on the watcher's goroutine.
func (a *agent) reservationChanged(s reservation.Status) {
	a.mu.Lock()
	defer a.mu.Unlock()
	g := a.gen.Load()
	set := g.set
	switch {
	case s.Reserved && !a.reserved:
		start := time.Now()
		if err := set.Close(); err != nil {
			a.log.Warningf("closing counters for perfalloc: %v", err)
		}
		g.closeCgroups()
		a.log.Infof("counters released for perfalloc (holders %s) in %v", pids(s.Holders), time.Since(start).Round(time.Microsecond))
	case !s.Reserved && a.reserved:
		// A user who takes and drops the lock in a loop must not make the
		// agent reopen every counter (events × CPUs system calls) and log
		// it hundreds of times a second. A few reopens in a row are
		// immediate; beyond that, one per minReopen, the pace of the C
		// agent's poll.
		a.pace()
		a.reserved = false
		if a.reloadDue && a.reloadLocked(true) {
			break // the new configuration's counters are open instead
		}
		a.reopenLocked(set)
		g.reopenCgroups()
	}
	a.reserved = s.Reserved
	a.updateState(&s)
}

// reopenLocked reopens the counters after a reservation; the caller holds a.mu.
// Failures already in the log (the events this machine could not count at
// start-up, or that failed the same way at an earlier reopen) are counted
// in the one Info line, not listed again: a perfalloc run every minute must
// not fill the log with them.
func (a *agent) reopenLocked(set *counter.Set) {
	start := time.Now()
	sum, err := set.Reopen()
	if err != nil {
		a.log.Warningf("reopening counters: %v", err)
	}
	var fresh []string
	known := 0
	for _, line := range sum.FailureLines() {
		if a.told[line] {
			known++
			continue
		}
		fresh = append(fresh, line)
		a.told[line] = true
	}
	msg := fmt.Sprintf("counters reopened after perfalloc in %v: %d of %d events served on %d descriptors",
		time.Since(start).Round(time.Microsecond), sum.Served, sum.Events, sum.FDs)
	if known > 0 {
		msg += "; still failing as logged before: " + plural(known, "event")
	}
	if len(fresh) > 0 {
		msg += "; failing anew: " + plural(len(fresh), "event") + ", below"
	}
	a.log.Infof("%s", msg)
	for _, line := range fresh {
		a.log.Warningf("%s", line)
	}
}

// updateState writes the state file; s is nil when only the events changed.
// The caller holds a.mu.
func (a *agent) updateState(s *reservation.Status) {
	if a.state == nil {
		return
	}
	events := a.events()
	err := a.state.Update(func(st *reservation.State) {
		if s != nil {
			counters := reservation.CountersOpen
			if s.Reserved {
				counters = reservation.CountersReleased
			}
			if st.Counters != counters {
				st.Since = time.Now()
			}
			st.Counters = counters
			st.Holders = append(st.Holders[:0], s.Holders...)
		}
		st.Events = events
	})
	if err != nil {
		a.log.Warningf("state file: %v", err)
	}
}

// events describes every configured event for the state file.
func (a *agent) events() []reservation.EventState {
	set := a.gen.Load().set
	out := make([]reservation.EventState, 0, set.NumEvents())
	for ev := range set.NumEvents() {
		e := reservation.EventState{Name: set.Name(ev), State: reservation.EventFailed}
		var why error
		for _, c := range set.Status(ev) {
			if c.Open {
				e.CPUs++
			}
			if why == nil && c.OpenErr != nil {
				why = c.OpenErr
			}
			if why == nil && c.ReadErr != nil {
				why = c.ReadErr
			}
		}
		switch {
		case e.CPUs > 0:
			e.State = reservation.EventCounting
		case len(set.CPUs(ev)) > 0 && set.Reserved():
			e.State = reservation.EventReleased
		}
		if why != nil {
			e.Error = why.Error()
		}
		out = append(out, e)
	}
	return out
}

func pids(p []int) string {
	if len(p) == 0 {
		return "unknown"
	}
	s := ""
	for i, pid := range p {
		if i > 0 {
			s += ","
		}
		s += strconv.Itoa(pid)
	}
	return s
}
