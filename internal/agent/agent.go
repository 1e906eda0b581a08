package agent

import (
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
	"golang.org/x/time/rate"

	"perfevent/internal/bpfcount"
	"perfevent/internal/cgroup"
	"perfevent/internal/counter"
	"perfevent/internal/cpuhotplug"
	"perfevent/internal/metrics"
	"perfevent/internal/pdu"
	"perfevent/internal/pmda"
	"perfevent/internal/pmu"
	"perfevent/internal/release"
	"perfevent/internal/reservation"
	"perfevent/internal/reservation/lockwatch"
	"perfevent/internal/setup"
)

// Program is the agent's name in its log and state file.
const Program = "pmdaperfevent"

// version is what perfevent.version reports. The C agent says "1.0.1".
const version = release.Version

// Options are what the command line tells the supervisor.
type Options struct {
	Config string // perfevent.conf (-c)
	// PMIDs is the PMID map (--pmids); DefaultPMIDs is where it lives
	// unless --pmids says otherwise, the agent's own directory.
	PMIDs, DefaultPMIDs string
	LockFile            string // perfalloc's lock file (--lockfile)
	// LockAccess is who may reserve: the lock file's mode and group
	// (-lockmode, -lockgroup).
	LockAccess reservation.Access
	// MaxHold, if not 0, is how long a reservation may stop counting:
	// after it, counting resumes although the lock is held (-max-hold).
	MaxHold     time.Duration
	Poll        time.Duration // the lock file's poll (--poll)
	NoInotify   bool          // poll the lock file only (--no-inotify)
	Compat      bool          // -C: the pre-3.10.8 metric names
	Debug       bool          // -D: log each start-up step in detail
	CCompatible bool          // --check --c-compatible
	// CLayout is PCP's C agent's perfevent.conf (--c-layout): the names
	// it would serve here keep its PMIDs under this agent (setup.CLayout).
	// "" or a missing file: none to keep.
	CLayout string
	// NoCatalog serves no ratio of the metric catalog and opens none of
	// their events (--no-catalog): the configuration alone, as the C
	// agent reads it.
	NoCatalog bool
	// User is the user to run as after start-up (-U), PCPUser
	// $PCP_USER; "" or "root" stays root.
	User, PCPUser string

	Log *pmda.Logger // nil: Check only
	FS  *pmu.FS      // sysfs, procfs, tracefs; nil: the host's

	// NewOpener, if set, gives each generation's counter opener (tests:
	// countertest); nil opens the kernel's counters.
	NewOpener func() counter.Opener
	// Hotplug tunes the watch on the online CPUs (tests: a fast poll);
	// it watches the online list of FS, whatever its own FS says.
	Hotplug cpuhotplug.Options
}

func (o *Options) fs() *pmu.FS {
	if o.FS == nil {
		o.FS = pmu.Default()
	}
	return o.FS
}

// generation is everything one reading of the configuration produced: a
// SIGHUP builds a new one and swaps it in whole.
type generation struct {
	plan   *setup.Plan
	report *report // what its build had to say (logReport)
	set    *counter.Set
	table  *pmda.Table
	src    *metrics.Source
	cg     *cgroup.Tracker // per-cgroup counters; nil when none
	// cgMode is perfevent.cgroup.mode as built, "" when cgroups.conf asks
	// for nothing; the hierarchy watch compares it with the machine's.
	cgMode string
	// cgUnreached says that it counts nothing per cgroup because the
	// cgroups below the root lack the perf_event controller: the
	// hierarchy watch probes again.
	cgUnreached bool
	// bpf is the BPF counter cg counts through (the agent's, or one it
	// replaced since); nil when cg counts with perf cgroup counters.
	bpf *bpfcount.Counter
}

