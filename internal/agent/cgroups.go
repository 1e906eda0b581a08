package agent

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"perfevent/internal/bpfcount"
	"perfevent/internal/cgroup"
	"perfevent/internal/hostfs"
	"perfevent/internal/metrics"
	"perfevent/internal/pmda"
	"perfevent/internal/setup"
)

// cgroupsConf is the per-cgroup configuration, beside perfevent.conf (a
// file of its own: the C agent's parser would reject new lines there).
func cgroupsConf(config string) string {
	return filepath.Join(filepath.Dir(config), "cgroups.conf")
}

// cgroupPlan is what cgroups.conf asks for with the events of the plan.
type cgroupPlan struct {
	cfg    cgroup.Config
	events []cgroup.Event
	spec   *metrics.Cgroups
	cpus   []int
	notes  []setup.Note // for the log and --check
	// missing says that there is no cgroups.conf: nothing is counted
	// per cgroup, and --check says nothing about it.
	missing bool
}

// planCgroups reads cgroups.conf and finds its events among the counters
// served. An event that perfevent.conf does not serve is Info, not a
// Problem: the shipped cgroups.conf names cpu-clock and context-switches,
// and a perfevent.conf taken over from the C agent, or one for a machine
// without them, is not wrong for lacking them.
func planCgroups(config string, read cgroupConf, served []setup.Counter) cgroupPlan {
	name := cgroupsConf(config)
	cfg, missing, errs := read.cfg, read.missing, read.errs
	p := cgroupPlan{cfg: cfg, missing: missing, spec: &metrics.Cgroups{Instances: pmda.NewInstances()}}
	for _, e := range errs {
		p.notes = append(p.notes, setup.Note{Severity: setup.Problem, Text: e.Error()})
	}
	if len(cfg.Patterns) == 0 {
		return p
	}
	for _, ev := range cfg.Events {
		i := slices.IndexFunc(served, func(c setup.Counter) bool { return c.Event.Name == ev })
		if i < 0 {
			p.notes = append(p.notes, setup.Note{Text: fmt.Sprintf("%s: event %q is not a counter served from %s (configure it there to count it per cgroup); not counted per cgroup", name, ev, config)})
			continue
		}
		c := served[i]
		p.spec.Events = append(p.spec.Events, metrics.CgroupEvent{Event: len(p.events), Metric: c.Metric,
			About: fmt.Sprintf("Configured in %s as %q, which %s defines at %s: %s.", name, ev, config, c.Pos, c.Event.Source)})
		p.events = append(p.events, cgroup.Event{Name: ev, Attr: c.Event.Attr})
		for _, cpu := range c.CPUs {
			if !slices.Contains(p.cpus, cpu) {
				p.cpus = append(p.cpus, cpu)
			}
		}
	}
	slices.Sort(p.cpus)
	if len(p.events) > 0 {
		p.notes = append(p.notes, setup.Note{Text: fmt.Sprintf("cgroups: %s counts %d events per cgroup (perfevent.cgroup.*) in the cgroups %v (in that priority), at most %d on at most %d descriptors", name, len(p.events), cfg.Patterns, cfg.Max, cfg.Descriptors)})
	}
	return p
}

// hierarchyNote is --check's word on where the cgroups would be counted:
// a Problem when nowhere, as the agent then logs a Warning.
func hierarchyNote(fs hostfs.FS, p cgroupPlan) []setup.Note {
	if len(p.events) == 0 {
		return nil
	}
	h, err := cgroup.LocateOn(fs)
	if err != nil {
		return []setup.Note{{Severity: setup.Problem, Text: "cgroups: " + whyNoHierarchy(err) + "; nothing would be counted per cgroup"}}
	}
	notes := []setup.Note{{Text: fmt.Sprintf("cgroups: counted in the %s (perfevent.cgroup.mode %q)", h, cgroup.Mode(h, nil))}}
	return append(notes, countingNote(p, h, nil))
}

