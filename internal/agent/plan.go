package agent

import (
	"fmt"
	"path/filepath"

	"golang.org/x/sys/unix"

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

// count reads the configuration files, plans them for this machine and
// opens the counters: the steps --check and the agent share. Only a
// configuration that cannot be read at all is an error; everything else is
// in the notes.
func count(o *Options, files *confFiles, cfg counter.Config) (*counted, error) {
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
	plan := setup.Make(f, perr, m, o.Compat)
	specs := plan.Specs()
	var rd ratioDefs
	rd.defs, rd.user, rd.errs = ratio.DefsOf(ratio.ParseHeld(files.ratios))
	ratio.Group(specs, rd.defs)
	if cfg.JoinSoftware == nil {
		// Tracepoints and x86's msr events live in the kernel's software
		// context, so they are read inside each CPU's software group.
		cfg.JoinSoftware = []uint32{unix.PERF_TYPE_TRACEPOINT}
		if p, err := fs.PMU("msr"); err == nil {
			cfg.JoinSoftware = append(cfg.JoinSoftware, p.Type)
		}
	}
	set, err := counter.New(specs, cfg)
	if err != nil {
		return nil, err
	}
	sum, err := set.Open()
	if err != nil {
		return nil, err
	}
	plan.Opened(set, sum)
	return &counted{plan: plan, set: set, sum: sum, derived: plan.AddDerived(set, fs), ratios: rd}, nil
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
