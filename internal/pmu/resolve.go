package pmu

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"perfevent/internal/pfm"

	"golang.org/x/sys/unix"
)

// Event is a resolved event name: what to pass to perf_event_open and how
// to present the count.
type Event struct {
	Name string // the name as configured
	// PMU is "perf" for generic, cache, software, tracepoint and ix86arch
	// names (libpfm4's perf PMU), "perf_raw" for RAW:, and otherwise the
	// sysfs PMU the event belongs to.
	PMU string
	// Attr holds Type, Config, Ext1 (config1), Ext2 (config2) and the
	// exclude bits; the counter package owns everything else.
	Attr  unix.PerfEventAttr
	Scale float64 // multiply counts by this; 1 when sysfs gives none
	Unit  string  // from sysfs .unit, e.g. "Joules", "MiB"
	// CPUs is the PMU's cpumask (uncore PMUs count per package, on the
	// listed CPUs only); nil means every online CPU.
	CPUs     []int
	Snapshot bool // sysfs .snapshot: an instantaneous value, not a count
	PerPkg   bool // sysfs .per-pkg: count once per package
	// Source says where the encoding came from, for logs and --check,
	// e.g. libpfm4's canonical name, "libpfm4
	// perf::PERF_COUNT_SW_CPU_CLOCK:u=1:k=1:excl=0:mg=0:mh=1", or
	// "tracepoint sched/sched_switch id 312".
	Source string
}

// Options carries what perfevent.conf can say besides the event name.
type Options struct {
	// RawCode is the rawcode= of a RAW:name event; HasRawCode says it
	// was given.
	RawCode    uint64
	HasRawCode bool
	// Params fills "term=?" placeholders of sysfs events (hv_24x7 and
	// hv_gpci): "chip", "core", "domain", "lpar", ...
	Params map[string]uint64
}

// Resolve resolves an event name with no options.
func (fs *FS) Resolve(name string) (Event, error) {
	return fs.ResolveWith(name, Options{})
}

// ResolveWith turns a perfevent.conf event name into an Event. Errors name
// the event and, where sysfs or tracefs is involved, the file at fault,
// and say what to write instead when the name cannot work here.
func (fs *FS) ResolveWith(name string, o Options) (Event, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		return Event{}, errors.New("empty event name")
	}
	ev, err := fs.passResolve(name, o)
	if err != nil {
		return Event{}, err
	}
	ev.Name = name
	if ev.Scale == 0 {
		ev.Scale = 1
	}
	return ev, nil
}

func (fs *FS) resolve(name string, o Options) (Event, error) {
	// The C agent matches these two prefixes case-sensitively.
	if strings.HasPrefix(name, "RAPL:") {
		return fs.resolveRAPL(name)
	}
	if strings.HasPrefix(name, "RAW:") {
		return fs.resolveRaw(name, o)
	}
	if strings.Contains(name, "/") {
		return fs.resolvePerfSyntax(name, o)
	}
	if !strings.Contains(name, "::") {
		if ev, ok, err := fs.resolveDynamic(name, o); ok {
			// perf users write the vendors' names in lower case
			// ("inst_retired.any"), which looks like pmu.event of a
			// PMU that does not exist; libpfm4 and the vendors' lists
			// ignore case.
			if err != nil && !fs.sysfsHas(name[:strings.IndexByte(name, '.')]) {
				if ev, lerr := fs.resolveLibpfm(name); lerr == nil {
					return ev, nil
				}
				if ev, verr := fs.resolveVendor(name); verr == nil {
					return ev, nil
				}
			}
			return ev, err
		}
	}
	// Everything else is a libpfm4 name first, as in the C agent; what
	// libpfm4 refuses may still be a tracepoint or a perf spelling that
	// only this agent knows.
	ev, libErr := fs.resolveLibpfm(name)
	if libErr == nil {
		return ev, nil
	}
	// Then the vendors' lists for the models libpfm4 lacks.
	if ev, err := fs.resolveVendor(name); err == nil || !errors.Is(err, errNotLocal) {
		return ev, err
	}
	if ev, err := fs.resolveLocal(name); err == nil || !errors.Is(err, errNotLocal) {
		return ev, err
	}
	return Event{}, fs.errUnknown(name, libErr)
}

