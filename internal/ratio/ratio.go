// Package ratio defines perfevent's ratio metrics (perfevent.ratio.*): the
// quotient of two counters over an interval, such as instructions per cycle,
// computed by the agent so that both counts come from one read of one perf
// group and cover exactly the same time.
//
// # Interval
//
// A ratio's value is Scale × Δnumerator / Δdenominator, where the Δ are the
// increases of the agent's (multiplex-scaled) accumulators since the same
// client's previous fetch of the same ratio. A client is a pmcd client slot
// and its context number, as the FETCH PDU carries them, so pmval, pmlogger
// (each metric at its own logging interval), pmie and every pmproxy context
// each see the interval they asked for, without any configuration. The first
// fetch of a ratio by a client has nothing to subtract and gives no value,
// as PCP's rate() does; so does an interval in which the denominator did not
// move. When pmcd reports that a client went away, its history is dropped
// (Tracker.Forget), so a slot reused by a new client starts afresh.
//
// # Operands
//
// Operands are event names as perfevent.conf spells them. The built-in
// ratios use the kernel's generic events (PERF_TYPE_HARDWARE and
// PERF_TYPE_SOFTWARE), which the kernel maps to each vendor's encoding, so
// one definition serves Intel, AMD, Arm and POWER alike. A ratio whose
// operands are not both counted on this machine, on the same CPUs, is left
// out of the namespace: it is not an error, a VM without a hardware PMU
// simply has no perfevent.ratio.ipc.
package ratio

import (
	"fmt"
	"math"
)

// Unit is what a ratio's value measures.
type Unit uint8

const (
	// Pure is a dimensionless quotient (instructions per cycle, a miss ratio).
	Pure Unit = iota
	// PerSecond is events per second of the denominator, whose counts are
	// nanoseconds (cpu-clock, task-clock): Scale is then 1e9.
	PerSecond
)

// Def is one ratio metric.
type Def struct {
	Name   string  // below perfevent.ratio, e.g. "ipc"
	Num    string  // the numerator's event
	Den    string  // the denominator's event
	Scale  float64 // multiplies Δnum/Δden
	Unit   Unit
	About  string // what it means, for the long help
	Source string // where the formula comes from
}

// Builtin are the ratios the agent offers whenever their operands are
// counted. Every operand here is a configured event of the shipped
// perfevent.conf; context_switches_per_cpu_second needs only software
// events, so it works on a VM without a hardware PMU.
var Builtin = []Def{
	{
		Name: "ipc", Num: "instructions", Den: "cycles", Scale: 1,
		About:  "Instructions retired per CPU cycle (instructions / cycles).",
		Source: "perf stat's \"insn per cycle\"; Intel SDM vol. 3B and AMD PPR, IPC",
	},
	{
		Name: "cpi", Num: "cycles", Den: "instructions", Scale: 1,
		About:  "CPU cycles per instruction retired (cycles / instructions), the inverse of ipc.",
		Source: "Intel 64 and IA-32 Architectures Optimization Reference Manual, CPI",
	},
	{
		Name: "branch_miss_ratio", Num: "branch-misses", Den: "branch-instructions", Scale: 1,
		About:  "Mispredicted branches per branch instruction retired (branch-misses / branch-instructions).",
		Source: "perf stat's \"of all branches\"",
	},
	{
		Name: "cache_miss_ratio", Num: "cache-misses", Den: "cache-references", Scale: 1,
		About:  "Last-level cache misses per reference (cache-misses / cache-references).",
		Source: "perf stat's \"of all cache refs\"; the kernel maps both to the LLC events of each vendor",
	},
	{
		Name: "context_switches_per_cpu_second", Num: "context-switches", Den: "cpu-clock", Scale: 1e9, Unit: PerSecond,
		About:  "Context switches per second of CPU time (context-switches / cpu-clock seconds). cpu-clock counts nanoseconds, so the quotient is scaled by 1e9.",
		Source: "perf stat's \"/sec\" shadow metric of context-switches against cpu-clock",
	},
	// TopDown level 1 (Intel Ice Lake and later, PERF_METRICS): the kernel
	// reports each topdown-* event in slots, so each share is that event
	// over slots. The kernel opens topdown-* only in a group led by slots,
	// which Group gives them when cpu.slots comes first in perfevent.conf.
	topdown("retiring", "cpu.topdown-retiring", "slots that retired a micro-op"),
	topdown("bad_speculation", "cpu.topdown-bad-spec", "slots wasted on mispredicted work"),
	topdown("frontend_bound", "cpu.topdown-fe-bound", "slots the front end left without a micro-op"),
	topdown("backend_bound", "cpu.topdown-be-bound", "slots stalled for back-end resources"),
}

func topdown(name, event, what string) Def {
	return Def{
		Name: "topdown_" + name, Num: event, Den: "cpu.slots", Scale: 1,
		About:  fmt.Sprintf("TopDown level 1: the share of pipeline slots that were %s (%s / cpu.slots).", what, event),
		Source: "Intel Optimization Reference Manual, Top-down Microarchitecture Analysis; the kernel's and perf's topdown documentation (metrics in slots)",
	}
}

// Check reports what is wrong with d, if anything.
func (d Def) Check() error {
	switch {
	case d.Name == "":
		return fmt.Errorf("a ratio has no name")
	case d.Name == "all":
		return fmt.Errorf("ratio name %q is taken by perfevent.ratio.all, the whole-machine values", d.Name)
	case d.Num == "" || d.Den == "":
		return fmt.Errorf("ratio %q needs a numerator and a denominator", d.Name)
	case d.Scale == 0 || math.IsNaN(d.Scale) || math.IsInf(d.Scale, 0):
		return fmt.Errorf("ratio %q: scale %v", d.Name, d.Scale)
	}
	return nil
}

// Of is the ratio over one interval: Scale × dNum / dDen, and false when
// dDen is 0 (nothing to divide by: the CPU was idle, or the counters were
// closed for a reservation).
func (d *Def) Of(dNum, dDen uint64) (float64, bool) {
	if dDen == 0 {
		return 0, false
	}
	return d.Scale * float64(dNum) / float64(dDen), true
}
