package bpfcount

import (
	"fmt"

	"perfevent/internal/bpf/asm"
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
	rKeyBase = asm.R8 // (slot*nPerCPU)*nCPU + cpu: a cgroup's first per-CPU event here
	rID      = asm.R8 // before the charge: the running task's cgroup id
	rGen     = asm.R9 // the generation of the slots this run goes by
)

// The cache remembers, per CPU, the slot the level walk found for the
// cgroups last seen there: a switch between the same cgroups, the
// common case, then costs one array lookup instead of a helper call and
// a hash lookup per level. Each CPU has a block of cacheBlock entries
// (struct cacheEntry) in one array: the first holds, in its gen field,
// the generation of the slots, which the agent raises on every change
// of the hash map (Counter.bump); the others, indexed by the low bits of
// a cgroup id, hold a cgroup id, the generation its walk saw, and its
// slot plus 1 (0: none counted). An entry of another generation is
// walked again. Direct-mapped, so that the lookup is an index.
const (
	cacheWays  = 64 // entries per CPU; a power of 2
	cacheBlock = 1 + cacheWays
	// entry fields
	cacheID   = 0
	cacheGen  = 8
	cacheSlot = 16
)

// cacheEntrySize is struct cacheEntry: id, gen, slot+1, each a u64.
const cacheEntrySize = 24

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
	counts int   // array: (slot*nPerCPU+col)*nCPU+cpu → the cgroup's sums there; totalsAt+slot*nTotalled+col → its totals
	cache  int   // array: cpu*cacheBlock → the generation; +1+(id%cacheWays) → an entry
	// total says per event whether it is Totalled (nil: none is); an
	// event's col is its index among the events of its kind.
	total    []bool
	totalsAt int // the first total in counts
}

// layout is m's events' columns and the number of each kind.
func (m maps) layout() (col []int, nPer, nTot int) {
	for e := range m.events {
		if e < len(m.total) && m.total[e] {
			col = append(col, nTot)
			nTot++
		} else {
			col = append(col, nPer)
			nPer++
		}
	}
	return col, nPer, nTot
}

// program is the body both programs run: on a cgroup switch, and at a
// fetch to charge what the cgroup running now has counted so far. It reads
// each event on this CPU, takes the delta from the previous reading here,
// and adds it to the nearest cgroup the agent counts of the task that
// runs now (the one switched out, for the switch event, which fires
// before the switch): its own, or else its nearest counted ancestor.
func program(m maps, nCPU, levels int) asm.Instructions {
	ins := readEvents(m)
	ins = append(ins, cachedSlot(m, levels)...)
	return append(ins, charge(m, nCPU)...)
}

// cachedSlot sets rSlot from this CPU's cache entry for the running
// task's cgroup if the entry is of the current generation, and else from
// findSlot, and keeps the answer in the entry.
func cachedSlot(m maps, levels int) asm.Instructions {
	// lookupEntry leaves in R0 the entry at rCPU*cacheBlock plus what R1
	// holds, or jumps to miss when the verifier's null check fails.
	lookupEntry := func(miss string) asm.Instructions {
		return append(asm.Instructions{
			asm.Mov.Reg(asm.R2, rCPU),
			asm.Mul.Imm(asm.R2, cacheBlock),
			asm.Add.Reg(asm.R1, asm.R2),
		}, lookup(m.cache, asm.R1, asm.Word, miss)...)
	}
	// entry puts the index of rID's entry in its block in R1.
	entry := func() asm.Instructions {
		return asm.Instructions{
			asm.Mov.Reg(asm.R1, rID),
			asm.And.Imm(asm.R1, cacheWays-1),
			asm.Add.Imm(asm.R1, 1),
		}
	}
	ins := asm.Instructions{
		asm.Mov.Imm(rSlot, 0),
		asm.FnGetCurrentCgroupId.Call(),
		asm.Mov.Reg(rID, asm.R0),
		asm.Mov.Imm(asm.R1, 0),
	}
	ins = append(ins, lookupEntry("charge")...)
	ins = append(ins, asm.LoadMem(rGen, asm.R0, cacheGen, asm.DWord))
	ins = append(ins, entry()...)
	ins = append(ins, lookupEntry("charge")...)
	ins = append(ins,
		asm.LoadMem(asm.R1, asm.R0, cacheID, asm.DWord),
		asm.JNE.Reg(asm.R1, rID, "cache_miss"),
		asm.LoadMem(asm.R1, asm.R0, cacheGen, asm.DWord),
		asm.JNE.Reg(asm.R1, rGen, "cache_miss"),
		asm.LoadMem(rSlot, asm.R0, cacheSlot, asm.DWord),
		asm.Ja.Label("charge"),
	)
	// A miss reads the generation again, atomically: a full barrier, so
	// that the walk sees the hash map as it was when the agent raised
	// the generation read, on a CPU that orders loads as it likes.
	ins = append(ins, asm.Mov.Imm(asm.R1, 0).WithSymbol("cache_miss"))
	ins = append(ins, lookupEntry("charge")...)
	ins = append(ins, asm.Mov.Imm(rGen, 0), fetchAdd(asm.R0, rGen, cacheGen))
	ins = append(ins, findSlot(m, levels, "cache_store")...)
	store := entry()
	store[0] = store[0].WithSymbol("cache_store")
	ins = append(ins, store...)
	ins = append(ins, lookupEntry("charge")...)
	return append(ins,
		asm.StoreMem(asm.R0, cacheID, rID, asm.DWord),
		asm.StoreMem(asm.R0, cacheGen, rGen, asm.DWord),
		asm.StoreMem(asm.R0, cacheSlot, rSlot, asm.DWord),
	)
}

