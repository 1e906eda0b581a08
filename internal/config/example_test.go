package config_test

import (
	"errors"
	"fmt"

	"perfevent/internal/config"
	"perfevent/internal/cpulist"
)

func Example() {
	src := `[skl]
INST_RETIRED:ANY_P
[perf]
cycles
instructions cpux
[ipc_k:derived]
instructions 0.001
`
	f, err := config.Parse("perfevent.conf", []byte(src))
	var bad config.ErrorList
	if errors.As(err, &bad) {
		for _, e := range bad {
			fmt.Println("skipped:", e)
		}
	}

	sec, why := f.ChoosePMUSection(func(pmu string) bool { return pmu == "perf" })
	for _, line := range why {
		fmt.Println(line)
	}

	cpus, _ := config.NewCPUAllocator(config.Topology{Online: []int{0, 1, 2, 3}})
	for _, ev := range sec.Events {
		ids, _ := cpus.CPUs(ev.CPU, ev.Pos)
		fmt.Printf("%v: %s on cpus %s\n", ev.Pos, ev.Name, cpulist.Format(ids))
	}

	for _, d := range f.DerivedSections() {
		_, err := d.ChooseGroup(func(event string) ([]int, bool) {
			return []int{0, 1, 2, 3}, event == "cycles"
		})
		fmt.Println(err)
	}
	// Output:
	// skipped: perfevent.conf:5: unknown option "cpux" for event "instructions"; expected cpu, cpu_rr, node, node_rr, a CPU index, or rawcode=0x… on a RAW: event
	// perfevent.conf:1: [skl] skipped: no PMU named skl on this machine
	// perfevent.conf:3: [perf] chosen: PMU perf is present
	// perfevent.conf:4: cycles on cpus 0-3
	// perfevent.conf:6: derived metric ipc_k is unavailable: the group at line 7 lacks instructions
}
