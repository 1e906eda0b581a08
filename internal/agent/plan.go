package agent

import (
	"fmt"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"

	"perfevent/internal/catalog"
	"perfevent/internal/config"
	"perfevent/internal/counter"
	"perfevent/internal/metrics"
	"perfevent/internal/pmda"
	"perfevent/internal/ratio"
	"perfevent/internal/setup"
)

// counted is what count made of the configuration.
type counted struct {
	plan   *setup.Plan     // what each line means here, with its notes
	family *catalog.Family // the metric catalog's part for this machine
	// unusable are the catalog's ratios whose events were not opened,
	// the notes saying why already.
	unusable []string
	set      *counter.Set    // the plan's counters, opened
	sum      counter.Summary // what opening them gave
	derived  []setup.Derived // the derived metrics the open counters allow
}

// count reads the configuration (through held, if not nil: see
// parseConfig), plans it for this machine and opens the counters: the
// steps --check and the agent share. Only a configuration that cannot be
// read at all is an error; everything else is in the notes.
func count(o *Options, held *config.Held, cfg counter.Config) (*counted, error) {
	f, perr := parseConfig(o.Config, held)
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
	family := catalog.Detect(fs.PresentNames())
	var fromCatalog []ratio.Def
	if !o.NoCatalog {
		fromCatalog = family.Metrics
	}
	// chooseRatios notes the file's errors
	defs, user, off, _ := ratio.DefsWith(ratiosPath(o), fromCatalog)
	unusable := catalog.Open(plan, defs[user:user+len(fromCatalog)-len(off)])
	specs := plan.Specs()
	if cfg.JoinSoftware == nil {
		// Tracepoints and x86's msr events live in the kernel's software
		// context, so they are read inside each CPU's software group.
		cfg.JoinSoftware = []uint32{unix.PERF_TYPE_TRACEPOINT}
		if p, err := fs.PMU("msr"); err == nil {
			cfg.JoinSoftware = append(cfg.JoinSoftware, p.Type)
		}
	}
	soft := func(sp counter.Spec) bool {
		return sp.Attr.Type == unix.PERF_TYPE_SOFTWARE || slices.Contains(cfg.JoinSoftware, sp.Attr.Type)
	}
	// Without the catalog, ratios group as the configuration says, with
	// no bound: a group too big for the PMU is then split by counter.
	fit := ratio.Fit{Soft: soft}
	if !o.NoCatalog {
		fit = family.Fit(soft)
	}
	for _, line := range ratio.GroupFit(specs, defs, fit) {
		plan.Notes = append(plan.Notes, setup.Note{Severity: setup.Info, Text: "catalog: " + line})
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
	return &counted{plan: plan, family: family, unusable: unusable, set: set, sum: sum, derived: plan.AddDerived(set, fs)}, nil
}

// parseConfig reads the configuration: through the descriptor start-up
// opened when there is one, so that a reload as the agent's user can read
// a file only root may open (see config.Held).
func parseConfig(path string, held *config.Held) (*config.File, error) {
	if held != nil {
		return held.Parse()
	}
	return config.ParseFile(path)
}

// buildTable is the table that serves what the plan kept: the last step
// that --check and the agent share.
func buildTable(o *Options, c *counted, clusters *metrics.Clusters, cgroups *metrics.Cgroups) (*pmda.Table, *metrics.Source, error) {
	spec := metrics.Spec{Version: version, Set: c.set, Clusters: clusters, Cgroups: cgroups, Sockets: c.plan.Sockets}
	for _, pc := range c.plan.Counters {
		ev, _ := c.set.Lookup(pc.Event.Name)
		about := fmt.Sprintf("Configured as %q at %s: %s.", pc.Event.Name, pc.Pos, pc.Event.Source)
		if pc.For != "" {
			about = fmt.Sprintf("Opened by the metric catalog as %q %s: %s.", pc.Event.Name, pc.For, pc.Event.Source)
		}
		spec.Counters = append(spec.Counters, metrics.Counter{Event: ev, Metric: pc.Metric, About: about})
	}
	for i, d := range c.derived {
		spec.Derived = append(spec.Derived, metrics.Derived{
			Derived: i,
			Metric:  d.Metric,
			About:   fmt.Sprintf("Defined by %s at %s.", d.Section.Header(), d.Section.Pos),
		})
	}
	var fromCatalog []ratio.Def
	if !o.NoCatalog {
		fromCatalog = c.family.Metrics
	}
	spec.Ratios = chooseRatios(ratiosPath(o), fromCatalog, func(name string) bool { return slices.Contains(c.unusable, name) }, c.plan, c.set)
	return metrics.Build(spec)
}

// ratiosPath is the user's ratios file, beside perfevent.conf.
func ratiosPath(o *Options) string { return filepath.Join(filepath.Dir(o.Config), "ratios.conf") }

// chooseRatios are the ratios served (ratio.Choose), with notes for the log
// and --check.
func chooseRatios(path string, fromCatalog []ratio.Def, quiet func(string) bool, plan *setup.Plan, set *counter.Set) []ratio.Chosen {
	chosen, problems, info := ratio.ChooseWith(path, fromCatalog, quiet, set, plan.Scale)
	for _, e := range problems {
		plan.Notes = append(plan.Notes, setup.Note{Severity: setup.Problem, Text: e.Error()})
	}
	for _, line := range info {
		plan.Notes = append(plan.Notes, setup.Note{Severity: setup.Info, Text: line})
	}
	return chosen
}
