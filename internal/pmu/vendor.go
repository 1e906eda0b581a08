package pmu

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"perfevent/internal/vendorevents"

	"golang.org/x/sys/unix"
)

// vendorPMU is a vendor table (package vendorevents) that this machine
// has: its CPU matches and the kernel exposes the PMU that counts it.
type vendorPMU struct {
	*vendorevents.PMU
	// kernel names the kernel PMUs that count the events: one for a core
	// PMU, every box of an uncore unit in box order (uncore_imc_0, ...).
	kernel []string
}

// kernelOrder puts the P-cores first, as libpfm4 puts adl_glc before
// adl_grt, so that a bare name shared by both core types means the P-core
// one; the uncore units come last.
func kernelOrder(k string) int {
	switch k {
	case "cpu_core":
		return 0
	case "cpu", "armv8":
		return 1
	case "cpu_atom":
		return 2
	case "cpu_lowpower":
		return 3
	}
	return 4
}

// VendorPMUs returns the vendor PMUs of this machine, named as perfevent.conf
// sections and PMU:: prefixes use them ("mtl_core", "srf_unc_imc",
// "arm_ac78"): the models libpfm4 lacks, from Intel's and Arm's own event
// lists. They count only when the kernel exposes a core PMU, and
// PresentNames lists them after libpfm4's.
func (fs *FS) VendorPMUs() []*vendorPMU {
	fs.vendorOnce.Do(func() {
		cpu, err := fs.CPUInfo()
		if err != nil || !fs.hasCorePMU() {
			return
		}
		names, _ := fs.PMUNames()
		if cpu.Implementer == 0 && cpu.Part == 0 {
			for _, p := range vendorevents.Detect(vendorevents.CPU{Vendor: cpu.Vendor, Family: cpu.Family, Model: cpu.Model, Stepping: cpu.Stepping}) {
				if k := kernelPMUsFor(p, names); len(k) > 0 {
					fs.vendor = append(fs.vendor, &vendorPMU{PMU: p, kernel: k})
				}
			}
		}
		// Every kind of Arm core, each on its own core PMU: a big.LITTLE
		// machine has one per kind. An x86 cpuinfo (the one with a
		// vendor_id) holds no Arm core, and reading it all again, every
		// processor of a large machine, would find none.
		var cores []armCore
		if cpu.Vendor == "" {
			cores = fs.armCores()
		}
		for _, core := range cores {
			for _, p := range vendorevents.Detect(vendorevents.CPU{Implementer: core.implementer, Part: core.part}) {
				if k := fs.armKernelPMU(p, core.cpus, names); k != "" {
					fs.vendor = append(fs.vendor, &vendorPMU{PMU: p, kernel: []string{k}})
				}
			}
		}
		slices.SortStableFunc(fs.vendor, func(a, b *vendorPMU) int { return kernelOrder(a.Kernel) - kernelOrder(b.Kernel) })
	})
	return fs.vendor
}

// vendorNames are the names of VendorPMUs, which PresentNames lists after
// libpfm4's so that a perfevent.conf section can name them.
func (fs *FS) vendorNames() []string {
	var names []string
	for _, p := range fs.VendorPMUs() {
		names = append(names, p.Name)
	}
	return names
}

// isVendorPMU reports whether name is one of VendorPMUs or a kernel PMU
// that counts one, ignoring case.
func (fs *FS) isVendorPMU(name string) bool {
	for _, p := range fs.VendorPMUs() {
		if strings.EqualFold(p.Name, name) || slices.Contains(p.kernel, name) {
			return true
		}
	}
	return false
}

// kernelPMUsFor finds the kernel PMUs of a vendor table among sysfs's.
func kernelPMUsFor(p *vendorevents.PMU, names []string) []string {
	var out []string
	switch {
	case p.Uncore():
		for _, n := range names {
			if n == p.Kernel {
				out = append(out, n)
			} else if rest, ok := strings.CutPrefix(n, p.Kernel+"_"); ok && rest != "" && strings.Trim(rest, "0123456789") == "" {
				out = append(out, n)
			}
		}
		slices.SortStableFunc(out, func(a, b string) int { return boxNumber(a) - boxNumber(b) })
	default:
		if slices.Contains(names, p.Kernel) {
			out = []string{p.Kernel}
		}
	}
	return out
}

func boxNumber(name string) int {
	i := strings.LastIndexByte(name, '_')
	n, err := strconv.Atoi(name[i+1:])
	if err != nil {
		return -1
	}
	return n
}

// armCore is one kind of Arm core and the CPUs that are of that kind.
type armCore struct {
	implementer, part int
	cpus              []int
}

// armCores gives every kind of Arm core of cpuinfo and its processors,
// kinds in the order first seen: as parseCPUInfo gathered them when it
// read the whole file (an Arm cpuinfo), else from a read of its own.
func (fs *FS) armCores() []armCore {
	if cpu, err := fs.CPUInfo(); err == nil && cpu.coresRead {
		return cpu.cores
	}
	return fs.readArmCores()
}

