package counter_test

import (
	"fmt"

	"golang.org/x/sys/unix"

	"perfevent/internal/counter"
	"perfevent/internal/counter/countertest"
)

// One fetch as the metrics layer does it: mark, read once, take values.
func Example() {
	fake := countertest.New() // counter.KernelOpener{} in the agent
	fake.FailOpen("cycles", countertest.AnyCPU, unix.ENOENT)
	set, _ := counter.New([]counter.Spec{
		{Name: "cycles", Attr: unix.PerfEventAttr{Type: unix.PERF_TYPE_HARDWARE}, CPUs: []int{0, 1}},
		{Name: "page-faults", Attr: unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Config: 2}, CPUs: []int{0, 1}},
	}, counter.Config{Opener: fake})
	sum, _ := set.Open()
	fmt.Println(sum)
	for _, line := range sum.FailureLines() {
		fmt.Println(line)
	}

	pf, _ := set.Lookup("page-faults")
	for range 2 {
		fake.Add("page-faults", 1, 7, 1000, 1000)
		f := set.Begin()
		f.Need(pf)
		f.Read()
		for i, cpu := range set.CPUs(pf) {
			fmt.Printf("cpu%d=%d ", cpu, f.Value(pf, i))
		}
		fmt.Println("active", f.Active())
		f.End()
	}
	// Output:
	// 1 of 2 events served on 2 descriptors; 2 opens failed
	// perf_event_open failed for "cycles" on cpus 0-1: not supported on this machine (e.g. a VM without a hardware PMU) (ENOENT)
	// cpu0=0 cpu1=7 active 0
	// cpu0=0 cpu1=14 active 2
}
