package catalog

import (
	"fmt"
	"slices"
	"sync"

	"perfevent/internal/ratio"
)

// Sources, cited by each metric. Intel's perfmon files are BSD-3-licensed;
// the formulas below are transcribed from them by hand (linear forms, or
// compound ones over one denominator, with the SMT-off variant of each: a
// thread's own clocks), and a test evaluates each against Intel's own
// formula, which package intelmetrics has generated from the same files.
const (
	srcSKX = "Intel perfmon SKX/metrics/skylakex_metrics.json (TMA 5.01), "
	srcICX = "Intel perfmon ICX/metrics/icelakex_metrics.json (TMA 5.2), "
	srcSPR = "Intel perfmon SPR/metrics/sapphirerapids_metrics.json (TMA 5.x), "
	srcGNR = "Intel perfmon GNR/metrics/graniterapids_metrics.json (TMA 5.2), "
	srcAMD = "AMD Processor Programming Reference (PPR) for Family 19h Model 11h B1 (publication 55901), " +
		"Vol. 1, Performance Monitor Counters: pipeline utilization (PMCx1A0 dispatch slots, PMCx0AA ops dispatched, PMCx0C1 retired ops, PMCx076 cycles, 6 slots a cycle)"
	// Zen 5 dispatches 8 ops a cycle (Zen 4: 6). Its PMCx0AA has two op
	// sources, the decoder (bit 0) and the op cache (bit 1): libpfm4
	// upstream's amd64_fam1ah_zen5 table lists no loop-buffer bit 2.
	srcZen5 = "AMD Processor Programming Reference (PPR) for AMD Family 1Ah Model 02h (Zen 5), Vol. 1, Performance Monitor Counters: " +
		"pipeline utilization (PMCx1A0 dispatch slots: FE_NO_OPS 0x01, BE_STALLS 0x1E, SMT_CONTENTION 0x60; PMCx0AA ops dispatched from the decoder and op cache, umask 0x03; " +
		"PMCx0C1 retired ops; PMCx076 cycles; 8 slots a cycle); event names as libpfm4 upstream's amd64_fam1ah_zen5 table"
	srcZen5UMC = "AMD PPR for Family 1Ah Model 02h (Zen 5), UMC performance counters: CAS commands (event 0x0A), read and write by RdWrMask, 64 bytes each; the kernel's amd_umc PMU"
	srcArm     = "Arm Neoverse N1 PMU guide and Arm telemetry-solution (Apache-2.0) neoverse-n1 topdown methodology, "
	srcArmV3   = "Arm Telemetry Specification for Neoverse V3 (telemetry-solution, Apache-2.0), topdown methodology stage 1, "
	srcArmV2   = "Arm Telemetry Specification for Neoverse V2 (telemetry-solution, Apache-2.0), topdown methodology stage 1, "
	srcRAPL    = "the kernel's power PMU (RAPL): energy-* count in units of their sysfs .scale joules (Intel SDM vol. 3B, " +
		"Platform Specific Power Management Support; AMD PPR, RAPL MSRs); watts = joules / seconds"
	srcAPERF = "Intel SDM vol. 3B and AMD PPR, IA32_APERF/IA32_MPERF (MPERF counts at the TSC's rate in C0, APERF at the actual clock); " +
		"turbostat's Busy% = MPERF/TSC, Bzy_MHz = TSC rate × APERF/MPERF, Avg_MHz = APERF / elapsed time"
)

const (
	instructions = "instructions|INSTRUCTION_RETIRED|INST_RETIRED:ANY_P|RETIRED_INSTRUCTIONS|INST_RETIRED|PM_INST_CMPL"
	cycles       = "cycles|UNHALTED_CORE_CYCLES|CPU_CLK_UNHALTED:THREAD_P|CYCLES_NOT_IN_HALT|CPU_CYCLES|PM_CYC"
)

func def(group, name string, unit ratio.Unit, num []string, w []float64, den string, scale float64, about, source string) ratio.Def {
	return ratio.Def{Name: name, Group: group, Num: num, Weights: w, Den: den, Scale: scale, Unit: unit, About: about, Source: source}
}

// compound is a catalog ratio that the vendor defines as a product of
// ratios (plus a ratio), put over one denominator: see ratio.Compound.
func compound(group, name string, c ratio.Compound, about, source string) ratio.Def {
	d := ratio.NewCompound(name, c, 1)
	d.Group, d.About, d.Source = group, about, source
	return d
}

// term, one and prod spell a compound ratio's parts.
func term(w float64, op string) ratio.Term { return ratio.Term{W: w, Op: op} }
func one(op string) ratio.Linear           { return ratio.Linear{term(1, op)} }
func prod(c float64, factors ...ratio.Linear) ratio.Product {
	return ratio.Product{C: c, Factors: factors}
}

// ipc over the given events: each family names the events that leave its
// other groups their counters.
func ipc(inst, cyc, source string) ratio.Def {
	return def(IPC, "ipc", ratio.Pure, []string{inst}, nil, cyc, 1,
		"Instructions retired per core cycle.", source)
}

// mpki are misses per kilo-instruction over inst: L1 data cache, last
// level cache and branch mispredictions, each "" where not defined.
func mpki(inst, l1d, llc, branch, source string) []ratio.Def {
	defs := make([]ratio.Def, 0, 3)
	for _, m := range []struct{ name, ev, what string }{
		{"l1d_mpki", l1d, "L1 data cache misses (lines brought into L1D)"},
		{"llc_mpki", llc, "last-level cache misses"},
		{"branch_mpki", branch, "mispredicted branches retired"},
	} {
		if m.ev == "" {
			continue
		}
		defs = append(defs, def(MPKI, m.name, ratio.Pure, []string{m.ev}, nil, inst, 1000,
			fmt.Sprintf("%s per thousand instructions retired.", m.what), source))
	}
	return defs
}

// energy are the power PMU's energy counters in watts, per package.
func energy() []ratio.Def {
	defs := make([]ratio.Def, 0, 3)
	for _, e := range []struct{ name, ev, what string }{
		{"energy_package_watts", "power.energy-pkg", "the whole package (cores, caches, uncore)"},
		{"energy_dram_watts", "power.energy-ram", "the DRAM attached to the package"},
		{"energy_cores_watts", "power.energy-cores", "the package's cores"},
	} {
		d := def(Energy, e.name, ratio.PerSecond, []string{e.ev}, nil, ratio.Elapsed, 1e9,
			fmt.Sprintf("Power drawn by %s, in watts (joules per second), per package, from RAPL's energy counter.", e.what), srcRAPL)
		d.KernelScale = true
		d.OneLine = "watts drawn by " + e.what + ", per package"
		d.OneLineAll = "watts drawn by " + e.what + ", all packages"
		defs = append(defs, d)
	}
	return defs
}

