package agent

import (
	"fmt"
	pathpkg "path"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"perfevent/internal/catalog"
	"perfevent/internal/cgroup"
	"perfevent/internal/conffile"
	"perfevent/internal/config"
	"perfevent/internal/counter"
	"perfevent/internal/metrics"
	"perfevent/internal/pmda"
	"perfevent/internal/pmu"
	"perfevent/internal/ratio"
	"perfevent/internal/setup"
)

// counted is what count made of the configuration: the plan as ready
// made it, untouched, and beside it what opening it gave.
type counted struct {
	plan    *setup.Plan      // what each line means here, with its notes
	src     []byte           // readied.src
	cLayout *setup.CPrepared // readied.cLayout
	family  *catalog.Family  // the metric catalog's part for this machine
	// unusable are the catalog's ratios whose events were not opened,
	// the notes saying why already.
	unusable []string
	set      *counter.Set    // the plan's counters, opened
	sum      counter.Summary // what opening them gave
	opened   *opened         // which counters and derived metrics that serves, and why
	ratios   ratioDefs       // ratios.conf's, the catalog's and the built-in ratios
	cgroups  cgroupConf      // cgroups.conf, read with the rest
	// chosen are the ratios served, ratioNotes what choosing them said.
	chosen     []ratio.Chosen
	ratioNotes []setup.Note
}

// notes are what the build has to say of the configuration, in the order
// the log gives them: the plan's (each line, the catalog's operands), the
// ratios' grouping, what opened, then the ratios'.
func (c *counted) notes() []setup.Note {
	notes := slices.Clone(c.plan.Notes)
	for _, line := range c.ratios.apart {
		notes = append(notes, setup.Note{Severity: setup.Info, Text: "catalog: " + line})
	}
	notes = append(notes, c.opened.notes...)
	return append(notes, c.ratioNotes...)
}