// sysfsHas reports whether sysfs has a PMU of that name.
func (fs *FS) sysfsHas(pmuName string) bool {
	if !isPathElem(pmuName) {
		return false
	}
	return fs.hasPMU(pmuName)
}

// errNotLocal says that resolveLocal does not know the name at all.
var errNotLocal = errors.New("not a local name")

// resolveLocal handles what libpfm4 does not: tracepoints, perf's
// spellings of the generic events and perf_raw, with this agent's own
// tables.
func (fs *FS) resolveLocal(name string) (Event, error) {
	rest, perfNS := cutPrefixFold(name, "perf::")
	if !perfNS {
		if pfx, ev, ok := strings.Cut(name, "::"); ok {
			if strings.EqualFold(pfx, "perf_raw") {
				return fs.resolvePerfRaw(name, ev)
			}
			return Event{}, errNotLocal
		}
	}
	base, mods, _ := strings.Cut(rest, ":")
	modList := splitMods(mods)
	if g, ok := genericNamed(base); ok {
		return fs.genericEvent(name, g, modList)
	}
	if id, ok := cacheByLibpfm(base); ok {
		return fs.libpfmCache(name, id, modList)
	}
	if len(modList) > 0 {
		if ev, ok, err := fs.resolveTracepoint(name, base, modList); ok {
			return ev, err
		}
	}
	return Event{}, errNotLocal
}

// errUnknown explains a name nothing knows: what libpfm4 said, the
// nearest names of this machine's libpfm4 PMUs, and the other ways to
// write an event.
func (fs *FS) errUnknown(name string, libErr error) error {
	var ee *pfm.EncodeError
	if errors.As(libErr, &ee) && ee.Attr != "" {
		msg := fmt.Sprintf("event %q: %s: %v (libpfm4)", name, ee.Attr, ee.Err)
		if s := fs.SuggestAttr(name); len(s) > 0 {
			msg += "; did you mean " + strings.Join(s, ", ") + "?"
		}
		return errors.New(msg)
	}
	if !errors.Is(libErr, pfm.ErrNotFound) {
		return fmt.Errorf("event %q: %s (libpfm4)", name, strings.TrimPrefix(libErr.Error(), fmt.Sprintf("perf event %q: ", name)))
	}
	present := fs.libpfmNames()
	var msg string
	pfx, rest, prefixed := strings.Cut(name, "::")
	switch {
	case prefixed && !slices.ContainsFunc(present, func(p string) bool { return strings.EqualFold(p, pfx) }) && !fs.isVendorPMU(pfx):
		msg = fmt.Sprintf("libpfm4 finds no PMU %s on this machine (it finds %s)", pfx, strings.Join(present, ", "))
		if k, ok := fs.kernelUncoreName(pfx); ok {
			msg += fmt.Sprintf("; the kernel's %s has its events in %s, for a [dynamic] section", k, filepath.Join(fs.devicesDir(), k, "events"))
		}
		return fmt.Errorf("event %q: %s", name, msg)
	case prefixed:
		ev, _, _ := strings.Cut(rest, ":")
		msg = fmt.Sprintf("PMU %s has no event %s", pfx, ev)
	default:
		vendor := ""
		if v := fs.vendorNames(); len(v) > 0 {
			vendor = fmt.Sprintf(", nor of the vendor's list for this CPU (%s)", strings.Join(v, ", "))
		}
		msg = fmt.Sprintf("not an event of the libpfm4 PMUs found here (%s)%s, nor a tracepoint or sysfs event; "+
			"write \"RAW:NAME rawcode=0x<code>\" or a [dynamic] pmu.event (pmdaperfevent --list-events shows both kinds)", strings.Join(present, ", "), vendor)
	}
	if s := fs.Suggest(name); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, ", ") + "?"
	}
	return fmt.Errorf("event %q: %s", name, msg)
}

// splitMods splits libpfm4's ":"-separated modifiers.
func splitMods(mods string) []string {
	if mods == "" {
		return nil
	}
	return strings.Split(mods, ":")
}

