package main

import (
	"debug/elf"
	"testing"

	"perfevent/internal/emulator"
)

// The agent runs without the runtime's heap profiler: the linker turns it
// off (runtime.disableMemoryProfiling) when nothing can read a heap
// profile, which spares a stack walk at every sampled allocation and the
// profiler's bucket table. Linking runtime/pprof, or anything that calls
// runtime.MemProfile, would turn it back on at every start.
func TestAgentLinksNoHeapProfiler(t *testing.T) {
	f, err := elf.Open(agentELF(t))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range syms {
		if s.Name != "runtime.disableMemoryProfiling" {
			continue
		}
		sec := f.Sections[s.Section]
		if sec.Type == elf.SHT_NOBITS {
			t.Fatalf("runtime.disableMemoryProfiling is in %s, zero: the heap profiler is on; something links runtime.MemProfile", sec.Name)
		}
		b := make([]byte, 1)
		if _, err := sec.ReadAt(b, int64(s.Value-sec.Addr)); err != nil {
			t.Fatal(err)
		}
		if b[0] != 1 {
			t.Errorf("runtime.disableMemoryProfiling is %d: the heap profiler is on; something links runtime.MemProfile", b[0])
		}
		return
	}
	t.Fatal("the agent has no symbol runtime.disableMemoryProfiling: the runtime changed how it turns the heap profiler off")
}

// agentELF is the path of the agent's executable as the tests built it:
// under an emulator, emulator.Wrap leaves a script in its place and moves
// the ELF aside.
func agentELF(t *testing.T) string {
	bin := agentBinary(t)
	if emulator.Name() != "" {
		bin += ".bin"
	}
	return bin
}