// ratioDefs are ratio.DefsHeldWith's results, read once per build: the
// user's ratios, the catalog's that are on and the built-in ones.
type ratioDefs struct {
	path    string // ratios.conf
	defs    []ratio.Def
	user    int      // the user's, first in defs
	catalog int      // the catalog's for this machine, on or off
	off     []string // the catalog's the file turned off
	errs    []error
	typos   []typo // the user's operands that name no event
	// apart are ratio.GroupFit's lines: the ratios whose operands could
	// not share a group.
	apart []string
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
	plan     *setup.Plan
	src      []byte           // perfevent.conf as read for the plan
	cLayout  *setup.CPrepared // the C agent's configuration read on this machine; nil: none
	family   *catalog.Family  // the metric catalog's part for this machine
	unusable []string         // the catalog's ratios whose events were not opened
	specs    []counter.Spec
	join     []uint32 // counter.Config.JoinSoftware
	ratios   ratioDefs
	cgroups  cgroupConf
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
// Each file is read once: what a build needs of one again (--check's
// comparison with the C agent's parser) comes from what ready read.
func ready(o *Options, files *confFiles) (*readied, error) {
	src, err := files.config.Read()
	if err != nil {
		return nil, err
	}
	f, perr := config.Parse(files.config.Path(), src)
	fs := o.fs()
	defer fs.Pass()() // each PMU's sysfs directory is read once per pass (pmu.FS.Pass)
	m, err := setup.ReadMachine(fs)
	if err != nil {
		return nil, fmt.Errorf("reading the CPU topology: %w", err)
	}
	r := &readied{plan: setup.Make(f, perr, m, o.Compat), src: src}
	if o.CLayout != "" {
		// The C agent's configuration is most often this one (both are
		// PCP_PMDAS_DIR's perfevent.conf): then the reading the plan was
		// made of serves, rather than reading and parsing it again.
		cf := f
		if o.CLayout != files.config.Path() {
			cf, _ = config.ParseFile(o.CLayout)
		}
		// In this pass: the events it shares with the plan are read once.
		if cf != nil {
			r.cLayout = setup.PrepareCLayout(cf, m, o.Compat)
		}
	}
	r.family = catalog.Detect(fs.PresentNames())
	var fromCatalog []ratio.Def
	if !o.NoCatalog {
		fromCatalog = r.family.Metrics
	}
	rd := &r.ratios
	rd.path = files.ratios.Path()
	rd.catalog = len(fromCatalog)
	rd.defs, rd.user, rd.off, rd.errs = ratio.DefsHeldWith(files.ratios, fromCatalog)
	r.plan, r.unusable = catalog.Open(r.plan, rd.defs[rd.user:rd.user+rd.catalog-len(rd.off)])
	r.specs = r.plan.Specs()
	// Tracepoints and x86's msr events live in the kernel's software
	// context, so they are read inside each CPU's software group.
	r.join = []uint32{unix.PERF_TYPE_TRACEPOINT}
	if p, err := fs.PMU("msr"); err == nil {
		r.join = append(r.join, p.Type)
	}
	rd.typos = unknownOperands(rd, r.plan, fs)
	c := &r.cgroups
	c.cfg, c.missing, c.errs = cgroup.ReadHeld(files.cgroups)
	return r, nil
}

// group puts the ratios' operands into perf groups within the family's
// counters, with the events that join the software group (join, as the
// counters are opened with) taking none.
func (r *readied) group(o *Options, join []uint32) {
	soft := func(sp counter.Spec) bool {
		return sp.Attr.Type == unix.PERF_TYPE_SOFTWARE || slices.Contains(join, sp.Attr.Type)
	}
	// Without the catalog, ratios group as the configuration says, with
	// no bound: a group too big for the PMU is then split by counter.
	fit := ratio.Fit{Soft: soft}
	if !o.NoCatalog {
		fit = r.family.Fit(soft)
	}
	r.ratios.apart = ratio.GroupFit(r.specs, r.ratios.defs, fit)
}

// open opens the counters of a plan (count's second half).
func (r *readied) open(o *Options, cfg counter.Config) (*counted, error) {
	if cfg.JoinSoftware == nil {
		cfg.JoinSoftware = r.join
	}
	cfg.FS = o.fs().FS
	r.group(o, cfg.JoinSoftware)
	set, err := counter.New(r.specs, cfg)
	if err != nil {
		return nil, err
	}
	sum, err := set.Open()
	if err != nil {
		return nil, err
	}
	c := &counted{plan: r.plan, src: r.src, cLayout: r.cLayout, family: r.family, unusable: r.unusable, set: set, sum: sum, ratios: r.ratios, cgroups: r.cgroups}
	c.opened = recordOpen(r.plan, set, sum)
	fs := o.fs()
	defer fs.Pass()()
	c.opened.derive(r.plan, set, fs)
	c.chosen, c.ratioNotes = chooseRatios(c)
	return c, nil
}

// buildTable is the table that serves what the plan kept: the last step
// that --check and the agent share.
func buildTable(o *Options, c *counted, clusters *metrics.Clusters, cgroups *metrics.Cgroups, resv *metrics.Reservations, cExtra ...metrics.CMetric) (*pmda.Table, *metrics.Source, error) {
	spec := metrics.Spec{Version: version, Set: c.set, Clusters: clusters, Cgroups: cgroups, Sockets: c.plan.Sockets, Reservations: resv, C: cExtra}
	spec.Counters = make([]metrics.Counter, 0, len(c.opened.counters))
	for _, pc := range c.opened.counters {
		ev, _ := c.set.Lookup(pc.Event.Name)
		// Written only for the help a client asks for.
		name, pos, source, by := pc.Event.Name, pc.Pos, pc.Event.Source, pc.For
		about := func() string {
			if by != "" {
				return fmt.Sprintf("Opened by the metric catalog as %q %s: %s.", name, by, source)
			}
			return fmt.Sprintf("Configured as %q at %s: %s.", name, pos, source)
		}
		spec.Counters = append(spec.Counters, metrics.Counter{Event: ev, Metric: pc.Metric, MakeAbout: about})
	}
	for i, d := range c.opened.derived {
		spec.Derived = append(spec.Derived, metrics.Derived{
			Derived: i,
			Metric:  d.Metric,
			About:   fmt.Sprintf("Defined by %s at %s.", d.Section.Header(), d.Section.Pos),
		})
	}
	spec.Ratios = c.chosen
	return metrics.Build(spec)
}

// ratiosPath is the user's ratios file, beside perfevent.conf.
func ratiosPath(o *Options) string { return filepath.Join(filepath.Dir(o.Config), "ratios.conf") }

// chooseRatios are the ratios served (ratio.ChooseFrom), with notes for
// the log and --check.
func chooseRatios(c *counted) (chosen []ratio.Chosen, notes []setup.Note) {
	rd := &c.ratios
	quiet := func(name string) bool { return slices.Contains(c.unusable, name) }
	chosen, info := ratio.ChooseFrom(rd.path, rd.defs, rd.user, rd.catalog, rd.off, quiet, c.set, c.plan.Scale)
	for _, e := range rd.errs {
		notes = append(notes, setup.Note{Severity: setup.Problem, Text: e.Error()})
	}
	typos := rd.typos
	for _, t := range typos {
		notes = append(notes, setup.Note{Severity: setup.Problem, Text: t.text})
	}
	for _, line := range info {
		// The problem above says why, better.
		if slices.ContainsFunc(typos, func(t typo) bool { return strings.HasPrefix(line, fmt.Sprintf("ratio %q not served:", t.ratio)) }) {
			continue
		}
		notes = append(notes, setup.Note{Severity: setup.Info, Text: line})
	}
	return chosen, notes
}

// cLayout is how PCP's C agent would number the metrics of its own
// configuration (Options.CLayout) on this machine, cluster i+2 for keys[i], and
// the names of it that c does not serve, each with the counter of c that
// counts the same event if there is one and the C agent counts it. Whether the C agent's event
// opens is what c's counter of the same event did, or else a trial open
// through opener.
func cLayout(c *counted, opener counter.Opener) (keys []string, extra []metrics.CMetric) {
	if c.cLayout == nil {
		return nil, nil
	}
	// alike is whether two events count the same thing, whatever their
	// exclude bits.
	alike := func(a, b *pmu.Event) bool {
		return a.Attr.Type == b.Attr.Type && a.Attr.Config == b.Attr.Config && a.Attr.Ext1 == b.Attr.Ext1 && a.Attr.Ext2 == b.Attr.Ext2
	}
	same := func(ev *pmu.Event) int {
		for _, pc := range c.opened.counters {
			if alike(&pc.Event, ev) {
				if i, ok := c.set.Lookup(pc.Event.Name); ok && len(c.set.CPUs(i)) > 0 {
					return i
				}
			}
		}
		return -1
	}
	// failed is whether c planned the same event on at least cpus and
	// opened it on none: the C agent's open would fail as c's did, and a
	// trial open would only pay for that again (an open per CPU).
	failed := func(ev *pmu.Event, cpus []int) bool {
		for _, pc := range c.plan.Counters {
			if !alike(&pc.Event, ev) || !covers(pc.CPUs, cpus) {
				continue
			}
			if i, ok := c.set.Lookup(pc.Event.Name); !ok || len(c.set.CPUs(i)) == 0 {
				return true
			}
		}
		return false
	}
	opens := func(ev *pmu.Event, cpus []int) bool {
		if same(ev) >= 0 {
			return true
		}
		if failed(ev, cpus) {
			return false
		}
		set, err := counter.New([]counter.Spec{{Name: ev.Name, Attr: ev.Attr, CPUs: cpus}}, counter.Config{Opener: opener})
		if err != nil {
			return false
		}
		defer set.Close()
		if _, err := set.Open(); err != nil {
			return false
		}
		return len(set.CPUs(0)) > 0
	}
	slots := c.cLayout.Slots(opens)
	keys = make([]string, 0, len(slots))
	served := make(map[string]bool, len(c.opened.counters)+len(c.opened.derived)+len(slots))
	for _, pc := range c.opened.counters {
		served["hwcounters."+pc.Metric] = true
	}
	for _, d := range c.opened.derived {
		served["derived."+d.Metric] = true
	}
	for _, s := range slots {
		keys = append(keys, s.Key)
		if served[s.Key] {
			continue
		}
		served[s.Key] = true
		// Values where the C agent has them: a [dynamic] event it was not
		// asked to count has none there, and none here.
		ev := -1
		if s.Event != nil && s.Counted {
			ev = same(s.Event)
		}
		extra = append(extra, metrics.CMetric{Key: s.Key, Event: ev})
	}
	return keys, extra
}

// disagreement says which names the PMID map numbers otherwise than the C
// agent, what the agent does about it, and how to choose otherwise.
func disagreement(mapPath, cConfig string, d []metrics.Disagreement) string {
	eg := d[0]
	held := ""
	if eg.Holder != "" {
		held = fmt.Sprintf(", which the map gives perfevent.%s", eg.Holder)
	}
	return fmt.Sprintf("the PMID map %s numbers %d of the names PCP's C agent serves here (from %s) otherwise than the C agent: "+
		"perfevent.%s is 127.%d here and 127.%d under the C agent%s. "+
		"They keep the map's numbers, so that this agent's archives stay consistent; a switch to the C agent changes them. "+
		"To take the C agent's numbers, remove the map and restart the agent (Install --c-pmids does that)",
		mapPath, len(d), cConfig, eg.Key, eg.Map, eg.C, held)
}

// unknownOperands are the operands of the user's ratios (ratios.conf) that
// name no event at all: neither one the plan counts nor one this machine
// knows. Such an operand is a typo, a problem, unlike an event that is
// merely not configured or not countable here; each gets the nearest
// configured names.
func unknownOperands(rd *ratioDefs, plan *setup.Plan, fs *pmu.FS) []typo {
	path, defs, user := rd.path, rd.defs, rd.user
	var names []string
	for _, pc := range plan.Counters {
		names = append(names, pc.Event.Name)
	}
	known := func(alt string) bool {
		for _, n := range names {
			if ok, _ := pathpkg.Match(alt, n); ok || alt == n {
				return true
			}
		}
		if strings.ContainsAny(alt, "*?[") {
			return false
		}
		_, err := fs.Resolve(alt)
		return err == nil
	}
	var out []typo
	for _, d := range defs[:user] {
		terms := d.Num
		if d.Den != ratio.Elapsed {
			terms = append(slices.Clone(terms), d.Den)
		}
		for _, term := range terms {
			alts := strings.Split(term, "|")
			if slices.ContainsFunc(alts, known) {
				continue
			}
			text := fmt.Sprintf("%s: ratio %q: operand %s is not an event here: neither configured nor known to this machine", path, d.Name, term)
			if s := pmu.Nearest(alts[0], names); len(s) > 0 {
				text += "; did you mean " + strings.Join(s, ", ") + "?"
			}
			out = append(out, typo{ratio: d.Name, text: text})
		}
	}
	return out
}

// typo is an operand of a user's ratio that names no event.
type typo struct{ ratio, text string }

// covers is whether every CPU of want is in have.
func covers(have, want []int) bool {
	for _, cpu := range want {
		if !slices.Contains(have, cpu) {
			return false
		}
	}
	return true
}
