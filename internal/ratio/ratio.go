// Package ratio defines perfevent's ratio metrics (perfevent.ratio.*): the
// quotient of counters over an interval, such as instructions per cycle,
// computed by the agent so that both counts come from one read of one perf
// group and cover exactly the same time; or the rate of counters over
// wall-clock time, such as DRAM bytes per second from the memory
// controllers, which count per package and have no CPU time of their own.
//
// # Interval
//
// A ratio's value is Scale × ΣΔnumerator / Δdenominator, where the Δ are
// the increases of the agent's (multiplex-scaled) accumulators since the
// same client's previous fetch of the same ratio, and the numerator is the
// weighted sum of its events. A compound ratio (Compound) is instead a
// quotient of sums of products of such sums, over the same interval. A client is a pmcd client slot and its
// context number, as the FETCH PDU carries them, so pmval, pmlogger (each
// metric at its own logging interval), pmie and every pmproxy context each
// see the interval they asked for, without any configuration. The
// denominator Elapsed (duration_time) is the wall-clock time between the
// client's fetches. A client's first fetch of a ratio, and its first after
// a reload (the Tracker belongs to one generation of counters), have no
// interval of their own: they get the agent's, from Recent, which samples
// each ratio whenever anyone fetches it and serves the interval from the
// newest sample at least a second old (see Recent for when it is longer).
// An interval in which the denominator did not move has no value. When
// pmcd reports that a client went away, its history is dropped
// (Tracker.Forget), so a slot reused by a new client starts afresh.
//
// # Operands
//
// Operands are event names as perfevent.conf spells them, or globs and
// alternatives over them. The built-in ratios use the kernel's generic
// events (PERF_TYPE_HARDWARE and PERF_TYPE_SOFTWARE) first, which the
// kernel maps to each vendor's encoding, then each vendor's names as
// libpfm4 gives them, so one definition serves Intel, AMD, Arm and POWER
// alike. A ratio whose operands are not all counted on this machine, on the
// same CPUs, is left out of the namespace: it is not an error, a VM without
// a hardware PMU simply has no perfevent.ratio.ipc.
package ratio

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Unit is what a ratio's value measures.
type Unit uint8

const (
	// Pure is a dimensionless quotient (instructions per cycle, a miss ratio).
	Pure Unit = iota
	// PerSecond is events per second of the denominator, whose counts are
	// nanoseconds (cpu-clock, task-clock, Elapsed): Scale is then 1e9.
	PerSecond
	// BytesPerSecond is bytes per second: a numerator weighed in bytes
	// (Def.Bytes) over nanoseconds, Scale 1e9.
	BytesPerSecond
)

// Elapsed is the denominator that is no event: the wall-clock time between
// the client's two fetches, in nanoseconds. perf stat calls the same thing
// duration_time, and its metrics divide uncore counts by it, since an
// uncore PMU (a memory controller) counts for its whole package and has no
// CPU time of its own to divide by.
const Elapsed = "duration_time"

// Def is one ratio metric.
type Def struct {
	Name string // below perfevent.ratio, e.g. "ipc"
	// Num is the numerator: the sum of its terms. A term is an event name
	// or a glob (path.Match) over the configured event names, and may list
	// alternatives separated by "|"; it must match at least one counted
	// event, and every event it matches is added in.
	Num   []string
	Den   string  // the denominator's event, or Elapsed
	Scale float64 // multiplies ΣΔnum/Δden
	Unit  Unit
	// Bytes weighs each numerator event by the bytes one count stands
	// for: the kernel's .scale in its .unit (uncore_imc's cas_count_read
	// is 6.103515625e-5 MiB), else BytesPerCAS.
	Bytes bool
	// Weights, if set, multiplies each term of Num (parallel to it): a
	// vendor's formula that subtracts events or counts a cycle as several
	// pipeline slots stays one linear sum over one denominator.
	Weights []float64
	// KernelScale weighs each numerator event by the kernel's .scale
	// whatever its unit (the power PMU's energy counts are 2^-32 J);
	// events without one count 1.
	KernelScale bool
	// Compound, if set, makes the ratio a quotient of sums of products of
	// linear forms of its operands (see Compound, NewCompound): Num then
	// lists every operand once, and Den is one of them.
	Compound *Compound
	// Group is the catalog's group of the ratio ("topdown", "bandwidth",
	// …), by which ratios.conf turns ratios off and on; "" for a user's.
	Group  string
	About  string // what it means, for the long help
	Source string // where the formula comes from
	// OneLine and OneLineAll, if set, are the one-line help of the
	// per-instance and whole-machine metrics; by default the formula.
	OneLine, OneLineAll string
}

// BytesPerCAS is what one DRAM CAS command moves when the kernel gives no
// scale: a 64-byte cache line (Intel's uncore performance monitoring
// guides: bandwidth = CAS_COUNT × 64).
const BytesPerCAS = 64