// Agent is the running perfevent agent. It is the pmda.Fetcher: each fetch
// is answered by the generation whose table pmcd's request was served from.
type Agent struct {
	o   Options
	fs  *pmu.FS
	log *pmda.Logger
	pm  *pmda.Agent

	// files are the configuration files as opened at start-up, for
	// reloads after the privilege drop.
	files *confFiles

	gen  atomic.Pointer[generation]
	prev atomic.Pointer[generation] // the one before a reload, for a fetch in flight
	cur  *generation                // the fetch being answered; Serve's goroutine only

	// buildMu serialises rebuilds (reload, hotplug); reloadReq, quit and
	// reloaderDone drive the reloader (RequestReload), which the first
	// request starts (reloaderOnce), and reloadBound is how long a
	// rebuild may read files.
	buildMu      sync.Mutex
	reloadReq    chan struct{}
	quit         chan struct{}
	reloaderDone chan struct{}
	reloaderOnce sync.Once
	reloadBound  time.Duration
	closeOnce    sync.Once

	// mu serialises reservation changes and the swap of a generation;
	// reserved is what the lock file said last. reopens paces reopens
	// and told quietens them.
	mu        sync.Mutex
	reserved  bool
	reloadDue bool          // a SIGHUP came while reserved
	reopens   *rate.Limiter // reopens after perfalloc (pace)
	// cycleLog paces the log lines of reservations as reopens are paced;
	// quietCycle says the current one is not told, untold counts those.
	cycleLog   *rate.Limiter
	quietCycle bool
	untold     int
	now        func() time.Time // the pace's clock
	sleep      func(time.Duration)
	told       map[string]bool // lines already in the log, for the agent's life
	// holds serves perfevent.reservation.*; overridden says that the
	// reservation held now outlasted MaxHold and counting resumed, and
	// holdTimer and holdSeq end it.
	holds      *holds
	status     reservation.Status // what the lock watcher said last
	overridden bool
	holdTimer  *time.Timer
	holdSeq    int
	closing    atomic.Bool // Close has begun: a maximum hold that ends now changes nothing
	state      *reservation.StateFile
	stateDir   *reservation.Directory
	published  atomic.Pointer[reservation.StateFile] // state, for RemoveState

	trusted []int             // uids whose files in the agent's directories it adopts (agentUsers)
	fresh   *metrics.Clusters // the PMIDs used while the map cannot be read
	// toldDisagree: the log has said which names the map numbers
	// otherwise than the C agent (once per agent life).
	toldDisagree bool
	lock         *reservation.LockFile
	watcher      *lockwatch.Watcher
	cpus         *cpuhotplug.Watcher // CPUs going offline and coming back
	hier         *hierarchyWatch     // the hierarchy that owns perf_event, once a generation counts per cgroup (a.mu)
	// locate finds that hierarchy in tests; nil is this machine's.
	locate func() (cgroup.Hierarchy, error)
	// reach probes it in tests; nil is cgroup.Reach.
	reach func(cgroup.Hierarchy, int) error
	// cgroupIDs numbers cgroup instances for the agent's life, across
	// reloads, so that an id never changes hands.
	cgroupIDs *cgroup.IDs
	// bpf counts per cgroup with a BPF program, loaded at start-up and
	// kept across generations (see bpfCounter); nil when none is.
	bpf *bpfcount.Counter
}

// New returns an agent that has done nothing yet; Start starts it.
func New(o Options) *Agent {
	a := &Agent{o: o, log: o.Log, now: time.Now, sleep: time.Sleep, cgroupIDs: cgroup.NewIDs(), told: map[string]bool{},
		reloadReq: make(chan struct{}, 1), quit: make(chan struct{}), reloaderDone: make(chan struct{}),
		reloadBound: reloadBound}
	a.fs = a.o.fs()
	a.holds = newHolds(o.MaxHold, a.fs.FS)
	a.reopens = rate.NewLimiter(rate.Every(minReopen), reopenBurst)
	a.cycleLog = rate.NewLimiter(rate.Every(minReopen), reopenBurst)
	if o.Log != nil {
		o.Log.SetDebug(o.Debug)
	}
	return a
}

