package agent

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"

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
	return []setup.Note{{Text: fmt.Sprintf("cgroups: counted in the %s (perfevent.cgroup.mode %q)", h, cgroup.Mode(h, nil))}}
}

// startCgroups starts counting per cgroup what cgroups.conf asks for,
// with the counters served, and returns the tracker (nil if nothing is
// counted), what the table needs to serve it and words for the summary of
// r (the numbers of cgroups and descriptors change as cgroups come and
// go: in the plan, every reload would seem a change). read is
// cgroups.conf as the build read it, outside the agent's lock.
func (a *Agent) startCgroups(served []setup.Counter, read cgroupConf, r *report) (*cgroup.Tracker, *metrics.Cgroups, string) {
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
		return nil, &metrics.Cgroups{Mode: func() string { return mode }}, ""
	}
	spec, cfg, events, cpus := p.spec, p.cfg, p.events, p.cpus
	h, err := a.hierarchy()
	mode := cgroup.Mode(h, err)
	spec.Mode = func() string { return mode }
	if err != nil {
		r.warningf("cgroups: %s; nothing is counted per cgroup (perfevent.cgroup.mode says so), everything else is", whyNoHierarchy(err))
		return nil, &metrics.Cgroups{Mode: spec.Mode}, ""
	}
	t := cgroup.New(cgroup.Options{
		Hierarchy:   h,
		Patterns:    cfg.Patterns,
		Max:         cfg.Max,
		Descriptors: cfg.Descriptors,
		Events:      events,
		CPUs:        cpus,
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
	r.infof("cgroups: counting per cgroup in the %s", h)
	if n == 0 {
		r.warningf("cgroups: no cgroup of the %s is counted: none matches %v, or every open failed (see above)", h, cfg.Patterns)
	}
	return t, spec, fmt.Sprintf(", and %d events in %d cgroups on %d descriptors", len(events), n, fds)
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

func (g *generation) stopCgroups() {
	if g.cg != nil {
		g.cg.Stop()
	}
}
