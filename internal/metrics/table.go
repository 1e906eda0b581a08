package metrics

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"perfevent/internal/counter"
	"perfevent/internal/pdu"
	"perfevent/internal/pmda"
	"perfevent/internal/ratio"
)

// Help texts. The one-line texts are the C agent's, so that pminfo -t reads
// the same with either agent; the long texts are ours.
const (
	oneLineVersion       = "The version number of the pmda."
	oneLineActive        = "The number of active counters."
	oneLineDerivedActive = "The number of derived metrics configured"
	oneLineValue         = "The values of the counter"
	oneLineDutycycle     = "The ratio of the time that the hardware counter was enabled to the total run time"
	oneLineDerived       = "The values of the derived events"
	oneLineCgroups       = "The number of cgroups counted"

	helpVersion = `The version string of the running perfevent agent. The pure-Go agent
reports a different version from the C agent (1.0.1), so this tells the
two apart.`
	helpActive = `The number of per-CPU counters that were read successfully by the
most recent fetch of perfevent.active. It is 0 while perfalloc holds the
counters, and on the first fetch after they are given back.`
	helpDerivedActive = `The number of derived metrics that could be built from the counters
that opened on this machine.`
	helpCgroups = `The number of cgroups whose events perfevent.cgroup.* serves now: those
that cgroups.conf selects, up to its cap. 0 when nothing is counted per
cgroup (no cgroups.conf events, or no hierarchy to count on: see
perfevent.cgroup.mode).`
	oneLineCgroupMode = "Where per-cgroup counting happens, or why it does not"
	helpCgroupMode    = `The cgroup hierarchy that owns the perf_event controller, which the
per-cgroup counters are bound to: "v2 MOUNT" or "v1 MOUNT" (the mount
point, such as /sys/fs/cgroup or /sys/fs/cgroup/perf_event). "unavailable:
REASON" when there is none to count on, for example while perf_event is
bound to a cgroup v1 hierarchy that is not mounted; "off: REASON" when
cgroups.conf asks for nothing.`
	oneLineCgroupCounting = "How the per-cgroup events are counted"
	helpCgroupCounting    = `How perfevent.cgroup.* is counted. "bpf": each event is opened once per
CPU, and a BPF program run at every switch between cgroups charges what
it counted to the cgroup switched out and its ancestors, so that the
descriptors do not grow with the cgroups. "perf": one perf counter per
cgroup, event and CPU, bound to the cgroup (PERF_FLAG_PID_CGROUP), within
the descriptor budget of cgroups.conf; "perf: REASON" says why BPF is not
used where cgroups.conf asks for it or leaves the choice to the agent
("counting auto", the default). "off: REASON" as for perfevent.cgroup.mode,
or when the cgroups below the root have no perf_event controller of their
own, so that neither way can count them apart.`
)

// Counter describes one served event for the table.
type Counter struct {
	Event  int    // index in the counter.Set
	Metric string // name below perfevent.hwcounters, from names.Metric
	About  string // what it counts, for the long help, e.g. the config line and encoding
	// MakeAbout, when About is "", writes it when a client asks for the
	// help.
	MakeAbout func() string
}

// about is what the counter counts, for its help.
func (c *Counter) about() string {
	if c.About == "" && c.MakeAbout != nil {
		return c.MakeAbout()
	}
	return c.About
}

// Derived describes one derived metric for the table.
type Derived struct {
	Derived int    // index among the Set's derived events
	Metric  string // name below perfevent.derived
	About   string
}

// Spec is what Build turns into a table.
type Spec struct {
	Version  string
	Set      *counter.Set
	Counters []Counter
	Derived  []Derived
	Ratios   []ratio.Chosen // served under perfevent.ratio
	// Clock reads nanoseconds for the ratios over duration_time; nil is
	// the monotonic clock. Tests step it by hand.
	Clock    func() uint64
	Clusters *Clusters
	Cgroups  *Cgroups // nil: no per-cgroup metrics
	// Sockets maps each CPU to its socket (physical package), for the
	// ratios' instances' "socket" label; a CPU it lacks gets no such
	// label. The counters' instances keep the C agent's labels alone
	// ({"cpu":N}), which archives and comparisons with it expect.
	Sockets map[int]int
	// Reservations serves perfevent.reservation.*; nil serves none.
	Reservations *Reservations
	// C are the names the C agent serves on this machine that the
	// configuration does not give; see CMetric.
	C []CMetric
}

