package pmu

import (
	"runtime"
	"slices"

	"perfevent/internal/pfm"
)

// catalogSource, when set, gives one libpfm4 build's PMUs in the order of
// their ids for detection to walk; tests swap in small ones. Unset, the
// generated catalog is walked by its sketches (see detectCatalog).
var catalogSource func(arch string) []*pfm.PMU

// detectCatalog is Detect on the PMUs of the libpfm4 build for arch in
// the order of their ids, as pfm_for_all_pmus walks them (the generated
// index holds them in that order: TestIndexMatchesTables). Detection reads five fields
// of every PMU of the build, and the generated catalog's sketches hold
// just those in a few pages, where its PMUs span forty: a start touches
// those pages for the first time, at some microseconds each.
func detectCatalog(cpu CPUInfo, arch string, device func(string) bool) []*pfm.PMU {
	if catalogSource != nil {
		return Detect(cpu, catalogSource(arch), device)
	}
	return pfm.SelectByID(arch, func(p *pfm.PMU) bool { return detects(cpu, p, device) })
}

// arch is the libpfm4 build a CPU belongs to: the machine's, which for
// a fixture need not be the one the agent runs on.
func (c CPUInfo) arch() string {
	switch {
	case c.Vendor != "":
		return "amd64"
	case c.Implementer != 0 || c.Part != 0:
		return "arm64"
	case c.PVR != 0:
		return "ppc64le"
	}
	// Every build has the generic perf PMUs; an architecture libpfm4's
	// catalog lacks (s390x here) still gets those.
	if slices.Contains(pfm.Archs, runtime.GOARCH) {
		return runtime.GOARCH
	}
	return "amd64"
}
