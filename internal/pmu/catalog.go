package pmu

import (
	"runtime"
	"slices"

	"perfevent/internal/pfm"
)

// catalogSource gives one libpfm4 build's PMUs in the order of their ids;
// tests swap in small ones.
var catalogSource = pfm.ArchPMUsByID

// catalog returns the PMUs of the libpfm4 build for arch in the order of
// their ids, as pfm_for_all_pmus walks them. The result is shared. The
// generated index holds them in that order (TestIndexMatchesTables), so
// no start sorts them, nor reads every PMU to check the order.
func catalog(arch string) []*pfm.PMU {
	return catalogSource(arch)
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
