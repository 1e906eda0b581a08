package bpfcount

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	"perfevent/internal/bpf/asm"
)

func TestSlotsReuseTheLowestFreed(t *testing.T) {
	s := newSlots(3)
	want := func(id uint64, slot int, added, fresh bool) {
		t.Helper()
		got, a, f, err := s.add(id)
		if err != nil || got != slot || a != added || f != fresh {
			t.Fatalf("add(%d) = %d, added %v, fresh %v, %v; want %d, added %v, fresh %v", id, got, a, f, err, slot, added, fresh)
		}
	}
	remove := func(id uint64, gone bool) {
		t.Helper()
		if _, g, ok := s.remove(id); !ok || g != gone {
			t.Fatalf("remove(%d): gone %v, found %v; want gone %v", id, g, ok, gone)
		}
	}
	want(100, 0, true, true)
	want(200, 1, true, true)
	want(300, 2, true, true)
	if _, _, _, err := s.add(400); err == nil || !strings.Contains(err.Error(), "all 3 cgroup slots are taken") {
		t.Fatalf("a fourth cgroup in 3 slots: %v, want the slots taken", err)
	}
	// A second add, as a reload's new Tracker makes, shares the slot, and
	// the slot stays until both are removed.
	want(200, 1, false, false)
	remove(200, false)
	remove(300, true)
	remove(100, true)
	if _, _, ok := s.remove(100); ok {
		t.Fatal("remove(100) twice found it again")
	}
	// Freed slots come back lowest first, and not as fresh: their counts
	// must be cleared.
	want(500, 0, true, false)
	want(600, 2, true, false)
	remove(200, true)
	want(700, 1, true, false)
}

func TestIndexKeepsASlotTogether(t *testing.T) {
	const nEvents, nCPU = 3, 4
	seen := map[int]bool{}
	for slot := range 2 {
		lo, hi := index(slot, 0, 0, nEvents, nCPU), index(slot+1, 0, 0, nEvents, nCPU)
		for ev := range nEvents {
			for cpu := range nCPU {
				i := index(slot, ev, cpu, nEvents, nCPU)
				if i < lo || i >= hi || seen[i] {
					t.Fatalf("slot %d event %d cpu %d at %d: outside [%d, %d) or taken", slot, ev, cpu, i, lo, hi)
				}
				seen[i] = true
			}
		}
	}
	if len(seen) != 2*nEvents*nCPU {
		t.Fatalf("%d entries for 2 slots, want %d", len(seen), 2*nEvents*nCPU)
	}
}

// TestProgramStack checks the frame the program uses: every stack access
// within the 512 bytes the kernel gives, the deltas of different events
// and the scratch slots apart.
func TestProgramStack(t *testing.T) {
	m := maps{events: make([]int, MaxEvents), prev: 1, slots: 2, counts: 3, cache: 4}
	ins := program(m, 2, Levels)
	used := map[int16]string{}
	for e := range MaxEvents {
		for f := range 3 {
			off := deltaOff(e, f)
			if off < -512 || off > -8 {
				t.Fatalf("event %d field %d at fp%d, outside the frame", e, f, off)
			}
			if other, ok := used[off]; ok {
				t.Fatalf("event %d field %d at fp%d, where %s is", e, f, off, other)
			}
			used[off] = "a delta"
		}
	}
	for f := range 3 {
		off := readingOff + int16(8*f)
		if _, ok := used[off]; ok || off == keyOff {
			t.Fatalf("the reading's field %d at fp%d overlaps", f, off)
		}
	}
	var calls, exits, fetches int
	for _, in := range ins {
		if in.OpCode.Mode() == asm.AtomicMode {
			var buf bytes.Buffer
			if _, err := in.Marshal(&buf, binary.LittleEndian); err != nil {
				t.Fatal(err)
			}
			if imm := binary.LittleEndian.Uint32(buf.Bytes()[4:]); imm != bpfFetch {
				t.Fatalf("%v marshals the immediate %#x, want BPF_ADD|BPF_FETCH", in, imm)
			}
			fetches++
		}
		if in.OpCode.JumpOp() == asm.Call {
			calls++
		}
		if in.OpCode.JumpOp() == asm.Exit {
			exits++
		}
		if in.OpCode.Class().IsStore() && in.Dst == asm.RFP && in.Offset < -512 {
			t.Fatalf("a store at fp%d", in.Offset)
		}
	}
	// One CPU id; per event a read and a lookup of the previous reading;
	// the cgroup id and the cache's generation and entry, each looked up
	// on a hit, again on a miss and for the store; per level the
	// ancestor and its slot; and one lookup per event of the slot
	// charged.
	if want := 1 + 2*MaxEvents + 1 + 4 + 2*Levels + MaxEvents; calls != want || exits != 1 {
		t.Fatalf("%d helper calls and %d exits, want %d and 1", calls, exits, want)
	}
	// A cache miss reads the generation by a fetch-add of 0.
	if fetches != 1 {
		t.Fatalf("%d atomic instructions, want 1", fetches)
	}
}

func TestRoomStaysWithinMaxSums(t *testing.T) {
	for _, c := range []struct{ events, totalled, cgroups, cpus, want int }{
		{2, 0, 1024, 2, 1024},
		{2, 0, 1024, 768, 1024},
		{2, 0, 4096, 768, MaxSums / (2 * 768 * readingSize)},
		{16, 0, 4096, 8192, MaxSums / (16 * 8192 * readingSize)},
		{16, 0, 4096, 1 << 18, 1}, // never none
		// Totalled events take 24 bytes a cgroup whatever the CPUs.
		{0, 2, 4096, 768, 4096},
		{0, 16, 1 << 20, 1 << 18, MaxSums / (16 * readingSize)},
		{1, 1, 4096, 768, MaxSums / ((768 + 1) * readingSize)},
	} {
		got := roomFor(c.events, c.totalled, c.cgroups, c.cpus)
		if got != c.want {
			t.Errorf("%d events per CPU and %d totalled, %d cgroups, %d CPUs: room for %d, want %d", c.events, c.totalled, c.cgroups, c.cpus, got, c.want)
		}
		if got > 1 && got*(c.events*c.cpus+c.totalled)*readingSize > MaxSums {
			t.Errorf("%d events per CPU and %d totalled, %d cgroups, %d CPUs: room for %d takes more than %d bytes", c.events, c.totalled, c.cgroups, c.cpus, got, MaxSums)
		}
	}
}
