package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"perfevent/internal/agent"
	"perfevent/internal/counter"
	"perfevent/internal/metrics"
	"perfevent/internal/pcpconf"
	"perfevent/internal/pmda"
	"perfevent/internal/pmu"
	"perfevent/internal/release"
	"perfevent/internal/reservation"
	"perfevent/internal/reservation/lockwatch"
	"perfevent/internal/threads"
)

const (
	prog    = agent.Program
	version = release.Version
)

// The range of -poll.
const (
	minPoll = 10 * time.Millisecond
	maxPoll = 10 * time.Second
)

// options are the command line; the supervisor's own are filled in place.
type options struct {
	agent.Options
	debug      string
	domain     int
	logfile    string
	logSize    byteSize
	pipe       bool
	socket     string
	inet       int
	ipv6       int
	check      bool
	listEvents bool
	listPMU    string
	listMatch  string
	noProbe    bool
	version    bool
	lockMode   string
	lockGroup  string
}

func main() {
	growStack()
	// An economy, not a need: a thread the slack cannot reach keeps the
	// kernel's default, and nothing else changes.
	threads.SetTimerSlack(timerSlack)
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// growStack gives the main goroutine the 32 KiB of stack that start-up
// comes to need, in one step while the stack holds two frames: grown from
// the runtime's 2 KiB by doubling, it would be copied four times, each copy
// walking every frame then on it, a few percent of a start's CPU. The
// room is a local of its own frame, gone when it returns: as its result,
// it sat in main's frame for the whole run, and start-up, left 8 KiB of
// the 32, grew the stack to 64 KiB once more, deep in the log's first
// time stamp.
//
//go:noinline
func growStack() {
	var b [24 << 10]byte
	keepStack(&b)
}

// keepStack keeps growStack's array, which the compiler would otherwise
// drop, and with it the frame that makes the stack grow.
//
//go:noinline
func keepStack(*[24 << 10]byte) {}

func parseFlags(args []string, pcp *pcpconf.Config, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet(prog, flag.ContinueOnError)
	// The flag package would print a bad flag's error before the usage,
	// and run prints it again with the program's name: once is enough.
	fs.SetOutput(io.Discard)
	fs.BoolVar(&o.Compat, "C", false, "compatibility names: only ':' becomes '-' (the pre-3.10.8 names)")
	fs.StringVar(&o.debug, "D", "", "debug `options` (accepted for compatibility; any value logs each start-up step in detail)")
	fs.IntVar(&o.domain, "d", metrics.Domain, "PMDA `domain` number; perfevent is 127")
	// Relative, as the C agent's: pmcd starts agents in $PCP_LOG_DIR/pmcd,
	// and an agent run by hand elsewhere leaves the live agent's log alone.
	fs.StringVar(&o.logfile, "l", "perfevent.log", "write the log to `file` (- for stderr)")
	o.logSize = defaultLogSize
	fs.Var(&o.logSize, "log-size", "rotate the log when it grows past `size` bytes (K, M and G multiply by 1024s; 0 never rotates), keeping the last one as .prev")
	// The default is looked for (a readlink and up to three stats) only
	// when it is needed: pmcd gives -c.
	fs.StringVar(&o.Config, "c", "", "read the configuration from `file`")
	fs.StringVar(&o.User, "U", pcp.Get("PCP_USER"), "after start-up, run as `user`, keeping only the capability to open counters (root: stay root)")
	fs.BoolVar(&o.pipe, "p", false, "talk to pmcd on stdin and stdout (the default)")
	fs.StringVar(&o.socket, "u", "", "listen for pmcd on the unix socket `path`")
	fs.IntVar(&o.inet, "i", 0, "listen for pmcd on 127.0.0.1:`port`")
	fs.IntVar(&o.ipv6, "6", 0, "listen for pmcd on [::1]:`port`")
	fs.BoolVar(&o.check, "check", false, "explain what the configuration means on this machine, line by line, and exit (1 if anything is wrong)")
	fs.BoolVar(&o.listEvents, "list-events", false, "list the events this machine offers, as they are written in perfevent.conf, and exit")
	fs.StringVar(&o.listPMU, "pmu", "", "with --list-events: only the events of this `PMU` (libpfm4's name, e.g. skx, a vendor list's, e.g. mtl_core, or the kernel's, e.g. uncore_imc_0; perf for the generic events); an unknown one is an error")
	fs.StringVar(&o.listMatch, "match", "", "with --list-events: only the events whose name or unit mask contains `pattern` (ignoring case; *, ? and [...] make it a glob over the whole name)")
	fs.BoolVar(&o.noProbe, "no-probe", false, "with --list-events: do not try to open each event to mark whether it works here")
	fs.StringVar(&o.LockFile, "lockfile", reservation.LockPathIn(pcp), "the perfalloc lock `file`")
	fs.StringVar(&o.lockMode, "lockmode", fmt.Sprintf("%04o", reservation.LockMode), "the lock file's `mode`: who may read it may reserve the counters (0640 with -lockgroup: root and the group's members)")
	fs.StringVar(&o.lockGroup, "lockgroup", "", "the lock file's `group` (a name or number); with -lockmode 0640, only its members (and root) may reserve the counters")
	fs.DurationVar(&o.MaxHold, "max-hold", 0, "resume counting when a reservation has lasted `duration` although perfalloc's lock is still held, and log it (0: never, as the C agent)")
	o.DefaultPMIDs = filepath.Join(pcp.Get("PCP_VAR_DIR"), "config", "perfevent", "pmids")
	fs.StringVar(&o.PMIDs, "pmids", o.DefaultPMIDs, "the `file` where metric names keep their PMIDs across restarts")
	fs.StringVar(&o.CLayout, "c-layout", filepath.Join(pcp.Get("PCP_PMDAS_DIR"), "perfevent", "perfevent.conf"), "PCP's C agent's configuration `file`: the names it would serve here keep its PMIDs (none when it does not exist)")
	fs.DurationVar(&o.Poll, "poll", lockwatch.DefaultPoll, "how often to check the lock file even without an inotify hint")
	fs.BoolVar(&o.NoInotify, "no-inotify", false, "check the lock file by polling only")
	fs.BoolVar(&o.CCompatible, "c-compatible", false, "with --check, also flag what PCP's C agent (6.0.3) would reject or read differently in the file")
	fs.BoolVar(&o.NoCatalog, "no-catalog", false, "serve only the configured events and ratios.conf's own ratios: no ratio of the metric catalog, none of its events opened")
	fs.BoolVar(&o.version, "version", false, "print the version and exit")
	fs.Usage = func() {
		fs.Lookup("c").DefValue = defaultConfig(pcp)
		usage(fs, stderr)
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	configGiven := false
	fs.Visit(func(f *flag.Flag) { configGiven = configGiven || f.Name == "c" })
	if !configGiven {
		o.Config = defaultConfig(pcp)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if o.domain != metrics.Domain {
		return nil, fmt.Errorf("-d %d: perfevent's domain is %d (PERFEVENT in stdpmid); its PMNS and pmcd.conf line must use it", o.domain, metrics.Domain)
	}
	if o.Poll < minPoll || o.Poll > maxPoll {
		// Below this the poll alone keeps a core busy; above it, without
		// inotify, perfalloc's release could go unnoticed for minutes.
		return nil, fmt.Errorf("-poll %v: choose an interval from %v to %v", o.Poll, minPoll, maxPoll)
	}
	access, err := lockAccess(o.lockMode, o.lockGroup)
	if err != nil {
		return nil, err
	}
	o.LockAccess = access
	if o.MaxHold < 0 || (o.MaxHold > 0 && o.MaxHold < time.Second) {
		return nil, fmt.Errorf("-max-hold %v: choose 0 (never) or at least 1s", o.MaxHold)
	}
	if o.logSize != 0 && o.logSize < minLogSize {
		// Smaller, a reload's summary would rotate the log it is in.
		return nil, fmt.Errorf("-log-size %d: choose 0 (never rotate) or at least %d bytes", o.logSize, minLogSize)
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
	o.Debug = o.debug != ""
	o.PCPUser = pcp.Get("PCP_USER")
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
	// The one description of where the machine's sysfs and procfs are,
	// from the environment, for every mode.
	o.FS = pmu.Default()
	switch {
	case o.version:
		fmt.Fprintf(stdout, "%s version %s\n", prog, version)
		return 0
	case o.listEvents:
		return listEvents(o.FS, o.listPMU, o.listMatch, !o.noProbe, stdout, stderr)
	case o.check:
		problems, err := agent.Check(o.Options, stdout)
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", prog, err)
			return 1
		}
		if problems > 0 {
			return 1
		}
		return 0
	}
	return serve(o, pcp, stderr)
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

	w, logFile, closeLog, lerr := pmda.OpenLog(o.logfile, stderr)
	defer closeLog()
	log := pmda.NewLogger(w, prog)
	log.RotateAt(logFile, o.logfile, int64(o.logSize))
	host, _ := os.Hostname()
	log.Start(host)
	defer log.Finish()
	if lerr != nil {
		log.Warningf("cannot open the log file: %v; logging to stderr", lerr)
	}
	if err := pcp.Err(); err != nil {
		log.Warningf("pcp.conf: %v", err)
	}
	o.Log = log
	a := agent.New(o.Options)
	signal.Ignore(syscall.SIGPIPE)
	if o.endpoint(pcp).Transport == pmda.Pipe {
		exitOnHangup(func(s string) { log.Infof("%s", s) }, func() {
			a.RemoveState()
			log.Finish()
		})
	}

	soft, hard, err := counter.RaiseFileLimit()
	if err != nil {
		log.Warningf("raising the descriptor limit: %v", err)
	}
	log.Infof("perfevent version %s (maxfiles=%d of %d), config %s", version, soft, hard, o.Config)

	err = a.Start()
	defer closeWithin(a, log, closeBound)
	if err != nil {
		log.Errorf("%v", err)
		return 1
	}

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGUSR1)
	done := make(chan error, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		ln.Close()
		done <- a.Serve(conn)
	}()
	for {
		select {
		case err := <-done:
			if err != nil {
				log.Errorf("talking to pmcd: %v", err)
				return 1
			}
			log.Infof("pmcd closed the connection")
			return 0
		case s := <-sigs:
			switch s {
			case syscall.SIGHUP:
				// Coalesced and run beside this loop (agent.RequestReload),
				// so that SIGTERM and pmcd's hangup never wait for one.
				a.RequestReload()
				continue
			case syscall.SIGUSR1:
				logRuntime(log)
				continue
			}
			log.Infof("caught %v, exiting", s)
			return 0
		}
	}
}

// closeBound is how long the agent's Close may take at exit (the watchers
// stopping, a reload's swap finishing) before the agent exits without it.
const closeBound = 500 * time.Millisecond

// closeWithin closes the agent, but exits without waiting longer than d:
// SIGTERM must end the agent whatever it is doing. The state file is
// removed either way.
func closeWithin(a *agent.Agent, log *pmda.Logger, d time.Duration) {
	done := make(chan struct{})
	go func() {
		a.Close()
		close(done)
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		a.RemoveState()
		log.Warningf("still closing after %v; exiting without waiting", d)
	}
}
