package agent

import (
	"fmt"
	"path/filepath"

	"golang.org/x/sys/unix"

	"perfevent/internal/cgroup"
	"perfevent/internal/conffile"
	"perfevent/internal/config"
	"perfevent/internal/counter"
	"perfevent/internal/metrics"
	"perfevent/internal/pmda"
	"perfevent/internal/ratio"
	"perfevent/internal/setup"
)

// counted is what count made of the configuration.
type counted struct {
	plan    *setup.Plan     // what each line means here, with its notes
	set     *counter.Set    // the plan's counters, opened
	sum     counter.Summary // what opening them gave
	derived []setup.Derived // the derived metrics the open counters allow
	ratios  ratioDefs       // ratios.conf's and the built-in ratios
	cgroups cgroupConf      // cgroups.conf, read with the rest
}

// ratioDefs are ratio.DefsOf's results, read once per build.
type ratioDefs struct {
	defs []ratio.Def
	user int
	errs []error
}

// confFiles are the configuration files, each held from start-up
// (conffile.File) so that a reload as the agent's user reads what root
// read, and each read under the same rules (conffile).
type confFiles struct {
	config  *conffile.File
	ratios  *conffile.File
	cgroups *conffile.File
}

func holdFiles(o *Options) *confFiles {
	return &confFiles{
		config:  conffile.Hold(o.Config),
		ratios:  conffile.Hold(ratiosPath(o)),
		cgroups: conffile.Hold(cgroupsConf(o.Config)),
	}
}

func (c *confFiles) Close() {
	c.config.Close()
	c.ratios.Close()
	c.cgroups.Close()
}

// readied is the configuration read and planned for this machine, with
// nothing opened yet: the part of a rebuild that reads files, and so the
// part that runs outside the agent's lock, under a time bound.
type readied struct {
	plan    *setup.Plan
	specs   []counter.Spec
	join    []uint32 // counter.Config.JoinSoftware
	ratios  ratioDefs
	cgroups cgroupConf
}

// cgroupConf is cgroups.conf as cgroup.ReadHeld read it.
type cgroupConf struct {
	cfg     cgroup.Config
	missing bool
	errs    []error
}

// count reads the configuration files, plans them for this machine and
// opens the counters: the steps --check and the agent share. Only a
// configuration that cannot be read at all is an error; everything else is
// in the notes.
func count(o *Options, files *confFiles, cfg counter.Config) (*counted, error) {
	r, err := ready(o, files)
	if err != nil {
		return nil, err
	}
	return r.open(o, cfg)
}

// ready reads the configuration files and plans them (count's first half).
func ready(o *Options, files *confFiles) (*readied, error) {
	f, perr := config.ParseHeld(files.config)
	if f == nil && perr != nil {
		return nil, perr
	}
	fs := o.fs()
	defer fs.Pass()() // each PMU's sysfs directory is read once per pass (pmu.FS.Pass)
	m, err := setup.ReadMachine(fs)
	if err != nil {
		return nil, fmt.Errorf("reading the CPU topology: %w", err)
	}
	r := &readied{plan: setup.Make(f, perr, m, o.Compat)}
	r.specs = r.plan.Specs()
	r.ratios.defs, r.ratios.user, r.ratios.errs = ratio.DefsOf(ratio.ParseHeld(files.ratios))
	ratio.Group(r.specs, r.ratios.defs)
	// Tracepoints and x86's msr events live in the kernel's software
	// context, so they are read inside each CPU's software group.
	r.join = []uint32{unix.PERF_TYPE_TRACEPOINT}
	if p, err := fs.PMU("msr"); err == nil {
		r.join = append(r.join, p.Type)
	}
	c := &r.cgroups
	c.cfg, c.missing, c.errs = cgroup.ReadHeld(files.cgroups)
	return r, nil
}

// open opens the counters of a plan (count's second half).
func (r *readied) open(o *Options, cfg counter.Config) (*counted, error) {
	if cfg.JoinSoftware == nil {
		cfg.JoinSoftware = r.join
	}
	set, err := counter.New(r.specs, cfg)
	if err != nil {
		return nil, err
	}
	sum, err := set.Open()
	if err != nil {
		return nil, err
	}
	r.plan.Opened(set, sum)
	fs := o.fs()
	defer fs.Pass()()
	return &counted{plan: r.plan, set: set, sum: sum, derived: r.plan.AddDerived(set, fs), ratios: r.ratios, cgroups: r.cgroups}, nil
}

// buildTable is the table that serves what the plan kept: the last step
// that --check and the agent share.
func buildTable(o *Options, c *counted, clusters *metrics.Clusters, cgroups *metrics.Cgroups) (*pmda.Table, *metrics.Source, error) {
	spec := metrics.Spec{Version: version, Set: c.set, Clusters: clusters, Cgroups: cgroups}
	for _, pc := range c.plan.Counters {
		ev, _ := c.set.Lookup(pc.Event.Name)
		spec.Counters = append(spec.Counters, metrics.Counter{
			Event:  ev,
			Metric: pc.Metric,
			About:  fmt.Sprintf("Configured as %q at %s: %s.", pc.Event.Name, pc.Pos, pc.Event.Source),
		})
	}
	for i, d := range c.derived {
		spec.Derived = append(spec.Derived, metrics.Derived{
			Derived: i,
			Metric:  d.Metric,
			About:   fmt.Sprintf("Defined by %s at %s.", d.Section.Header(), d.Section.Pos),
		})
	}
	spec.Ratios = chooseRatios(c)
	return metrics.Build(spec)
}

// ratiosPath is the user's ratios file, beside perfevent.conf.
func ratiosPath(o *Options) string { return filepath.Join(filepath.Dir(o.Config), "ratios.conf") }

// chooseRatios are the ratios served (ratio.ChooseFrom), with notes for
// the log and --check.
func chooseRatios(c *counted) []ratio.Chosen {
	chosen, info := ratio.ChooseFrom(c.ratios.defs, c.ratios.user, c.set, c.plan.Scale)
	for _, e := range c.ratios.errs {
		c.plan.Notes = append(c.plan.Notes, setup.Note{Severity: setup.Problem, Text: e.Error()})
	}
	for _, line := range info {
		c.plan.Notes = append(c.plan.Notes, setup.Note{Severity: setup.Info, Text: line})
	}
	return chosen
}
