package bpfcount

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"

	"perfevent/internal/bpf"
)

// TestProgramBytesMatchCilium assembles every shape of the program Load
// builds with our asm and with github.com/cilium/ebpf/asm (the copy of
// program.go in program_cilium_test.go), and requires the same bytes in
// either byte order: each event count to MaxEvents, per-CPU, totalled and
// mixed; one level, a few and Levels; one CPU, a few, this host's and 768.
func TestProgramBytesMatchCilium(t *testing.T) {
	host, err := bpf.PossibleCPU()
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]func(e int) bool{
		"per-cpu":  func(int) bool { return false },
		"totalled": func(int) bool { return true },
		"mixed":    func(e int) bool { return e%3 != 1 },
	}
	shapes := 0
	for n := 1; n <= MaxEvents; n++ {
		for kind, totalled := range kinds {
			m := maps{prev: 3, slots: 4, counts: 5, cache: 6}
			for e := range n {
				m.events = append(m.events, 10+e)
				m.total = append(m.total, totalled(e))
			}
			if kind == "per-cpu" && n%2 == 0 {
				m.total = nil // as Load's caller may leave it: none totalled
			}
			for _, nCPU := range []int{1, 3, host, 768} {
				m.totalsAt = 1024 * n * nCPU
				for _, levels := range []int{1, 2, 5, Levels} {
					name := fmt.Sprintf("%d %s events, %d CPUs, %d levels", n, kind, nCPU, levels)
					ours := program(m, nCPU, levels)
					theirs := ciliumProgram(ciliumMaps(m), nCPU, levels)
					for _, bo := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
						got, err := ours.AppendTo(nil, bo)
						if err != nil {
							t.Fatalf("%s: ours: %v", name, err)
						}
						var want bytes.Buffer
						if err := theirs.Marshal(&want, bo); err != nil {
							t.Fatalf("%s: cilium's: %v", name, err)
						}
						if !bytes.Equal(got, want.Bytes()) {
							t.Fatalf("%s, %v: %s", name, bo, firstDifference(got, want.Bytes()))
						}
					}
					shapes++
				}
			}
		}
	}
	if want := MaxEvents * len(kinds) * 4 * 4; shapes != want {
		t.Fatalf("%d shapes compared, want %d", shapes, want)
	}
}

// firstDifference says where two encodings part, by raw instruction.
func firstDifference(got, want []byte) string {
	for i := 0; i < min(len(got), len(want)); i += 8 {
		g, w := got[i:min(i+8, len(got))], want[i:min(i+8, len(want))]
		if !bytes.Equal(g, w) {
			return fmt.Sprintf("raw instruction %d is % x, cilium's % x", i/8, g, w)
		}
	}
	return fmt.Sprintf("%d bytes, cilium's %d", len(got), len(want))
}