func (fs *FS) readArmCores() []armCore {
	b, err := os.ReadFile(fs.CPUInfoFile())
	if err != nil {
		return nil
	}
	scan := newCoreScan()
	for _, line := range strings.Split(string(b), "\n") {
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		scan.line(strings.TrimSpace(key), strings.TrimSpace(val))
	}
	return scan.done()
}

// coreScan gathers armCores from cpuinfo's lines, given one by one as
// key and value, trimmed: the processor's number, implementer and part,
// for every processor that has all three. A line whose value is not a
// number is passed over.
type coreScan struct {
	cores           []armCore
	cpu, impl, part int
}

func newCoreScan() coreScan { return coreScan{cpu: -1, impl: -1, part: -1} }

func (s *coreScan) line(key, val string) {
	switch key {
	case "processor", "CPU implementer", "CPU part":
	default:
		return
	}
	n, err := strconv.ParseInt(val, 0, 32)
	if err != nil {
		return
	}
	switch key {
	case "processor":
		s.flush()
		s.cpu, s.impl, s.part = int(n), -1, -1
	case "CPU implementer":
		s.impl = int(n)
	case "CPU part":
		s.part = int(n)
	}
}

func (s *coreScan) flush() {
	if s.cpu < 0 || s.impl < 0 || s.part < 0 {
		return
	}
	i := slices.IndexFunc(s.cores, func(c armCore) bool { return c.implementer == s.impl && c.part == s.part })
	if i < 0 {
		s.cores = append(s.cores, armCore{implementer: s.impl, part: s.part})
		i = len(s.cores) - 1
	}
	s.cores[i].cpus = append(s.cores[i].cpus, s.cpu)
}

// done gives the cores of every line given.
func (s *coreScan) done() []armCore {
	s.flush()
	return s.cores
}

// armKernelPMU finds the core PMU of one kind of Arm core. Device-tree
// kernels name it after the core (armv8_cortex_a78); ACPI ones number
// them (armv8_pmuv3_0), and the one whose cpus are this core's is the one.
func (fs *FS) armKernelPMU(p *vendorevents.PMU, cpus []int, names []string) string {
	own := "_" + strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(p.Desc, "Arm "), "-", "_"))
	for _, n := range names {
		if (strings.HasPrefix(n, "armv8_") || strings.HasPrefix(n, "armv9_")) && strings.HasSuffix(n, own) {
			return n
		}
	}
	for _, n := range names {
		if !strings.HasPrefix(n, "armv8_pmuv3") && !strings.HasPrefix(n, "armv9_pmuv3") {
			continue
		}
		k, err := fs.PMU(n)
		if err != nil {
			continue
		}
		if k.CPUs == nil || slices.ContainsFunc(cpus, func(c int) bool { return slices.Contains(k.CPUs, c) }) {
			return n
		}
	}
	return ""
}

// resolveVendor handles the names of the vendor PMUs found here: Intel's
// and Arm's spellings ("INST_RETIRED.ANY", "UNC_M_CAS_COUNT_SCH0.RD",
// "L1D_CACHE_REFILL"), optionally prefixed by the vendor PMU
// ("srf_unc_imc::...") or by the kernel PMU, which for an uncore unit
// picks the box ("uncore_imc_3::..."), and followed by ":u", ":k" or ":h".
// libpfm4's spelling, EVENT:UMASK, is also accepted for EVENT.UMASK. It
// reports errNotLocal when no vendor PMU here has the event.
func (fs *FS) resolveVendor(name string) (Event, error) {
	pmus := fs.VendorPMUs()
	if len(pmus) == 0 {
		return Event{}, errNotLocal
	}
	pfx, rest, prefixed := strings.Cut(name, "::")
	if !prefixed {
		pfx, rest = "", name
	}
	base, mods, _ := strings.Cut(rest, ":")
	modList := splitMods(mods)
	for _, vp := range pmus {
		box := ""
		if pfx != "" {
			switch {
			case strings.EqualFold(pfx, vp.Name):
			case slices.Contains(vp.kernel, pfx):
				box = pfx
			default:
				continue
			}
		}
		ev, ok := vp.Event(base)
		mods := modList
		if !ok && len(modList) > 0 {
			// libpfm4's EVENT:UMASK for Intel's EVENT.UMASK.
			ev, ok = vp.Event(base + "." + modList[0])
			mods = modList[1:]
		}
		if !ok {
			continue
		}
		return fs.vendorEvent(name, vp, ev, box, mods)
	}
	return Event{}, errNotLocal
}