// x86Frequency are the msr PMU's APERF, MPERF and TSC: free-running,
// read with each CPU's software events, so they need no counter.
func x86Frequency() []ratio.Def {
	return []ratio.Def{
		def(Frequency, "busy_share", ratio.Pure, []string{"msr.mperf"}, nil, "msr.tsc", 1,
			"Share of the time the CPU was busy (in C0): MPERF over the time stamp counter.", srcAPERF),
		def(Frequency, "frequency_relative", ratio.Pure, []string{"msr.aperf"}, nil, "msr.mperf", 1,
			"Effective frequency while busy, relative to the base (TSC) frequency: APERF / MPERF; above 1 is turbo.", srcAPERF),
		def(Frequency, "frequency_average_hz", ratio.PerSecond, []string{"msr.aperf"}, nil, "cpu-clock", 1e9,
			"Average frequency over the interval, idle time counting as 0 Hz: APERF cycles per second of the CPU's clock.", srcAPERF),
	}
}

// cyclesFrequency is the average frequency where there is no APERF: the
// core cycles, which stop while the CPU idles, per second.
func cyclesFrequency(cyc, source string) ratio.Def {
	return def(Frequency, "frequency_average_hz", ratio.PerSecond, []string{cyc}, nil, "cpu-clock", 1e9,
		"Average frequency over the interval, idle time counting as 0 Hz: core cycles per second of the CPU's clock.", source)
}

// imcBandwidth is DRAM traffic from Intel's memory controllers: the
// servers' uncore_imc_N CAS counts, or the client parts' free-running
// counters, 64 bytes each (the kernel's .scale says so too).
func imcBandwidth(source string) []ratio.Def {
	rd := "uncore_imc_*.cas_count_read|uncore_imc.data_reads|uncore_imc_free_running_*.data_read|*_unc_imc*::UNC_M_CAS_COUNT:RD"
	wr := "uncore_imc_*.cas_count_write|uncore_imc.data_writes|uncore_imc_free_running_*.data_write|*_unc_imc*::UNC_M_CAS_COUNT:WR"
	return bandwidth(rd, wr, source)
}

func bandwidth(rd, wr, source string) []ratio.Def {
	return bandwidthOf([]string{rd}, []string{wr}, source)
}

// bandwidthOf is bandwidth where a direction is the sum of several
// events: Granite Rapids counts each memory controller's two schedulers
// apart.
func bandwidthOf(rd, wr []string, source string) []ratio.Def {
	var defs []ratio.Def
	for _, b := range []struct {
		name string
		num  []string
		what string
	}{
		{"mem_read_bandwidth", rd, "read from"},
		{"mem_write_bandwidth", wr, "written to"},
		{"mem_bandwidth", append(slices.Clone(rd), wr...), "read from and written to"},
	} {
		d := def(Bandwidth, b.name, ratio.BytesPerSecond, b.num, nil, ratio.Elapsed, 1e9,
			fmt.Sprintf("DRAM bytes %s memory per second, per package: the memory controllers' CAS commands, one 64-byte line each, over the wall-clock time.", b.what), source)
		d.Bytes = true
		d.OneLine = "DRAM bytes " + b.what + " memory per second, per package"
		d.OneLineAll = "DRAM bytes " + b.what + " memory per second, all packages"
		defs = append(defs, d)
	}
	return defs
}