// CMetric is a name that PCP's C agent serves here and the configuration
// does not (setup.CLayout): served too, so that a client or a pmlogger
// that asked the C agent for it still finds it, with the same PMID
// (Clusters.Prefer), after a switch.
type CMetric struct {
	Key string // "hwcounters.NAME" (value and dutycycle) or "derived.NAME"
	// Event is a counter of the Set that counts the same event, which the
	// name then serves too; -1 for none: the name has no values, as the C
	// agent's names of the [dynamic] events it was not asked to count.
	Event int
}

// Cgroups describes the per-cgroup metrics, perfevent.cgroup.EVENT.value
// and .dutycycle, whose one instance domain follows the counted cgroups.
type Cgroups struct {
	// Mode is perfevent.cgroup.mode's value (see its help); nil serves
	// "off". It is asked at each fetch, as Counting is.
	Mode func() string
	// Counting is perfevent.cgroup.counting's value; nil serves Mode's
	// when that is "off: ...", "perf" otherwise.
	Counting  func() string
	Events    []CgroupEvent
	Reader    CgroupReader
	Instances *pmda.Instances // the live members; see CgroupInstance
}

// CgroupEvent is one event counted per cgroup.
type CgroupEvent struct {
	Event  int    // index among the Reader's events
	Metric string // name below perfevent.cgroup, from MetricName
	About  string
}

// CgroupReader reads every counted cgroup's events (internal/cgroup's
// Tracker). Read reads the marked events once per fetch; Len and At answer
// from that reading until the next. Counted is the number of cgroups
// counted now, read or not.
type CgroupReader interface {
	Read(need []bool)
	Len() int
	At(i, ev int) (inst int32, value uint64, duty float64)
	Counted() int
}

// CgroupInstance is the instance of a cgroup: named by its path, as PCP's
// cgroup.* metrics name it, with the path as a label too.
func CgroupInstance(id int32, path string) pmda.Instance {
	return pmda.Instance{ID: id, Name: path, Labels: pmda.Labels{"cgroup": path}}
}