// Start does what comes before serving pmcd, in the order the privilege
// drop needs: the user to run as, the lock file, state directory and lock
// watcher's thread, the first generation, the state file and the
// watcher's first check, the drop itself, and the watch on the online
// CPUs. Only an agent that cannot serve even its static metrics is an
// error: an unreadable configuration is logged, and perfevent.version and
// perfevent.active are served until a reload.
func (a *Agent) Start() error {
	// What needs a descriptor or root besides the counters comes first:
	// the counters may use up the descriptor limit. The state file's and
	// PMID map's directories are given to the user the agent will run as.
	a.files = holdFiles(&a.o)
	uid, gid, acct, drop := a.runAs()
	if err := a.openLock(uid, gid); err != nil {
		a.log.Errorf("perfalloc lock file: %v; counters stay open and perfalloc cannot reserve them", err)
	} else {
		a.prepareWatch()
	}

	g, err := a.build(false)
	built := err == nil
	if !built {
		// An unreadable configuration: serve the static metrics and say
		// why, rather than leave pmcd without an agent (the C agent exits).
		a.log.Errorf("%v; serving perfevent.version and perfevent.active only until this is fixed and the agent gets SIGHUP", err)
		if g, err = a.empty(); err != nil {
			return err
		}
	}
	a.gen.Store(g)

	// The lock watcher's first check needs the generation: counters it
	// finds reserved are released at once.
	if a.watcher != nil {
		if err := a.watchLock(); err != nil {
			a.log.Errorf("perfalloc lock file: %v; counters stay open and perfalloc cannot reserve them", err)
		}
	}
	if built {
		a.logReport(g.report, nil, "")
	}
	if drop {
		if a.watcher != nil {
			// Its thread asks for a real-time policy, which root may
			// give itself and the agent's user may not. Started
			// before the build, it has long since done so.
			a.watcher.Ready()
		}
		a.dropPrivileges(acct)
	}
	if a.watcher != nil {
		a.watcher.Begin()
	}
	a.mu.Lock()
	a.pm = pmda.New(pmda.Config{Fetcher: a, Log: a.log, OnEndContext: a.endContext}, g.table)
	a.mu.Unlock()
	a.watchCPUs(a.o.Hotplug) // a change from now on swaps the table
	a.mu.Lock()
	a.followHierarchy(g)
	a.mu.Unlock()
	return nil
}

// Serve answers pmcd on conn until it closes it (pmda.Agent.Serve).
func (a *Agent) Serve(conn io.ReadWriter) error { return a.pm.Serve(conn) }

// Close stops the reloader and the watchers and removes the state file:
// no agent, no state. Calls after the first do nothing.
func (a *Agent) Close() { a.closeOnce.Do(a.close) }

func (a *Agent) close() {
	a.closing.Store(true)
	close(a.quit)
	// A reload opening counters finishes first (a reading of files is
	// abandoned at once); a reloader never started never will be.
	a.reloaderOnce.Do(func() { close(a.reloaderDone) })
	<-a.reloaderDone
	if a.cpus != nil {
		a.cpus.Close()
	}
	a.mu.Lock()
	hier := a.hier
	a.mu.Unlock()
	if hier != nil {
		hier.close()
	}
	a.stopReservation()
	if a.files != nil {
		a.files.Close()
	}
	if g := a.gen.Load(); g != nil {
		g.stopCgroups()
		if g.bpf != nil && g.bpf != a.bpf {
			g.bpf.Close()
		}
	}
	if a.bpf != nil {
		a.bpf.Close()
	}
}

// RemoveState removes the state file, for an exit that cannot wait for
// Close (pmcd gone while the agent is busy); safe from any goroutine.
func (a *Agent) RemoveState() {
	if st := a.published.Load(); st != nil {
		st.Close()
	}
}

