package main

import (
	"os"
	"path/filepath"
	"slices"

	"perfevent/internal/cgroup"
	"perfevent/internal/metrics"
	"perfevent/internal/pmda"
	"perfevent/internal/setup"
)

// cgroupIDs numbers cgroup instances for the life of the process, across
// reloads, so that an id never changes hands.
var cgroupIDs = cgroup.NewIDs()

// cgroupsConf is the per-cgroup configuration, beside perfevent.conf (a
// file of its own: the C agent's parser would reject new lines there).
func cgroupsConf(config string) string {
	return filepath.Join(filepath.Dir(config), "cgroups.conf")
}

// startCgroups starts counting per cgroup what cgroups.conf asks for,
// with the events of the plan, and returns the tracker (nil if nothing is
// counted) and what the table needs to serve it.
func (a *agent) startCgroups(plan *setup.Plan) (*cgroup.Tracker, *metrics.Cgroups) {
	name := cgroupsConf(a.o.config)
	cfg, missing, errs := cgroup.ReadConfig(name)
	for _, e := range errs {
		a.log.Warningf("%v", e)
	}
	if missing {
		a.log.Infof("cgroups: %s is missing; counting %v in the cgroups %v, at most %d", name, cfg.Events, cfg.Patterns, cfg.Max)
	}
	if len(cfg.Patterns) == 0 || len(cfg.Events) == 0 {
		return nil, nil
	}
	spec := &metrics.Cgroups{Instances: pmda.NewInstances()}
	var events []cgroup.Event
	var cpus []int
	for _, ev := range cfg.Events {
		i := slices.IndexFunc(plan.Counters, func(c setup.Counter) bool { return c.Event.Name == ev })
		if i < 0 {
			// Only what the administrator wrote is worth a warning.
			logf := a.log.Warningf
			if missing {
				logf = a.log.Infof
			}
			logf("%s: event %q is not a counter served from %s; not counted per cgroup", name, ev, a.o.config)
			continue
		}
		c := plan.Counters[i]
		spec.Events = append(spec.Events, metrics.CgroupEvent{Event: len(events), Metric: c.Metric,
			About: "Configured in " + name + " as \"" + ev + "\", which " + a.o.config + " defines at " + c.Pos.String() + ": " + c.Event.Source + "."})
		events = append(events, cgroup.Event{Name: ev, Attr: c.Event.Attr})
		for _, cpu := range c.CPUs {
			if !slices.Contains(cpus, cpu) {
				cpus = append(cpus, cpu)
			}
		}
	}
	if len(events) == 0 {
		return nil, nil
	}
	info, err := os.ReadFile("/proc/self/mountinfo")
	var h cgroup.Hierarchy
	if err == nil {
		h, err = cgroup.FindHierarchy(info)
	}
	if err != nil {
		a.log.Infof("cgroups: %v; perfevent.cgroup.* is not served, everything else is", err)
		return nil, nil
	}
	debugf := func(string, ...any) {}
	if a.o.debug != "" {
		debugf = a.log.Infof
	}
	slices.Sort(cpus)
	t := cgroup.New(cgroup.Options{
		Hierarchy: h,
		Patterns:  cfg.Patterns,
		Max:       cfg.Max,
		Events:    events,
		CPUs:      cpus,
		IDs:       cgroupIDs,
		Infof:     a.log.Infof,
		Debugf:    debugf,
		Changed: func(in []cgroup.Instance) {
			list := make([]pmda.Instance, len(in))
			for i, c := range in {
				list[i] = metrics.CgroupInstance(c.ID, c.Path)
			}
			if err := spec.Instances.Set(list); err != nil {
				a.log.Warningf("cgroups: the instance list: %v", err)
			}
		},
	})
	spec.Reader = t
	t.Start()
	n, fds := t.Stats()
	a.log.Infof("cgroups: counting %d events in %d cgroups of the %s on %d descriptors", len(events), n, h, fds)
	return t, spec
}

// The per-cgroup counters follow the generation's: closed for perfalloc,
// reopened after, stopped when a reload replaces them.
func (g *generation) closeCgroups() {
	if g.cg != nil {
		g.cg.Close()
	}
}

func (g *generation) reopenCgroups() {
	if g.cg != nil {
		g.cg.Reopen()
	}
}

func (g *generation) stopCgroups() {
	if g.cg != nil {
		g.cg.Stop()
	}
}