// Build lays out perfevent's namespace and returns the table to serve and
// the Fetcher that answers for it. A metric that gets no PMID cluster is
// left out, and Source.Skipped says why; the others are served.
//
// Each counter gets a cluster with items 0 (value) and 1 (dutycycle), and
// an instance domain per event whose serial is the cluster minus 2, as in
// the C agent. Unlike the C agent, whose instance ids are indexes, an
// instance's id is its CPU number: "cpu3" is instance 3 even when CPU 2 is
// offline, so values line up with kernel.percpu.* and with labels.
func Build(spec Spec) (*pmda.Table, *Source, error) {
	src := &Source{set: spec.Set, version: spec.Version, clock: spec.Clock, cpus: cpuInstances{}}
	defer func() { src.cpus = nil }()
	if src.clock == nil {
		src.clock = monotonic
	}
	src.born = src.clock()
	ts := pmda.TableSpec{
		Domain:       Domain,
		DomainLabels: pmda.Labels{"agent": "perfevent"},
		Subtrees:     []string{"perfevent.hwcounters", "perfevent.derived", "perfevent.cgroup", "perfevent.ratio", "perfevent.reservation"},
		Metrics: []pmda.Metric{
			{
				Name:    "perfevent.version",
				Desc:    pdu.Desc{PMID: pdu.NewPMID(Domain, ClusterStatic, 0), Type: pdu.ValueString, InDom: pdu.InDomNull, Sem: pdu.SemDiscrete, Units: pdu.UnitsNone},
				OneLine: oneLineVersion,
				Help:    helpVersion,
			},
			{
				Name:    "perfevent.active",
				Desc:    pdu.Desc{PMID: pdu.NewPMID(Domain, ClusterStatic, 1), Type: pdu.ValueInt32, InDom: pdu.InDomNull, Sem: pdu.SemDiscrete, Units: pdu.UnitsNone},
				OneLine: oneLineActive,
				Help:    helpActive,
			},
			{
				// Always there, so that perfevent.cgroup is never an
				// empty subtree, which pminfo reports as an error.
				Name:    "perfevent.cgroup.counted",
				Desc:    pdu.Desc{PMID: pdu.NewPMID(Domain, ClusterStatic, 2), Type: pdu.ValueUint32, InDom: pdu.InDomNull, Sem: pdu.SemInstant, Units: pdu.UnitsNone},
				OneLine: oneLineCgroups,
				Help:    helpCgroups,
			},
			{
				Name:    "perfevent.cgroup.mode",
				Desc:    pdu.Desc{PMID: pdu.NewPMID(Domain, ClusterStatic, 3), Type: pdu.ValueString, InDom: pdu.InDomNull, Sem: pdu.SemDiscrete, Units: pdu.UnitsNone},
				OneLine: oneLineCgroupMode,
				Help:    helpCgroupMode,
			},
			{
				Name:    "perfevent.cgroup.counting",
				Desc:    pdu.Desc{PMID: pdu.NewPMID(Domain, ClusterStatic, 4), Type: pdu.ValueString, InDom: pdu.InDomNull, Sem: pdu.SemDiscrete, Units: pdu.UnitsNone},
				OneLine: oneLineCgroupCounting,
				Help:    helpCgroupCounting,
			},
			{
				Name:    "perfevent.derived.active",
				Desc:    pdu.Desc{PMID: pdu.NewPMID(Domain, ClusterDerived, 0), Type: pdu.ValueInt32, InDom: pdu.InDomNull, Sem: pdu.SemDiscrete, Units: pdu.UnitsNone},
				OneLine: oneLineDerivedActive,
				Help:    helpDerivedActive,
			},
		},
	}
	// The spec's lists are sized once: grown by append they were copied
	// over and over, each metric a hundred bytes.
	nMetrics := len(ts.Metrics) + 2*len(spec.Counters) + len(spec.Derived) + 6*len(spec.Ratios) + 2*len(spec.C)
	if cg := spec.Cgroups; cg != nil {
		nMetrics += 2 * len(cg.Events)
	}
	if spec.Reservations != nil {
		nMetrics += reservationMetrics
	}
	ts.Metrics = slices.Grow(ts.Metrics, nMetrics-len(ts.Metrics))
	ts.InDoms = make([]pmda.InDom, 0, len(spec.Counters)+len(spec.Derived)+len(spec.Ratios)+len(spec.C)+2)
	src.refs = make([]ref, firstDynamic)
	src.refs[ClusterStatic] = ref{kind: kindStatic}
	src.refs[ClusterDerived] = ref{kind: kindDerivedActive}

	for _, c := range spec.Counters {
		cluster, err := spec.Clusters.Cluster("hwcounters." + c.Metric)
		if err != nil {
			src.skipped = append(src.skipped, err)
			continue
		}
		indom := pdu.NewInDom(Domain, cluster-firstDynamic)
		name := "perfevent.hwcounters." + c.Metric
		ts.InDoms = append(ts.InDoms, src.cpus.inDom(indom, spec.Set.CPUs(c.Event), nil))
		about := c.about
		ts.Metrics = counterMetrics(ts.Metrics, name, cluster, indom,
			func() string {
				return oneLineValue + ".\n\n" + about() + "\nThe count is accumulated by the agent since it started, and scaled up\nby time_enabled/time_running when the kernel multiplexed the counter."
			},
			func() string {
				return oneLineDutycycle + ".\n\n" + about() + "\ntime_running/time_enabled since the counter was opened: 1 means the\ncounter was never multiplexed."
			})
		src.setRef(cluster, ref{kind: kindCounter, idx: c.Event})
	}

	for _, d := range spec.Derived {
		cluster, err := spec.Clusters.Cluster("derived." + d.Metric)
		if err != nil {
			src.skipped = append(src.skipped, err)
			continue
		}
		indom := pdu.NewInDom(Domain, cluster-firstDynamic)
		ts.InDoms = append(ts.InDoms, src.cpus.inDom(indom, spec.Set.DerivedCPUs(d.Derived), nil))
		about := d.About
		ts.Metrics = append(ts.Metrics, pmda.Metric{
			Name:     "perfevent.derived." + d.Metric + ".value",
			Desc:     pdu.Desc{PMID: pdu.NewPMID(Domain, cluster, 0), Type: pdu.ValueDouble, InDom: indom, Sem: pdu.SemCounter, Units: pdu.UnitsCount},
			OneLine:  oneLineDerived,
			MakeHelp: func() string { return oneLineDerived + ".\n\n" + about },
		})
		src.setRef(cluster, ref{kind: kindDerived, idx: d.Derived})
	}

	for _, c := range spec.Ratios {
		cluster, err := spec.Clusters.Cluster("ratio." + c.Name)
		if err != nil {
			src.skipped = append(src.skipped, err)
			continue
		}
		indom := pdu.NewInDom(Domain, cluster-firstDynamic)
		units := pdu.UnitsNone
		switch c.Unit {
		case ratio.PerSecond:
			units = pdu.NewUnits(0, -1, 1, 0, pdu.TimeSec, pdu.CountOne)
		case ratio.BytesPerSecond:
			units = pdu.NewUnits(1, -1, 0, pdu.SpaceByte, pdu.TimeSec, 0)
		}
		h := &ratioHelp{c: c, set: spec.Set}
		oneLine, oneLineAll := c.OneLine, c.OneLineAll
		if oneLine == "" || oneLineAll == "" {
			formula := c.Formula(spec.Set)
			oneLine, oneLineAll = cmp.Or(oneLine, formula+" per CPU"), cmp.Or(oneLineAll, formula+" over all CPUs")
		}
		ts.InDoms = append(ts.InDoms, src.cpus.inDom(indom, c.CPUs, spec.Sockets))
		ts.Metrics = append(ts.Metrics, pmda.Metric{
			Name:     "perfevent.ratio." + c.Name,
			Desc:     pdu.Desc{PMID: pdu.NewPMID(Domain, cluster, ItemRatioCPU), Type: pdu.ValueDouble, InDom: indom, Sem: pdu.SemInstant, Units: units},
			OneLine:  oneLine + ", since this client's previous fetch",
			MakeHelp: h.perCPU,
		})
		ts.Metrics = append(ts.Metrics, pmda.Metric{
			Name:     "perfevent.ratio.all." + c.Name,
			Desc:     pdu.Desc{PMID: pdu.NewPMID(Domain, cluster, ItemRatioAll), Type: pdu.ValueDouble, InDom: pdu.InDomNull, Sem: pdu.SemInstant, Units: units},
			OneLine:  oneLineAll + ", since this client's previous fetch",
			MakeHelp: h.all,
		})
		if c.Compound == nil {
			ts.Metrics = operandMetrics(ts.Metrics, h, cluster, indom)
		}
		src.setRef(cluster, ref{kind: kindRatio, idx: len(src.ratios)})
		src.ratios = append(src.ratios, c)
	}
	if cg := spec.Cgroups; cg != nil {
		src.cgMode, src.cgCounting = cg.Mode, cg.Counting
	}
	src.addC(&ts, spec)
	if cg := spec.Cgroups; cg != nil && len(cg.Events) > 0 {
		if err := src.addCgroups(&ts, cg, spec.Clusters); err != nil {
			src.skipped = append(src.skipped, err)
		}
	}

	if r := spec.Reservations; r != nil {
		if err := src.addReservation(&ts, r, spec.Clusters); err != nil {
			src.skipped = append(src.skipped, err)
		}
	}

	table, err := pmda.NewTable(ts)
	if err != nil {
		return nil, nil, err
	}
	src.prepare()
	return table, src, nil
}

