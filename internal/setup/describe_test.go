package setup

import (
	"fmt"
	"testing"

	"golang.org/x/sys/unix"

	"perfevent/internal/pmu"
)

// Describe writes what fmt writes of the same fields: %d, %#x and %g.
func TestDescribeAsFmt(t *testing.T) {
	want := func(c Counter) string {
		ev, a := c.Event, c.Event.Attr
		s := fmt.Sprintf("%s: type %d config %#x", ev.Source, a.Type, a.Config)
		if a.Ext1 != 0 || a.Ext2 != 0 {
			s += fmt.Sprintf(" config1 %#x config2 %#x", a.Ext1, a.Ext2)
		}
		s += " exclude " + excludeNames(a.Bits)
		if ev.Scale != 1 || ev.Unit != "" {
			s += fmt.Sprintf(" (scale %g %s)", ev.Scale, ev.Unit)
		}
		return s + " -> perfevent.hwcounters." + c.Metric
	}
	for _, c := range []Counter{
		{Event: pmu.Event{Source: "software PERF_COUNT_SW_CPU_CLOCK", Scale: 1, Attr: unix.PerfEventAttr{Type: 1}}, Metric: "cpu_clock"},
		{Event: pmu.Event{Source: "libpfm4 skx::INST_RETIRED:ANY_P", Scale: 1, Attr: unix.PerfEventAttr{Type: 4, Config: 0x5300c0, Bits: unix.PerfBitExcludeHv | unix.PerfBitExcludeGuest}}, Metric: "INST_RETIRED_ANY_P"},
		{Event: pmu.Event{Source: "sysfs uncore_imc_0/events/cas_count_read", Scale: 6.103515625e-05, Unit: "MiB", Attr: unix.PerfEventAttr{Type: 13, Config: 0x304, Ext1: 0xffffffffffffffff, Ext2: 1}}, Metric: "uncore_imc_0.cas_count_read"},
		{Event: pmu.Event{Source: "sysfs power/events/energy-pkg", Scale: 2.3283064365386962890625e-10, Unit: "Joules", Attr: unix.PerfEventAttr{Type: 23, Config: 2, Ext2: 0x10}}, Metric: "power.energy_pkg"},
		{Event: pmu.Event{Source: "tracepoint sched/sched_switch id 312", Scale: 1, Unit: "x", Attr: unix.PerfEventAttr{Type: 2, Config: 312, Bits: unix.PerfBitExcludeUser | unix.PerfBitExcludeKernel | unix.PerfBitExcludeIdle | unix.PerfBitExcludeHost}}, Metric: "sched_sched_switch"},
		{Event: pmu.Event{Source: "", Scale: 1e9, Attr: unix.PerfEventAttr{Type: 0xffffffff, Config: 1 << 63}}, Metric: ""},
	} {
		if got, w := c.Describe(), want(c); got != w {
			t.Errorf("Describe() = %q, want %q", got, w)
		}
	}
}