// Formula is the definition as one line: "instructions / cycles",
// "(a + b) / duration_time × 1e+09".
func (d *Def) Formula() string {
	if d.Compound != nil {
		return d.Compound.formula(d.Scale, func(op string) string { return op })
	}
	terms := make([]string, len(d.Num))
	for j, t := range d.Num {
		terms[j] = weighted(t, d.weight(j), j == 0)
	}
	num := strings.Join(terms, " ")
	if len(d.Num) > 1 {
		num = "(" + num + ")"
	}
	if d.Bytes {
		num += " × bytes"
	}
	if d.KernelScale {
		num += " × scale"
	}
	s := num + " / " + d.Den
	if d.Scale != 1 {
		s += fmt.Sprintf(" × %g", d.Scale)
	}
	return s
}

// Brief is Formula with each term's first alternative only: the event
// names as the catalog opens them, for notes.
func (d *Def) Brief() string {
	b := *d
	first := func(t string) string { f, _, _ := strings.Cut(t, "|"); return f }
	b.Num = make([]string, len(d.Num))
	for j, t := range d.Num {
		b.Num[j] = first(t)
	}
	b.Den = first(d.Den)
	if d.Compound != nil {
		return d.Compound.formula(d.Scale, first)
	}
	return b.Formula()
}

// weight is the weight of numerator term j: Weights[j], or 1.
func (d *Def) weight(j int) float64 {
	if j < len(d.Weights) {
		return d.Weights[j]
	}
	return 1
}

// weighted writes one term of a sum: "a", "+ a", "- a", "+ 4 × a".
func weighted(term string, w float64, first bool) string {
	sign := "+ "
	if w < 0 {
		sign, w = "- ", -w
	}
	if w != 1 {
		term = fmt.Sprintf("%g × %s", w, term)
	}
	if first {
		if sign == "- " {
			return "-" + term
		}
		return term
	}
	return sign + term
}

// The instructions retired and the core cycles, by the kernel's generic
// names first, then by those that libpfm4 gives each vendor's PMU, as a
// configuration written for the C agent names them: Intel's architectural
// events, AMD Zen's, Arm's common events and POWER's.
const (
	instructions = "instructions|INSTRUCTION_RETIRED|INST_RETIRED:ANY_P|RETIRED_INSTRUCTIONS|INST_RETIRED|PM_INST_CMPL"
	cycles       = "cycles|UNHALTED_CORE_CYCLES|CPU_CLK_UNHALTED:THREAD_P|CYCLES_NOT_IN_HALT|CPU_CYCLES|PM_CYC"
)

