package pmu

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"perfevent/internal/pfm"
)

// Kind groups listed events the way perf list does.
type Kind string

const (
	KindHardware   Kind = "hardware"   // generic hardware events, any PMU section
	KindCache      Kind = "cache"      // generic cache events, any PMU section
	KindSoftware   Kind = "software"   // software events, any PMU section
	KindTracepoint Kind = "tracepoint" // tracefs events, any PMU section
	KindDynamic    Kind = "dynamic"    // sysfs pmu.event, [dynamic] section only
	KindLibpfm     Kind = "libpfm4"    // libpfm4's tables for this machine's PMUs, any PMU section
	KindVendor     Kind = "vendor"     // Intel's or Arm's own lists, for the models libpfm4 lacks, any PMU section
)

// Listing is one event pmdaperfevent --list-events shows.
type Listing struct {
	Name    string   // what to write in perfevent.conf
	Aliases []string // other accepted spellings
	Kind    Kind
	// Group is the PMU for dynamic events, the subsystem for
	// tracepoints and empty otherwise, so long lists can be shown in
	// sections.
	Group string
	Desc  string  // what it counts, or the sysfs encoding
	Scale float64 // sysfs .scale, 1 otherwise
	Unit  string
	// Err says why a sysfs event cannot be resolved (bad term, bad
	// format file); such events are still listed, as the C agent exports
	// a metric for every sysfs event.
	Err error
	// Umasks are a libpfm4 event's unit masks, written after the event
	// name and a colon ("MEM_LOAD_RETIRED:L3_HIT").
	Umasks []UmaskListing
	// NeedsParams marks a sysfs event with "term=?" placeholders, which
	// cannot be opened until perfevent.conf fills them in.
	NeedsParams bool
	// Probe is what opening it here gave; see FS.Probe.
	Probe ProbeResult
}

// UmaskListing is one unit mask of a listed libpfm4 event.
type UmaskListing struct {
	Name, Desc string
	Default    bool // taken when the name gives none of its group
}

// ListEvents lists every event name Resolve accepts on this machine, in
// perf list's order: hardware, cache, software, then the libpfm4 tables of
// the PMUs libpfm4 finds here (but its generic perf PMUs, whose events are
// the first three kinds), [dynamic] sysfs events
// (PMUs and their events sorted by name, then the synthetic software PMU,
// as the C agent orders them), tracepoints. Whether an event can actually be
// opened is for Probe to find out. The returned error collects
// non-fatal problems (an unreadable PMU, no tracefs); the listings are
// valid either way.
func (fs *FS) ListEvents() ([]Listing, error) {
	var ls []Listing
	var errs []error
	for _, g := range hardwareEvents {
		ls = append(ls, genericListing(g, KindHardware))
	}
	for _, g := range cacheEvents() {
		ls = append(ls, genericListing(g, KindCache))
	}
	for _, g := range softwareEvents {
		ls = append(ls, genericListing(g, KindSoftware))
	}

	ls = append(ls, fs.catalogListings()...)
	ls = append(ls, fs.vendorListings()...)

	pmus, err := fs.PMUs()
	if err != nil {
		errs = append(errs, err)
	}
	for _, p := range pmus {
		for i := range p.Events {
			pe := &p.Events[i]
			l := Listing{Name: p.Name + "." + pe.Name, Kind: KindDynamic, Group: p.Name, Desc: pe.Text, Scale: pe.Scale, Unit: pe.Unit}
			l.NeedsParams = needsParams(pe)
			if _, err := p.Encode(pe, nil); err != nil && !l.NeedsParams {
				l.Err = err
			}
			ls = append(ls, l)
		}
	}
	// The C agent appends its synthetic software PMU after the sorted
	// sysfs ones; keeping its order keeps its metric order.
	for _, name := range dynamicSoftware {
		g, _ := genericNamed(name)
		ls = append(ls, Listing{Name: "software." + name, Kind: KindDynamic, Group: "software", Desc: g.Desc, Scale: 1})
	}

	tps, err := fs.Tracepoints()
	if err != nil {
		errs = append(errs, err)
	}
	for _, tp := range tps {
		sub, _, _ := strings.Cut(tp, ":")
		ls = append(ls, Listing{Name: tp, Kind: KindTracepoint, Group: sub, Scale: 1})
	}
	return ls, errors.Join(errs...)
}

