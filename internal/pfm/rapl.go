package pfm

// The encoder of Intel's RAPL energy counters (libpfm4's "rapl" PMU),
// which perf_events offers as its "power" PMU. AMD's (amd64_rapl) is an
// AMD table, and the AMD encoder gives libpfm4's answer for it too.

import (
	"slices"

	"golang.org/x/sys/unix"
)

// initRAPL is pfm_rapl_detect's choice of table: the CPU model says which
// energy counters the package has (DRAM on servers, GPU and PSYS on
// clients). A model with no table of its own keeps the compiled-in one.
func initRAPL(p *PMU, env Env) *PMU {
	for _, mt := range p.ModelTables {
		if slices.Contains(mt.CPUModels, env.IntelModel) {
			q := *p
			q.Events = mt.Events
			return &q
		}
	}
	return p
}

func encodeRAPL(r *request) error {
	// RAPL events have no unit masks or modifiers. libpfm4 runs them
	// through the intel_x86 perf step, which keeps the perf attributes a
	// PMU without privilege levels or precise sampling can use.
	keep := func(idx int) bool {
		switch idx {
		case perfPrecise, perfHWSmpl, perfH:
			return false
		}
		return perfKeep(r.pmu, idx)
	}
	if err := r.parseAttrs(nil, keep); err != nil {
		return err
	}
	r.addf("%s", r.event.Name)
	// Unlike the uncore encoders, the intel_x86 perf step falls back to
	// the core PMU's type when the kernel has no "power" PMU.
	r.attr.Type = unix.PERF_TYPE_RAW
	if t, err := r.kernelPMUType(); err == nil {
		r.attr.Type = t
	}
	r.attr.Config = r.event.Code
	return nil
}
