// Package pmu turns the event names found in perfevent.conf into
// perf_event_open attributes, reading everything it needs from sysfs,
// tracefs and /proc instead of linking libpfm4.
//
// The names it understands are the ones pmdaperfevent accepts:
//
//   - generic hardware, cache and software events, spelt the perf way
//     ("cycles", "L1-dcache-load-misses", "page-faults") or the libpfm4
//     way ("PERF_COUNT_HW_CPU_CYCLES", "perf::PAGE-FAULTS",
//     "PERF_COUNT_HW_CACHE_L1D:READ:MISS"), with :u, :k and :h modifiers;
//   - the Intel architectural events of libpfm4's ix86arch table
//     ("UNHALTED_CORE_CYCLES", "INSTRUCTION_RETIRED", ...);
//   - tracepoints, "subsystem:event";
//   - "RAW:name" with a rawcode supplied by the caller;
//   - sysfs PMU events for [dynamic] sections, "pmu.event"
//     ("msr.tsc", "power.energy-pkg"), and perf's "pmu/term=value/" syntax.
//
// The package also reports which libpfm4 PMU names are present, for
// choosing a perfevent.conf section, and lists every event it can resolve.
//
// Everything is read below the roots held by an FS, so tests point it at
// the trees under testdata/.
package pmu