// firstFetch says what a client's first fetch of a ratio gets.
const firstFetch = "A context's first fetch of the metric, and its first after the agent reloads " +
	"(SIGHUP, a CPU going offline or coming back), has no interval of its own: it gets the agent's, " +
	"from the newest of its samples of this ratio that is at least 1 s old (else the oldest) up to " +
	"the fetch. The agent samples a ratio whenever any client fetches it, and once when the counters " +
	"open, never on a timer: if nobody fetched the ratio in the last second, that interval reaches " +
	"back to the last fetch by anyone, or to the opening."

// ratioHelp writes a ratio's long help texts when a client asks for one
// (pmda.Metric.MakeHelp).
type ratioHelp struct {
	c   ratio.Chosen
	set *counter.Set
}

// den names the ratio's denominator.
func (h *ratioHelp) den() string {
	if h.c.Elapsed() {
		return "duration_time"
	}
	return h.set.Name(h.c.DenEv)
}

// events lists the numerator's events, joined by sep.
func (h *ratioHelp) events(sep string) string {
	events := make([]string, len(h.c.NumEv))
	for j, ev := range h.c.NumEv {
		events[j] = h.set.Name(ev)
	}
	return strings.Join(events, sep)
}

// texts are what the per-CPU and the whole machine's help say of how the
// ratio is computed and of its operands.
func (h *ratioHelp) texts() (help, operands, allOperands string) {
	c, den := &h.c, h.den()
	help = fmt.Sprintf("Computed by the agent from %s and %s, counted in one perf group per CPU "+
		"where the PMU allows, over the interval since the same client context's previous fetch of "+
		"this metric. %s An interval in which %s did not move has no value.", h.events(" + "), den, firstFetch, den)
	if c.Elapsed() {
		help = fmt.Sprintf("Computed by the agent from %s, each counted on the CPUs of its PMU's cpumask "+
			"(one per package for an uncore PMU), which are the instances, over the wall-clock time "+
			"since the same client context's previous fetch of this metric (duration_time). %s",
			h.events(" + "), firstFetch)
	}
	operands = fmt.Sprintf("The operands are perfevent.ratio.numerator.%s and perfevent.ratio.denominator.%s: "+
		"the value is %g × Δnumerator / Δdenominator over the interval.", c.Name, c.Name, c.Scale)
	allOperands = fmt.Sprintf("The operands are perfevent.ratio.all.numerator.%s and perfevent.ratio.all.denominator.%s.", c.Name, c.Name)
	if c.Compound != nil {
		// A product of ratios has no one numerator: its events are
		// counters of their own, from which a client computes it.
		help = fmt.Sprintf("Computed by the agent from the increases of %s, counted in perf groups per CPU "+
			"where the PMU allows, over the interval since the same client context's previous fetch of "+
			"this metric. %s An interval in which the denominator did not move has no value.", h.events(", "), firstFetch)
		operands = fmt.Sprintf("The value is %s over the increases; each event is a cumulative counter of "+
			"its own under perfevent.hwcounters, from which a client computes it over any interval.", c.Formula(h.set))
		allOperands = "Its operands are the per-instance events' counters, summed."
	}
	return help, operands, allOperands
}