// catalogListings lists the events of libpfm4's tables for the PMUs it
// finds here, in libpfm4's order of PMUs and each table's order.
func (fs *FS) catalogListings() []Listing {
	var ls []Listing
	for _, p := range fs.presentTables() {
		if p.Family == pfm.FamilyPerf {
			continue
		}
		// libpfm4 detects an AMD L3 by the CPU alone, but encodes its
		// events only through the kernel's PMU.
		var missing error
		if p.PerfName != "" {
			if _, ok := fs.perfNamePMU(p.PerfName); !ok {
				missing = fmt.Errorf("kernel PMU %s not found", p.PerfName)
			}
		}
		for i := range p.Events {
			e := &p.Events[i]
			if !belongs(p, e.Model, e.Flags) {
				continue
			}
			l := Listing{Name: p.Name + "::" + e.Name, Kind: KindLibpfm, Group: p.Name, Desc: firstLine(e.Desc), Scale: 1, Err: missing}
			if e.Equiv != "" {
				l.Desc = "alias for " + e.Equiv
			}
			for _, u := range e.Umasks {
				if !belongs(p, u.Model, u.Flags) {
					continue
				}
				l.Umasks = append(l.Umasks, UmaskListing{Name: u.Name, Desc: firstLine(u.Desc), Default: umaskDefault(p.Family, u.Flags)})
			}
			ls = append(ls, l)
		}
	}
	return ls
}

// umaskDefault reports libpfm4's default flag of a unit mask: INTEL_X86_DFL
// and AMD64_FL_DFL.
func umaskDefault(f pfm.Family, flags uint32) bool {
	switch f {
	case pfm.FamilyIntelX86, pfm.FamilyIntelUncore, pfm.FamilyIntelNHMUncore, pfm.FamilyIntelRAPL, pfm.FamilyAMD64:
		return flags&0x8 != 0 // the same bit in both families
	}
	return false
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return strings.TrimSpace(s)
}

func needsParams(pe *PMUEvent) bool {
	for _, t := range pe.Terms {
		if t.Param {
			return true
		}
	}
	return false
}

func genericListing(g genericEvent, k Kind) Listing {
	l := Listing{Name: g.Name, Kind: k, Desc: g.Desc, Scale: 1}
	l.Aliases = append(l.Aliases, g.Aliases...)
	l.Aliases = append(l.Aliases, g.Const)
	return l
}

// String renders a listing as one line of --list-events output.
func (l Listing) String() string {
	var b strings.Builder
	b.WriteString(l.Name)
	if len(l.Aliases) > 0 {
		b.WriteString(" OR ")
		b.WriteString(strings.Join(l.Aliases, " OR "))
	}
	fmt.Fprintf(&b, " [%s", l.Kind)
	if l.Desc != "" {
		b.WriteString(": ")
		b.WriteString(l.Desc)
	}
	if l.Scale != 1 && l.Scale != 0 || l.Unit != "" {
		fmt.Fprintf(&b, "; scale %g %s", l.Scale, l.Unit)
	}
	b.WriteString("]")
	if l.Err != nil {
		fmt.Fprintf(&b, " (unusable: %v)", l.Err)
	}
	if m := l.Probe.mark(); m != "" {
		b.WriteString(" " + m)
	}
	for _, u := range l.Umasks {
		fmt.Fprintf(&b, "\n    :%s", u.Name)
		if u.Default {
			b.WriteString(" (default)")
		}
		if u.Desc != "" {
			b.WriteString("  " + u.Desc)
		}
	}
	return b.String()
}