// skylakeTopDown is TMA level 1 and 2 from events on a 4-wide core
// (Skylake, Cascade Lake and, with the same events, Haswell and
// Broadwell): slots = 4 × core cycles. pfx is the libpfm4 PMU, which
// spells the level-2 group's copy of IDQ_UOPS_NOT_DELIVERED:CORE apart,
// so that each level is a group of its own within 4 counters.
func skylakeTopDown(pfx, source string) []ratio.Def {
	const (
		idq      = "IDQ_UOPS_NOT_DELIVERED:CORE"
		issued   = "UOPS_ISSUED:ANY"
		retSlots = "UOPS_RETIRED:RETIRE_SLOTS"
		recovery = "INT_MISC:RECOVERY_CYCLES"
		cyc0     = "IDQ_UOPS_NOT_DELIVERED:CYCLES_0_UOPS_DELIV_CORE"
		thread   = "CPU_CLK_UNHALTED:THREAD_P"
	)
	td := func(name, what string, num []string, w []float64, formula string) ratio.Def {
		return def(TopDown, "topdown_"+name, ratio.Pure, num, w, "cycles|UNHALTED_CORE_CYCLES", 0.25,
			"TopDown level 1: the share of pipeline slots (4 a cycle) "+what+".", source+formula)
	}
	l2 := func(name, what string, num []string, w []float64, scale float64, formula string) ratio.Def {
		return def(TopDownL2, "topdown_"+name, ratio.Pure, num, w, thread, scale,
			"TopDown level 2: the share of pipeline slots "+what+".", source+formula)
	}
	const (
		cyc = "cycles|UNHALTED_CORE_CYCLES"
		// Spelled apart from the MPKI group's copy, which with
		// MACHINE_CLEARS would need 5 of the 4 counters.
		brMisp   = "::BR_MISP_RETIRED:ALL_BRANCHES"
		clears   = "MACHINE_CLEARS:COUNT"
		memAny   = "CYCLE_ACTIVITY:STALLS_MEM_ANY"
		onStores = "EXE_ACTIVITY:BOUND_ON_STORES"
		stalls   = "CYCLE_ACTIVITY:STALLS_TOTAL"
		ports1   = "EXE_ACTIVITY:1_PORTS_UTIL"
		ports2   = "EXE_ACTIVITY:2_PORTS_UTIL"
	)
	badSpec := ratio.Linear{term(1, issued), term(-1, retSlots), term(4, recovery)}
	backend := ratio.Linear{term(4, cyc), term(-1, idq), term(-1, issued), term(-4, recovery)}
	return []ratio.Def{
		td("frontend_bound", "the front end left without a micro-op", []string{idq}, nil, "Frontend_Bound"),
		td("bad_speculation", "spent on micro-ops that never retired, and on recovering from mispredictions",
			[]string{issued, retSlots, recovery}, []float64{1, -1, 4}, "Bad_Speculation"),
		// Bad_Speculation × the mispredicts' share of the clears; each
		// factor in a group of its own.
		compound(TopDownL2, "topdown_branch_mispredicts", ratio.Compound{
			Num:    []ratio.Product{prod(1, one(pfx+brMisp), badSpec)},
			Den:    []ratio.Product{prod(4, ratio.Linear{term(1, pfx+brMisp), term(1, clears)}, one(cyc))},
			Groups: [][]string{{pfx + brMisp, clears}, {cyc, issued, retSlots, recovery}},
		}, "TopDown level 2: the share of pipeline slots lost to mispredicted branches: bad speculation × the mispredictions' share of mispredictions and machine clears.",
			source+"Branch_Mispredicts = BR_MISP_RETIRED.ALL_BRANCHES / (BR_MISP_RETIRED.ALL_BRANCHES + MACHINE_CLEARS.COUNT) × Bad_Speculation"),
		// Backend_Bound × the memory's share of the stalled cycles, whose
		// denominator holds Retiring × EXE_ACTIVITY.2_PORTS_UTIL: over
		// one denominator, (a + b) × backend / (4 × cycles × (c + d + b)
		// + retire slots × 2 ports). Four of its events are a group, the
		// level-1 ones theirs; the fifth is counted alone.
		compound(TopDownL2, "topdown_memory_bound", ratio.Compound{
			Num: []ratio.Product{prod(1, ratio.Linear{term(1, memAny), term(1, onStores)}, backend)},
			Den: []ratio.Product{
				prod(4, one(cyc), ratio.Linear{term(1, stalls), term(1, ports1), term(1, onStores)}),
				prod(1, one(retSlots), one(ports2)),
			},
			Groups: [][]string{{memAny, onStores, stalls, ports1}, {cyc, idq, issued, recovery, retSlots}},
		}, "TopDown level 2: the share of pipeline slots stalled on the memory subsystem: back-end bound × the share of the stalled cycles spent waiting for memory (loads and stores).",
			source+"Memory_Bound = (CYCLE_ACTIVITY.STALLS_MEM_ANY + EXE_ACTIVITY.BOUND_ON_STORES) / (CYCLE_ACTIVITY.STALLS_TOTAL + "+
				"(EXE_ACTIVITY.1_PORTS_UTIL + Retiring × EXE_ACTIVITY.2_PORTS_UTIL) + EXE_ACTIVITY.BOUND_ON_STORES) × Backend_Bound"),
		td("retiring", "that retired a micro-op", []string{retSlots}, nil, "Retiring"),
		td("backend_bound", "stalled for back-end resources (1 − the other three)",
			[]string{"cycles|UNHALTED_CORE_CYCLES", idq, issued, recovery}, []float64{4, -1, -1, -4}, "Backend_Bound"),
		l2("fetch_latency", "lost to front-end latency (no micro-op delivered)", []string{cyc0}, nil, 1, "Fetch_Latency"),
		l2("fetch_bandwidth", "lost to front-end bandwidth (fewer micro-ops than slots delivered)",
			[]string{pfx + "::" + idq, cyc0}, []float64{1, -4}, 0.25, "Fetch_Bandwidth"),
	}
}

// iceLakeTopDown is TMA level 1 from the kernel's PERF_METRICS events
// (in slots, led by cpu/slots/), with Intel's corrections for dropped
// micro-ops and pipeline clears, and level 2's front-end split; Ice Lake
// allocates 5 micro-ops a cycle.
func iceLakeTopDown(source string) []ratio.Def {
	const (
		slots = "cpu.slots"
		fe    = "cpu.topdown-fe-bound"
		be    = "cpu.topdown-be-bound"
		ret   = "cpu.topdown-retiring"
		drop  = "INT_MISC:UOP_DROPPING"
		clear = "INT_MISC:CLEARS_COUNT"
		cyc0  = "IDQ_UOPS_NOT_DELIVERED:CYCLES_0_UOPS_DELIV_CORE"

		brMisp   = "BR_MISP_RETIRED:ALL_BRANCHES"
		clears   = "MACHINE_CLEARS:COUNT"
		memAny   = "CYCLE_ACTIVITY:STALLS_MEM_ANY"
		onStores = "EXE_ACTIVITY:BOUND_ON_STORES"
		stalls   = "CYCLE_ACTIVITY:STALLS_TOTAL"
		ports1   = "EXE_ACTIVITY:1_PORTS_UTIL"
		ports2   = "EXE_ACTIVITY:2_PORTS_UTIL"
	)
	td := func(group, name, what string, num []string, w []float64, formula string) ratio.Def {
		return def(group, "topdown_"+name, ratio.Pure, num, w, slots, 1,
			"TopDown: the share of pipeline slots "+what+".", source+formula)
	}
	return []ratio.Def{
		td(TopDown, "frontend_bound", "the front end left without a micro-op", []string{fe, drop}, []float64{1, -1}, "Frontend_Bound"),
		td(TopDown, "bad_speculation", "spent on micro-ops that never retired (1 − the other three)",
			[]string{slots, fe, drop, be, clear, ret}, []float64{1, -1, 1, -1, -5, -1}, "Bad_Speculation"),
		td(TopDown, "retiring", "that retired a micro-op", []string{ret}, nil, "Retiring"),
		td(TopDown, "backend_bound", "stalled for back-end resources", []string{be, clear}, []float64{1, 5}, "Backend_Bound"),
		td(TopDownL2, "fetch_latency", "lost to front-end latency", []string{cyc0, drop}, []float64{5, -1}, "Fetch_Latency"),
		td(TopDownL2, "fetch_bandwidth", "lost to front-end bandwidth", []string{fe, cyc0}, []float64{1, -5}, "Fetch_Bandwidth"),
		// Bad_Speculation × the mispredicts' share of the clears.
		compound(TopDownL2, "topdown_branch_mispredicts", ratio.Compound{
			Num: []ratio.Product{prod(1, one(brMisp),
				ratio.Linear{term(1, slots), term(-1, fe), term(1, drop), term(-1, be), term(-5, clear), term(-1, ret)})},
			Den:    []ratio.Product{prod(1, ratio.Linear{term(1, brMisp), term(1, clears)}, one(slots))},
			Groups: [][]string{{brMisp, clears}, {slots, fe, drop, be, clear, ret}},
		}, "TopDown level 2: the share of pipeline slots lost to mispredicted branches: bad speculation × the mispredictions' share of mispredictions and machine clears.",
			source+"Branch_Mispredicts = BR_MISP_RETIRED.ALL_BRANCHES / (BR_MISP_RETIRED.ALL_BRANCHES + MACHINE_CLEARS.COUNT) × Bad_Speculation"),
		// Backend_Bound × the memory's share of the stalled cycles, whose
		// denominator holds Retiring × EXE_ACTIVITY.2_PORTS_UTIL: over
		// one denominator, (a + b) × (be + 5 × clears) / (slots × (c + d
		// + b) + retiring × 2 ports), all in level 1's group.
		compound(TopDownL2, "topdown_memory_bound", ratio.Compound{
			Num: []ratio.Product{prod(1, ratio.Linear{term(1, memAny), term(1, onStores)}, ratio.Linear{term(1, be), term(5, clear)})},
			Den: []ratio.Product{
				prod(1, one(slots), ratio.Linear{term(1, stalls), term(1, ports1), term(1, onStores)}),
				prod(1, one(ret), one(ports2)),
			},
		}, "TopDown level 2: the share of pipeline slots stalled on the memory subsystem: back-end bound × the share of the stalled cycles spent waiting for memory (loads and stores).",
			source+"Memory_Bound = (CYCLE_ACTIVITY.STALLS_MEM_ANY + EXE_ACTIVITY.BOUND_ON_STORES) / (CYCLE_ACTIVITY.STALLS_TOTAL + "+
				"(EXE_ACTIVITY.1_PORTS_UTIL + Retiring × EXE_ACTIVITY.2_PORTS_UTIL) + EXE_ACTIVITY.BOUND_ON_STORES) × Backend_Bound"),
	}
}