// perCPU is the help of perfevent.ratio.NAME.
func (h *ratioHelp) perCPU() string {
	help, operands, _ := h.texts()
	return wrap(h.c.About) + "\n\n" + wrap(help+" "+operands+" Source: "+h.c.Source+".")
}

// all is the help of perfevent.ratio.all.NAME.
func (h *ratioHelp) all() string {
	_, _, allOperands := h.texts()
	return wrap(h.c.About) + "\n\n" + wrap(fmt.Sprintf("The whole machine's value of perfevent.ratio.%s: %s, over the same interval. %s %s",
		h.c.Name, allWhat(h.c, h.den()), firstFetch, allOperands))
}

// operandMetrics appends a ratio's cumulative operands, per CPU and for the
// whole machine, with counter semantics, so that a client computes the
// ratio over any interval it likes, from archives too: Scale × rate(num) /
// rate(den).
func operandMetrics(dst []pmda.Metric, h *ratioHelp, cluster int, indom pdu.InDom) []pmda.Metric {
	c := &h.c
	numUnits := pdu.UnitsCount
	if c.Bytes {
		numUnits = pdu.NewUnits(1, 0, 0, pdu.SpaceByte, 0, 0)
	}
	denUnits := pdu.UnitsCount
	switch {
	case c.Elapsed(), c.Unit == ratio.PerSecond || c.Unit == ratio.BytesPerSecond:
		denUnits = pdu.NewUnits(0, 1, 0, 0, pdu.TimeNSec, 0)
	}
	one := func(item int, name string, in pdu.InDom, units pdu.Units, oneLine string) pmda.Metric {
		return pmda.Metric{
			Name:     name,
			Desc:     pdu.Desc{PMID: pdu.NewPMID(Domain, cluster, item), Type: pdu.ValueUint64, InDom: in, Sem: pdu.SemCounter, Units: units},
			OneLine:  oneLine,
			MakeHelp: func() string { return h.operandHelp(item) },
		}
	}
	return append(dst,
		one(ItemNumeratorCPU, "perfevent.ratio.numerator."+c.Name, indom, numUnits,
			"Numerator of perfevent.ratio."+c.Name+", cumulative, per CPU"),
		one(ItemDenominatorCPU, "perfevent.ratio.denominator."+c.Name, indom, denUnits,
			"Denominator of perfevent.ratio."+c.Name+", cumulative, per CPU"),
		one(ItemNumeratorAll, "perfevent.ratio.all.numerator."+c.Name, pdu.InDomNull, numUnits,
			"Numerator of perfevent.ratio.all."+c.Name+", cumulative, all CPUs"),
		one(ItemDenominatorAll, "perfevent.ratio.all.denominator."+c.Name, pdu.InDomNull, denUnits,
			"Denominator of perfevent.ratio.all."+c.Name+", cumulative, all CPUs"),
	)
}

