package bpfcount

import (
	"testing"

	"perfevent/internal/bpf"
	"perfevent/internal/bpf/asm"
)

// SkipUnlessUnsupported skips a test whose Load failed with err when the
// kernel cannot load programs of the two types Load needs, which a program
// that only returns 0 tells. Where it can, the failure is the program's or
// the maps', and the test fails: a broken program must not pass as a
// kernel without BPF.
func SkipUnlessUnsupported(tb testing.TB, err error) {
	tb.Helper()
	for _, typ := range []bpf.ProgramType{bpf.PerfEvent, bpf.RawTracepoint} {
		p, perr := bpf.NewProgram(&bpf.ProgramSpec{
			Name:         "pe_probe",
			Type:         typ,
			Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()},
			License:      license,
		})
		if perr != nil {
			tb.Skipf("needs BPF programs of type perf_event and raw_tp: %v (a program of type %v that returns 0: %v)", err, typ, perr)
		}
		p.Close()
	}
	tb.Fatalf("Load failed where the kernel loads programs of type perf_event and raw_tp: %v", err)
}