// countingNote is --check's word on how the cgroups would be counted: it
// loads the BPF program and attaches it as the agent would, and lets go.
// reach probes the hierarchy (nil: cgroup.Reach).
func countingNote(p cgroupPlan, h cgroup.Hierarchy, reach func(cgroup.Hierarchy, int) error) setup.Note {
	a := Agent{reach: reach}
	if why := a.unreached(h, p.cpus); why != "" {
		return setup.Note{Severity: setup.Problem, Text: fmt.Sprintf("cgroups: %snothing would be counted per cgroup: %s (perfevent.cgroup.counting \"off: ...\")", asked(p.cfg), why)}
	}
	if p.cfg.Counting == cgroup.CountingPerf {
		return setup.Note{Text: "cgroups: counted with perf cgroup counters, as cgroups.conf asks (perfevent.cgroup.counting \"perf\")"}
	}
	c, why := a.bpfCounter(h, p.events, p.cpus, p.cfg.Max)
	if c != nil {
		c.Close()
		return setup.Note{Text: "cgroups: counted with BPF, on a constant number of descriptors (perfevent.cgroup.counting \"bpf\")"}
	}
	n := setup.Note{Text: fmt.Sprintf("cgroups: counted with perf cgroup counters: %s (perfevent.cgroup.counting \"perf: ...\")", why)}
	if p.cfg.Counting == cgroup.CountingBPF {
		n.Severity = setup.Problem
	}
	return n
}

// startCgroups starts counting per cgroup what cgroups.conf asks for,
// with the counters served, and returns the tracker (nil if nothing is
// counted), what the table needs to serve it and words for the summary of
// r (the numbers of cgroups and descriptors change as cgroups come and
// go: in the plan, every reload would seem a change). read is
// cgroups.conf as the build read it, outside the agent's lock.
func (a *Agent) startCgroups(served []setup.Counter, read cgroupConf, r *report) (*cgroup.Tracker, *metrics.Cgroups, string, *bpfcount.Counter) {
	p := planCgroups(a.o.Config, read, served)
	if p.missing {
		r.infof("cgroups: no %s, so nothing is counted per cgroup (the shipped one counts cpu-clock and context-switches per cgroup)", cgroupsConf(a.o.Config))
	}
	for _, n := range p.notes {
		r.note(n)
	}
	if len(p.events) == 0 {
		mode := "off: no per-cgroup events (cgroups.conf)"
		if p.missing {
			mode = "off: no " + cgroupsConf(a.o.Config)
		}
		return nil, &metrics.Cgroups{Mode: func() string { return mode }}, "", nil
	}
	spec, cfg, events, cpus := p.spec, p.cfg, p.events, p.cpus
	h, err := a.hierarchy()
	mode := cgroup.Mode(h, err)
	spec.Mode = func() string { return mode }
	if err != nil {
		r.warningf("cgroups: %s; nothing is counted per cgroup (perfevent.cgroup.mode says so), everything else is", whyNoHierarchy(err))
		return nil, &metrics.Cgroups{Mode: spec.Mode}, "", nil
	}
	if why := a.unreached(h, cpus); why != "" {
		off := "off: " + why
		r.warningf("cgroups: %snothing is counted per cgroup: %s (perfevent.cgroup.counting says so); everything else is, and the agent probes again every %v", asked(cfg), why, hierarchyEvery)
		return nil, &metrics.Cgroups{Mode: spec.Mode, Counting: func() string { return off }}, "", nil
	}
	bpf, counting := a.cgroupCounting(cfg, h, events, cpus, r)
	spec.Counting = func() string { return counting }
	t := cgroup.New(cgroup.Options{
		Hierarchy:   h,
		Patterns:    cfg.Patterns,
		Max:         cfg.Max,
		Descriptors: cfg.Descriptors,
		Events:      events,
		CPUs:        cpus,
		BPF:         bpf,
		IDs:         a.cgroupIDs,
		Log:         a.log,
		Changed: func(in []cgroup.Instance) {
			list := make([]pmda.Instance, len(in))
			for i, c := range in {
				list[i] = metrics.CgroupInstance(c.ID, c.Path)
				for k, v := range cgroup.Labels(c.Path) {
					list[i].Labels[k] = v
				}
			}
			if err := spec.Instances.Set(list); err != nil {
				a.log.Warningf("cgroups: the instance list: %v", err)
			}
		},
	})
	spec.Reader = t
	t.Start()
	n, fds := t.Stats()
	r.infof("cgroups: counting per cgroup in the %s, with %s (perfevent.cgroup.counting %q)", h, countingWords(bpf), counting)
	if n == 0 {
		r.warningf("cgroups: no cgroup of the %s is counted: none matches %v, or every open failed (see above)", h, cfg.Patterns)
	}
	return t, spec, fmt.Sprintf(", and %d events in %d cgroups on %d descriptors", len(events), n, fds), bpf
}

