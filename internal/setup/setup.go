// Package setup decides what a perfevent.conf means on this machine: which
// PMU section applies, what each event line resolves to, on which CPUs it
// counts, and which derived sections it names. The Plan it makes is a
// value: nothing changes it once made (Plan.WithOperands makes another),
// and what opening its counters gives is recorded by the agent beside it.
// Its one word to package counter is the Spec of each counter to open.
//
// Every line gets a Note that says what became of it, so the agent's log and
// `pmdaperfevent --check` tell the same story. Lines that cannot work here
// are skipped and the rest is served: one bad line never costs the others.
package setup

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"perfevent/internal/config"
	"perfevent/internal/counter"
	"perfevent/internal/cpulist"
	"perfevent/internal/hostfs"
	"perfevent/internal/names"
	"perfevent/internal/pmu"

	"golang.org/x/sys/unix"
)

// Severity says whether a note is a problem to fix or just information.
type Severity int

const (
	// Info is normal: a line that works, or one that cannot work on this
	// kind of machine (cycles on a VM without a PMU) and is skipped.
	Info Severity = iota
	// Problem is a mistake in the config or the system that someone should
	// fix: a syntax error, an unknown event, a permission problem.
	Problem
)

// Note is what became of one line of the config.
type Note struct {
	Pos      config.Pos
	Severity Severity
	Text     string
}

func (n Note) String() string {
	if n.Pos.Line == 0 {
		return n.Text
	}
	return n.Pos.String() + ": " + n.Text
}

// Counter is an event line that resolved: what to open, where, and the
// metric name it is exported under (below perfevent.hwcounters).
type Counter struct {
	Pos    config.Pos
	Event  pmu.Event
	CPUs   []int
	Metric string
	// For names the ratios an event no line configures was opened for
	// (WithOperands); "" for a configured line.
	For string
}

// Derived is a derived section, exported below perfevent.derived.
type Derived struct {
	Section *config.Section
	Metric  string
}

// Plan is what the config asks for on this machine. Nobody changes a plan
// once it is made: the log, --check and the agent read it as it is, and
// what opening its counters gave is recorded beside it.
type Plan struct {
	Config   *config.File
	Section  *config.Section // the PMU section in use; nil if none matched
	Counters []Counter       // in config order: the chosen section, then [dynamic]
	Derived  []Derived       // in config order
	// Notes say what became of each line, and of each operand the
	// catalog asked for (WithOperands), in that order.
	Notes []Note
	// Online is the list of online CPUs the plan was made against: the
	// agent rebuilds when it changes (see internal/cpuhotplug).
	Online []int
	// Sockets is Machine.Sockets, for the instances' labels.
	Sockets map[int]int

	compat bool
	fs     *pmu.FS // the machine's PMUs, for Scale
	alloc  *config.CPUAllocator
	taken  map[string]config.Pos
	tree   *subtree
}

// Machine is what the plan is made against. Tests fake both parts.
type Machine struct {
	PMU      *pmu.FS
	Topology config.Topology
	// Sockets maps each online CPU to its socket, the kernel's
	// physical_package_id; a CPU whose topology sysfs does not give is
	// left out.
	Sockets map[int]int
}

// ReadMachine reads the topology from fs's sysfs.
func ReadMachine(fs *pmu.FS) (Machine, error) {
	online, err := fs.OnlineCPUs()
	if err != nil {
		return Machine{}, err
	}
	m := Machine{PMU: fs, Topology: config.Topology{Online: online}, Sockets: make(map[int]int, len(online))}
	for _, cpu := range online {
		if _, done := m.Sockets[cpu]; done {
			continue
		}
		topology := filepath.Join(fs.CPUDir(cpu), "topology")
		data, err := hostfs.ReadFile(filepath.Join(topology, "physical_package_id"))
		if err != nil {
			continue
		}
		id, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil || id < 0 {
			continue
		}
		m.Sockets[cpu] = id
		// The package's other CPUs are in the same socket: one CPU's
		// files per package rather than one per CPU, a few hundred reads
		// fewer on a large machine. A kernel without package_cpus_list
		// (before 5.6) has each CPU read.
		if data, err := hostfs.ReadFile(filepath.Join(topology, "package_cpus_list")); err == nil {
			if pkg, err := cpulist.Parse(string(data)); err == nil {
				for _, c := range pkg {
					if _, ok := slices.BinarySearch(online, c); ok {
						m.Sockets[c] = id
					}
				}
			}
		}
	}
	// Nodes sort numerically (node10 after node9), as the C agent's
	// versionsort does, so node_rr walks them in order.
	dirs := nodeDirs(fs.NodesDir())
	sort.Slice(dirs, func(i, j int) bool {
		if len(dirs[i]) != len(dirs[j]) {
			return len(dirs[i]) < len(dirs[j])
		}
		return dirs[i] < dirs[j]
	})
	for _, d := range dirs {
		data, err := hostfs.ReadFile(filepath.Join(d, "cpulist"))
		if err != nil {
			continue
		}
		cpus, err := cpulist.Parse(string(data))
		if err != nil {
			return Machine{}, fmt.Errorf("%s/cpulist: %w", d, err)
		}
		m.Topology.Nodes = append(m.Topology.Nodes, cpus)
	}
	return m, nil
}

