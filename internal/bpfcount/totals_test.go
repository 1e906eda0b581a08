package bpfcount

import (
	"bytes"
	"encoding/binary"
	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"perfevent/internal/bpf/asm"
)

// TestTotalledTypes checks which events lose their per-CPU sums: only
// the kinds the kernel never multiplexes.
func TestTotalledTypes(t *testing.T) {
	for _, c := range []struct {
		typ  uint32
		want bool
	}{
		{unix.PERF_TYPE_SOFTWARE, true},
		{unix.PERF_TYPE_TRACEPOINT, true},
		{unix.PERF_TYPE_HARDWARE, false},
		{unix.PERF_TYPE_HW_CACHE, false},
		{unix.PERF_TYPE_RAW, false},
		{unix.PERF_TYPE_BREAKPOINT, false},
		{8, false}, // a PMU's dynamic type (cpu, msr, armv8_pmuv3_0...)
	} {
		if got := Totalled(c.typ); got != c.want {
			t.Errorf("Totalled(type %d) = %v, want %v", c.typ, got, c.want)
		}
	}
	events := []unix.PerfEventAttr{
		{Type: unix.PERF_TYPE_HARDWARE, Config: unix.PERF_COUNT_HW_CPU_CYCLES},
		{Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_CPU_CLOCK},
		{Type: unix.PERF_TYPE_RAW, Config: 0xc0},
		{Type: unix.PERF_TYPE_TRACEPOINT, Config: 1},
		{Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_CONTEXT_SWITCHES},
	}
	total, col, nPer, nTot := layout(events)
	if want := []bool{false, true, false, true, true}; !slices.Equal(total, want) {
		t.Errorf("totalled %v, want %v", total, want)
	}
	if want := []int{0, 0, 1, 1, 2}; !slices.Equal(col, want) || nPer != 2 || nTot != 3 {
		t.Errorf("columns %v, %d per CPU and %d totalled; want %v, 2 and 3", col, nPer, nTot, want)
	}
	// The shipped shape, two software events, at 768 CPUs: the room asked
	// for, where per-CPU sums held 910.
	if got := roomFor(0, 2, 1000, 768); got != 1000 {
		t.Errorf("2 totalled events at 768 CPUs: room for %d cgroups, want 1000", got)
	}
}

// TestProgramChargesTotalsAtomically checks the charge of a mixed set:
// each per-CPU event's sums looked up in the counts map and added by a
// load and a store (this CPU alone writes them), each totalled event's
// past the per-CPU sums, at totalsAt, and added by a plain atomic add of each field
// (every CPU may add to them at once), and the cache's one fetch-add
// still a fetch.
func TestProgramChargesTotalsAtomically(t *testing.T) {
	const counts, nCPU, totalsAt = 3, 768, 100 * 2 * 768
	total := []bool{false, true, false, true, true}
	m := maps{events: make([]int, len(total)), prev: 1, slots: 2, counts: counts, cache: 4, total: total, totalsAt: totalsAt}
	ins := charge(m, nCPU)
	adds, fetches, stores, lookups := 0, 0, 0, map[int64]int{}
	var keys []int64
	for i, in := range ins {
		if in.IsLoadFromMap() {
			lookups[in.Constant]++
		}
		if in.OpCode.ALUOp() == asm.Add && in.OpCode.Source() == asm.ImmSource && in.Dst == asm.R1 {
			keys = append(keys, in.Constant)
		}
		if in.OpCode.Class().IsStore() && in.OpCode.Mode() == asm.MemMode && in.Dst == asm.R0 {
			stores++
		}
		if in.OpCode.Mode() != asm.AtomicMode {
			continue
		}
		var buf bytes.Buffer
		if _, err := in.Marshal(&buf, binary.LittleEndian); err != nil {
			t.Fatal(err)
		}
		if imm := binary.LittleEndian.Uint32(buf.Bytes()[4:]); imm != 0 || in.OpCode.Size() != asm.DWord || in.Dst != asm.R0 {
			t.Fatalf("instruction %d, %v: immediate %#x, want a plain 64-bit BPF_ADD into the looked-up total", i, in, imm)
		}
		adds++
	}
	if lookups[counts] != 5 || len(lookups) != 1 {
		t.Errorf("lookups by map %v, want 5 in the counts map", lookups)
	}
	// Per event, what is added to the slot's first key: a per-CPU
	// event's column of CPUs, a totalled one's total past the sums.
	if want := []int64{0, totalsAt, nCPU, totalsAt + 1, totalsAt + 2}; !slices.Equal(keys, want) {
		t.Errorf("keys at %v past the slot's, want %v", keys, want)
	}
	if adds != 3*3 || stores != 2*3 {
		t.Errorf("%d atomic adds and %d stores into sums, want 9 (3 totalled events × 3 fields) and 6", adds, stores)
	}
	for _, in := range program(m, 768, Levels) {
		if in.OpCode.Mode() == asm.AtomicMode && in.Constant == bpfFetch {
			fetches++
		}
	}
	if fetches != 1 {
		t.Errorf("%d fetch-adds in the program, want the cache's 1", fetches)
	}
}
