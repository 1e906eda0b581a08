// Package pmu turns the event names found in perfevent.conf into
// perf_event_open attributes, reading everything it needs from sysfs,
// tracefs and /proc instead of linking libpfm4.
//
// It finds the PMUs libpfm4 would find on this machine (Detect,
// FS.LibpfmPMUs), from /proc/cpuinfo and sysfs; a perfevent.conf section
// is chosen among their names (FS.PresentNames) as in the C agent.
//
// The names it understands are the ones pmdaperfevent accepts:
//
//   - libpfm4 names of those PMUs, "[pmu::]EVENT[:UMASK][:mod]", encoded
//     by package pfm exactly as libpfm4 encodes them for the C agent;
//   - for the CPU models libpfm4 lacks, Intel's and Arm's own names
//     ("INST_RETIRED.ANY", "UNC_M_CAS_COUNT_SCH0.RD", "L1D_CACHE_REFILL"),
//     optionally prefixed by the vendor PMU ("srf_unc_imc::") or by the
//     kernel PMU, which picks an uncore box ("uncore_imc_3::"), from
//     package vendorevents and encoded through the kernel PMU's format
//     files (FS.VendorPMUs);
//   - RAPL:PACKAGE_ENERGY and its siblings, as the kernel's power PMU;
//   - generic hardware, cache and software events, spelt the perf way
//     ("cycles", "L1-dcache-load-misses", "page-faults") or the libpfm4
//     way ("PERF_COUNT_HW_CPU_CYCLES", "perf::PAGE-FAULTS",
//     "PERF_COUNT_HW_CACHE_L1D:READ:MISS"), with :u, :k and :h modifiers;
//   - tracepoints, "subsystem:event";
//   - "RAW:name" with a rawcode supplied by the caller;
//   - sysfs PMU events for [dynamic] sections, "pmu.event"
//     ("msr.tsc", "power.energy-pkg"), and perf's "pmu/term=value/" syntax.
//
// FS.ResolveWith returns an Event whose Attr carries the type, config
// words and exclude bits; libpfm4-style names get libpfm4's exclude bits
// (user and kernel, guests excluded, exclude_hv only where the core PMU
// can filter the hypervisor), sysfs names none, as in the C agent.
// FS.ListEvents gives everything --list-events shows, FS.Suggest the
// nearest catalog names for a name nothing knows, and FS.ScaleFor the
// sysfs scale behind the perf_scale option.
//
// Everything is read below the roots held by an FS, so tests point it at
// the trees under testdata/: "vm" is a copy of the CI VM's PMUs (software,
// msr, tracepoint, breakpoint, uprobe), "skylake" an Intel Xeon with core,
// uncore, power, msr and cstate PMUs and a few deliberately broken event
// files, "power9" an LPAR with hv_24x7, "graviton2" an ARM Neoverse N1;
// "snbep" (Sandy Bridge-EP with its uncore), "haswell", "icelake-sp",
// "zen2", "zen3" and "zen4" carry what detection needs; "meteorlake",
// "sierraforest", "cortex-a78" and "cortex-a78-a55" (big.LITTLE) are
// models only the vendors' lists serve. Each tree's
// libpfm4-pmus file is libpfm4's own list for it, and says how it was
// obtained.
package pmu