// nodeDirs lists dir's node<N> directories, as the glob node[0-9]* would,
// from one listing: a glob stats the directory before it lists it, and
// matches each name with the pattern's parser.
func nodeDirs(dir string) []string {
	names, _ := hostfs.ReadDirNames(dir)
	var dirs []string
	for _, n := range names {
		if len(n) > len("node") && strings.HasPrefix(n, "node") && '0' <= n[4] && n[4] <= '9' {
			dirs = append(dirs, filepath.Join(dir, n))
		}
	}
	return dirs
}

// Make plans the counters of f. parseErr is what config.Parse returned
// alongside f; its errors become Problem notes. compat selects the C
// agent's pre-3.10.8 metric names (pmdaperfevent -C).
func Make(f *config.File, parseErr error, m Machine, compat bool) *Plan {
	p := &Plan{Config: f, compat: compat, Online: m.Topology.Online, Sockets: m.Sockets, fs: m.PMU}
	var list config.ErrorList
	if errors.As(parseErr, &list) {
		for _, e := range list {
			p.problem(e.Pos, "%s; line skipped", e.Msg)
		}
	} else if parseErr != nil {
		p.Notes = append(p.Notes, Note{Severity: Problem, Text: parseErr.Error()})
	}
	if f == nil {
		return p
	}

	present := map[string]bool{}
	for _, n := range m.PMU.PresentNames() {
		present[n] = true
	}
	section, why := f.ChoosePMUSection(func(name string) bool { return present[name] })
	p.Section = section
	// One explanation per PMU section, in order, each led by the section's
	// position; the position goes into the Note, so that notes sort by line.
	sections := f.PMUSections()
	for i, line := range why {
		n := Note{Severity: Info, Text: line}
		if i < len(sections) {
			if text, ok := strings.CutPrefix(line, sections[i].Pos.String()+": "); ok {
				n.Pos, n.Text = sections[i].Pos, text
			}
			if section != sections[i] {
				n.Text += gatedPMU(m.PMU, sections[i].PMUs, present)
			}
		}
		p.Notes = append(p.Notes, n)
	}

	alloc, err := config.NewCPUAllocator(m.Topology)
	if err != nil {
		p.Notes = append(p.Notes, Note{Severity: Problem, Text: err.Error()})
		return p
	}
	dynamic := f.DynamicEvents()
	n := len(dynamic)
	if section != nil {
		n += len(section.Events)
	}
	// Sized once: a Counter is a few hundred bytes.
	p.Counters = make([]Counter, 0, n)
	taken := make(map[string]config.Pos, n)
	tree := newSubtree("perfevent.hwcounters", n)
	p.alloc, p.taken, p.tree = alloc, taken, tree
	if section != nil {
		for _, ev := range section.Events {
			p.addCounter(m.PMU, alloc, ev, false, taken, tree)
		}
	}
	for _, ev := range dynamic {
		p.addCounter(m.PMU, alloc, ev, true, taken, tree)
	}

	derivedTaken := map[string]config.Pos{}
	derived := f.DerivedSections()
	dtree := newSubtree("perfevent.derived", len(derived), "active")
	for _, s := range derived {
		name := names.Metric(s.Name, compat)
		if prev, ok := derivedTaken[name]; ok {
			p.problem(s.Pos, "%s: metric perfevent.derived.%s is already defined at line %d; section skipped", s.Header(), name, prev.Line)
			continue
		}
		if name == "active" {
			p.problem(s.Pos, "%s: the name clashes with perfevent.derived.active; section skipped", s.Header())
			continue
		}
		if !names.Valid(name) {
			p.problem(s.Pos, "%s: %q is not a usable metric name; section skipped", s.Header(), name)
			continue
		}
		if clash := dtree.add(s.Pos, name+".value"); clash != "" {
			p.problem(s.Pos, "%s: %s; section skipped", s.Header(), clash)
			continue
		}
		derivedTaken[name] = s.Pos
		p.Derived = append(p.Derived, Derived{Section: s, Metric: name})
	}
	return p
}