func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix) {
		return s[len(prefix):], true
	}
	return s, false
}

func (fs *FS) resolveRaw(name string, o Options) (Event, error) {
	if !o.HasRawCode {
		return Event{}, fmt.Errorf("event %q: a RAW: event needs rawcode=0x<code> on its line", name)
	}
	// The same bits the C agent sets for RAW events.
	return Event{
		PMU: "perf_raw",
		Attr: unix.PerfEventAttr{
			Type:   unix.PERF_TYPE_RAW,
			Config: o.RawCode,
			Bits:   unix.PerfBitExcludeHv | unix.PerfBitExcludeGuest,
		},
		Source: fmt.Sprintf("raw rawcode %#x", o.RawCode),
	}, nil
}

// resolvePerfRaw handles libpfm4's perf_raw PMU, "perf_raw::r<hex>[:mods]",
// a raw code written in the name.
func (fs *FS) resolvePerfRaw(name, rest string) (Event, error) {
	code, mods, _ := strings.Cut(rest, ":")
	hex, ok := cutPrefixFold(code, "r")
	v, err := strconv.ParseUint(hex, 16, 64)
	if !ok || err != nil {
		return Event{}, fmt.Errorf("event %q: perf_raw events are written r<hex code>, e.g. perf_raw::r01c2", name)
	}
	l, err := levelsFrom(name, splitMods(mods))
	if err != nil {
		return Event{}, err
	}
	return Event{
		PMU:    "perf_raw",
		Attr:   unix.PerfEventAttr{Type: unix.PERF_TYPE_RAW, Config: v, Bits: l.bits(fs.supportedPLM())},
		Source: fmt.Sprintf("perf_raw code %#x", v),
	}, nil
}

// genericEvent encodes a generic hardware, software or cache event the
// way libpfm4's perf PMU does, modifiers included.
func (fs *FS) genericEvent(name string, g genericEvent, mods []string) (Event, error) {
	l, err := levelsFrom(name, mods)
	if err != nil {
		return Event{}, err
	}
	return Event{
		PMU:    "perf",
		Attr:   unix.PerfEventAttr{Type: g.Type, Config: g.Config, Bits: l.bits(fs.supportedPLM())},
		Source: genericSource(g),
	}, nil
}

func genericSource(g genericEvent) string {
	kind := "generic hardware"
	switch g.Type {
	case unix.PERF_TYPE_SOFTWARE:
		kind = "software"
	case unix.PERF_TYPE_HW_CACHE:
		kind = "generic cache"
	}
	return kind + " " + g.Const
}

func cacheByLibpfm(base string) (cacheDef, bool) {
	rest, ok := cutPrefixFold(base, "PERF_COUNT_HW_CACHE_")
	if !ok {
		return cacheDef{}, false
	}
	for _, c := range caches {
		if strings.EqualFold(rest, c.Libpfm) {
			return c, true
		}
	}
	return cacheDef{}, false
}

// libpfmCacheOp is the operation of one of libpfm4's operation modifiers
// of cache events: READ, WRITE or PREFETCH (in upper case). A switch, not
// a map, so that no start of the agent spends time building it.
func libpfmCacheOp(mod string) uint64 {
	switch mod {
	case "WRITE":
		return unix.PERF_COUNT_HW_CACHE_OP_WRITE
	case "PREFETCH":
		return unix.PERF_COUNT_HW_CACHE_OP_PREFETCH
	}
	return unix.PERF_COUNT_HW_CACHE_OP_READ
}