// sapphireRapidsTopDown is TMA levels 1 and 2 from the kernel's
// PERF_METRICS events, which from Sapphire Rapids on include level 2
// (heavy operations, branch mispredicts, fetch latency, memory bound); the
// rest of level 2 is each level-1 share less its level-2 part.
func sapphireRapidsTopDown(source string) []ratio.Def {
	const (
		slots = "cpu.slots"
		fe    = "cpu.topdown-fe-bound"
		be    = "cpu.topdown-be-bound"
		ret   = "cpu.topdown-retiring"
		drop  = "INT_MISC:UOP_DROPPING"
		heavy = "cpu.topdown-heavy-ops"
		brm   = "cpu.topdown-br-mispredict"
		flat  = "cpu.topdown-fetch-lat"
		mem   = "cpu.topdown-mem-bound"
	)
	td := func(group, name, what string, num []string, w []float64, formula string) ratio.Def {
		return def(group, "topdown_"+name, ratio.Pure, num, w, slots, 1,
			"TopDown: the share of pipeline slots "+what+".", source+formula)
	}
	return []ratio.Def{
		td(TopDown, "frontend_bound", "the front end left without a micro-op", []string{fe, drop}, []float64{1, -1}, "Frontend_Bound"),
		td(TopDown, "bad_speculation", "spent on micro-ops that never retired (1 − the other three)",
			[]string{slots, fe, drop, be, ret}, []float64{1, -1, 1, -1, -1}, "Bad_Speculation"),
		td(TopDown, "retiring", "that retired a micro-op", []string{ret}, nil, "Retiring"),
		td(TopDown, "backend_bound", "stalled for back-end resources", []string{be}, nil, "Backend_Bound"),
		td(TopDownL2, "fetch_latency", "lost to front-end latency", []string{flat, drop}, []float64{1, -1}, "Fetch_Latency"),
		td(TopDownL2, "fetch_bandwidth", "lost to front-end bandwidth", []string{fe, flat}, []float64{1, -1}, "Fetch_Bandwidth"),
		td(TopDownL2, "branch_mispredicts", "lost to mispredicted branches", []string{brm}, nil, "Branch_Mispredicts"),
		td(TopDownL2, "machine_clears", "lost to machine clears", []string{slots, fe, drop, be, ret, brm}, []float64{1, -1, 1, -1, -1, -1}, "Machine_Clears"),
		td(TopDownL2, "memory_bound", "stalled on the memory subsystem", []string{mem}, nil, "Memory_Bound"),
		td(TopDownL2, "core_bound", "stalled on the core's execution units", []string{be, mem}, []float64{1, -1}, "Core_Bound"),
		td(TopDownL2, "heavy_operations", "retiring heavy (microcoded or multi-uop) operations", []string{heavy}, nil, "Heavy_Operations"),
		td(TopDownL2, "light_operations", "retiring light operations", []string{ret, heavy}, []float64{1, -1}, "Light_Operations"),
	}
}

var intelFixed = []string{"instructions", "cycles", "ref-cycles", "INSTRUCTION_RETIRED", "UNHALTED_CORE_CYCLES", "UNHALTED_REFERENCE_CYCLES", "cpu.slots", "cpu.topdown-*"}

func intelMPKI(source string) []ratio.Def {
	return mpki("INST_RETIRED:ANY_P", "L1D:REPLACEMENT", "MEM_LOAD_RETIRED:L3_MISS", "BR_MISP_RETIRED:ALL_BRANCHES", source+"l1d_mpi, L3MPKI, IpMispredict")
}

func concat(parts ...[]ratio.Def) []ratio.Def {
	// Sized once: a Def is some two hundred bytes, and growing the list
	// part by part copied it into an array of each size on the way.
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	if n == 0 {
		return nil
	}
	all := make([]ratio.Def, 0, n)
	for _, p := range parts {
		all = append(all, p...)
	}
	return all
}

// Skylake and Cascade Lake servers (libpfm4's skx; its clients share the
// core events as skl), 4 counters a thread with Hyper-Threading on.
func skylakeSP() *Family {
	return &Family{
		Name: "Intel Skylake-SP / Cascade Lake", PMUs: []string{"skx", "clx", "skl"}, Counters: 4, Fixed: intelFixed,
		Metrics: concat(
			[]ratio.Def{ipc(instructions, cycles, srcSKX+"IPC")},
			skylakeTopDown("skx", srcSKX),
			imcBandwidth(srcSKX+"memory_bandwidth_read, memory_bandwidth_write (UNC_M_CAS_COUNT × 64 bytes / duration)"),
			energy(), x86Frequency(), intelMPKI(srcSKX),
		),
	}
}