// subtree is part of the namespace as the plan fills it, so that no metric
// is given a name that another metric's name passes through: pmcd's
// namespace cannot hold a.value as a metric and as the parent of
// a.value.value, and the agent would refuse to serve a table that tries.
type subtree struct {
	root   string
	leaves map[string]config.Pos // metric names below root
	dirs   map[string]config.Pos // their parents, with the first line that made each
}

// newSubtree starts a subtree below root holding the fixed metrics given,
// with room for the value and dutycycle of n counters: maps grown a
// counter at a time were rehashed several times over.
func newSubtree(root string, n int, fixed ...string) *subtree {
	t := &subtree{root: root, leaves: make(map[string]config.Pos, 2*n+len(fixed)), dirs: make(map[string]config.Pos, n)}
	for _, name := range fixed {
		t.leaves[name] = config.Pos{}
	}
	return t
}

func (t *subtree) clone() *subtree {
	return &subtree{root: t.root, leaves: maps.Clone(t.leaves), dirs: maps.Clone(t.dirs)}
}

// add enters the metric names of one line, all or none, and returns why
// they do not fit ("" when they do).
func (t *subtree) add(pos config.Pos, names ...string) string {
	at := func(p config.Pos) string {
		if p.Line == 0 {
			return "the agent's own metric"
		}
		return fmt.Sprintf("the metric of line %d", p.Line)
	}
	for _, name := range names {
		if p, ok := t.leaves[name]; ok {
			return fmt.Sprintf("metric %s.%s is already %s", t.root, name, at(p))
		}
		if p, ok := t.dirs[name]; ok {
			return fmt.Sprintf("metric %s.%s would also be a level above a metric of line %d", t.root, name, p.Line)
		}
		for i := range len(name) {
			if name[i] != '.' {
				continue
			}
			if p, ok := t.leaves[name[:i]]; ok {
				return fmt.Sprintf("metric %s.%s would sit below %s.%s, %s", t.root, name, t.root, name[:i], at(p))
			}
		}
	}
	for _, name := range names {
		t.leaves[name] = pos
		for i := range len(name) {
			if _, ok := t.dirs[name[:i]]; name[i] == '.' && !ok {
				t.dirs[name[:i]] = pos
			}
		}
	}
	return ""
}

func (p *Plan) addCounter(fs *pmu.FS, alloc *config.CPUAllocator, ev config.Event, dynamic bool, taken map[string]config.Pos, tree *subtree) {
	opts := pmu.Options{RawCode: ev.RawCode, HasRawCode: ev.HasRawCode}
	if len(ev.Params) > 0 {
		opts.Params = map[string]uint64{}
		for _, prm := range ev.Params {
			opts.Params[prm.Name] = uint64(prm.Value)
		}
	}
	resolved, err := fs.ResolveWith(ev.Name, opts)
	if err != nil {
		if pmuName, _, ok := strings.Cut(ev.Name, "."); dynamic && ok && !p.sysfsPMU(fs, pmuName) {
			// A shared config lists PMUs that only some machines have
			// (msr on x86, power with RAPL): expected, not a mistake.
			p.info(ev.Pos, "%s: this machine has no PMU %s; line skipped", ev.Name, pmuName)
			return
		}
		p.problem(ev.Pos, "%v; line skipped", err)
		return
	}
	var cpus []int
	if ev.CPU.Kind == config.CPUDefault && resolved.CPUs != nil {
		// An uncore PMU counts once per package, on the CPUs of its
		// cpumask; counting it on every CPU would multiply the total.
		cpus = slices.Clone(resolved.CPUs)
	} else if cpus, err = alloc.CPUs(ev.CPU, ev.Pos); err != nil {
		p.problem(ev.Pos, "%s: %s; line skipped", ev.Name, strings.TrimPrefix(err.Error(), ev.Pos.String()+": "))
		return
	}
	name := names.Metric(ev.Name, p.compat)
	if prev, ok := taken[name]; ok {
		p.problem(ev.Pos, "%s: metric perfevent.hwcounters.%s is already defined at line %d; line skipped", ev.Name, name, prev.Line)
		return
	}
	if !names.Valid(name) {
		p.problem(ev.Pos, "%s: %q is not a usable metric name; line skipped", ev.Name, name)
		return
	}
	if clash := tree.add(ev.Pos, name+".value", name+".dutycycle"); clash != "" {
		p.problem(ev.Pos, "%s: %s; line skipped", ev.Name, clash)
		return
	}
	taken[name] = ev.Pos
	p.Counters = append(p.Counters, Counter{Pos: ev.Pos, Event: resolved, CPUs: cpus, Metric: name})
}