// Builtin are the ratios the agent offers whenever their operands are
// counted. The operands of the first five are configured events of the
// shipped perfevent.conf; context_switches_per_cpu_second needs only
// software events, so it works on a VM without a hardware PMU. The memory
// controllers' and TopDown's events are machine-specific: a user lists
// them in [dynamic], and their ratios follow.
var Builtin = []Def{
	{
		Name: "ipc", Num: []string{instructions}, Den: cycles, Scale: 1,
		About:  "Instructions retired per CPU cycle (instructions / cycles).",
		Source: "perf stat's \"insn per cycle\"; Intel SDM vol. 3B and AMD PPR, IPC",
	},
	{
		Name: "cpi", Num: []string{cycles}, Den: instructions, Scale: 1,
		About:  "CPU cycles per instruction retired (cycles / instructions), the inverse of ipc.",
		Source: "Intel 64 and IA-32 Architectures Optimization Reference Manual, CPI",
	},
	{
		Name: "branch_miss_ratio", Num: []string{"branch-misses"}, Den: "branch-instructions", Scale: 1,
		About:  "Mispredicted branches per branch instruction retired (branch-misses / branch-instructions).",
		Source: "perf stat's \"of all branches\"",
	},
	{
		Name: "cache_miss_ratio", Num: []string{"cache-misses"}, Den: "cache-references", Scale: 1,
		About:  "Last-level cache misses per reference (cache-misses / cache-references).",
		Source: "perf stat's \"of all cache refs\"; the kernel maps both to the LLC events of each vendor",
	},
	{
		Name: "context_switches_per_cpu_second", Num: []string{"context-switches"}, Den: "cpu-clock", Scale: 1e9, Unit: PerSecond,
		About:  "Context switches per second of CPU time (context-switches / cpu-clock seconds). cpu-clock counts nanoseconds, so the quotient is scaled by 1e9.",
		Source: "perf stat's \"/sec\" shadow metric of context-switches against cpu-clock",
	},
	// DRAM traffic, from the memory controllers' CAS commands, read and
	// written: the kernel's uncore_imc_N PMUs on Intel servers (or
	// libpfm4's names for the same events), the free-running counters of
	// client parts. The kernel gives these in MiB (a scale of 64 bytes
	// per count); its scale is used.
	{
		Name: "mem_bandwidth",
		Num: []string{
			"uncore_imc_*.cas_count_read|uncore_imc.data_reads|uncore_imc_free_running_*.data_read|*_unc_imc*::UNC_M_CAS_COUNT:RD",
			"uncore_imc_*.cas_count_write|uncore_imc.data_writes|uncore_imc_free_running_*.data_write|*_unc_imc*::UNC_M_CAS_COUNT:WR",
		},
		Den: Elapsed, Scale: 1e9, Unit: BytesPerSecond, Bytes: true,
		OneLine:    "DRAM bytes read and written per second, per package",
		OneLineAll: "DRAM bytes read and written per second, all packages",
		About: "DRAM bandwidth in bytes per second: the memory controllers' read and write CAS commands " +
			"(each one 64-byte line), summed over every memory controller of the package, over the wall-clock time " +
			"since this client's previous fetch.",
		Source: "Intel's uncore performance monitoring reference manuals (Xeon E5 to Xeon Scalable), memory " +
			"bandwidth = (CAS_COUNT.RD + CAS_COUNT.WR) × 64 bytes; perf's memory bandwidth metrics over duration_time",
	},
	// TopDown level 1 (Intel Ice Lake and later, PERF_METRICS): the kernel
	// reports each topdown-* event in slots, so each share is that event
	// over slots. The kernel opens topdown-* only in a group led by slots,
	// which Group gives them when cpu.slots comes first in perfevent.conf.
	{
		Name: "topdown_retiring", Num: []string{"cpu.topdown-retiring"}, Den: "cpu.slots", Scale: 1,
		About:  "TopDown level 1: the share of pipeline slots that were slots that retired a micro-op (cpu.topdown-retiring / cpu.slots).",
		Source: topdownSource,
	},
	{
		Name: "topdown_bad_speculation", Num: []string{"cpu.topdown-bad-spec"}, Den: "cpu.slots", Scale: 1,
		About:  "TopDown level 1: the share of pipeline slots that were slots wasted on mispredicted work (cpu.topdown-bad-spec / cpu.slots).",
		Source: topdownSource,
	},
	{
		Name: "topdown_frontend_bound", Num: []string{"cpu.topdown-fe-bound"}, Den: "cpu.slots", Scale: 1,
		About:  "TopDown level 1: the share of pipeline slots that were slots the front end left without a micro-op (cpu.topdown-fe-bound / cpu.slots).",
		Source: topdownSource,
	},
	{
		Name: "topdown_backend_bound", Num: []string{"cpu.topdown-be-bound"}, Den: "cpu.slots", Scale: 1,
		About:  "TopDown level 1: the share of pipeline slots that were slots stalled for back-end resources (cpu.topdown-be-bound / cpu.slots).",
		Source: topdownSource,
	},
}

// topdownSource is every TopDown ratio's source. The four are written out
// rather than made by a function so that Builtin is data in the binary,
// not code that every start runs.
const topdownSource = "Intel Optimization Reference Manual, Top-down Microarchitecture Analysis; the kernel's and perf's topdown documentation (metrics in slots)"

// Check reports what is wrong with d, if anything.
func (d Def) Check() error {
	switch {
	case d.Name == "":
		return fmt.Errorf("a ratio has no name")
	case d.Name == "all":
		return fmt.Errorf("ratio name %q is taken by perfevent.ratio.all, the whole-machine values", d.Name)
	case d.Name == "numerator" || d.Name == "denominator":
		return fmt.Errorf("ratio name %q is taken by perfevent.ratio.%s, the ratios' operands", d.Name, d.Name)
	case len(d.Num) == 0 || slices.Contains(d.Num, "") || d.Den == "":
		return fmt.Errorf("ratio %q needs a numerator and a denominator", d.Name)
	case d.Scale == 0 || math.IsNaN(d.Scale) || math.IsInf(d.Scale, 0):
		return fmt.Errorf("ratio %q: scale %v", d.Name, d.Scale)
	case len(d.Weights) > 0 && len(d.Weights) != len(d.Num):
		return fmt.Errorf("ratio %q: %d weights for %d numerator terms", d.Name, len(d.Weights), len(d.Num))
	case d.Compound != nil:
		return d.Compound.check(&d)
	}
	return nil
}

// Of is the ratio over one interval: Scale × dNum / dDen, and false when
// dDen is 0 (nothing to divide by: the CPU was idle, or the counters were
// closed for a reservation).
func (d *Def) Of(dNum float64, dDen uint64) (float64, bool) {
	if dDen == 0 {
		return 0, false
	}
	return d.Scale * dNum / float64(dDen), true
}