// Ice Lake servers (libpfm4's icx; clients icl), 8 counters a thread,
// PERF_METRICS through the kernel's slots and topdown-* events.
func iceLakeSP() *Family {
	return &Family{
		Name: "Intel Ice Lake-SP", PMUs: []string{"icx", "icl"}, Counters: 8, Fixed: intelFixed,
		Metrics: concat(
			[]ratio.Def{ipc(instructions, cycles, srcICX+"IPC")},
			iceLakeTopDown(srcICX),
			imcBandwidth(srcICX+"memory_bandwidth_read, memory_bandwidth_write (UNC_M_CAS_COUNT × 64 bytes / duration)"),
			energy(), x86Frequency(), intelMPKI(srcICX),
		),
	}
}

// Sapphire Rapids and Emerald Rapids (libpfm4's spr; emr where the
// libpfm4 tables name it), 8 counters a thread.
func sapphireRapids() *Family {
	return &Family{
		Name: "Intel Sapphire Rapids / Emerald Rapids", PMUs: []string{"spr", "emr"}, Counters: 8, Fixed: intelFixed,
		Metrics: concat(
			[]ratio.Def{ipc(instructions, cycles, srcSPR+"IPC")},
			sapphireRapidsTopDown(srcSPR),
			imcBandwidth(srcSPR+"memory_bandwidth_read, memory_bandwidth_write (UNC_M_CAS_COUNT × 64 bytes / duration)"),
			energy(), x86Frequency(), intelMPKI(srcSPR),
		),
	}
}

// gnrCAS are Granite Rapids' CAS counts of one direction, in the kernel's
// raw spelling on every uncore_imc_N box: each memory controller has two
// schedulers, counted by events 0x05 (SCH0) and 0x06 (SCH1), and Intel's
// bandwidth is their sum. The kernel's cas_count_read and cas_count_write
// are one event each, so at best one scheduler's half: not a fallback.
func gnrCAS(umask string) []string {
	return []string{"uncore_imc_*/event=0x05,umask=" + umask + "/", "uncore_imc_*/event=0x06,umask=" + umask + "/"}
}

// Granite Rapids (libpfm4's gnr), 8 counters a thread: TMA levels 1 and 2
// as Sapphire Rapids (Intel's formulas are the same), and DRAM bandwidth
// from its own memory-controller events.
func graniteRapids() *Family {
	return &Family{
		Name: "Intel Granite Rapids", PMUs: []string{"gnr"}, Counters: 8, Fixed: intelFixed,
		Metrics: concat(
			[]ratio.Def{ipc(instructions, cycles, srcGNR+"IPC")},
			sapphireRapidsTopDown(srcGNR),
			bandwidthOf(gnrCAS("0xcf"), gnrCAS("0xf0"),
				srcGNR+"memory_bandwidth_read, memory_bandwidth_write ((UNC_M_CAS_COUNT_SCH0 + UNC_M_CAS_COUNT_SCH1) × 64 bytes / duration; "+
					"GNR/events/graniterapids_uncore.json: SCH0 event 0x05, SCH1 event 0x06, RD umask 0xCF, WR umask 0xF0)"),
			energy(), x86Frequency(), intelMPKI(srcGNR),
		),
	}
}

// zenTopDown is AMD's pipeline utilization on a Zen core that defines
// it: slots dispatch slots a cycle, dispatched the PMCx0AA ops-dispatched
// event with every op source of that core.
type zenTopDown struct {
	slots             int
	dispatched        string
	source, umcSource string
}

// AMD Zen: 6 core counters, none fixed; td is nil where the PPR defines
// no top-down method.
func zenFamily(name, pmu string, td *zenTopDown) *Family {
	f := &Family{
		Name: name, PMUs: []string{pmu}, Counters: 6,
		Metrics: []ratio.Def{ipc("RETIRED_INSTRUCTIONS", "CYCLES_NOT_IN_HALT", "AMD PPR, Core::X86::Pmc::Core PMCx0C0 retired instructions over PMCx076 cycles not in halt")},
	}
	if td != nil {
		// The dispatch slots are the cycles × the slots a cycle (the scale
		// below), spelled with the PMU so that they are an event of their
		// own: with no fixed counters, the configuration's cycles and
		// instructions (cpi) joining these five would need 7 counters,
		// and ipc's CYCLES_NOT_IN_HALT with its MPKI 9.
		slots := pmu + "::CYCLES_NOT_IN_HALT"
		share := func(name, what string, num []string, w []float64) ratio.Def {
			return def(TopDown, "topdown_"+name, ratio.Pure, num, w, slots, 1/float64(td.slots),
				fmt.Sprintf("TopDown level 1 (AMD's pipeline utilization): the share of dispatch slots (%d a cycle) %s.", td.slots, what), td.source)
		}
		f.Metrics = append(f.Metrics,
			share("frontend_bound", "the front end left without an op", []string{"cpu/event=0x1a0,umask=0x1/"}, nil),
			share("bad_speculation", "dispatched ops that never retired", []string{td.dispatched, "RETIRED_OPS"}, []float64{1, -1}),
			share("backend_bound", "stalled for back-end resources", []string{"cpu/event=0x1a0,umask=0x1e/"}, nil),
			share("smt_contention", "given to the other thread of the core", []string{"cpu/event=0x1a0,umask=0x60/"}, nil),
			share("retiring", "that retired an op", []string{"RETIRED_OPS"}, nil),
		)
		f.Metrics = append(f.Metrics, bandwidth("amd_umc_*/event=0xa,rdwrmask=0x1/", "amd_umc_*/event=0xa,rdwrmask=0x2/", td.umcSource)...)
	} else {
		f.Unserved = append(f.Unserved,
			Unserved{"topdown_*", TopDown, "dispatch-slot shares", "AMD PPR for Family 19h Model 11h (55901)",
				"AMD defines pipeline utilization (PMCx1A0 dispatch slots) from Zen 4 on; the PPRs of Zen 2 and Zen 3 define no top-down method"},
			Unserved{"mem_*_bandwidth", Bandwidth, "DRAM CAS commands × 64 / time", "AMD PPR",
				"the kernel's amd_df PMU names no DRAM events on Zen 2 and Zen 3, and libpfm4 4.13 has no tables for it"})
	}
	f.Metrics = append(f.Metrics, energy()...)
	f.Metrics = append(f.Metrics, x86Frequency()...)
	f.Metrics = append(f.Metrics, mpki("RETIRED_INSTRUCTIONS", "L1-dcache-load-misses", "", "RETIRED_BRANCH_INSTRUCTIONS_MISPREDICTED",
		"AMD PPR, PMCx0C3 retired mispredicted branches and the kernel's L1D read-miss cache event, per PMCx0C0 retired instructions")...)
	f.Unserved = append(f.Unserved, Unserved{"llc_mpki", MPKI, "L3 misses / instructions × 1000", "AMD PPR, L3 cache PMCs",
		"the L3 is counted per CCX by the amd_l3 PMU, not per instruction stream"})
	return f
}

