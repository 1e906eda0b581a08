package asm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestEncodings checks instructions against their encodings as the
// kernel's uapi defines them, little-endian.
func TestEncodings(t *testing.T) {
	for _, c := range []struct {
		name string
		ins  Instruction
		want string
	}{
		{"r0 = 0", Mov.Imm(R0, 0), "b7 00 00 00 00 00 00 00"},
		{"r6 = r0", Mov.Reg(R6, R0), "bf 06 00 00 00 00 00 00"},
		{"r3 += -32", Add.Imm(R3, -32), "07 03 00 00 e0 ff ff ff"},
		{"r1 -= r2", Sub.Reg(R1, R2), "1f 21 00 00 00 00 00 00"},
		{"r8 *= 1536", Mul.Imm(R8, 1536), "27 08 00 00 00 06 00 00"},
		{"r1 &= 63", And.Imm(R1, 63), "57 01 00 00 3f 00 00 00"},
		{"r1 = *(u64 *)(r10 - 32)", LoadMem(R1, RFP, -32, DWord), "79 a1 e0 ff 00 00 00 00"},
		{"r7 = *(u32 *)(r0 + 0)", LoadMem(R7, R0, 0, Word), "61 07 00 00 00 00 00 00"},
		{"*(u64 *)(r10 - 8) = r1", StoreMem(RFP, -8, R1, DWord), "7b 1a f8 ff 00 00 00 00"},
		{"*(u32 *)(r10 - 8) = r1", StoreMem(RFP, -8, R1, Word), "63 1a f8 ff 00 00 00 00"},
		{"call 8", FnGetSmpProcessorId.Call(), "85 00 00 00 08 00 00 00"},
		{"call 123", FnGetCurrentAncestorCgroupId.Call(), "85 00 00 00 7b 00 00 00"},
		{"exit", Return(), "95 00 00 00 00 00 00 00"},
		{"lock *(u64 *)(r0 + 16) += r1", AddAtomic.Mem(R0, R1, DWord, 16), "db 10 10 00 00 00 00 00"},
		{"r9 = atomic_fetch_add((u64 *)(r0 + 8), r9)", FetchAdd.Mem(R0, R9, DWord, 8), "db 90 08 00 01 00 00 00"},
		{"r1 = map fd 5", LoadMapPtr(R1, 5), "18 11 00 00 05 00 00 00 00 00 00 00 00 00 00 00"},
		{"r2 = 0xffffffff ll", LoadImm(R2, 0xffffffff, DWord), "18 02 00 00 ff ff ff ff 00 00 00 00 00 00 00 00"},
		{"r2 = 0x123456789 ll", LoadImm(R2, 0x123456789, DWord), "18 02 00 00 89 67 45 23 00 00 00 00 01 00 00 00"},
	} {
		var b bytes.Buffer
		n, err := c.ins.Marshal(&b, binary.LittleEndian)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if got := hexBytes(b.Bytes()); got != c.want || n != c.ins.Size() {
			t.Errorf("%s: % s (%d bytes, Size %d), want %s", c.name, got, n, c.ins.Size(), c.want)
		}
	}
}

func hexBytes(b []byte) string { return fmt.Sprintf("% x", b) }

// TestBigEndian checks what changes in the other byte order: the
// register nibbles swap, and the offset and immediate are big-endian.
func TestBigEndian(t *testing.T) {
	b, err := Instructions{StoreMem(RFP, -8, R1, DWord), LoadImm(R2, 0x123456789, DWord)}.AppendTo(nil, binary.BigEndian)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := hexBytes(b), "7b a1 ff f8 00 00 00 00 18 20 00 00 23 45 67 89 00 00 00 00 00 00 00 01"; got != want {
		t.Fatalf("big-endian: %s, want %s", got, want)
	}
}

// TestLabels checks jumps resolved forward and back, counted in raw
// instructions (a 64-bit load is two), from the instruction after the
// jump.
func TestLabels(t *testing.T) {
	insns := Instructions{
		Mov.Imm(R0, 0).WithSymbol("top"),
		JEq.Imm(R0, 0, "out"),      // over the 64-bit load (2), the Ja and the JNE: +4
		LoadImm(R1, 1<<40, DWord),  // raw 2 and 3
		Ja.Label("top"),            // raw 4 → 0: -5
		JNE.Reg(R0, R1, "out"),     // raw 5 → 6: 0
		Return().WithSymbol("out"), // raw 6
	}
	b, err := insns.AppendTo(nil, binary.LittleEndian)
	if err != nil {
		t.Fatal(err)
	}
	off := func(raw int) int16 { return int16(binary.LittleEndian.Uint16(b[raw*8+2:])) }
	if len(b) != 7*8 || off(1) != 4 || off(4) != -5 || off(5) != 0 {
		t.Fatalf("%d raw instructions, offsets %d %d %d; want 7, 4 -5 0", len(b)/8, off(1), off(4), off(5))
	}
	if insns.Size() != 7*8 {
		t.Fatalf("Size %d, want 56", insns.Size())
	}
}

func TestBadPrograms(t *testing.T) {
	_, err := Instructions{Ja.Label("nowhere"), Return()}.AppendTo(nil, binary.LittleEndian)
	if !errors.Is(err, ErrUnsatisfiedReference) || !strings.Contains(err.Error(), `"nowhere"`) {
		t.Errorf("a jump to no label: %v", err)
	}
	_, err = Instructions{Return().WithSymbol("x"), Return().WithSymbol("x")}.AppendTo(nil, binary.LittleEndian)
	if err == nil || !strings.Contains(err.Error(), `label "x" given twice`) {
		t.Errorf("a label given twice: %v", err)
	}
	for _, ins := range []Instruction{LoadMapPtr(R1, -1), AddAtomic.Mem(R0, R1, Byte, 0), JEq.Label("x")} {
		if _, err := (Instructions{ins}).AppendTo(nil, binary.LittleEndian); err == nil || !strings.Contains(err.Error(), "invalid opcode") {
			t.Errorf("%v: %v, want an invalid opcode", ins, err)
		}
	}
}
