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

// resolveLibpfm encodes a name as libpfm4 does for the C agent, among the
// PMUs libpfm4 finds on this machine, in libpfm4's order. Uncore and RAPL
// events count on the CPUs of the kernel PMU they open through, and a
// core event on a hybrid machine on the CPUs of its kernel PMU.
func (fs *FS) resolveLibpfm(name string) (Event, error) {
	enc, err := pfm.Encode(name, fs.pfmEnv(), fs.libpfmNames())
	if err != nil {
		return Event{}, err
	}
	ev := Event{
		PMU:    enc.PMU.Name,
		Attr:   enc.Attr,
		Source: "libpfm4 " + enc.FullName,
	}
	if enc.FullName == "" {
		// libpfm4 names no TOPDOWN_M metric: the name as given.
		ev.Source = "libpfm4 " + name
	}
	if k := fs.kernelPMUOf(enc); k != nil {
		ev.CPUs = slices.Clone(k.CPUs)
	}
	if enc.CPU >= 0 {
		ev.CPUs = []int{enc.CPU}
	}
	// The kernel's scale and unit for the same encoding, if it has one:
	// RAPL counts in units of 2^-32 J, IMC CAS counts in 64-byte lines.
	if scale, unit, ok := fs.ScaleFor(ev); ok {
		ev.Scale, ev.Unit = scale, unit
	}
	return ev, nil
}

// pfmEnv tells the encoders the perf_event type of a kernel PMU.
func (fs *FS) pfmEnv() pfm.Env {
	return pfm.Env{Arch: fs.libpfmArch(), IntelArch: fs.IntelArch, PerfType: func(name string) (uint32, error) {
		if !isPathElem(name) {
			return 0, fmt.Errorf("no kernel PMU %q", name)
		}
		s, err := fs.typeText(name)
		if err != nil {
			return 0, err
		}
		v, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			return 0, fmt.Errorf("%s: type %q is not a number", filepath.Join(fs.devicesDir(), name, "type"), s)
		}
		return uint32(v), nil
	}}
}

// kernelPMUOf is the kernel PMU an encoded event opens through: the one
// libpfm4 names (perf_name) for uncore and RAPL PMUs, else the sysfs PMU
// of the event's type when that PMU covers only some CPUs (cpu_core and
// cpu_atom on hybrid Intel). Nil means every online CPU.
func (fs *FS) kernelPMUOf(enc pfm.Encoding) *PMU {
	if n := enc.PMU.PerfName; n != "" {
		if k, ok := fs.perfNamePMU(n); ok {
			if p, err := fs.PMU(k); err == nil {
				return p
			}
		}
		return nil
	}
	if enc.Attr.Type != unix.PERF_TYPE_RAW && enc.Attr.Type < unix.PERF_TYPE_MAX {
		return nil
	}
	for _, n := range []string{"cpu_core", "cpu_atom"} {
		if p, err := fs.PMU(n); err == nil && p.Type == enc.Attr.Type {
			return p
		}
	}
	return nil
}

// perfNamePMU is the kernel PMU a libpfm4 perf_name stands for: the
// first of its comma-separated names that the kernel has, as libpfm4
// after 4.13 picks it ("armv8_cortex_a57,armv8_pmuv3_0,armv8_pmuv3").
func (fs *FS) perfNamePMU(perfName string) (string, bool) {
	for _, n := range strings.Split(perfName, ",") {
		if _, err := fs.pfmEnv().PerfType(n); err == nil {
			return n, true
		}
	}
	return "", false
}

// raplEvent maps the C agent's RAPL: names, which it reads from
// /dev/cpu/N/msr, onto the kernel's power PMU events that count the same
// energy. Its power-limit names (THERMAL_SPEC, MINIMUM_POWER,
// MAXIMUM_POWER) are settings, not counters, and have no perf event. A
// switch, not a map, so that no start of the agent spends time building
// it.
func raplEvent(name string) (string, bool) {
	switch name {
	case "RAPL:PACKAGE_ENERGY":
		return "energy-pkg", true
	case "RAPL:PP0_ENERGY":
		return "energy-cores", true
	case "RAPL:PP1_ENERGY":
		return "energy-gpu", true
	case "RAPL:DRAM_ENERGY":
		return "energy-ram", true
	}
	return "", false
}

func (fs *FS) resolveRAPL(name string) (Event, error) {
	ev, ok := raplEvent(name)
	if !ok {
		return Event{}, fmt.Errorf("event %q: only RAPL:PACKAGE_ENERGY, RAPL:PP0_ENERGY, RAPL:PP1_ENERGY and RAPL:DRAM_ENERGY have a perf event (the kernel's power PMU); the C agent's power limits are read from MSRs, which this agent does not do", name)
	}
	e, found, err := fs.resolveDynamic("power."+ev, Options{})
	if !found || err != nil {
		if err == nil {
			err = errors.New("no power PMU")
		}
		return Event{}, fmt.Errorf("event %q is the kernel's power/%s: %w", name, ev, err)
	}
	e.Source = "RAPL as " + e.Source
	return e, nil
}