// Arm Neoverse N1 (libpfm4's arm_n1): 6 counters and the cycle counter.
func neoverseN1() *Family {
	return &Family{
		Name: "Arm Neoverse N1", PMUs: []string{"arm_n1"}, Counters: 6, Fixed: []string{"cycles", "CPU_CYCLES", "cpu_cycles"},
		Metrics: concat(
			[]ratio.Def{ipc(instructions, cycles, srcArm+"ipc = INST_RETIRED / CPU_CYCLES")},
			[]ratio.Def{
				def(TopDown, "topdown_frontend_bound", ratio.Pure, []string{"STALL_FRONTEND"}, nil, cycles, 1,
					"TopDown level 1: the share of cycles the front end stalled the pipeline.", srcArm+"frontend_bound = STALL_FRONTEND / CPU_CYCLES"),
				def(TopDown, "topdown_backend_bound", ratio.Pure, []string{"STALL_BACKEND"}, nil, cycles, 1,
					"TopDown level 1: the share of cycles the back end stalled the pipeline.", srcArm+"backend_bound = STALL_BACKEND / CPU_CYCLES"),
				def(TopDown, "topdown_not_stalled", ratio.Pure, []string{cycles, "STALL_FRONTEND", "STALL_BACKEND"}, []float64{1, -1, -1}, cycles, 1,
					"The share of cycles neither end stalled, 1 − frontend_bound − backend_bound: retiring plus bad speculation, which Arm splits by INST_RETIRED / INST_SPEC.",
					srcArm+"1 − (STALL_FRONTEND + STALL_BACKEND) / CPU_CYCLES, the factor of retiring and bad_speculation"),
				def(TopDown, "topdown_retired_share", ratio.Pure, []string{"INST_RETIRED"}, nil, "INST_SPEC", 1,
					"Instructions retired per instruction speculatively executed: retiring = not_stalled × this, bad_speculation = not_stalled × (1 − this).",
					srcArm+"INST_RETIRED / INST_SPEC, the other factor of retiring and bad_speculation"),
			},
			armSplit("INST_RETIRED", "INST_SPEC", ratio.Linear{term(1, cycles), term(-1, "STALL_FRONTEND"), term(-1, "STALL_BACKEND")}, 1, nil, [2]string{
				srcArm + "retiring = INST_RETIRED / INST_SPEC × (1 − (STALL_FRONTEND + STALL_BACKEND) / CPU_CYCLES)",
				srcArm + "bad_speculation = (1 − INST_RETIRED / INST_SPEC) × (1 − (STALL_FRONTEND + STALL_BACKEND) / CPU_CYCLES)",
			}),
			[]ratio.Def{cyclesFrequency(cycles, "Arm ARM, CPU_CYCLES (does not count while in WFI/WFE); cycles per second of cpu-clock")},
			mpki("INST_RETIRED", "L1D_CACHE_REFILL", "LL_CACHE_MISS_RD", "BR_MIS_PRED_RETIRED", srcArm+"l1d_cache_mpki, ll_cache_read_mpki, branch_mpki"),
		),
		Unserved: []Unserved{
			{"energy_*, mem_*_bandwidth", Energy, "", "", "the kernel offers no power PMU and no memory-controller PMU on Neoverse N1 systems in general"},
		},
	}
}

// armSlots is Arm's slot-based top-down level 1 on a Neoverse core with
// slots dispatch slots a cycle: the stalled slots of each end, less the
// slots Arm's method charges to bad speculation (fe and be, events with
// their weights in slots, none for an end without a correction). Arm's
// retiring and bad speculation are products of two ratios (armSplit),
// served with their factors as on Neoverse N1: the share of slots not
// stalled and the share of speculated operations retired.
func armSlots(slots int, fe, be []string, feW, beW []float64, source string, formulas [6]string) []ratio.Def {
	n := float64(slots)
	td := func(name, about string, num []string, w []float64, den string, scale float64, formula string) ratio.Def {
		return def(TopDown, "topdown_"+name, ratio.Pure, num, w, den, scale, about, source+formula)
	}
	// Bad speculation's own slots: those the corrections took from each
	// end, per event.
	charged := map[string]float64{}
	var chargedEvs []string
	for i, ev := range append(slices.Clone(fe), be...) {
		if !slices.Contains(chargedEvs, ev) {
			chargedEvs = append(chargedEvs, ev)
		}
		charged[ev] -= append(slices.Clone(feW), beW...)[i]
	}
	var extra []ratio.Product
	for _, ev := range chargedEvs {
		extra = append(extra, prod(charged[ev], one(ev)))
	}
	return append([]ratio.Def{
		td("frontend_bound", fmt.Sprintf("TopDown level 1: the share of slots (%d a cycle) the front end left empty, less those charged to bad speculation.", slots),
			append([]string{"STALL_SLOT_FRONTEND"}, fe...), append([]float64{1}, feW...), cycles, 1/n, formulas[0]),
		td("backend_bound", fmt.Sprintf("TopDown level 1: the share of slots (%d a cycle) the back end could not accept, less those charged to bad speculation.", slots),
			append([]string{"STALL_SLOT_BACKEND"}, be...), append([]float64{1}, beW...), cycles, 1/n, formulas[1]),
		td("not_stalled", fmt.Sprintf("The share of slots (%d a cycle) not stalled, 1 − STALL_SLOT / (%d × CPU_CYCLES): the factor of retiring and bad speculation that Arm splits by OP_RETIRED / OP_SPEC.", slots, slots),
			[]string{cycles, "STALL_SLOT"}, []float64{n, -1}, cycles, 1/n, formulas[2]),
		td("retired_share", "Operations retired per operation speculatively executed: retiring = not_stalled × this.",
			[]string{"OP_RETIRED"}, nil, "OP_SPEC", 1, formulas[3]),
	}, armSplit("OP_RETIRED", "OP_SPEC", ratio.Linear{term(n, cycles), term(-1, "STALL_SLOT")}, n, extra,
		[2]string{source + formulas[4], source + formulas[5]})...)
}