// operandHelp is the help of one of the ratio's operands (operandMetrics),
// by its item.
func (h *ratioHelp) operandHelp(item int) string {
	c := &h.c
	events, den := h.events(" + "), h.den()
	numWhat := "the sum of the counts of " + events
	if c.Bytes {
		numWhat = "the bytes that the counts of " + events + " stand for (each count times its size, as the formula says)"
	}
	denWhat := "the count of " + den
	switch {
	case c.Elapsed():
		denWhat = "the agent's monotonic clock, nanoseconds since it started (duration_time)"
	case c.Unit == ratio.PerSecond || c.Unit == ratio.BytesPerSecond:
		denWhat = "the nanoseconds of " + den
	}
	rel := func(ratio string) string {
		return fmt.Sprintf("%s is %g × Δnumerator / Δdenominator over the interval, so rate(numerator) / rate(denominator) × %g "+
			"is the ratio over any interval a client chooses. Cumulative since the counters were opened, carried across reloads, "+
			"and scaled up by time_enabled/time_running when the kernel multiplexed them.", ratio, c.Scale, c.Scale)
	}
	perCPU, all := "perfevent.ratio."+c.Name, "perfevent.ratio.all."+c.Name
	var what, of string
	switch item {
	case ItemNumeratorCPU:
		what, of = "The numerator of perfevent.ratio."+c.Name+" per instance: "+numWhat, perCPU
	case ItemDenominatorCPU:
		what, of = "The denominator of perfevent.ratio."+c.Name+" per instance: "+denWhat, perCPU
	case ItemNumeratorAll:
		what, of = "The numerator of perfevent.ratio.all."+c.Name+": the per-instance numerators summed, each "+numWhat, all
	default:
		what, of = "The denominator of perfevent.ratio.all."+c.Name+": "+allDenOperand(c.Elapsed(), denWhat), all
	}
	return wrap(what + ". " + rel(of))
}

// allDenOperand says what the whole machine's denominator operand is.
func allDenOperand(elapsed bool, denWhat string) string {
	if elapsed {
		return denWhat + ", not a sum over the instances"
	}
	return "the sum over the instances of " + denWhat
}

// wrap breaks text into lines of at most 72 columns, as pminfo -T shows
// help best; a word longer than that gets a line of its own.
func wrap(text string) string {
	var b strings.Builder
	n := 0
	for _, w := range strings.Fields(text) {
		if n > 0 && n+1+len([]rune(w)) > 72 {
			b.WriteByte('\n')
			n = 0
		} else if n > 0 {
			b.WriteByte(' ')
			n++
		}
		b.WriteString(w)
		n += len([]rune(w))
	}
	return b.String()
}

// allWhat says how the whole machine's value is computed.
func allWhat(c ratio.Chosen, den string) string {
	if c.Compound != nil {
		return "the formula over the increases of each event summed over the instances"
	}
	return "the increases of its numerator summed over the instances, divided by " + allDen(den, c.Elapsed())
}

// allDen says what the whole machine's value divides by.
func allDen(den string, elapsed bool) string {
	if elapsed {
		return "the interval's wall-clock time"
	}
	return "the sum of those of " + den
}

// monotonic is the clock of the ratios over duration_time: nanoseconds
// since the agent started, which never step back as the wall clock may.
func monotonic() uint64 { return uint64(time.Since(started)) }

var started = time.Now()