// Prepare implements pmda.Fetcher.
func (a *Agent) Prepare(req *pmda.FetchRequest) error {
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
func (a *Agent) endContext(client int32) {
	for _, g := range [2]*generation{a.gen.Load(), a.prev.Load()} {
		if g != nil {
			g.src.Forget(client)
		}
	}
}

// Values implements pmda.Fetcher.
func (a *Agent) Values(m *pmda.Metric, w *pmda.ValueWriter) error {
	return a.cur.src.Values(m, w)
}

// build reads the configuration and turns it into open counters and the
// table that serves them (start-up: readConfig, then openGeneration).
func (a *Agent) build(seamless bool) (*generation, error) {
	r, err := a.readConfig()
	if err != nil {
		return nil, err
	}
	return a.openGeneration(r, seamless)
}

// read is what readConfig read: the plan, and the PMID map.
type read struct {
	*readied
	clusters *metrics.Clusters
	cerrs    []error
}

// readConfig is the part of a build that reads files (the configuration
// files, the PMID map, sysfs) and opens nothing. Only a configuration
// that cannot be read at all is an error.
func (a *Agent) readConfig() (*read, error) {
	// The PMID map first: counters can take every descriptor there is,
	// and without the map names would get other PMIDs than they had.
	clusters, cerrs := metrics.LoadClusters(a.o.PMIDs, a.trusted...)
	r, err := ready(&a.o, a.files)
	if err != nil {
		return nil, err
	}
	return &read{readied: r, clusters: clusters, cerrs: cerrs}, nil
}

// openGeneration opens the counters of what readConfig read and builds the
// table that serves them. Problems with single lines are in the
// generation's report and skipped. seamless is for a reload with no
// reservation between the old counters and these: their first fetch
// counts in perfevent.active.
func (a *Agent) openGeneration(rd *read, seamless bool) (*generation, error) {
	// Counters take descriptors until the limit; keep a few back for the
	// state file, inotify and the PMID map, which come after.
	defer releaseFDs(holdFDs(spareFDs))
	r := &report{}
	// A build that fails has no generation to carry its report: what it
	// found on the way is logged here.
	failed := func(err error) (*generation, error) {
		for _, l := range r.lines {
			a.logLine(l)
		}
		return nil, err
	}
	for _, e := range rd.cerrs {
		r.warningf("%v", e)
	}
	clusters := rd.clusters
	if clusters == nil {
		// Numbers that differ from the archives' beat serving nothing.
		// They are not saved over the map, so that fixing it and
		// restarting brings the old numbers back.
		if a.fresh == nil {
			a.fresh = metrics.NewClusters()
		}
		clusters = a.fresh
		r.errorf("the PMID map %s cannot be used: metrics get fresh PMIDs for this run, unlike those in existing archives; fix or remove the map and restart the agent", a.o.PMIDs)
	}
	var opener counter.Opener
	if a.o.NewOpener != nil {
		opener = a.o.NewOpener()
	}
	c, err := rd.open(&a.o, counter.Config{
		Opener:         opener,
		Log:            a.log,
		ReadFailed:     a.checkCPUs,
		CountFirstRead: seamless,
	})
	if err != nil {
		return failed(err)
	}
	set := c.set
	// The plan's notes report these failures; a reopen repeats only new ones.
	for _, line := range c.sum.FailureLines() {
		a.told[line] = true
	}
	cg, cgSpec, cgSays, bpf := a.startCgroups(c.opened.counters, c.cgroups, r)
	cKeys, cExtra := cLayout(c, opener)
	clusters.Prefer(cKeys)
	table, src, err := buildTable(&a.o, c, clusters, cgSpec, a.reservations(), cExtra...)
	if err != nil {
		set.Close()
		if cg != nil {
			cg.Stop()
		}
		return failed(err)
	}
	for _, e := range src.Skipped() {
		r.warningf("%v; not served", e)
	}
	if err := clusters.Save(); err != nil {
		r.warningf("saving the PMID map: %v; new metrics may get other PMIDs after a restart", err)
	}
	if d := clusters.Disagree(); len(d) > 0 && !a.toldDisagree {
		a.toldDisagree = true
		a.log.Warningf("%s", disagreement(a.o.PMIDs, a.o.CLayout, d))
	}
	for _, n := range c.notes() {
		r.note(n)
	}
	r.summary = fmt.Sprintf("%d counters on %d descriptors and %d derived metrics%s", len(c.opened.counters), c.sum.FDs, len(c.opened.derived), cgSays)
	if len(c.opened.counters) == 0 {
		r.warningf("no counter could be opened; serving perfevent.version and perfevent.active only (see the lines above, or run %s --check)", Program)
	}
	return &generation{plan: c.plan, report: r, set: set, table: table, src: src, cg: cg, cgMode: followedMode(cgSpec), cgUnreached: unreachedSpec(cgSpec), bpf: bpf}, nil
}

// empty is a generation with no counters.
func (a *Agent) empty() (*generation, error) {
	set, err := counter.New(nil, counter.Config{})
	if err != nil {
		return nil, err
	}
	if _, err := set.Open(); err != nil {
		return nil, err
	}
	clusters, _ := metrics.LoadClusters(a.o.PMIDs, a.trusted...)
	table, src, err := metrics.Build(metrics.Spec{Version: version, Set: set, Clusters: clusters, Reservations: a.reservations()})
	if err != nil {
		return nil, err
	}
	return &generation{plan: &setup.Plan{}, set: set, table: table, src: src}, nil
}

// Reload rereads the configuration now and serves it. If it cannot be
// read at all, or reading it takes longer than reloadBound, the agent
// keeps serving the old one. Only opening the new counters and the swap
// hold the lock that reservations need: reading files does not, so no
// file can keep perfalloc waiting. While perfalloc holds the counters the
// reload waits for their release: building opens counters, and the holder
// was promised the PMU to itself.
func (a *Agent) Reload() {
	a.buildMu.Lock()
	defer a.buildMu.Unlock()
	a.rebuild()
}

// RequestReload asks for a reload (SIGHUP) and returns at once. Requests
// are coalesced: the reload starts once they have stopped for
// reloadSettle (or reloadSettleMax after the first), at least reloadGap
// after the previous one, so a storm of SIGHUPs makes one or two reloads,
// and the last request is always followed by a reading of the files.
func (a *Agent) RequestReload() {
	// The reloader's goroutine starts with the first request, not at
	// start-up: each goroutine started before the agent answers pmcd
	// wakes another of the runtime's threads, or makes one.
	a.reloaderOnce.Do(func() { go a.reloader() })
	select {
	case a.reloadReq <- struct{}{}:
	default:
	}
}

// Reload coalescing and its bound.
const (
	reloadSettle    = 100 * time.Millisecond
	reloadSettleMax = time.Second
	reloadGap       = time.Second
	reloadBound     = 10 * time.Second
)

// reloader runs the reloads RequestReload asks for, one at a time, until
// quit is closed.
func (a *Agent) reloader() {
	defer close(a.reloaderDone)
	var last time.Time
	wait := func(d time.Duration) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return true
		case <-a.quit:
			return false
		}
	}
	for {
		select {
		case <-a.reloadReq:
		case <-a.quit:
			return
		}
		first := time.Now()
		settle := time.NewTimer(reloadSettle)
	settling:
		for {
			select {
			case <-a.reloadReq:
				if time.Since(first) < reloadSettleMax {
					settle.Reset(reloadSettle)
				}
			case <-settle.C:
				break settling
			case <-a.quit:
				settle.Stop()
				return
			}
		}
		if d := reloadGap - time.Since(last); !last.IsZero() && d > 0 && !wait(d) {
			return
		}
		last = time.Now()
		a.Reload()
	}
}