// FilterListings keeps the listings of one PMU and those matching a
// pattern, for --list-events' --pmu and --match. pmuName is a libpfm4
// PMU ("skx"), a kernel one ("uncore_imc_0") or "perf" for the generic
// events and tracepoints, which libpfm4 files under its perf PMU. The
// pattern matches names and aliases ignoring case, as a substring, or
// as a glob over the whole name when it has *, ? or [. A libpfm4 event
// matches by its name or by unit masks; in the second case only the
// matching unit masks are kept.
func FilterListings(ls []Listing, pmuName, pattern string) ([]Listing, error) {
	pattern = strings.ToLower(pattern)
	glob := strings.ContainsAny(pattern, "*?[")
	if _, err := path.Match(pattern, ""); glob && err != nil {
		return nil, fmt.Errorf("%q: %v", pattern, err)
	}
	matches := func(s string) bool {
		s = strings.ToLower(s)
		if glob {
			ok, _ := path.Match(pattern, s)
			return ok
		}
		return strings.Contains(s, pattern)
	}
	var out []Listing
	for _, l := range ls {
		if pmuName != "" {
			group := l.Group
			if l.Kind != KindDynamic && l.Kind != KindLibpfm && l.Kind != KindVendor {
				group = "perf"
			}
			if !strings.EqualFold(group, pmuName) {
				continue
			}
		}
		if pattern == "" || matches(l.Name) || slices.ContainsFunc(l.Aliases, matches) {
			out = append(out, l)
			continue
		}
		var kept []UmaskListing
		for _, u := range l.Umasks {
			if matches(u.Name) || matches(l.Name+":"+u.Name) {
				kept = append(kept, u)
			}
		}
		if len(kept) > 0 {
			l.Umasks = kept
			out = append(out, l)
		}
	}
	return out, nil
}

// LibpfmCatalog names the libpfm4 tables package pfm decodes (the
// upstream commit they were generated from), for listings that say where
// each PMU's events come from.
var LibpfmCatalog = pfm.Source()

// CatalogOf says where the events of one listing group come from: the
// libpfm4 tables, a vendor's list (with its commit, the list's version
// and the kernel PMUs that count it), or the kernel's own sysfs and
// tracefs.
func (fs *FS) CatalogOf(k Kind, group string) string {
	switch k {
	case KindLibpfm:
		return LibpfmCatalog
	case KindVendor:
		for _, vp := range fs.VendorPMUs() {
			if vp.Name != group {
				continue
			}
			s := vp.Catalog.String()
			if vp.Version != "-" {
				s += " v" + vp.Version
			}
			on := vp.kernel[0]
			if len(vp.kernel) > 1 {
				on = fmt.Sprintf("%s..%s, %d boxes", vp.kernel[0], vp.kernel[len(vp.kernel)-1], len(vp.kernel))
			}
			return fmt.Sprintf("%s: %s, on %s", s, vp.Desc, on)
		}
	case KindDynamic:
		if group == "software" {
			return "the agent's software PMU"
		}
		return "the kernel's " + path.Join(fs.devicesDir(), group, "events")
	case KindTracepoint:
		return "tracefs"
	case KindHardware, KindCache, KindSoftware:
		return "the kernel's generic events"
	}
	return ""
}

// KnownPMUs lists every name --list-events --pmu accepts here: "perf",
// libpfm4's PMUs (LibpfmPMUs, whose events are listed even where no
// section can be chosen by them), the vendors' (VendorPMUs) and the
// kernel's (PMUNames), sorted and without duplicates.
func (fs *FS) KnownPMUs() []string {
	names := append([]string{"perf"}, fs.libpfmNames()...)
	names = append(names, fs.vendorNames()...)
	kernel, _ := fs.PMUNames()
	names = append(names, kernel...)
	names = append(names, "software")
	slices.Sort(names)
	return slices.Compact(names)
}

// NearestNames returns up to three of names closest to want (edit
// distance, ignoring case), nearest first, for "did you mean" advice.
func NearestNames(want string, names []string) []string {
	return nearest(want, names, func(s string) string { return s })
}
