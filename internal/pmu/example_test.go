package pmu_test

import (
	"fmt"

	"golang.org/x/sys/unix"

	"perfevent/internal/hostfs"
	"perfevent/internal/pmu"
)

func ExampleFS_Resolve() {
	// pmu.Default() reads the running system; tests use a fixture tree.
	fs := &pmu.FS{
		FS:      hostfs.FS{Sys: "testdata/skylake/sys", Proc: "testdata/skylake/proc"},
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
		fmt.Printf("%s: type %d config %#x config1 %#x exclude %v scale %g %s cpus %v\n  from %s\n",
			name, ev.Attr.Type, ev.Attr.Config, ev.Attr.Ext1, excluded(ev.Attr.Bits), ev.Scale, ev.Unit, ev.CPUs, ev.Source)
	}
	// Output:
	// cycles:u: type 0 config 0x0 config1 0x0 exclude [kernel guest] scale 1  cpus []
	//   from libpfm4 perf::PERF_COUNT_HW_CPU_CYCLES:u=1:k=0:precise=0:excl=0:mg=0:mh=1
	// perf::PAGE-FAULTS: type 1 config 0x2 config1 0x0 exclude [guest] scale 1  cpus []
	//   from libpfm4 perf::PERF_COUNT_SW_PAGE_FAULTS:u=1:k=1:excl=0:mg=0:mh=1
	// sched:sched_switch: type 2 config 0x138 config1 0x0 exclude [guest] scale 1  cpus []
	//   from tracepoint sched/sched_switch id 312
	// uncore_imc_0.cas_count_read: type 17 config 0x304 config1 0x0 exclude [] scale 6.103515625e-05 MiB cpus [0 18]
	//   from sysfs uncore_imc_0/events/cas_count_read (event=0x04,umask=0x03)
	// cpu/mem-loads,ldlat=30/: type 4 config 0x1cd config1 0x1e exclude [] scale 1  cpus []
	//   from perf syntax cpu/mem-loads,ldlat=30/
}

// excluded names the exclude bits set in bits: where they sit in the word
// depends on the machine's byte order, as C bitfields do.
func excluded(bits uint64) []string {
	var names []string
	for _, b := range []struct {
		bit  uint64
		name string
	}{
		{unix.PerfBitExcludeUser, "user"}, {unix.PerfBitExcludeKernel, "kernel"}, {unix.PerfBitExcludeHv, "hv"},
		{unix.PerfBitExcludeIdle, "idle"}, {unix.PerfBitExcludeHost, "host"}, {unix.PerfBitExcludeGuest, "guest"},
	} {
		if bits&b.bit != 0 {
			names = append(names, b.name)
		}
	}
	return names
}

func ExampleFS_PresentNames() {
	fs := &pmu.FS{FS: hostfs.FS{Sys: "testdata/skylake/sys", Proc: "testdata/skylake/proc"}}
	fmt.Println(fs.PresentNames())
	// Output:
	// [ix86arch perf rapl perf_raw skx skx_unc_imc0]
}