// libpfmCache handles PERF_COUNT_HW_CACHE_<cache>[:op][:result]; libpfm4
// defaults to READ and MISS.
func (fs *FS) libpfmCache(name string, c cacheDef, mods []string) (Event, error) {
	op, result := uint64(unix.PERF_COUNT_HW_CACHE_OP_READ), uint64(unix.PERF_COUNT_HW_CACHE_RESULT_MISS)
	var opSet, resSet bool
	var l levels
	for _, m := range mods {
		switch u := strings.ToUpper(m); u {
		case "READ", "WRITE", "PREFETCH":
			o := libpfmCacheOp(u)
			if opSet {
				return Event{}, fmt.Errorf("event %q: more than one of READ, WRITE, PREFETCH", name)
			}
			if !slices.Contains(c.Ops, o) {
				return Event{}, fmt.Errorf("event %q: %s has no %s operation", name, c.Perf, u)
			}
			op, opSet = o, true
		case "ACCESS", "MISS":
			if resSet {
				return Event{}, fmt.Errorf("event %q: more than one of ACCESS, MISS", name)
			}
			result, resSet = unix.PERF_COUNT_HW_CACHE_RESULT_ACCESS, true
			if strings.EqualFold(m, "MISS") {
				result = unix.PERF_COUNT_HW_CACHE_RESULT_MISS
			}
		default:
			ok, err := l.parseLevel(m)
			if err != nil {
				return Event{}, fmt.Errorf("event %q: %w", name, err)
			}
			if !ok {
				return Event{}, fmt.Errorf("event %q: unknown modifier %q (want READ, WRITE, PREFETCH, ACCESS, MISS, u, k, h, mg or mh)", name, m)
			}
		}
	}
	res := "ACCESS"
	if result == unix.PERF_COUNT_HW_CACHE_RESULT_MISS {
		res = "MISS"
	}
	return Event{
		PMU: "perf",
		Attr: unix.PerfEventAttr{
			Type:   unix.PERF_TYPE_HW_CACHE,
			Config: cacheConfig(c.ID, op, result),
			Bits:   l.bits(fs.supportedPLM()),
		},
		Source: "generic cache PERF_COUNT_HW_CACHE_" + c.Libpfm + ":" + libpfmOp[op] + ":" + res,
	}, nil
}

// kernelUncoreName guesses the kernel's name for a libpfm4 uncore PMU:
// snbep_unc_imc0 is uncore_imc_0, hswep_unc_cbo3 is uncore_cbox_3,
// snbep_unc_pcu is uncore_pcu. It reports false unless that PMU exists.
func (fs *FS) kernelUncoreName(libpfm string) (string, bool) {
	_, unit, ok := strings.Cut(strings.ToLower(libpfm), "_unc_")
	if !ok {
		return "", false
	}
	base := strings.TrimRight(unit, "0123456789")
	unit, num := base, unit[len(base):]
	if unit == "cbo" {
		unit = "cbox"
	}
	candidates := []string{"uncore_" + unit}
	if num != "" {
		candidates = []string{"uncore_" + unit + "_" + num, "uncore_" + unit + num}
	}
	for _, c := range candidates {
		if fs.hasPMU(c) {
			return c, true
		}
	}
	return "", false
}

// resolveTracepoint handles "subsys:event[:mods]". It reports false when
// the name is not plausibly a tracepoint, so that the caller can give the
// generic advice instead.
func (fs *FS) resolveTracepoint(name, subsys string, mods []string) (Event, bool, error) {
	event, mods := mods[0], mods[1:]
	if !isPathElem(subsys) || !isPathElem(event) {
		return Event{}, false, nil
	}
	// Tracepoint subsystems are lower case; libpfm4 event names are not.
	// That tells "sched:sched_switch" without tracefs from
	// "INST_RETIRED:ANY_P".
	lowerCase := subsys == strings.ToLower(subsys)
	root, mounted := fs.passTracingRoot()
	var id uint64
	source := ""
	if !mounted {
		denied := fs.tracingDenied()
		cached, ok := fs.cachedTracepoint(subsys, event)
		switch {
		case ok:
			// Tracepoint ids do not change while the kernel runs (a
			// module's are new only if it is loaded again).
			id = cached
			source = fmt.Sprintf("tracepoint %s/%s id %d (as resolved at start-up: %s is readable by root only)", subsys, event, id, denied)
		case denied != "" && lowerCase:
			return Event{}, true, fmt.Errorf("event %q: tracepoint %s:%s is not resolvable after the privilege drop (%s is readable by root only); restart the agent to add new tracepoints", name, subsys, event, denied)
		case lowerCase:
			return Event{}, true, fmt.Errorf("event %q: %w", name, fs.errNoTracefs())
		default:
			return Event{}, false, nil
		}
	} else {
		var found bool
		var err error
		id, found, err = fs.passTracepointID(root, subsys, event)
		if !found {
			if lowerCase {
				return Event{}, true, fmt.Errorf("event %q: not a generic event, and %s has no tracepoint subsystem %s%s", name, filepath.Join(root, "events"), subsys,
					didYouMean(name, fs.tracepointNames(root, "")))
			}
			return Event{}, false, nil
		}
		if err != nil {
			return Event{}, true, fmt.Errorf("event %q: %w%s", name, err, didYouMean(name, fs.tracepointNames(root, subsys)))
		}
		fs.rememberTracepoint(subsys, event, id)
		source = fmt.Sprintf("tracepoint %s/%s id %d", subsys, event, id)
	}
	l, err := levelsFrom(name, mods)
	if err != nil {
		return Event{}, true, err
	}
	return Event{
		PMU: "perf",
		Attr: unix.PerfEventAttr{
			Type:   fs.tracepointType(),
			Config: id,
			Bits:   l.bits(fs.supportedPLM()),
		},
		Source: source,
	}, true, nil
}

