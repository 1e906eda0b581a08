package pmu

import (
	"fmt"
	"strings"

	"golang.org/x/sys/unix"
)

// plm is a set of privilege levels, as in libpfm4's PFM_PLM0 (kernel),
// PFM_PLM3 (user) and PFM_PLMH (hypervisor).
type plm uint8

const (
	plmKernel plm = 1 << iota
	plmUser
	plmHyp
	plmAll = plmKernel | plmUser | plmHyp
)

// levels is what an event's modifiers asked for.
type levels struct {
	set    bool // some of u, k, h was given
	plm    plm
	vmxSet bool // some of mg, mh was given
	vmx    plm  // plmUser = guest, plmKernel = host, as libpfm4 encodes them
}

// parseLevel applies one privilege modifier ("u", "k", "h", "uk", "u=0",
// "mg", "mh=1") to l. It reports false for anything else.
func (l *levels) parseLevel(mod string) (bool, error) {
	name, val, hasVal := strings.Cut(strings.ToLower(mod), "=")
	// perf-style letter runs ("uk") are accepted as well as libpfm4's
	// one-letter modifiers; a value applies to one letter only.
	letters := name != "" && strings.Trim(name, "ukh") == "" && (!hasVal || len(name) == 1)
	if !letters && name != "mg" && name != "mh" {
		return false, nil
	}
	on := true
	if hasVal {
		switch val {
		case "0":
			on = false
		case "1":
		default:
			return true, fmt.Errorf("modifier %q: value must be 0 or 1", mod)
		}
	}
	switch name {
	case "mg":
		l.vmxSet = true
		if on {
			l.vmx |= plmUser
		}
		return true, nil
	case "mh":
		l.vmxSet = true
		if on {
			l.vmx |= plmKernel
		}
		return true, nil
	}
	l.set = true
	if !on {
		return true, nil
	}
	for _, c := range name {
		switch c {
		case 'u':
			l.plm |= plmUser
		case 'k':
			l.plm |= plmKernel
		case 'h':
			l.plm |= plmHyp
		}
	}
	return true, nil
}

// levelsFrom parses the modifiers of a libpfm4-style name.
func levelsFrom(name string, mods []string) (levels, error) {
	var l levels
	for _, m := range mods {
		ok, err := l.parseLevel(m)
		if err != nil {
			return levels{}, fmt.Errorf("event %q: %w", name, err)
		}
		if !ok {
			return levels{}, fmt.Errorf("event %q: unknown modifier %q (want u, k, h, mg or mh)", name, m)
		}
	}
	return l, nil
}

// bits turns the request into perf exclude bits the way libpfm4's
// perf_event layer does: without u/k/h the default is user+kernel
// (PFM_PLM0|PFM_PLM3, what pmdaperfevent passes), guests are excluded
// unless mg is given, and levels the core PMU cannot filter are never
// excluded (so exclude_hv stays 0 on Intel, whose PMU cannot filter the
// hypervisor, and is 1 on AMD and on machines with no core PMU).
func (l levels) bits(supported plm) uint64 {
	p := plmKernel | plmUser
	if l.set {
		p = l.plm
	}
	vmx := plmKernel
	if l.vmxSet {
		vmx = l.vmx
	}
	p |= ^supported & plmAll
	vmx |= ^supported & plmAll
	var b uint64
	if p&plmUser == 0 {
		b |= unix.PerfBitExcludeUser
	}
	if p&plmKernel == 0 {
		b |= unix.PerfBitExcludeKernel
	}
	if p&plmHyp == 0 {
		b |= unix.PerfBitExcludeHv
	}
	if vmx&plmUser == 0 {
		b |= unix.PerfBitExcludeGuest
	}
	if vmx&plmKernel == 0 {
		b |= unix.PerfBitExcludeHost
	}
	return b
}

// supportedPLM is the set of privilege levels libpfm4 believes the core
// PMU can filter, which decides the default exclude bits of every event it
// encodes: Intel core PMUs filter user and kernel only, AMD ones also the
// hypervisor, and without a core PMU libpfm4 assumes all three.
func (fs *FS) supportedPLM() plm {
	fs.once.Do(func() {
		fs.plm = plmAll
		cpu, err := fs.CPUInfo()
		if err != nil || !fs.hasCorePMU() {
			return
		}
		if cpu.Vendor == "GenuineIntel" {
			fs.plm = plmKernel | plmUser
		}
	})
	return fs.plm
}
