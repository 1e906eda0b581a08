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
	enc, err := pfm.Encode(name, fs.pfmEnv(), fs.PresentNames())
	if err != nil {
		return Event{}, err
	}
	ev := Event{
		PMU:    enc.PMU.Name,
		Attr:   enc.Attr,
		Source: "libpfm4 " + enc.FullName,
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
		s, err := readTrimmed(filepath.Join(fs.devicesDir(), name, "type"))
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
		if p, err := fs.PMU(n); err == nil {
			return p
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

// raplNames maps the C agent's RAPL: names, which it reads from
// /dev/cpu/N/msr, onto the kernel's power PMU events that count the same
// energy. Its power-limit names (THERMAL_SPEC, MINIMUM_POWER,
// MAXIMUM_POWER) are settings, not counters, and have no perf event.
var raplNames = map[string]string{
	"RAPL:PACKAGE_ENERGY": "energy-pkg",
	"RAPL:PP0_ENERGY":     "energy-cores",
	"RAPL:PP1_ENERGY":     "energy-gpu",
	"RAPL:DRAM_ENERGY":    "energy-ram",
}

func (fs *FS) resolveRAPL(name string) (Event, error) {
	ev, ok := raplNames[name]
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

// Suggest returns up to three event names of the PMUs libpfm4 finds here
// that are closest to name (edit distance, ignoring case), nearest first,
// each with its PMU prefix, for an unknown name's error.
func (fs *FS) Suggest(name string) []string {
	_, ev, ok := strings.Cut(name, "::")
	if !ok {
		ev = name
	}
	ev, _, _ = strings.Cut(ev, ":")
	want := strings.ToUpper(ev)
	type cand struct {
		name string
		d    int
	}
	var cands []cand
	for _, pn := range fs.PresentNames() {
		p, err := pfm.LoadArch(fs.libpfmArch(), pn)
		if err != nil {
			continue
		}
		for i := range p.Events {
			e := &p.Events[i]
			d := editDistance(want, strings.ToUpper(e.Name))
			if d <= max(2, len(want)/3) {
				cands = append(cands, cand{p.Name + "::" + e.Name, d})
			}
		}
	}
	slices.SortStableFunc(cands, func(a, b cand) int { return a.d - b.d })
	var out []string
	for _, c := range cands {
		if len(out) == 3 {
			break
		}
		out = append(out, c.name)
	}
	return out
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