// readEvents reads each event on this CPU, keeps the reading in prev and
// leaves the delta from the previous one on the stack, rCPU set.
func readEvents(m maps) asm.Instructions {
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
		)
		ins = append(ins, lookup(m.prev, asm.R1, asm.Word, next)...)
		ins = append(ins,
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
	return ins
}

// findSlot sets rSlot to the slot to charge, plus 1, or 0 for none, and
// goes on at done.
func findSlot(m maps, levels int, done string) asm.Instructions {
	var ins asm.Instructions
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
			asm.JEq.Imm(asm.R0, 0, done),
		)
		// Not found: a cgroup the agent does not count.
		ins = append(ins, lookup(m.slots, asm.R0, asm.DWord, next)...)
		ins = append(ins,
			asm.LoadMem(rSlot, asm.R0, 0, asm.Word),
			asm.Add.Imm(rSlot, 1),
			asm.Mov.Imm(asm.R0, 0).WithSymbol(next),
		)
	}
	return ins
}

// charge adds the deltas to slot rSlot-1's sums on this CPU, or to its
// totals for a Totalled event, and exits. A sum on this CPU is written
// by this CPU alone, a load and a store; a total is added to by every
// CPU that runs the cgroup, so atomically.
func charge(m maps, nCPU int) asm.Instructions {
	col, nPer, nTot := m.layout()
	ins := asm.Instructions{
		asm.JEq.Imm(rSlot, 0, "exit").WithSymbol("charge"), // no counted cgroup
		asm.Sub.Imm(rSlot, 1),
		asm.Mov.Reg(rKeyBase, rSlot),
		asm.Mul.Imm(rKeyBase, int32(nPer*nCPU)),
		asm.Add.Reg(rKeyBase, rCPU),
		asm.Mul.Imm(rSlot, int32(nTot)),
	}
	for e := range m.events {
		skip := fmt.Sprintf("charge_event%d_done", e)
		total := e < len(m.total) && m.total[e]
		if total {
			ins = append(ins,
				asm.Mov.Reg(asm.R1, rSlot),
				asm.Add.Imm(asm.R1, int32(m.totalsAt+col[e])),
			)
		} else {
			ins = append(ins,
				asm.Mov.Reg(asm.R1, rKeyBase),
				asm.Add.Imm(asm.R1, int32(col[e]*nCPU)),
			)
		}
		ins = append(ins, lookup(m.counts, asm.R1, asm.Word, skip)...)
		for f := range 3 {
			if total {
				ins = append(ins,
					asm.LoadMem(asm.R1, asm.RFP, deltaOff(e, f), asm.DWord),
					atomicAdd(asm.R0, asm.R1, int16(8*f)),
				)
				continue
			}
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

// lookup looks up, in the map mapFD, the key that register key holds
// (size bytes of it, stored on the stack at keyOff), and leaves a pointer
// to the value in R0, or jumps to miss when there is none: the verifier
// lets the value be used only past that null check.
func lookup(mapFD int, key asm.Register, size asm.Size, miss string) asm.Instructions {
	return asm.Instructions{
		asm.StoreMem(asm.RFP, keyOff, key, size),
		asm.LoadMapPtr(asm.R1, mapFD),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, keyOff),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, miss),
	}
}

// atomicAdd is *(u64 *)(dst+off) += src, atomically: BPF_ADD without
// BPF_FETCH, an immediate of 0.
func atomicAdd(dst, src asm.Register, off int16) asm.Instruction {
	return asm.AddAtomic.Mem(dst, src, asm.DWord, off)
}

// bpfFetch is BPF_ADD|BPF_FETCH, the immediate of an atomic fetch-add.
const bpfFetch = 0x01

// fetchAdd is *(u64 *)(dst+off) += src, src set to the value before. Our
// asm puts BPF_FETCH in the immediate itself; the constant says it too
// because cilium/ebpf's asm, which TestProgramBytesMatchCilium assembles
// this file with, marshals the constant there and would leave it out.
func fetchAdd(dst, src asm.Register, off int16) asm.Instruction {
	i := asm.FetchAdd.Mem(dst, src, asm.DWord, off)
	i.Constant = bpfFetch
	return i
}