// sysfsPMU reports whether sysfs lists a PMU of that name; "software" is
// always there, as the agent synthesises its events.
func (p *Plan) sysfsPMU(fs *pmu.FS, name string) bool {
	if name == "software" {
		return true
	}
	names, _ := fs.PMUNames()
	return slices.Contains(names, name)
}

// Describe says what a counter is: where its encoding came from (for a
// libpfm4 name, libpfm4's canonical full name), the perf_event attributes,
// and the metric it becomes.
func (c Counter) Describe() string {
	ev := c.Event
	a := ev.Attr
	// Written with strconv, as fmt's %d, %#x and %g write them: one line
	// per counter in every start's log.
	b := make([]byte, 0, len(ev.Source)+len(c.Metric)+96)
	b = append(b, ev.Source...)
	b = strconv.AppendUint(append(b, ": type "...), uint64(a.Type), 10)
	b = strconv.AppendUint(append(b, " config 0x"...), a.Config, 16)
	if a.Ext1 != 0 || a.Ext2 != 0 {
		b = strconv.AppendUint(append(b, " config1 0x"...), a.Ext1, 16)
		b = strconv.AppendUint(append(b, " config2 0x"...), a.Ext2, 16)
	}
	b = append(append(b, " exclude "...), excludeNames(a.Bits)...)
	if ev.Scale != 1 || ev.Unit != "" {
		b = fmt.Appendf(b, " (scale %g %s)", ev.Scale, ev.Unit)
	}
	return string(append(append(b, " -> perfevent.hwcounters."...), c.Metric...))
}

// excludeNames lists the exclude bits that are set, as perf_event_attr
// names them without the prefix.
func excludeNames(bits uint64) string {
	var names []string
	for _, b := range []struct {
		bit  uint64
		name string
	}{
		{unix.PerfBitExcludeUser, "user"},
		{unix.PerfBitExcludeKernel, "kernel"},
		{unix.PerfBitExcludeHv, "hv"},
		{unix.PerfBitExcludeIdle, "idle"},
		{unix.PerfBitExcludeHost, "host"},
		{unix.PerfBitExcludeGuest, "guest"},
	} {
		if bits&b.bit != 0 {
			names = append(names, b.name)
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ",")
}

func (p *Plan) info(pos config.Pos, format string, args ...any) {
	p.Notes = append(p.Notes, Note{Pos: pos, Severity: Info, Text: fmt.Sprintf(format, args...)})
}

func (p *Plan) problem(pos config.Pos, format string, args ...any) {
	p.Notes = append(p.Notes, Note{Pos: pos, Severity: Problem, Text: fmt.Sprintf(format, args...)})
}

// Specs are the counters to open, in plan order.
func (p *Plan) Specs() []counter.Spec {
	specs := make([]counter.Spec, len(p.Counters))
	for i, c := range p.Counters {
		specs[i] = counter.Spec{Name: c.Event.Name, Attr: c.Event.Attr, CPUs: c.CPUs}
	}
	return specs
}

// Scale is the kernel's .scale and .unit of a planned event (pmu.FS.ScaleFor):
// for an event given by a libpfm4 name too, when its encoding is one that
// sysfs describes. ok is false when the kernel says nothing of it.
func (p *Plan) Scale(event string) (scale float64, unit string, ok bool) {
	c, found := p.counter(event)
	if !found || p.fs == nil {
		return 0, "", false
	}
	return p.fs.ScaleFor(c.Event)
}

func (p *Plan) counter(event string) (Counter, bool) {
	for _, c := range p.Counters {
		if c.Event.Name == event {
			return c, true
		}
	}
	return Counter{}, false
}

// Problems counts the notes of severity Problem.
func (p *Plan) Problems() int {
	n := 0
	for _, note := range p.Notes {
		if note.Severity == Problem {
			n++
		}
	}
	return n
}

// gatedPMU says why a section naming a PMU that libpfm4 finds from the CPU
// is not chosen: the kernel has no core PMU (a guest without a virtual
// PMU), so none of its events could count. "" for the other sections.
func gatedPMU(fs *pmu.FS, names []string, present map[string]bool) string {
	for _, h := range fs.LibpfmPMUs() {
		if slices.Contains(names, h.Name) && !present[h.Name] {
			return fmt.Sprintf(" (libpfm4 finds %s from the CPU, but the kernel exposes no core PMU to count its events)", h.Name)
		}
	}
	return ""
}