// armSplit are Arm's retiring and bad speculation: the share of slots
// not stalled (notStalled / (n × cycles)) split by the share of the
// speculated operations retired (retired / spec), bad speculation plus
// the slots charged to it (extra, each a count of slots over n × cycles).
// Over one denominator, n × spec × cycles; the two factors count in
// groups of their own, as topdown_retired_share and topdown_not_stalled.
func armSplit(retired, spec string, notStalled ratio.Linear, n float64, extra []ratio.Product, sources [2]string) []ratio.Def {
	slotsOps := []string{cycles}
	for _, t := range notStalled {
		if !slices.Contains(slotsOps, t.Op) {
			slotsOps = append(slotsOps, t.Op)
		}
	}
	groups := [][]string{{retired, spec}, slotsOps}
	badOps := slices.Clone(slotsOps)
	for i, p := range extra {
		ev := p.Factors[0][0].Op
		extra[i].Factors = append(extra[i].Factors, one(spec))
		if !slices.Contains(badOps, ev) {
			badOps = append(badOps, ev)
		}
	}
	den := []ratio.Product{prod(n, one(spec), one(cycles))}
	return []ratio.Def{
		compound(TopDown, "topdown_retiring", ratio.Compound{
			Num: []ratio.Product{prod(1, one(retired), notStalled)}, Den: den, Groups: groups,
		}, "TopDown level 1: the share of slots that retired an operation: the slots not stalled × the share of the speculated operations retired.", sources[0]),
		compound(TopDown, "topdown_bad_speculation", ratio.Compound{
			Num:    append([]ratio.Product{prod(1, ratio.Linear{term(1, spec), term(-1, retired)}, notStalled)}, extra...),
			Den:    den,
			Groups: [][]string{{retired, spec}, badOps},
		}, "TopDown level 1: the share of slots spent on operations that never retired, and on recovering from mispredictions: the slots not stalled × the share of the speculated operations not retired, plus the slots charged to bad speculation.", sources[1]),
	}
}

// Arm Neoverse V2 (libpfm4's arm_v2): 6 counters and the cycle counter,
// 8 slots a cycle; each mispredicted branch is charged 8 front-end and 24
// back-end slots.
func neoverseV2() *Family {
	return &Family{
		Name: "Arm Neoverse V2", PMUs: []string{"arm_v2"}, Counters: 6, Fixed: []string{"cycles", "CPU_CYCLES", "cpu_cycles"},
		Metrics: concat(
			[]ratio.Def{ipc(instructions, cycles, srcArmV2+"ipc = INST_RETIRED / CPU_CYCLES")},
			armSlots(8, []string{"BR_MIS_PRED"}, []string{"BR_MIS_PRED"}, []float64{-8}, []float64{-24}, srcArmV2, [6]string{
				"frontend_bound = STALL_SLOT_FRONTEND / (CPU_CYCLES × 8) − BR_MIS_PRED / CPU_CYCLES",
				"backend_bound = STALL_SLOT_BACKEND / (CPU_CYCLES × 8) − BR_MIS_PRED × 3 / CPU_CYCLES",
				"1 − STALL_SLOT / (CPU_CYCLES × 8), the factor of retiring and bad_speculation",
				"OP_RETIRED / OP_SPEC, the other factor of retiring and bad_speculation",
				"retiring = OP_RETIRED / OP_SPEC × (1 − STALL_SLOT / (CPU_CYCLES × 8))",
				"bad_speculation = (1 − OP_RETIRED / OP_SPEC) × (1 − STALL_SLOT / (CPU_CYCLES × 8)) + BR_MIS_PRED × 4 / CPU_CYCLES",
			}),
			[]ratio.Def{cyclesFrequency(cycles, "Arm ARM, CPU_CYCLES (does not count while in WFI/WFE); cycles per second of cpu-clock")},
			mpki("INST_RETIRED", "L1D_CACHE_REFILL", "LL_CACHE_MISS_RD", "BR_MIS_PRED_RETIRED", srcArmV2+"l1d_cache_mpki, ll_cache_read_mpki, branch_mpki"),
		),
		Unserved: []Unserved{
			{"energy_*, mem_*_bandwidth", Energy, "", "", "the kernel offers no power PMU and no memory-controller PMU on Neoverse V2 systems in general"},
		},
	}
}