// counterMetrics appends the value and dutycycle metrics of one
// counter's cluster, as the C agent lays them out (items 0 and 1).
func counterMetrics(dst []pmda.Metric, name string, cluster int, indom pdu.InDom, helpValue, helpDuty func() string) []pmda.Metric {
	return append(dst,
		pmda.Metric{
			Name:     name + ".value",
			Desc:     pdu.Desc{PMID: pdu.NewPMID(Domain, cluster, ItemValue), Type: pdu.ValueInt64, InDom: indom, Sem: pdu.SemCounter, Units: pdu.UnitsCount},
			OneLine:  oneLineValue,
			MakeHelp: helpValue,
		},
		pmda.Metric{
			Name:     name + ".dutycycle",
			Desc:     pdu.Desc{PMID: pdu.NewPMID(Domain, cluster, ItemDutycycle), Type: pdu.ValueDouble, InDom: indom, Sem: pdu.SemInstant, Units: pdu.UnitsNone},
			OneLine:  oneLineDutycycle,
			MakeHelp: helpDuty,
		},
	)
}

// Skipped returns why Build left metrics out (see Clusters.Cluster).
func (s *Source) Skipped() []error { return s.skipped }

// cpuDomainLabels are the labels of every per-CPU instance domain, one
// map for all of them: nothing changes a table's labels once it is made.
var cpuDomainLabels = pmda.Labels{"device_type": "cpu", "indom_name": "per cpu"}

// cpuInstances are the instance lists of a table's per-CPU domains, one
// list per distinct CPU list (and socket labelling), which every domain
// with those CPUs shares: the C agent's layout gives each counter a domain
// of its own, and on a machine of hundreds of CPUs the lists would
// otherwise be most of the table (pmda indexes a shared list once).
type cpuInstances map[string][]pmda.Instance

// inDom is a per-CPU instance domain with the C agent's labels, and a
// "socket" label where sockets knows the CPU's, so that a ratio's
// per-package value (an uncore PMU's, counted on one CPU per package)
// says which socket it is. The per-instance "cpu" label is the CPU
// number, which the C agent gets wrong (it gives the index) whenever a
// CPU is offline.
func (c cpuInstances) inDom(indom pdu.InDom, cpus []int, sockets map[int]int) pmda.InDom {
	d := pmda.InDom{
		InDom:  indom,
		Labels: cpuDomainLabels,
	}
	key := make([]byte, 0, 4*len(cpus)+1)
	if sockets != nil {
		key = append(key, 's')
	}
	for _, cpu := range cpus {
		key = strconv.AppendInt(append(key, ','), int64(cpu), 10)
	}
	if in, ok := c[string(key)]; ok {
		d.Instances = in
		return d
	}
	for _, cpu := range cpus {
		labels := pmda.Labels{"cpu": cpu}
		if sk, ok := sockets[cpu]; ok {
			labels["socket"] = sk
		}
		d.Instances = append(d.Instances, pmda.Instance{ID: int32(cpu), Name: InstanceName(cpu), Labels: labels})
	}
	c[string(key)] = d.Instances
	return d
}