func countingWords(bpf *bpfcount.Counter) string {
	if bpf != nil {
		return "a BPF program at each cgroup switch, on a constant number of descriptors"
	}
	return "perf cgroup counters, one per cgroup, event and CPU"
}

// cgroupCounting chooses how a generation counts per cgroup, as
// cgroups.conf's "counting" asks: with perf cgroup counters, or with the
// agent's bpfcount.Counter, which it returns, and perfevent.cgroup.counting.
// Where BPF cannot count, perf does, and the report says why: at Warning
// when cgroups.conf asked for BPF.
func (a *Agent) cgroupCounting(cfg cgroup.Config, h cgroup.Hierarchy, events []cgroup.Event, cpus []int, r *report) (*bpfcount.Counter, string) {
	if cfg.Counting == cgroup.CountingPerf {
		return nil, cgroup.CountingPerf
	}
	c, why := a.bpfCounter(h, events, cpus, cfg.Max)
	if c != nil {
		return c, cgroup.CountingBPF
	}
	if cfg.Counting == cgroup.CountingBPF {
		r.warningf("cgroups: %s asks for counting bpf, but %s; counting with perf cgroup counters instead", cgroupsConf(a.o.Config), why)
	}
	return nil, "perf: " + why
}

// unreached says why no cgroup below the root of h can be counted apart,
// in either mode, or "" when they can or the probe cannot tell: both
// modes need the cgroups' own perf_event controller (cgroup.Unreached).
func (a *Agent) unreached(h cgroup.Hierarchy, cpus []int) string {
	probe := a.reach
	if probe == nil {
		probe = cgroup.Reach
	}
	cpu := 0
	if len(cpus) > 0 {
		cpu = cpus[0]
	}
	var u *cgroup.Unreached
	if err := probe(h, cpu); errors.As(err, &u) {
		return u.Reason
	}
	return ""
}

// unreachedSpec says whether spec counts nothing per cgroup because the
// cgroups below the root lack the perf_event controller: the one way
// startCgroups has to serve a hierarchy in perfevent.cgroup.mode and
// "off: ..." in perfevent.cgroup.counting.
func unreachedSpec(spec *metrics.Cgroups) bool {
	return spec != nil && spec.Counting != nil && followedMode(spec) != "" && strings.HasPrefix(spec.Counting(), "off: ")
}

// asked names the counting mode cgroups.conf asks for, when it asks for
// one, to begin a sentence saying that it cannot be had.
func asked(cfg cgroup.Config) string {
	if cfg.Counting == cgroup.CountingAuto {
		return ""
	}
	return fmt.Sprintf("cgroups.conf asks for counting %s, but ", cfg.Counting)
}