// Suggest returns up to three event names of the PMUs libpfm4 finds here,
// and of the vendor PMUs, that are closest to name (edit distance, ignoring case), nearest first,
// each with its PMU prefix, for an unknown name's error.
func (fs *FS) Suggest(name string) []string {
	_, ev, ok := strings.Cut(name, "::")
	if !ok {
		ev = name
	}
	ev, _, _ = strings.Cut(ev, ":")
	var names []string
	for _, p := range fs.presentTables() {
		for i := range p.Events {
			names = append(names, p.Name+"::"+p.Events[i].Name)
		}
	}
	for _, vp := range fs.VendorPMUs() {
		evs, _ := vp.Events()
		for _, e := range evs {
			names = append(names, vp.Name+"::"+e.Name)
		}
	}
	return nearest(ev, names, func(n string) string {
		_, e, _ := strings.Cut(n, "::")
		return e
	})
}

// editDistance is Levenshtein's distance between two strings, by bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// SuggestAttr returns, for a libpfm4 name whose unit mask or modifier
// libpfm4 refused, up to three of the event's own unit masks and
// modifiers closest to the first attribute it does not have, as
// "EVENT:NAME". It returns nil when the event or the culprit is not found.
func (fs *FS) SuggestAttr(name string) []string {
	pfx, rest, prefixed := strings.Cut(name, "::")
	if !prefixed {
		pfx, rest = "", name
	}
	evName, attrs, _ := strings.Cut(rest, ":")
	p, ev := fs.findCatalogEvent(pfx, evName)
	if ev == nil {
		return nil
	}
	var own []string
	for _, u := range ev.Umasks {
		if belongs(p, u.Model, u.Flags) {
			own = append(own, u.Name)
		}
	}
	for i, m := range p.Modifiers {
		if m.Name != "" && (ev.ModMask == 0 || ev.ModMask&(1<<i) != 0) {
			own = append(own, m.Name)
		}
	}
	for _, a := range strings.Split(attrs, ":") {
		a, _, _ = strings.Cut(a, "=")
		if a == "" || slices.ContainsFunc(own, func(o string) bool { return strings.EqualFold(o, a) }) || isPerfModifier(a) {
			continue
		}
		var full []string
		for _, o := range own {
			full = append(full, ev.Name+":"+o)
		}
		return nearest(a, full, func(f string) string {
			_, o, _ := strings.Cut(f, ":")
			return o
		})
	}
	return nil
}

// isPerfModifier reports the modifiers libpfm4's perf layer adds to every
// event.
func isPerfModifier(a string) bool {
	switch strings.ToLower(a) {
	case "u", "k", "h", "period", "freq", "precise", "excl", "mg", "mh", "cpu", "pinned", "hw_smpl":
		return true
	}
	return false
}

// findCatalogEvent finds an event as libpfm4 does: in the PMU named, or
// else in the first present PMU, in libpfm4's order, that has it.
func (fs *FS) findCatalogEvent(pfx, evName string) (*pfm.PMU, *pfm.Event) {
	tables := fs.presentTables()
	slices.SortStableFunc(tables, func(a, b *pfm.PMU) int { return a.Order - b.Order })
	for _, p := range tables {
		if pfx != "" && !strings.EqualFold(pfx, p.Name) {
			continue
		}
		for i := range p.Events {
			e := &p.Events[i]
			if belongs(p, e.Model, e.Flags) && strings.EqualFold(e.Name, evName) {
				return p, e
			}
		}
	}
	return nil, nil
}

// presentTables loads the tables of the PMUs libpfm4 finds here, in the
// order of their ids.
func (fs *FS) presentTables() []*pfm.PMU {
	var tables []*pfm.PMU
	for _, h := range fs.LibpfmPMUs() {
		if p, err := pfm.LoadArch(fs.libpfmArch(), h.Name); err == nil {
			tables = append(tables, p)
		}
	}
	return tables
}

// belongs reports whether an event or unit mask of a table that several
// PMU models share is one of p's: Intel entries may name the one model
// they are for, AMD ones the range of revisions (flags bits 8-15 from,
// 16-23 until, 0 for no limit) they exist in.
func belongs(p *pfm.PMU, model uint16, flags uint32) bool {
	if model != 0 && int(model) != p.ID {
		return false
	}
	if p.Family != pfm.FamilyAMD64 {
		return true
	}
	from, till := int(flags>>8&0xff), int(flags>>16&0xff)
	if till == 0 {
		till = 0xff
	}
	return p.Rev >= from && p.Rev <= till
}

// nearest returns up to three of cands whose key is closest to want
// (edit distance, ignoring case, within a third of its length or 2),
// nearest first.
func nearest(want string, cands []string, key func(string) string) []string {
	type cand struct {
		name string
		d    int
	}
	want = strings.ToUpper(want)
	var cs []cand
	for _, c := range cands {
		if d := editDistance(want, strings.ToUpper(key(c))); d <= max(2, len(want)/3) {
			cs = append(cs, cand{c, d})
		}
	}
	slices.SortStableFunc(cs, func(a, b cand) int { return a.d - b.d })
	var out []string
	for _, c := range cs {
		if len(out) == 3 {
			break
		}
		out = append(out, c.name)
	}
	return out
}
