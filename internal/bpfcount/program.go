package bpfcount

import (
	"fmt"

	"github.com/cilium/ebpf/asm"
)

// The stack frame of the program, as offsets from the frame pointer (R10),
// which the kernel gives 512 bytes below it. Every offset is fixed: the
// loops over events and levels are unrolled here, so that the verifier
// never meets a variable stack offset.
const (
	keyOff     = -8  // u64: a map key (a cgroup id) or a u32 key in its low half
	readingOff = -32 // struct reading: what bpf_perf_event_read_value wrote
	// deltaBase is where event 0's delta starts; event e's is
	// readingSize bytes further down per event.
	deltaBase = readingOff - readingSize
)

// readingSize is struct bpf_perf_event_value: counter, enabled, running.
const readingSize = 24

// Registers the body keeps across helper calls, which clobber R0 to R5.
const (
	rCPU     = asm.R6 // this CPU's id
	rPrev    = asm.R7 // &prev[cpu*nEvents+e], once looked up
	rSlot    = asm.R7 // after the events: the slot to charge, plus 1; 0 for none
	rKeyBase = asm.R8 // (slot*nEvents)*nCPU + cpu: a cgroup's event 0 here
)

// bpfCurrentCPU is BPF_F_CURRENT_CPU: the event of the CPU the program
// runs on, the only one bpf_perf_event_read_value can read.
const bpfCurrentCPU = 0xffffffff

// deltaOff is the stack offset of field f (0 counter, 1 enabled, 2
// running) of event e's delta.
func deltaOff(e, f int) int16 {
	return int16(deltaBase - readingSize*e + 8*f)
}

// maps are the descriptors the program reads and writes.
type maps struct {
	events []int // per event, a perf event array: cpu → the event there
	prev   int   // array: cpu*nEvents+ev → the last reading on that CPU
	slots  int   // hash: cgroup id → slot
	counts int   // array: (slot*nEvents+ev)*nCPU+cpu → the cgroup's sums there
}