// Arm Neoverse V3 (libpfm4's arm_v3): 6 counters for libpfm4 (its
// implementations may have up to 20), 10 slots a cycle; the front end is
// charged the cycles it spent recovering from a flush, 10 slots each.
// Arm's level 2 splits each end's stalled cycles into core and memory.
func neoverseV3() *Family {
	return &Family{
		Name: "Arm Neoverse V3", PMUs: []string{"arm_v3"}, Counters: 6, Fixed: []string{"cycles", "CPU_CYCLES", "cpu_cycles"},
		Metrics: concat(
			[]ratio.Def{ipc(instructions, cycles, srcArmV3+"ipc = INST_RETIRED / CPU_CYCLES")},
			armSlots(10, []string{"STALL_FRONTEND_FLUSH"}, nil, []float64{-10}, nil, srcArmV3, [6]string{
				"frontend_bound = STALL_SLOT_FRONTEND / (10 × CPU_CYCLES) − STALL_FRONTEND_FLUSH / CPU_CYCLES",
				"backend_bound = STALL_SLOT_BACKEND / (10 × CPU_CYCLES)",
				"1 − STALL_SLOT / (10 × CPU_CYCLES), the factor of retiring and bad_speculation",
				"OP_RETIRED / OP_SPEC, the other factor of retiring and bad_speculation",
				"retiring = OP_RETIRED / OP_SPEC × (1 − STALL_SLOT / (10 × CPU_CYCLES)), the rest of the slots",
				"bad_speculation = (1 − STALL_SLOT / (10 × CPU_CYCLES)) × (1 − OP_RETIRED / OP_SPEC) + STALL_FRONTEND_FLUSH / CPU_CYCLES",
			}),
			[]ratio.Def{
				def(TopDownL2, "topdown_frontend_core_bound", ratio.Pure, []string{"STALL_FRONTEND_CPUBOUND"}, nil, "STALL_FRONTEND", 1,
					"TopDown level 2: the share of the front end's stalled cycles due to the core (branch prediction, flushes), not to fetch latency.", srcArmV3+"frontend_core_bound = STALL_FRONTEND_CPUBOUND / STALL_FRONTEND"),
				def(TopDownL2, "topdown_frontend_mem_bound", ratio.Pure, []string{"STALL_FRONTEND_MEMBOUND"}, nil, "STALL_FRONTEND", 1,
					"TopDown level 2: the share of the front end's stalled cycles due to instruction fetch latency (caches, TLB).", srcArmV3+"frontend_mem_bound = STALL_FRONTEND_MEMBOUND / STALL_FRONTEND"),
				def(TopDownL2, "topdown_backend_core_bound", ratio.Pure, []string{"STALL_BACKEND_CPUBOUND"}, nil, "STALL_BACKEND", 1,
					"TopDown level 2: the share of the back end's stalled cycles due to core resources other than memory.", srcArmV3+"backend_core_bound = STALL_BACKEND_CPUBOUND / STALL_BACKEND"),
				def(TopDownL2, "topdown_backend_mem_bound", ratio.Pure, []string{"STALL_BACKEND_MEMBOUND"}, nil, "STALL_BACKEND", 1,
					"TopDown level 2: the share of the back end's stalled cycles due to memory access latency.", srcArmV3+"backend_mem_bound = STALL_BACKEND_MEMBOUND / STALL_BACKEND"),
			},
			[]ratio.Def{cyclesFrequency(cycles, "Arm ARM, CPU_CYCLES (does not count while in WFI/WFE); cycles per second of cpu-clock")},
			mpki("INST_RETIRED", "L1D_CACHE_REFILL", "LL_CACHE_MISS_RD", "BR_MIS_PRED_RETIRED", srcArmV3+"l1d_cache_mpki, ll_cache_read_mpki, branch_mpki"),
		),
		Unserved: []Unserved{
			{"energy_*, mem_*_bandwidth", Energy, "", "", "the kernel offers no power PMU and no memory-controller PMU on Neoverse V3 systems in general"},
		},
	}
}

// IBM POWER9: 4 programmable counters (PMC5 and PMC6 count instructions
// and cycles only).
func power9() *Family {
	return &Family{
		Name: "IBM POWER9", PMUs: []string{"power9"}, Counters: 4,
		Metrics: concat(
			[]ratio.Def{ipc(instructions, cycles, "IBM POWER9 PMU user's guide, PM_INST_CMPL / PM_CYC")},
			[]ratio.Def{cyclesFrequency(cycles, "IBM POWER9 PMU user's guide, PM_CYC; cycles per second of cpu-clock")},
			mpki(instructions, "L1-dcache-load-misses|PM_LD_MISS_L1", "", "branch-misses|PM_BR_MPRED_CMPL", "IBM POWER9 PMU user's guide, PM_LD_MISS_L1 and PM_BR_MPRED_CMPL per PM_INST_CMPL"),
		),
		Unserved: []Unserved{
			{"topdown_*", TopDown, "", "IBM POWER9 PMU user's guide", "IBM defines a CPI stack (PM_CMPLU_STALL_*), not a top-down slot method"},
		},
	}
}

// families are the catalog's families with the libpfm4 PMUs that tell
// each, which must be its Family.PMUs. A family's metrics are built the
// first time it is asked for: an agent starts with one family, not all.
// The list is written out as data, so that no start spends time making
// it.
var families = []lazyFamily{
	{pmus: []string{"skx", "clx", "skl"}, once: &familyOnce{build: skylakeSP}},
	{pmus: []string{"icx", "icl"}, once: &familyOnce{build: iceLakeSP}},
	{pmus: []string{"spr", "emr"}, once: &familyOnce{build: sapphireRapids}},
	{pmus: []string{"gnr"}, once: &familyOnce{build: graniteRapids}},
	{pmus: []string{"amd64_fam1ah_zen5"}, once: &familyOnce{build: func() *Family {
		return zenFamily("AMD Zen 5", "amd64_fam1ah_zen5", &zenTopDown{slots: 8, dispatched: "cpu/event=0xaa,umask=0x3/", source: srcZen5, umcSource: srcZen5UMC})
	}}},
	{pmus: []string{"amd64_fam19h_zen4"}, once: &familyOnce{build: func() *Family {
		return zenFamily("AMD Zen 4", "amd64_fam19h_zen4", &zenTopDown{slots: 6, dispatched: "cpu/event=0xaa,umask=0x7/", source: srcAMD,
			umcSource: "AMD PPR for Family 19h Model 11h (55901), UMC performance counters: CAS commands (event 0x0A), read and write by RdWrMask, 64 bytes each"})
	}}},
	{pmus: []string{"amd64_fam19h_zen3"}, once: &familyOnce{build: func() *Family { return zenFamily("AMD Zen 3", "amd64_fam19h_zen3", nil) }}},
	{pmus: []string{"amd64_fam17h_zen2"}, once: &familyOnce{build: func() *Family { return zenFamily("AMD Zen 2", "amd64_fam17h_zen2", nil) }}},
	{pmus: []string{"arm_n1"}, once: &familyOnce{build: neoverseN1}},
	{pmus: []string{"arm_v2"}, once: &familyOnce{build: neoverseV2}},
	{pmus: []string{"arm_v3"}, once: &familyOnce{build: neoverseV3}},
	{pmus: []string{"power9"}, once: &familyOnce{build: power9}},
}

type lazyFamily struct {
	pmus []string
	once *familyOnce
}

func (f lazyFamily) get() *Family { return f.once.get() }

// familyOnce builds a family on first use.
type familyOnce struct {
	build func() *Family
	once  sync.Once
	fam   *Family
}

func (o *familyOnce) get() *Family {
	o.once.Do(func() { o.fam = o.build() })
	return o.fam
}

// generic is every other machine: the kernel's generic events, energy
// and msr where the kernel has them.
var genericFamily = familyOnce{build: func() *Family {
	return &Family{
		Name: "generic", Counters: 4,
		Metrics: concat(
			[]ratio.Def{ipc(instructions, cycles, "perf stat's \"insn per cycle\"")},
			energy(),
			x86Frequency(),
			[]ratio.Def{cyclesFrequency(cycles, "core cycles per second of cpu-clock")},
			mpki(instructions, "L1-dcache-load-misses", "LLC-load-misses", "branch-misses", "the kernel's generic cache and branch events"),
		),
	}
}}

func generic() *Family { return genericFamily.get() }
