package pmu_test

import (
	"fmt"

	"perfevent/internal/pmu"
)

func ExampleFS_Resolve() {
	// pmu.Default() reads the running system; tests use a fixture tree.
	fs := &pmu.FS{
		Sys:     "testdata/skylake/sys",
		Proc:    "testdata/skylake/proc",
		Tracing: []string{"testdata/vm/tracing"},
	}
	for _, name := range []string{
		"cycles:u",
		"perf::PAGE-FAULTS",
		"sched:sched_switch",
		"uncore_imc_0.cas_count_read",
		"cpu/mem-loads,ldlat=30/",
	} {
		ev, err := fs.Resolve(name)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Printf("%s: type %d config %#x config1 %#x bits %#x scale %g %s cpus %v\n  from %s\n",
			name, ev.Attr.Type, ev.Attr.Config, ev.Attr.Ext1, ev.Attr.Bits, ev.Scale, ev.Unit, ev.CPUs, ev.Source)
	}
	// Output:
	// cycles:u: type 0 config 0x0 config1 0x0 bits 0x100020 scale 1  cpus []
	//   from generic hardware PERF_COUNT_HW_CPU_CYCLES
	// perf::PAGE-FAULTS: type 1 config 0x2 config1 0x0 bits 0x100000 scale 1  cpus []
	//   from software PERF_COUNT_SW_PAGE_FAULTS
	// sched:sched_switch: type 2 config 0x138 config1 0x0 bits 0x100000 scale 1  cpus []
	//   from tracepoint sched/sched_switch id 312
	// uncore_imc_0.cas_count_read: type 17 config 0x304 config1 0x0 bits 0x0 scale 6.103515625e-05 MiB cpus [0 18]
	//   from sysfs uncore_imc_0/events/cas_count_read (event=0x04,umask=0x03)
	// cpu/mem-loads,ldlat=30/: type 4 config 0x1cd config1 0x1e bits 0x0 scale 1  cpus []
	//   from perf syntax cpu/mem-loads,ldlat=30/
}