// program is the body both programs run: on a cgroup switch, and at a
// fetch to charge what the cgroup running now has counted so far. It reads
// each event on this CPU, takes the delta from the previous reading here,
// and adds it to the nearest cgroup the agent counts of the task that
// runs now (the one switched out, for the switch event, which fires
// before the switch): its own, or else its nearest counted ancestor.
func program(m maps, nCPU, levels int) asm.Instructions {
	nEvents := len(m.events)
	if nEvents*readingSize-deltaBase > 512 {
		panic(fmt.Sprintf("bpfcount: %d events do not fit the stack", nEvents))
	}
	ins := asm.Instructions{
		asm.FnGetSmpProcessorId.Call(),
		asm.Mov.Reg(rCPU, asm.R0),
	}
	for e := range nEvents {
		next := fmt.Sprintf("event%d_done", e)
		store := fmt.Sprintf("event%d_store", e)
		// No delta unless a reading and a previous one say so.
		ins = append(ins, asm.Mov.Imm(asm.R1, 0))
		for f := range 3 {
			ins = append(ins, asm.StoreMem(asm.RFP, deltaOff(e, f), asm.R1, asm.DWord))
		}
		ins = append(ins,
			asm.LoadMapPtr(asm.R1, m.events[e]),
			asm.LoadImm(asm.R2, bpfCurrentCPU, asm.DWord),
			asm.Mov.Reg(asm.R3, asm.RFP),
			asm.Add.Imm(asm.R3, readingOff),
			asm.Mov.Imm(asm.R4, readingSize),
			asm.FnPerfEventReadValue.Call(),
			// An event not open on this CPU, or in error: nothing to add.
			asm.JNE.Imm(asm.R0, 0, next),
			asm.Mov.Reg(asm.R1, rCPU),
			asm.Mul.Imm(asm.R1, int32(nEvents)),
			asm.Add.Imm(asm.R1, int32(e)),
			asm.StoreMem(asm.RFP, keyOff, asm.R1, asm.Word),
			asm.LoadMapPtr(asm.R1, m.prev),
			asm.Mov.Reg(asm.R2, asm.RFP),
			asm.Add.Imm(asm.R2, keyOff),
			asm.FnMapLookupElem.Call(),
			asm.JEq.Imm(asm.R0, 0, next),
			asm.Mov.Reg(rPrev, asm.R0),
			// No previous reading (enabled 0: Attach cleared it), or one of
			// an event closed since (its enabled time is ahead of the new
			// one's): this reading only starts the next interval.
			asm.LoadMem(asm.R1, rPrev, 8, asm.DWord),
			asm.JEq.Imm(asm.R1, 0, store),
			asm.LoadMem(asm.R2, asm.RFP, readingOff+8, asm.DWord),
			asm.JLT.Reg(asm.R2, asm.R1, store),
		)
		for f := range 3 {
			ins = append(ins,
				asm.LoadMem(asm.R1, asm.RFP, readingOff+int16(8*f), asm.DWord),
				asm.LoadMem(asm.R2, rPrev, int16(8*f), asm.DWord),
				asm.Sub.Reg(asm.R1, asm.R2),
				asm.StoreMem(asm.RFP, deltaOff(e, f), asm.R1, asm.DWord),
			)
		}
		for f := range 3 {
			i := asm.LoadMem(asm.R1, asm.RFP, readingOff+int16(8*f), asm.DWord)
			if f == 0 {
				i = i.WithSymbol(store)
			}
			ins = append(ins, i, asm.StoreMem(rPrev, int16(8*f), asm.R1, asm.DWord))
		}
		ins = append(ins, asm.Mov.Imm(asm.R0, 0).WithSymbol(next))
	}
	// Find the deepest cgroup the agent counts among the task's own and
	// its ancestors, root (level 0) first, until the level below the
	// task's own, where the helper returns 0. Only that one is charged:
	// Counter.Read adds the sums of the counted cgroups below a cgroup to
	// its own, so the verifier walks each level and each event once, not
	// every event at every level.
	ins = append(ins, asm.Mov.Imm(rSlot, 0))
	for l := range levels {
		next := fmt.Sprintf("level%d_done", l)
		ins = append(ins,
			asm.Mov.Imm(asm.R1, int32(l)),
			asm.FnGetCurrentAncestorCgroupId.Call(),
			asm.JEq.Imm(asm.R0, 0, "charge"),
			asm.StoreMem(asm.RFP, keyOff, asm.R0, asm.DWord),
			asm.LoadMapPtr(asm.R1, m.slots),
			asm.Mov.Reg(asm.R2, asm.RFP),
			asm.Add.Imm(asm.R2, keyOff),
			asm.FnMapLookupElem.Call(),
			asm.JEq.Imm(asm.R0, 0, next), // a cgroup the agent does not count
			asm.LoadMem(rSlot, asm.R0, 0, asm.Word),
			asm.Add.Imm(rSlot, 1),
			asm.Mov.Imm(asm.R0, 0).WithSymbol(next),
		)
	}
	ins = append(ins,
		asm.JEq.Imm(rSlot, 0, "exit").WithSymbol("charge"), // no counted cgroup
		asm.Mov.Reg(rKeyBase, rSlot),
		asm.Sub.Imm(rKeyBase, 1),
		asm.Mul.Imm(rKeyBase, int32(nEvents*nCPU)),
		asm.Add.Reg(rKeyBase, rCPU),
	)
	for e := range nEvents {
		skip := fmt.Sprintf("charge_event%d_done", e)
		ins = append(ins,
			asm.Mov.Reg(asm.R1, rKeyBase),
			asm.Add.Imm(asm.R1, int32(e*nCPU)),
			asm.StoreMem(asm.RFP, keyOff, asm.R1, asm.Word),
			asm.LoadMapPtr(asm.R1, m.counts),
			asm.Mov.Reg(asm.R2, asm.RFP),
			asm.Add.Imm(asm.R2, keyOff),
			asm.FnMapLookupElem.Call(),
			asm.JEq.Imm(asm.R0, 0, skip),
		)
		for f := range 3 {
			ins = append(ins,
				asm.LoadMem(asm.R1, asm.R0, int16(8*f), asm.DWord),
				asm.LoadMem(asm.R2, asm.RFP, deltaOff(e, f), asm.DWord),
				asm.Add.Reg(asm.R1, asm.R2),
				asm.StoreMem(asm.R0, int16(8*f), asm.R1, asm.DWord),
			)
		}
		ins = append(ins, asm.Mov.Imm(asm.R0, 0).WithSymbol(skip))
	}
	return append(ins, asm.Mov.Imm(asm.R0, 0).WithSymbol("exit"), asm.Return())
}
