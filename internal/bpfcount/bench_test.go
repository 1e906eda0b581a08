package bpfcount

import (
	"fmt"
	"regexp"
	"strconv"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"

	"perfevent/internal/testneed"
)

// BenchmarkLoad is what the agent pays at start-up when cgroups.conf
// counts events: the maps made and both programs through the verifier,
// for 2, 4 and 16 software events and room for 1,024 cgroups. It reports
// the program's size (insns) and the instructions the verifier walked
// to accept it (verified).
func BenchmarkLoad(b *testing.B) {
	testneed.Root(b, "to load BPF programs (CAP_BPF)")
	for _, n := range []int{2, 4, 16} {
		events := make([]unix.PerfEventAttr, n)
		for i := range events {
			events[i] = unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Config: uint64(i % unix.PERF_COUNT_SW_DUMMY)}
		}
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
			c, err := Load(Options{Events: events, Cgroups: 1024})
			if err != nil {
				b.Skipf("needs BPF programs of type perf_event and raw_tp: %v", err)
			}
			size, verified := verify(b, c)
			c.Close()
			for b.Loop() {
				c, err := Load(Options{Events: events, Cgroups: 1024})
				if err != nil {
					b.Fatal(err)
				}
				c.Close()
			}
			b.ReportMetric(float64(size), "insns")
			b.ReportMetric(float64(verified), "verified")
		})
	}
}

var processed = regexp.MustCompile(`processed (\d+) insns`)

// verify loads c's switch program once more with the verifier's
// statistics, and returns its size in instructions and the instructions
// the verifier processed.
func verify(b *testing.B, c *Counter) (size, verified int) {
	m := maps{prev: c.prev.FD(), slots: c.slotMap.FD(), counts: c.counts.FD()}
	for _, a := range c.evArr {
		m.events = append(m.events, a.FD())
	}
	body := program(m, c.nCPU, Levels)
	p, err := ebpf.NewProgramWithOptions(&ebpf.ProgramSpec{Name: "pe_cgrp_switch", Type: ebpf.PerfEvent, Instructions: body, License: license},
		ebpf.ProgramOptions{LogLevel: ebpf.LogLevelStats})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	if s := processed.FindStringSubmatch(p.VerifierLog); s != nil {
		verified, _ = strconv.Atoi(s[1])
	}
	return int(body.Size() / asm.InstructionSize), verified
}
