// Package asm builds eBPF instructions and encodes them as the kernel
// reads them: 8 bytes each (16 for a 64-bit immediate load), in the
// host's byte order, jumps resolved from labels.
//
// Its builders are named as those of github.com/cilium/ebpf/asm, of which
// it keeps the few that internal/bpfcount uses, so that a program reads
// the same with either; the bytes they give are checked against that
// library's in bpfcount's tests. An OpCode holds the kernel's 8-bit
// opcode in its low byte and, for an atomic instruction, the operation
// (the immediate the kernel reads) in bits 8 to 16, as that library's
// does.
package asm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// InstructionSize is the size of one raw instruction; a 64-bit immediate
// load takes two.
const InstructionSize = 8

// Register is one of the eBPF machine's registers.
type Register uint8

// R0 holds a helper's result and the program's; R1 to R5 a helper's
// arguments, clobbered by the call; R6 to R9 are kept across calls; R10
// (RFP) is the read-only frame pointer, 512 bytes of stack below it.
const (
	R0 Register = iota
	R1
	R2
	R3
	R4
	R5
	R6
	R7
	R8
	R9
	R10
	RFP = R10
)

// PseudoMapFD in the source register of a 64-bit immediate load says that
// the immediate is a map's descriptor, which the kernel replaces with the
// map's address (BPF_PSEUDO_MAP_FD).
const PseudoMapFD = R1

// Class is an opcode's instruction class, its low 3 bits.
type Class uint8

const classMask OpCode = 0x07

// The classes (BPF_LD ... BPF_ALU64).
const (
	LdClass     Class = 0x00
	LdXClass    Class = 0x01
	StClass     Class = 0x02
	StXClass    Class = 0x03
	ALUClass    Class = 0x04
	JumpClass   Class = 0x05
	Jump32Class Class = 0x06
	ALU64Class  Class = 0x07
)

// IsLoad says whether the class loads (BPF_LD, BPF_LDX).
func (c Class) IsLoad() bool { return c == LdClass || c == LdXClass }

// IsStore says whether the class stores (BPF_ST, BPF_STX).
func (c Class) IsStore() bool { return c == StClass || c == StXClass }

// IsALU says whether the class is arithmetic, 32- or 64-bit.
func (c Class) IsALU() bool { return c == ALUClass || c == ALU64Class }

// IsJump says whether the class is a jump, 32- or 64-bit.
func (c Class) IsJump() bool { return c == JumpClass || c == Jump32Class }

// OpCode is an instruction's operation: the kernel's opcode byte and,
// above it, an atomic instruction's operation.
type OpCode uint32

// InvalidOpCode is what a builder gives for an operation the kernel has
// not; Marshal refuses it.
const InvalidOpCode OpCode = 0xffff

// Class is the opcode's class.
func (op OpCode) Class() Class { return Class(op & classMask) }

// Mode is a load's or store's mode, InvalidMode for another class.
func (op OpCode) Mode() Mode {
	if !op.Class().IsLoad() && !op.Class().IsStore() {
		return InvalidMode
	}
	return Mode(op & modeMask)
}

// Size is a load's or store's width, InvalidSize for another class.
func (op OpCode) Size() Size {
	if !op.Class().IsLoad() && !op.Class().IsStore() {
		return InvalidSize
	}
	return Size(op & sizeMask)
}

// Source says whether an arithmetic or jump instruction's operand is its
// immediate or its source register; InvalidSource for another class.
func (op OpCode) Source() Source {
	if !op.Class().IsALU() && !op.Class().IsJump() {
		return InvalidSource
	}
	return Source(op & sourceMask)
}

// ALUOp is an arithmetic instruction's operation, InvalidALUOp for
// another class.
func (op OpCode) ALUOp() ALUOp {
	if !op.Class().IsALU() {
		return InvalidALUOp
	}
	return ALUOp(op & aluMask)
}

// JumpOp is a jump instruction's operation, InvalidJumpOp for another
// class.
func (op OpCode) JumpOp() JumpOp {
	if !op.Class().IsJump() {
		return InvalidJumpOp
	}
	return JumpOp(op & jumpMask)
}

// AtomicOp is an atomic instruction's operation, InvalidAtomic for
// another instruction.
func (op OpCode) AtomicOp() AtomicOp {
	if op.Class() != StXClass || op.Mode() != AtomicMode {
		return InvalidAtomic
	}
	return AtomicOp(op & atomicMask)
}

// IsDWordLoad says whether op is the 64-bit immediate load, the one
// instruction two raw instructions wide.
func (op OpCode) IsDWordLoad() bool { return op == LoadImmOp(DWord) }

// Instruction is one instruction: a jump to a label has an Offset of -1
// until Instructions.Marshal resolves it.
type Instruction struct {
	OpCode   OpCode
	Dst, Src Register
	Offset   int16
	// Constant is the immediate: 32 bits sign-extended, all 64 for a
	// 64-bit load; a helper's number for a call. An atomic instruction's
	// immediate is its operation, held in the OpCode.
	Constant int64

	symbol, reference string
}

// WithSymbol names the instruction as a jump's target.
func (ins Instruction) WithSymbol(name string) Instruction {
	ins.symbol = name
	return ins
}

// Symbol is the name WithSymbol gave, or "".
func (ins Instruction) Symbol() string { return ins.symbol }

// Reference is the label a jump goes to, or "".
func (ins Instruction) Reference() string { return ins.reference }