// vendorEvent encodes a vendor event through the kernel PMU's format
// files, as perf encodes the same JSON.
func (fs *FS) vendorEvent(name string, vp *vendorPMU, ev vendorevents.Event, box string, mods []string) (Event, error) {
	if box == "" {
		box = vp.kernel[0]
	}
	k, err := fs.PMU(box)
	if err != nil {
		return Event{}, fmt.Errorf("event %q: %w", name, err)
	}
	terms, err := ParseTerms(ev.Terms)
	if err != nil {
		return Event{}, fmt.Errorf("event %q: %s::%s: %w", name, vp.Name, ev.Name, err)
	}
	terms = foldUmaskExt(k, terms)
	enc, err := k.Encode(&PMUEvent{Name: ev.Name, Path: vp.Name + "::" + ev.Name + " (" + ev.Terms + ")", Terms: terms}, nil)
	if err != nil {
		return Event{}, fmt.Errorf("event %q: %w", name, err)
	}
	e := Event{
		PMU:    k.Name,
		Attr:   unix.PerfEventAttr{Type: k.Type, Config: enc.Config, Ext1: enc.Config1, Ext2: enc.Config2},
		CPUs:   slices.Clone(k.CPUs),
		Source: fmt.Sprintf("%s %s::%s on %s (%s)", vp.Catalog.Source, vp.Name, ev.Name, k.Name, ev.Terms),
	}
	if vp.Uncore() {
		// Uncore PMUs count every privilege level and refuse exclude bits.
		if len(mods) > 0 {
			return Event{}, fmt.Errorf("event %q: %s is an uncore event, which takes no modifiers", name, ev.Name)
		}
		if len(vp.kernel) > 1 {
			e.Source += fmt.Sprintf("; one of %d boxes, %s::%s counts another", len(vp.kernel), vp.kernel[len(vp.kernel)-1], ev.Name)
		}
		return e, nil
	}
	// A core event gets the exclude bits libpfm4 gives its own names.
	l, err := levelsFrom(name, mods)
	if err != nil {
		return Event{}, err
	}
	e.Attr.Bits = l.bits(fs.supportedPLM())
	return e, nil
}

// foldUmaskExt places Intel's UMaskExt: in a format of its own where the
// PMU has one, else above the umask's low byte, where the kernel's CHA
// format continues the umask (umask=config:8-15,32-55 on Sapphire
// Rapids, 32-63 on Granite Rapids and Sierra Forest).
func foldUmaskExt(p *PMU, terms []Term) []Term {
	if _, ok := p.Formats["umask_ext"]; ok {
		return terms
	}
	i := slices.IndexFunc(terms, func(t Term) bool { return t.Name == "umask_ext" })
	if i < 0 {
		return terms
	}
	ext := terms[i].Value
	out := slices.Delete(slices.Clone(terms), i, i+1)
	for j := range out {
		if out[j].Name == "umask" {
			out[j].Value |= ext << 8
		}
	}
	return out
}

// vendorListings lists the events of the vendor PMUs found here.
func (fs *FS) vendorListings() []Listing {
	var ls []Listing
	// The bare name is an alias only where it means this PMU's event:
	// on a hybrid CPU the P-core's, which VendorPMUs lists first.
	bare := map[string]bool{}
	for _, vp := range fs.VendorPMUs() {
		evs, err := vp.Events()
		if err != nil {
			continue
		}
		for _, ev := range evs {
			l := Listing{Name: vp.Name + "::" + ev.Name, Kind: KindVendor, Group: vp.Name, Desc: ev.Desc, Scale: 1}
			if !bare[ev.Name] {
				bare[ev.Name] = true
				l.Aliases = []string{ev.Name}
			}
			ls = append(ls, l)
		}
	}
	return ls
}

// vendorOfKernel returns the vendor PMU a kernel PMU counts for, if any.
func (fs *FS) vendorOfKernel(name string) *vendorPMU {
	for _, vp := range fs.VendorPMUs() {
		if slices.Contains(vp.kernel, name) {
			return vp
		}
	}
	return nil
}

// vendorTerms gives the terms of a vendor event named inside perf's
// pmu/.../ syntax, when p counts a vendor PMU that has it.
func (fs *FS) vendorTerms(p *PMU, name string) ([]Term, bool, error) {
	vp := fs.vendorOfKernel(p.Name)
	if vp == nil {
		return nil, false, nil
	}
	ev, ok := vp.Event(name)
	if !ok {
		return nil, false, nil
	}
	terms, err := ParseTerms(ev.Terms)
	if err != nil {
		return nil, true, fmt.Errorf("%s::%s: %w", vp.Name, ev.Name, err)
	}
	return foldUmaskExt(p, terms), true, nil
}

// vendorName finds the vendor event that p encodes as enc, for --check to
// show what a perf-syntax line counts: "mtl_core::INST_RETIRED.ANY_P".
func (fs *FS) vendorName(p *PMU, enc Encoding) string {
	vp := fs.vendorOfKernel(p.Name)
	if vp == nil {
		return ""
	}
	evs, _ := vp.Events()
	for _, ev := range evs {
		terms, err := ParseTerms(ev.Terms)
		if err != nil {
			continue
		}
		e, err := p.Encode(&PMUEvent{Name: ev.Name, Terms: foldUmaskExt(p, terms)}, nil)
		if err == nil && e == enc {
			return vp.Name + "::" + ev.Name
		}
	}
	return ""
}