// rebuild reads the configuration outside a.mu, under reloadBound, then
// opens the new generation and swaps it in under a.mu; it says whether the
// new configuration is served. The caller holds a.buildMu.
func (a *Agent) rebuild() bool {
	a.log.Debugf("reloading %s", a.o.Config)
	type result struct {
		r   *read
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := a.readConfig()
		done <- result{r, err}
	}()
	bound := time.NewTimer(a.reloadBound)
	defer bound.Stop()
	var res result
	select {
	case res = <-done:
	case <-a.quit:
		return false
	case <-bound.C:
		// The reading goroutine holds no lock and has opened nothing; it
		// is left to finish, and what it read is dropped.
		a.log.Errorf("reload: reading %s and the files beside it, the PMID map and sysfs did not finish within %v; reload abandoned, still serving the previous configuration", a.o.Config, a.reloadBound)
		return false
	}
	if res.err != nil {
		a.log.Errorf("reload: %v; still serving the previous configuration", res.err)
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.holding() {
		a.reloadDue = true
		a.log.Infof("reload of %s deferred: perfalloc holds the counters; it happens when they are released", a.o.Config)
		return false
	}
	a.reloadDue = false
	g, err := a.openGeneration(res.r, true)
	if err != nil {
		a.log.Errorf("reload: %v; still serving the previous configuration", err)
		return false
	}
	old := a.gen.Load()
	g.set.Carry(old.set)
	g.carryCgroups(old)
	a.prev.Store(old)
	a.gen.Store(g)
	a.followHierarchy(g)
	if a.pm != nil {
		a.pm.SetTable(g.table)
	}
	if err := old.set.Close(); err != nil {
		a.log.Warningf("closing the previous counters: %v", err)
	}
	old.stopCgroups()
	a.retireBPF(old, g)
	a.updateState(nil)
	a.logReport(g.report, old.report, "reload done: the new configuration is served")
	return true
}

// Reopens of the counters after perfalloc: reopenBurst in a row, then one
// per minReopen.
const (
	minReopen   = 100 * time.Millisecond
	reopenBurst = 3
)

// pace waits, if need be, until a reopen is allowed: a token bucket
// holding reopenBurst tokens, refilled at one per minReopen.
func (a *Agent) pace() {
	now := a.now()
	if d := a.reopens.ReserveN(now, 1).DelayFrom(now); d > 0 {
		a.sleep(d)
	}
}

// spareFDs is how many descriptors build keeps back from the counters.
const spareFDs = 8

// holdFDs opens up to n descriptors of /dev/null to keep them from the
// counters; releaseFDs gives them back. They are plain descriptors: an
// os.File would be offered to the runtime's poller, five more system
// calls each at every build.
func holdFDs(n int) []int {
	held := make([]int, 0, n)
	for range n {
		fd, err := unix.Open(os.DevNull, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			break
		}
		held = append(held, fd)
	}
	return held
}

func releaseFDs(held []int) {
	for _, fd := range held {
		unix.Close(fd)
	}
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
