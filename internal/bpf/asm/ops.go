package asm

// Mode is a load's or store's addressing mode.
type Mode uint8

const modeMask OpCode = 0xe0

// The modes bpfcount meets (BPF_IMM, BPF_MEM, BPF_ATOMIC).
const (
	InvalidMode Mode = 0xff
	ImmMode     Mode = 0x00
	MemMode     Mode = 0x60
	AtomicMode  Mode = 0xc0
)

// Size is a load's or store's width.
type Size uint8

const sizeMask OpCode = 0x18

// The widths (BPF_DW, BPF_W, BPF_H, BPF_B).
const (
	InvalidSize Size = 0xff
	DWord       Size = 0x18
	Word        Size = 0x00
	Half        Size = 0x08
	Byte        Size = 0x10
)

// Sizeof is the width in bytes, or -1.
func (s Size) Sizeof() int {
	switch s {
	case DWord:
		return 8
	case Word:
		return 4
	case Half:
		return 2
	case Byte:
		return 1
	}
	return -1
}

// Source is where an arithmetic or jump instruction takes its operand.
type Source uint16

const sourceMask OpCode = 0x08

// The sources (BPF_K, BPF_X).
const (
	InvalidSource Source = 0xffff
	ImmSource     Source = 0x00
	RegSource     Source = 0x08
)

// ALUOp is an arithmetic operation.
type ALUOp uint16

const aluMask OpCode = 0xf0

// The arithmetic operations (BPF_ADD ...).
const (
	InvalidALUOp ALUOp = 0xffff
	Add          ALUOp = 0x00
	Sub          ALUOp = 0x10
	Mul          ALUOp = 0x20
	Div          ALUOp = 0x30
	Or           ALUOp = 0x40
	And          ALUOp = 0x50
	LSh          ALUOp = 0x60
	RSh          ALUOp = 0x70
	Mod          ALUOp = 0x90
	Xor          ALUOp = 0xa0
	Mov          ALUOp = 0xb0
	ArSh         ALUOp = 0xc0
)

// Op is the 64-bit opcode of op with its operand from source.
func (op ALUOp) Op(source Source) OpCode {
	return OpCode(ALU64Class) | OpCode(op) | OpCode(source)
}

// Reg is dst = dst op src, in 64 bits.
func (op ALUOp) Reg(dst, src Register) Instruction {
	return Instruction{OpCode: op.Op(RegSource), Dst: dst, Src: src}
}

// Imm is dst = dst op value, value sign-extended to 64 bits.
func (op ALUOp) Imm(dst Register, value int32) Instruction {
	return Instruction{OpCode: op.Op(ImmSource), Dst: dst, Constant: int64(value)}
}

// JumpOp is a jump's condition, or a call or exit.
type JumpOp uint8

const jumpMask OpCode = 0xf0

// The jumps (BPF_JA ...).
const (
	InvalidJumpOp JumpOp = 0xff
	Ja            JumpOp = 0x00
	JEq           JumpOp = 0x10
	JGT           JumpOp = 0x20
	JGE           JumpOp = 0x30
	JSet          JumpOp = 0x40
	JNE           JumpOp = 0x50
	JSGT          JumpOp = 0x60
	JSGE          JumpOp = 0x70
	Call          JumpOp = 0x80
	Exit          JumpOp = 0x90
	JLT           JumpOp = 0xa0
	JLE           JumpOp = 0xb0
	JSLT          JumpOp = 0xc0
	JSLE          JumpOp = 0xd0
)

// Op is the 64-bit opcode of the comparison op with its operand from
// source.
func (op JumpOp) Op(source Source) OpCode {
	if op == Call || op == Exit {
		return InvalidOpCode
	}
	return OpCode(JumpClass) | OpCode(op) | OpCode(source)
}

// Imm jumps to label if dst op value, compared in 64 bits (value
// sign-extended).
func (op JumpOp) Imm(dst Register, value int32, label string) Instruction {
	return Instruction{OpCode: op.Op(ImmSource), Dst: dst, Offset: -1, Constant: int64(value), reference: label}
}