// resolveDynamic handles "pmu.event" from sysfs. It reports false when the
// name does not look like one.
func (fs *FS) resolveDynamic(name string, o Options) (Event, bool, error) {
	pmuName, evName, ok := fs.splitDynamic(name)
	if !ok {
		return Event{}, false, nil
	}
	if pmuName == "software" {
		ev, err := fs.dynamicSoftware(name, evName)
		return ev, true, err
	}
	p, err := fs.PMU(pmuName)
	if err != nil {
		if (pmuName == "hv_24x7" || pmuName == "hv_gpci") && !fs.hasPMU(pmuName) {
			return Event{}, true, fmt.Errorf("event %q: %s parameters are only meaningful on IBM POWER; PMU %s is not present", name, pmuName, pmuName)
		}
		return Event{}, true, fmt.Errorf("event %q: %w", name, err)
	}
	pe, ok := p.Event(evName)
	if !ok {
		names := make([]string, len(p.Events))
		for i, e := range p.Events {
			names[i] = pmuName + "." + e.Name
		}
		return Event{}, true, fmt.Errorf("event %q: PMU %s has no event %s (no file %s/events/%s)%s", name, pmuName, evName, p.Dir, evName,
			didYouMean(name, names))
	}
	enc, err := p.Encode(pe, o.Params)
	if err != nil {
		return Event{}, true, fmt.Errorf("event %q: %w", name, err)
	}
	return Event{
		PMU: p.Name,
		// The C agent opens sysfs events without exclude bits, and some
		// PMUs (msr, power, uncore) reject any.
		Attr:     unix.PerfEventAttr{Type: p.Type, Config: enc.Config, Ext1: enc.Config1, Ext2: enc.Config2},
		Scale:    pe.Scale,
		Unit:     pe.Unit,
		CPUs:     slices.Clone(p.CPUs), // p may be shared (see Pass)
		Snapshot: pe.Snapshot,
		PerPkg:   pe.PerPkg,
		Source:   fmt.Sprintf("sysfs %s/events/%s (%s)", p.Name, pe.Name, pe.Text),
	}, true, nil
}

// splitDynamic splits "pmu.event" at the first dot whose prefix is a
// PMU (the synthetic "software" one included). A lower-case prefix that
// is no PMU still counts as a dynamic name, so that "cpu.branch-misses"
// on a machine without a cpu PMU says so, while Intel-style
// "MEM_LOAD_RETIRED.L1_HIT" falls through to the generic advice.
func (fs *FS) splitDynamic(name string) (string, string, bool) {
	first := ""
	for i := 0; i < len(name); i++ {
		if name[i] != '.' {
			continue
		}
		pmuName, ev := name[:i], name[i+1:]
		if ev == "" || !isPathElem(pmuName) {
			continue
		}
		if first == "" {
			first = pmuName
		}
		if pmuName == "software" {
			return pmuName, ev, true
		}
		if fs.hasPMU(pmuName) {
			return pmuName, ev, true
		}
	}
	if first != "" && first == strings.ToLower(first) && !strings.Contains(first, ":") {
		return first, name[len(first)+1:], true
	}
	return "", "", false
}