// addC adds the C agent's names that the rest of the table does not
// serve. One whose name the table cannot hold beside the others (a level
// of the namespace that is a metric there) is left out, with the reason.
func (s *Source) addC(ts *pmda.TableSpec, spec Spec) {
	// Sized once, for the table's names and a value and a dutycycle of
	// each slot: grown a name at a time, each map was rehashed into a
	// new table of twice the size several times over.
	n := len(ts.Metrics) + 2*len(spec.C)
	taken := make(map[string]bool, n)
	dirs := make(map[string]bool, n/2)
	for _, m := range ts.Metrics {
		taken[m.Name] = true
		for i := range len(m.Name) {
			if m.Name[i] == '.' {
				dirs[m.Name[:i]] = true
			}
		}
	}
	fits := func(names ...string) bool {
		for _, n := range names {
			if taken[n] || dirs[n] {
				return false
			}
			for i := range len(n) {
				if n[i] == '.' && taken[n[:i]] {
					return false
				}
			}
		}
		return true
	}
	set := spec.Set
	for _, c := range spec.C {
		name := "perfevent." + c.Key
		hw := strings.HasPrefix(c.Key, "hwcounters.")
		leaves := []string{name + ".value"}
		if hw {
			leaves = append(leaves, name+".dutycycle")
		}
		if !fits(leaves...) {
			s.skipped = append(s.skipped, fmt.Errorf("the C agent's metric %s clashes with a name of this configuration", name))
			continue
		}
		cluster, err := spec.Clusters.Cluster(c.Key)
		if err != nil {
			s.skipped = append(s.skipped, err)
			continue
		}
		for _, l := range leaves {
			taken[l] = true
		}
		for i := range len(name) {
			if name[i] == '.' {
				dirs[name[:i]] = true
			}
		}
		indom := pdu.NewInDom(Domain, cluster-firstDynamic)
		var cpus []int
		if c.Event >= 0 {
			cpus = spec.Set.CPUs(c.Event)
		}
		ts.InDoms = append(ts.InDoms, s.cpus.inDom(indom, cpus, nil))
		about := func() string {
			if c.Event < 0 {
				return "A name of PCP's C agent for this event, served so that switching agents keeps its PMID; it has no values here, as under the C agent, because the configuration does not count the event."
			}
			return fmt.Sprintf("A name of PCP's C agent for this event, served so that switching agents keeps its PMID; the values are those of %s.", set.Name(c.Event))
		}
		s.setRef(cluster, ref{kind: kindEmpty})
		if !hw {
			ts.Metrics = append(ts.Metrics, pmda.Metric{
				Name:    name + ".value",
				Desc:    pdu.Desc{PMID: pdu.NewPMID(Domain, cluster, 0), Type: pdu.ValueDouble, InDom: indom, Sem: pdu.SemCounter, Units: pdu.UnitsCount},
				OneLine: oneLineDerived,
				Help:    cDerivedHelp,
			})
			continue
		}
		ts.Metrics = counterMetrics(ts.Metrics, name, cluster, indom,
			func() string { return oneLineValue + ".\n\n" + wrap(about()) },
			func() string { return oneLineDutycycle + ".\n\n" + wrap(about()) })
		if c.Event >= 0 {
			s.setRef(cluster, ref{kind: kindCounter, idx: c.Event})
		}
	}
}

// cDerivedHelp is the help of a C agent's derived metric that the
// configuration does not define.
const cDerivedHelp = oneLineDerived + ".\n\nA derived metric of PCP's C agent, served so that switching agents keeps its PMID; it has no values here: the configuration does not define it."

// addCgroups adds the per-cgroup metrics: a cluster per event, as for
// hwcounters, and one instance domain for all of them, numbered from a
// cluster of its own so that it keeps its number too.
func (s *Source) addCgroups(ts *pmda.TableSpec, cg *Cgroups, clusters *Clusters) error {
	home, err := clusters.Cluster("cgroup")
	if err != nil {
		return err
	}
	indom := pdu.NewInDom(Domain, home-firstDynamic)
	ts.InDoms = append(ts.InDoms, pmda.InDom{
		InDom:   indom,
		Live:    cg.Instances,
		Labels:  pmda.Labels{"device_type": "cgroup", "indom_name": "per cgroup"},
		OneLine: "cgroups counted by perfevent",
		Help:    "The cgroups that cgroups.conf selects, named by their path below the\ncgroup mount as PCP's cgroup.* metrics name them.",
	})
	s.cgroups = cg.Reader
	s.cgNeed = make([]bool, 0, len(cg.Events))
	for _, e := range cg.Events {
		cluster, err := clusters.Cluster("cgroup." + e.Metric)
		if err != nil {
			s.skipped = append(s.skipped, err)
			continue
		}
		for len(s.cgNeed) <= e.Event {
			s.cgNeed = append(s.cgNeed, false)
		}
		name := "perfevent.cgroup." + e.Metric
		about := e.About
		ts.Metrics = counterMetrics(ts.Metrics, name, cluster, indom,
			func() string {
				return oneLineValue + ", per cgroup.\n\n" + about + "\nCounted only while a task of the cgroup (or of one below it) runs, summed\nover CPUs, accumulated since the cgroup was first counted and scaled up by\ntime_enabled/time_running when the kernel multiplexed the counter."
			},
			func() string {
				return oneLineDutycycle + ", per cgroup.\n\n" + about + "\nThe mean over CPUs of time_running/time_enabled since the counters were\nopened: 1 means never multiplexed."
			})
		s.setRef(cluster, ref{kind: kindCgroup, idx: e.Event})
	}
	return nil
}