// bpfCounter is the agent's bpfcount.Counter for events, attached to
// cpus, or nil and why there is none. It is loaded once, at start-up,
// while the agent is root: after the privilege drop CAP_PERFMON still
// lets it add cgroups to the map, run the program and attach it to new
// events, but not load another. So a reload keeps the Counter, and one
// that changes the events can count them with BPF only if the agent runs
// as root.
func (a *Agent) bpfCounter(h cgroup.Hierarchy, events []cgroup.Event, cpus []int, room int) (*bpfcount.Counter, string) {
	if h.Version != 2 {
		return nil, fmt.Sprintf("the %s is not cgroup v2, whose ancestors' ids the program looks up", h)
	}
	if len(events) > bpfcount.MaxEvents {
		return nil, fmt.Sprintf("%d events per cgroup, more than the %d the program reads", len(events), bpfcount.MaxEvents)
	}
	attrs := make([]unix.PerfEventAttr, len(events))
	for i, e := range events {
		attrs[i] = e.Attr
	}
	c := a.bpf
	if c == nil || !c.Counts(attrs) || c.Room() < bpfcount.RoomFor(attrs, room) {
		nc, err := bpfcount.Load(bpfcount.Options{Events: attrs, Cgroups: room})
		switch {
		case err == nil:
			c, a.bpf = nc, nc // the previous one closes with its generation
		case c != nil && c.Counts(attrs):
			// Room for fewer cgroups than max asks: the Tracker counts
			// as many as there is room for, and says so.
		case a.bpf != nil && errors.Is(err, unix.EPERM):
			return nil, fmt.Sprintf("the events changed since start-up, and loading the BPF program for them needs CAP_BPF, which the agent gave up after start-up (restart it): %v", err)
		case errors.Is(err, unix.EPERM):
			return nil, fmt.Sprintf("loading a BPF program needs CAP_BPF (the agent is root until start-up ends), and no lockdown: %v", err)
		default:
			return nil, err.Error()
		}
	}
	if err := c.AttachOnly(cpus); err != nil {
		// No CPU runs the program for nobody: the generation counts
		// with perf, and the one before it, if it counted with c, has
		// its last fetches frozen.
		c.AttachOnly(nil)
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP) {
			return nil, fmt.Sprintf("the program cannot run at each cgroup switch (the cgroup-switches event is Linux 5.13's, and kernel.perf_event_max_sample_rate must allow sampling): %v", err)
		}
		return nil, err.Error()
	}
	return c, ""
}

// retireBPF lets go of what old's generation held of BPF counting, now
// that a generation that does not share it replaces it.
func (a *Agent) retireBPF(old, g *generation) {
	if old == nil || old.bpf == nil || old.bpf == g.bpf {
		return
	}
	if old.bpf != a.bpf {
		old.bpf.Close() // a reload as root loaded another
	} else {
		old.bpf.AttachOnly(nil) // kept, idle, for a reload that counts with it again
	}
}

// whyNoHierarchy says why per-cgroup counting cannot start, and what to
// do about it.
func whyNoHierarchy(err error) string {
	var u *cgroup.Unavailable
	if errors.As(err, &u) {
		return u.Reason
	}
	return "finding the cgroup hierarchy: " + err.Error()
}

// The per-cgroup counters follow the generation's: closed for perfalloc,
// reopened after, stopped when a reload replaces them.
func (g *generation) closeCgroups() {
	if g.cg != nil {
		g.cg.Close()
	}
}

// resumeCgroups enables the per-cgroup counters again and says whether
// reopenCgroups has work left, which the caller paces.
func (g *generation) resumeCgroups() (reopen bool) {
	return g.cg != nil && g.cg.Resume()
}

func (g *generation) reopenCgroups() {
	if g.cg != nil {
		g.cg.Reopen()
	}
}

// carryCgroups makes the per-cgroup values of g continue old's, as
// counter.Set.Carry does for the per-CPU ones: a reload or a hotplug
// rebuild must not show a counter reset on every cgroup.
func (g *generation) carryCgroups(old *generation) {
	if g.cg != nil && old != nil {
		g.cg.Carry(old.cg)
	}
}

// stopCgroups stops g's Tracker; the BPF counter it used is the agent's
// (retireBPF).
func (g *generation) stopCgroups() {
	if g.cg != nil {
		g.cg.Stop()
	}
}