func (fs *FS) dynamicSoftware(name, evName string) (Event, error) {
	if !slices.Contains(dynamicSoftware, evName) {
		names := make([]string, len(dynamicSoftware))
		for i, e := range dynamicSoftware {
			names[i] = "software." + e
		}
		return Event{}, fmt.Errorf("event %q: the software PMU of [dynamic] has only %s%s", name, strings.Join(dynamicSoftware, ", "), didYouMean(name, names))
	}
	g := softwareNamed(evName)
	typ := uint32(unix.PERF_TYPE_SOFTWARE)
	if t, ok := fs.typeOf("software"); ok {
		typ = t
	}
	return Event{
		PMU:    "software",
		Attr:   unix.PerfEventAttr{Type: typ, Config: g.Config},
		Source: "software " + g.Const,
	}, nil
}

// resolvePerfSyntax handles perf's "pmu/term=value,.../mods". A bare term
// that names one of the PMU's events stands for that event's terms, as
// in perf ("cpu/mem-loads,ldlat=30/").
func (fs *FS) resolvePerfSyntax(name string, o Options) (Event, error) {
	pmuName, rest, _ := strings.Cut(name, "/")
	body, mods, closed := strings.Cut(rest, "/")
	if !closed || strings.Contains(mods, "/") {
		return Event{}, fmt.Errorf("event %q: perf syntax is pmu/term=value,.../ with an optional u, k or h after the last slash", name)
	}
	p, err := fs.PMU(pmuName)
	if err != nil {
		return Event{}, fmt.Errorf("event %q: %w", name, err)
	}
	terms, err := ParseTerms(body)
	if err != nil {
		return Event{}, fmt.Errorf("event %q: %w", name, err)
	}
	ev := Event{PMU: p.Name, Scale: 1, CPUs: slices.Clone(p.CPUs), Source: "perf syntax " + name}
	// An event alias contributes its terms; terms written after it
	// override them, as in perf ("cpu/mem-loads,ldlat=30/").
	var all []Term
	for _, t := range terms {
		if _, isFormat := p.Formats[t.Name]; !isFormat && !t.Param && t.Value == 1 {
			if pe, ok := p.Event(t.Name); ok {
				if pe.Err != nil {
					return Event{}, fmt.Errorf("event %q: %w", name, pe.Err)
				}
				all = append(all, pe.Terms...)
				ev.Scale, ev.Unit, ev.Snapshot, ev.PerPkg = pe.Scale, pe.Unit, pe.Snapshot, pe.PerPkg
				continue
			}
			// perf also takes the vendor's names there
			// ("cpu_atom/INST_RETIRED.ANY/").
			if vt, ok, err := fs.vendorTerms(p, t.Name); ok {
				if err != nil {
					return Event{}, fmt.Errorf("event %q: %w", name, err)
				}
				all = append(all, vt...)
				continue
			}
		}
		all = slices.DeleteFunc(all, func(a Term) bool { return a.Name == t.Name })
		all = append(all, t)
	}
	enc, err := p.Encode(&PMUEvent{Name: body, Path: p.Dir, Terms: all}, o.Params)
	if err != nil {
		return Event{}, fmt.Errorf("event %q: %w", name, err)
	}
	var bits uint64
	if mods != "" {
		var l levels
		ok, err := l.parseLevel(mods)
		if err != nil || !ok {
			return Event{}, fmt.Errorf("event %q: unknown modifier %q after the last slash (want some of u, k, h)", name, mods)
		}
		// perf, unlike libpfm4, leaves guests and the hypervisor alone
		// unless told.
		bits = l.bits(plmAll) &^ (unix.PerfBitExcludeGuest | unix.PerfBitExcludeHost)
	}
	ev.Attr = unix.PerfEventAttr{Type: p.Type, Config: enc.Config, Ext1: enc.Config1, Ext2: enc.Config2, Bits: bits}
	if canon := fs.vendorName(p, enc); canon != "" {
		ev.Source += " = " + canon
	}
	return ev, nil
}
