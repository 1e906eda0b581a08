package setup

import (
	"maps"
	"path"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"perfevent/internal/config"
	"perfevent/internal/names"
	"perfevent/internal/pmu"
)

// Operand is an event some ratios need, as a term of theirs: alternatives
// separated by "|", each an event name or a glob whose PMU part ranges
// over the machine's PMUs ("uncore_imc_*.cas_count_read",
// "amd_umc_*/event=0xa/").
type Operand struct {
	Term string
	For  []string // the ratios that need it, for the notes
}

// WithOperands is a copy of p with notes added (the word of whoever chose
// the operands) and the events of each operand that no configured event
// provides, after the configuration's own counters, so that what
// perfevent.conf's lines produce does not change; p is left as it was. A
// term one of whose alternatives is configured needs nothing; otherwise
// its first alternative that names events this machine resolves is added,
// every PMU a glob matches. What resolves nowhere is noted (Info: a
// catalog names events other machines have) and skipped. Each added
// counter counts on every online CPU, or on its PMU's cpumask.
func (p *Plan) WithOperands(ops []Operand, notes ...Note) *Plan {
	q := *p
	// One copy, made at its size: a clone of p's then grown for notes
	// was two.
	q.Notes = nil
	if n := len(p.Notes) + len(notes); n > 0 {
		q.Notes = append(append(make([]Note, 0, n), p.Notes...), notes...)
	}
	if len(ops) == 0 {
		// Nothing to add: the counters and the names they took are
		// p's, which q only reads (a WithOperands of q copies them).
		q.Counters = slices.Clip(p.Counters)
		return &q
	}
	// Room for an event per operand, most often all it takes.
	q.Counters = append(make([]Counter, 0, len(p.Counters)+len(ops)), p.Counters...)
	q.taken = maps.Clone(p.taken)
	if p.tree != nil {
		q.tree = p.tree.clone()
	}
	q.addOperands(ops)
	return &q
}

func (p *Plan) addOperands(ops []Operand) {
	if p.alloc == nil || p.fs == nil {
		return
	}
	have := func(alt string) bool {
		for _, c := range p.Counters {
			if ok, _ := path.Match(alt, c.Event.Name); ok || alt == c.Event.Name {
				return true
			}
		}
		return false
	}
	pmus, _ := p.fs.PMUNames()
	for _, op := range ops {
		alts := strings.Split(op.Term, "|")
		if slices.ContainsFunc(alts, have) {
			continue
		}
		why := "for perfevent.ratio." + strings.Join(op.For, ", perfevent.ratio.")
		var added bool
		var firstErr error
		for _, alt := range alts {
			for _, name := range expand(alt, pmus) {
				if err := p.addOperand(name, why); err != nil {
					if firstErr == nil {
						firstErr = err
					}
					continue
				}
				added = true
			}
			if added {
				break
			}
		}
		if !added {
			text := op.Term + ": resolves to no event here"
			if firstErr != nil {
				text = op.Term + ": " + firstErr.Error()
			}
			p.info(config.Pos{}, "catalog: %s; %s not served", text, why)
		}
	}
}

// Usable reports whether term is configured, or one of its alternatives
// names events this machine resolves and could count; why says otherwise,
// for the log. A catalog ratio is given its events only when every one of
// its operands is usable, so that a machine never opens events for a
// ratio it cannot serve (hardware events on a VM without a core PMU).
func (p *Plan) Usable(term string) (ok bool, why string) {
	if p.fs == nil {
		return false, "no machine"
	}
	pmus, _ := p.fs.PMUNames()
	var firstErr error
	for _, alt := range strings.Split(term, "|") {
		for _, c := range p.Counters {
			if ok, _ := path.Match(alt, c.Event.Name); ok || alt == c.Event.Name {
				return true, ""
			}
		}
		for _, name := range expand(alt, pmus) {
			ev, err := p.fs.ResolveWith(name, pmu.Options{})
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				continue
			}
			switch ev.Attr.Type {
			case unix.PERF_TYPE_HARDWARE, unix.PERF_TYPE_HW_CACHE, unix.PERF_TYPE_RAW:
				if !p.fs.HasCorePMU() {
					return false, "the kernel has no core PMU here (a VM without a hardware PMU?)"
				}
			}
			return true, ""
		}
	}
	if firstErr != nil {
		return false, firstErr.Error()
	}
	return false, "no event of that name here"
}

// expand gives the event names of one alternative: itself, or for a glob
// in its PMU part (before "." or "/"), one name per PMU it matches.
func expand(alt string, pmus []string) []string {
	i := strings.IndexAny(alt, "./")
	if i < 0 || !strings.ContainsAny(alt[:i], "*?[") {
		return []string{alt}
	}
	var out []string
	for _, pm := range pmus {
		if ok, _ := path.Match(alt[:i], pm); ok {
			out = append(out, pm+alt[i:])
		}
	}
	return out
}

// addOperand resolves and adds one event for the catalog.
func (p *Plan) addOperand(name, why string) error {
	if _, ok := p.counter(name); ok {
		return nil
	}
	resolved, err := p.fs.ResolveWith(name, pmu.Options{})
	if err != nil {
		return err
	}
	cpus := slices.Clone(resolved.CPUs)
	if cpus == nil {
		if cpus, err = p.alloc.CPUs(config.CPUOption{}, config.Pos{}); err != nil {
			return err
		}
	}
	metric := names.Metric(name, p.compat)
	if _, ok := p.taken[metric]; ok || !names.Valid(metric) {
		return nil
	}
	if clash := p.tree.add(config.Pos{}, metric+".value", metric+".dutycycle"); clash != "" {
		return nil
	}
	p.taken[metric] = config.Pos{}
	p.Counters = append(p.Counters, Counter{Event: resolved, CPUs: cpus, Metric: metric, For: why})
	return nil
}
