package pfm

// The encoder of Intel's RAPL energy counters (libpfm4's "rapl" PMU),
// which perf_events offers as its "power" PMU. AMD's (amd64_rapl) is an
// AMD table and goes through the AMD encoder, to the same kernel PMU.

func init() { familyEncoders[FamilyIntelRAPL] = encodeRAPL }

// perfTypeRaw is PERF_TYPE_RAW.
const perfTypeRaw = 4

func encodeRAPL(r *request) error {
	p, ev := r.pmu, r.event
	// RAPL events have no unit masks or modifiers; libpfm4 treats them as
	// intel_x86 events, whose perf step keeps only what a PMU without
	// privilege levels or precise sampling can use.
	noSmpl := p.Flags&pmuFlagNoSmpl != 0
	pattrs := withPerfAttrs(nil, func(a pattr) bool {
		switch a.idx {
		case perfPrecise, perfHWSmpl, perfH:
			return true
		case perfFreq, perfPeriod:
			return noSmpl
		case perfU, perfK, perfMG, perfMH:
			return p.SupportedPLM == 0
		}
		return false
	})
	vals, err := r.parseAttrs(pattrs)
	if err != nil {
		return err
	}
	var f fstr
	f.add("%s", ev.Name)
	// Unlike the other uncore encoders, the intel_x86 perf step falls back
	// to the core PMU's type when the kernel has no "power" PMU.
	r.attr.Type = perfTypeRaw
	if p.PerfName != "" && r.env.PerfType != nil {
		if t, err := r.env.PerfType(p.PerfName); err == nil {
			r.attr.Type = t
		}
	}
	r.attr.Config = ev.Code
	return r.perfFinish(pattrs, vals, &f)
}