// Reg jumps to label if dst op src, compared in 64 bits.
func (op JumpOp) Reg(dst, src Register, label string) Instruction {
	return Instruction{OpCode: op.Op(RegSource), Dst: dst, Src: src, Offset: -1, reference: label}
}

// Label jumps to label unconditionally; op is Ja.
func (op JumpOp) Label(label string) Instruction {
	if op != Ja {
		return Instruction{OpCode: InvalidOpCode}
	}
	return Instruction{OpCode: OpCode(JumpClass) | OpCode(Ja), Offset: -1, reference: label}
}

// Return ends the program with the value in R0.
func Return() Instruction {
	return Instruction{OpCode: OpCode(JumpClass) | OpCode(Exit)}
}

// BuiltinFunc is a kernel helper, by its number in the kernel's
// enum bpf_func_id.
type BuiltinFunc int32

// The helpers bpfcount calls.
const (
	FnMapLookupElem              BuiltinFunc = 1
	FnKtimeGetNs                 BuiltinFunc = 5
	FnGetSmpProcessorId          BuiltinFunc = 8
	FnPerfEventReadValue         BuiltinFunc = 55
	FnGetCurrentCgroupId         BuiltinFunc = 80
	FnGetCurrentAncestorCgroupId BuiltinFunc = 123
)

// Call calls the helper fn: its arguments in R1 to R5, its result in R0.
func (fn BuiltinFunc) Call() Instruction {
	return Instruction{OpCode: OpCode(JumpClass) | OpCode(Call), Constant: int64(fn)}
}

// AtomicOp is an atomic read-modify-write, as the immediate of a
// BPF_ATOMIC store holds it, shifted 8 bits up into the OpCode.
type AtomicOp uint32

const atomicMask OpCode = 0x1ff00

// The atomic additions: BPF_ADD, and BPF_ADD|BPF_FETCH, which leaves the
// value before in the source register.
const (
	InvalidAtomic AtomicOp = 0xffffffff
	AddAtomic     AtomicOp = AtomicOp(Add) << 8
	FetchAdd      AtomicOp = AddAtomic | fetch

	fetch AtomicOp = 0x01 << 8
)

// Mem is *(size *)(dst + offset) op= src, atomically; size Word or
// DWord.
func (op AtomicOp) Mem(dst, src Register, size Size, offset int16) Instruction {
	if size != Word && size != DWord {
		return Instruction{OpCode: InvalidOpCode}
	}
	return Instruction{OpCode: OpCode(StXClass) | OpCode(AtomicMode) | OpCode(size) | OpCode(op), Dst: dst, Src: src, Offset: offset}
}

// LoadImmOp is the opcode of an immediate load of size.
func LoadImmOp(size Size) OpCode {
	return OpCode(LdClass) | OpCode(ImmMode) | OpCode(size)
}

// LoadImm is dst = value; of size DWord, all 64 bits of it, in two raw
// instructions.
func LoadImm(dst Register, value int64, size Size) Instruction {
	return Instruction{OpCode: LoadImmOp(size), Dst: dst, Constant: value}
}

// LoadMapPtr is dst = the address of the map whose descriptor is fd.
func LoadMapPtr(dst Register, fd int) Instruction {
	if fd < 0 {
		return Instruction{OpCode: InvalidOpCode}
	}
	return Instruction{OpCode: LoadImmOp(DWord), Dst: dst, Src: PseudoMapFD, Constant: int64(uint32(fd))}
}

// LoadMem is dst = *(size *)(src + offset).
func LoadMem(dst, src Register, offset int16, size Size) Instruction {
	return Instruction{OpCode: OpCode(LdXClass) | OpCode(MemMode) | OpCode(size), Dst: dst, Src: src, Offset: offset}
}

// StoreMem is *(size *)(dst + offset) = src.
func StoreMem(dst Register, offset int16, src Register, size Size) Instruction {
	return Instruction{OpCode: OpCode(StXClass) | OpCode(MemMode) | OpCode(size), Dst: dst, Src: src, Offset: offset}
}