// Width is the number of raw instructions ins takes.
func (ins Instruction) Width() int {
	if ins.OpCode.IsDWordLoad() {
		return 2
	}
	return 1
}

// Size is the size of ins encoded.
func (ins Instruction) Size() uint64 { return uint64(ins.Width() * InstructionSize) }

// IsLoadFromMap says whether ins loads a map's address from its
// descriptor.
func (ins Instruction) IsLoadFromMap() bool {
	return ins.OpCode.IsDWordLoad() && ins.Src == PseudoMapFD
}

// IsBuiltinCall says whether ins calls a kernel helper.
func (ins Instruction) IsBuiltinCall() bool {
	return ins.OpCode.JumpOp() == Call && ins.Src == R0 && ins.Dst == R0
}

// Marshal writes ins encoded in the byte order bo, as the kernel reads it
// when bo is the host's, and returns how many bytes it wrote. A jump to a
// label must have been resolved (Instructions.Marshal does).
func (ins Instruction) Marshal(w io.Writer, bo binary.ByteOrder) (uint64, error) {
	b, err := ins.AppendTo(nil, bo)
	if err != nil {
		return 0, err
	}
	n, err := w.Write(b)
	return uint64(n), err
}

// AppendTo appends ins encoded in the byte order bo to b.
func (ins Instruction) AppendTo(b []byte, bo binary.ByteOrder) ([]byte, error) {
	op := ins.OpCode
	imm := int32(ins.Constant)
	if atomic := op.AtomicOp(); atomic != InvalidAtomic {
		op &^= atomicMask
		imm = int32(atomic >> 8)
	}
	if op > 0xff {
		return b, fmt.Errorf("instruction %v: invalid opcode %#x", ins, ins.OpCode)
	}
	if ins.Dst > R10 || ins.Src > R10 {
		return b, fmt.Errorf("instruction %v: no register r%d", ins, max(ins.Dst, ins.Src))
	}
	// The kernel's struct bpf_insn has two 4-bit fields, dst_reg first:
	// the low nibble on a little-endian host, the high one on a
	// big-endian.
	regs := byte(ins.Dst) | byte(ins.Src)<<4
	if bo.Uint16([]byte{0, 1}) == 1 {
		regs = byte(ins.Dst)<<4 | byte(ins.Src)
	}
	var raw [2 * InstructionSize]byte
	raw[0], raw[1] = byte(op), regs
	bo.PutUint16(raw[2:], uint16(ins.Offset))
	bo.PutUint32(raw[4:], uint32(imm))
	if !op.IsDWordLoad() {
		return append(b, raw[:InstructionSize]...), nil
	}
	// The second half: zero but for the immediate's upper 32 bits.
	bo.PutUint32(raw[12:], uint32(uint64(ins.Constant)>>32))
	return append(b, raw[:]...), nil
}

// String is ins as a line of a listing, for error messages.
func (ins Instruction) String() string {
	s := fmt.Sprintf("op %#02x dst r%d src r%d off %d imm %d", uint32(ins.OpCode), ins.Dst, ins.Src, ins.Offset, ins.Constant)
	if ins.reference != "" {
		s += " -> " + ins.reference
	}
	if ins.symbol != "" {
		s = ins.symbol + ": " + s
	}
	return s
}

// Instructions is a program, or a part of one.
type Instructions []Instruction

// Size is the size of insns encoded.
func (insns Instructions) Size() uint64 {
	var n uint64
	for _, ins := range insns {
		n += ins.Size()
	}
	return n
}

// ErrUnsatisfiedReference is the error of a jump to a label no
// instruction bears.
var ErrUnsatisfiedReference = errors.New("unsatisfied reference")

// Marshal writes insns encoded in the byte order bo, each jump to a label
// given the offset of the instruction that bears it.
func (insns Instructions) Marshal(w io.Writer, bo binary.ByteOrder) error {
	b, err := insns.AppendTo(nil, bo)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// AppendTo appends insns encoded in the byte order bo to b, each jump to
// a label given the offset of the instruction that bears it.
func (insns Instructions) AppendTo(b []byte, bo binary.ByteOrder) ([]byte, error) {
	// Offsets are in raw instructions, from the one after the jump.
	at := make(map[string]int)
	raw := 0
	for i, ins := range insns {
		if ins.symbol != "" {
			if _, dup := at[ins.symbol]; dup {
				return b, fmt.Errorf("instruction %d: label %q given twice", i, ins.symbol)
			}
			at[ins.symbol] = raw
		}
		raw += ins.Width()
	}
	raw = 0
	for i, ins := range insns {
		if ins.reference != "" && ins.OpCode.Class().IsJump() && ins.Offset == -1 {
			target, ok := at[ins.reference]
			if !ok {
				return b, fmt.Errorf("instruction %d, a jump to %q: %w", i, ins.reference, ErrUnsatisfiedReference)
			}
			off := target - raw - 1
			if off < -1<<15 || off >= 1<<15 {
				return b, fmt.Errorf("instruction %d, a jump to %q: %d instructions away, beyond a jump's 16 bits", i, ins.reference, off)
			}
			ins.Offset = int16(off)
		}
		var err error
		if b, err = ins.AppendTo(b, bo); err != nil {
			return b, fmt.Errorf("instruction %d: %w", i, err)
		}
		raw += ins.Width()
	}
	return b, nil
}
