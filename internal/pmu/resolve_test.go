package pmu

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"perfevent/internal/hostfs"
)

// testFS points at one of the trees under testdata: "vm" is this project's
// CI VM (no core PMU, AMD Zen 5 cpuinfo), "skylake" an Intel Xeon with
// core, uncore, power, msr and cstate PMUs, "power9" an IBM POWER9 LPAR,
// "graviton2" an AWS Graviton2 (Neoverse N1) instance.
func testFS(tree string) *FS {
	return &FS{
		FS:      hostfs.FS{Sys: filepath.Join("testdata", tree, "sys"), Proc: filepath.Join("testdata", tree, "proc")},
		Tracing: []string{filepath.Join("testdata", tree, "tracing")},
	}
}

const (
	exUser  = unix.PerfBitExcludeUser
	exKern  = unix.PerfBitExcludeKernel
	exHv    = unix.PerfBitExcludeHv
	exGuest = unix.PerfBitExcludeGuest
	exHost  = unix.PerfBitExcludeHost

	// libpfm4's defaults for user+kernel counting: with no core PMU (or
	// an AMD one) it excludes the hypervisor, on Intel it cannot.
	dflNoCore = exHv | exGuest
	dflIntel  = exGuest
)

type want struct {
	pmu              string
	typ              uint32
	config, c1, c2   uint64
	bits             uint64
	scale            float64
	unit             string
	cpus             []int
	source           string
	snapshot, perPkg bool
}

func check(t *testing.T, tree, name string, o Options, w want) {
	t.Helper()
	ev, err := testFS(tree).ResolveWith(name, o)
	if err != nil {
		t.Errorf("%s: Resolve(%q): %v", tree, name, err)
		return
	}
	if w.scale == 0 {
		w.scale = 1
	}
	got := want{ev.PMU, ev.Attr.Type, ev.Attr.Config, ev.Attr.Ext1, ev.Attr.Ext2, ev.Attr.Bits,
		ev.Scale, ev.Unit, ev.CPUs, ev.Source, ev.Snapshot, ev.PerPkg}
	if w.source == "" {
		got.source = ""
	}
	if !reflect.DeepEqual(got, w) {
		t.Errorf("%s: Resolve(%q)\n got %+v\nwant %+v", tree, name, got, w)
	}
	if ev.Name != name {
		t.Errorf("%s: Resolve(%q).Name = %q", tree, name, ev.Name)
	}
	// Resolve fills only what DESIGN.md gives it.
	a := ev.Attr
	a.Type, a.Config, a.Ext1, a.Ext2, a.Bits = 0, 0, 0, 0, 0
	if a != (unix.PerfEventAttr{}) {
		t.Errorf("%s: Resolve(%q) set attr fields it does not own: %+v", tree, name, a)
	}
}

func TestResolveGeneric(t *testing.T) {
	hw, sw, cache := uint32(unix.PERF_TYPE_HARDWARE), uint32(unix.PERF_TYPE_SOFTWARE), uint32(unix.PERF_TYPE_HW_CACHE)
	tests := []struct {
		name string
		w    want
	}{
		{"cycles", want{pmu: "perf", typ: hw, config: 0, bits: dflNoCore, source: "libpfm4 perf::PERF_COUNT_HW_CPU_CYCLES:u=1:k=1:h=0:precise=0:excl=0:mg=0:mh=1"}},
		{"cpu-cycles", want{pmu: "perf", typ: hw, config: 0, bits: dflNoCore}},
		{"perf::CYCLES", want{pmu: "perf", typ: hw, config: 0, bits: dflNoCore}},
		{"PERF_COUNT_HW_CPU_CYCLES", want{pmu: "perf", typ: hw, config: 0, bits: dflNoCore}},
		{"Instructions", want{pmu: "perf", typ: hw, config: 1, bits: dflNoCore}},
		{"cache-references", want{pmu: "perf", typ: hw, config: 2, bits: dflNoCore}},
		{"cache-misses", want{pmu: "perf", typ: hw, config: 3, bits: dflNoCore}},
		{"branches", want{pmu: "perf", typ: hw, config: 4, bits: dflNoCore}},
		{"branch-instructions", want{pmu: "perf", typ: hw, config: 4, bits: dflNoCore}},
		{"branch-misses", want{pmu: "perf", typ: hw, config: 5, bits: dflNoCore}},
		{"bus-cycles", want{pmu: "perf", typ: hw, config: 6, bits: dflNoCore}},
		{"stalled-cycles-frontend", want{pmu: "perf", typ: hw, config: 7, bits: dflNoCore}},
		{"idle-cycles-frontend", want{pmu: "perf", typ: hw, config: 7, bits: dflNoCore}},
		{"idle-cycles-backend", want{pmu: "perf", typ: hw, config: 8, bits: dflNoCore}},
		{"ref-cycles", want{pmu: "perf", typ: hw, config: 9, bits: dflNoCore}},
		{"PERF_COUNT_HW_REF_CPU_CYCLES", want{pmu: "perf", typ: hw, config: 9, bits: dflNoCore}},

		{"cpu-clock", want{pmu: "perf", typ: sw, config: 0, bits: dflNoCore, source: "libpfm4 perf::PERF_COUNT_SW_CPU_CLOCK:u=1:k=1:excl=0:mg=0:mh=1"}},
		{"task-clock", want{pmu: "perf", typ: sw, config: 1, bits: dflNoCore}},
		{"page-faults", want{pmu: "perf", typ: sw, config: 2, bits: dflNoCore}},
		{"faults", want{pmu: "perf", typ: sw, config: 2, bits: dflNoCore}},
		{"perf::PAGE-FAULTS", want{pmu: "perf", typ: sw, config: 2, bits: dflNoCore}},
		{"CONTEXT-SWITCHES", want{pmu: "perf", typ: sw, config: 3, bits: dflNoCore}},
		{"cs", want{pmu: "perf", typ: sw, config: 3, bits: dflNoCore}},
		{"migrations", want{pmu: "perf", typ: sw, config: 4, bits: dflNoCore}},
		{"PERF_COUNT_SW_CPU_MIGRATIONS", want{pmu: "perf", typ: sw, config: 4, bits: dflNoCore}},
		{"minor-faults", want{pmu: "perf", typ: sw, config: 5, bits: dflNoCore}},
		{"major-faults", want{pmu: "perf", typ: sw, config: 6, bits: dflNoCore}},
		{"alignment-faults", want{pmu: "perf", typ: sw, config: 7, bits: dflNoCore}},
		{"emulation-faults", want{pmu: "perf", typ: sw, config: 8, bits: dflNoCore}},
		{"dummy", want{pmu: "perf", typ: sw, config: 9, bits: dflNoCore}},
		{"bpf-output", want{pmu: "perf", typ: sw, config: 10, bits: dflNoCore}},
		{"cgroup-switches", want{pmu: "perf", typ: sw, config: 11, bits: dflNoCore}},

		// config = cache | op<<8 | result<<16
		{"L1-dcache-loads", want{pmu: "perf", typ: cache, config: 0x00000, bits: dflNoCore, source: "libpfm4 perf::PERF_COUNT_HW_CACHE_L1D:READ:ACCESS:u=1:k=1:h=0:precise=0:excl=0:mg=0:mh=1"}},
		{"L1-dcache-load-misses", want{pmu: "perf", typ: cache, config: 0x10000, bits: dflNoCore}},
		{"perf::L1-DCACHE-LOAD-MISSES", want{pmu: "perf", typ: cache, config: 0x10000, bits: dflNoCore}},
		{"L1-dcache-stores", want{pmu: "perf", typ: cache, config: 0x00100, bits: dflNoCore}},
		{"L1-icache-prefetch-misses", want{pmu: "perf", typ: cache, config: 0x10201, bits: dflNoCore}},
		{"LLC-loads", want{pmu: "perf", typ: cache, config: 0x00002, bits: dflNoCore}},
		{"LLC-store-misses", want{pmu: "perf", typ: cache, config: 0x10102, bits: dflNoCore}},
		{"dTLB-load-misses", want{pmu: "perf", typ: cache, config: 0x10003, bits: dflNoCore}},
		{"dTLB-prefetches", want{pmu: "perf", typ: cache, config: 0x00203, bits: dflNoCore}},
		{"iTLB-load-misses", want{pmu: "perf", typ: cache, config: 0x10004, bits: dflNoCore}},
		{"branch-loads", want{pmu: "perf", typ: cache, config: 0x00005, bits: dflNoCore}},
		{"branch-load-misses", want{pmu: "perf", typ: cache, config: 0x10005, bits: dflNoCore}},
		{"node-loads", want{pmu: "perf", typ: cache, config: 0x00006, bits: dflNoCore}},
		{"node-prefetch-misses", want{pmu: "perf", typ: cache, config: 0x10206, bits: dflNoCore}},
		// libpfm4's spelling defaults to READ and MISS.
		{"PERF_COUNT_HW_CACHE_L1D", want{pmu: "perf", typ: cache, config: 0x10000, bits: dflNoCore, source: "libpfm4 perf::PERF_COUNT_HW_CACHE_L1D:READ:MISS:u=1:k=1:h=0:precise=0:excl=0:mg=0:mh=1"}},
		{"PERF_COUNT_HW_CACHE_LL:WRITE:ACCESS", want{pmu: "perf", typ: cache, config: 0x00102, bits: dflNoCore}},
		{"perf::PERF_COUNT_HW_CACHE_DTLB:prefetch", want{pmu: "perf", typ: cache, config: 0x10203, bits: dflNoCore}},
		{"PERF_COUNT_HW_CACHE_L1D:WRITE:u", want{pmu: "perf", typ: cache, config: 0x10100, bits: exKern | exHv | exGuest}},

		// Modifiers, libpfm4 style.
		{"cycles:u", want{pmu: "perf", typ: hw, config: 0, bits: exKern | exHv | exGuest}},
		{"cycles:k", want{pmu: "perf", typ: hw, config: 0, bits: exUser | exHv | exGuest}},
		{"cycles:u:k", want{pmu: "perf", typ: hw, config: 0, bits: exHv | exGuest}},
		{"cycles:uk", want{pmu: "perf", typ: hw, config: 0, bits: exHv | exGuest}},
		{"cycles:h", want{pmu: "perf", typ: hw, config: 0, bits: exUser | exKern | exGuest}},
		{"cycles:ukh", want{pmu: "perf", typ: hw, config: 0, bits: exGuest}},
		{"instructions:u=0:k=1", want{pmu: "perf", typ: hw, config: 1, bits: exUser | exHv | exGuest}},
		{"perf::PAGE-FAULTS:U", want{pmu: "perf", typ: sw, config: 2, bits: exKern | exHv | exGuest}},
		{"cycles:mg", want{pmu: "perf", typ: hw, config: 0, bits: exHv | exHost}},
		{"cycles:mg:mh", want{pmu: "perf", typ: hw, config: 0, bits: exHv}},

		{"perf_raw::r01c2", want{pmu: "perf_raw", typ: unix.PERF_TYPE_RAW, config: 0x1c2, bits: dflNoCore, source: "libpfm4 perf_raw:::u=1:k=1:h=0:precise=0:excl=0:mg=0:mh=1:hw_smpl=0"}},
		{"perf_raw::r3c:k", want{pmu: "perf_raw", typ: unix.PERF_TYPE_RAW, config: 0x3c, bits: exUser | exHv | exGuest}},
	}
	for _, tt := range tests {
		check(t, "vm", tt.name, Options{}, tt.w)
	}
}

func TestResolveDefaultsFollowCorePMU(t *testing.T) {
	// On Intel, libpfm4's core PMU cannot filter the hypervisor, so it
	// never sets exclude_hv; POWER (no x86 core PMU name) behaves like
	// the VM.
	check(t, "skylake", "cycles", Options{}, want{pmu: "perf", typ: 0, config: 0, bits: dflIntel})
	check(t, "skylake", "cycles:u", Options{}, want{pmu: "perf", typ: 0, config: 0, bits: exKern | exGuest})
	// libpfm4's own names get libpfm4's encoding, raw codes of the core PMU.
	check(t, "skylake", "INSTRUCTION_RETIRED:k", Options{}, want{pmu: "skx", typ: 4, config: 0xc0, bits: exUser | exGuest,
		source: "libpfm4 skx::INSTRUCTION_RETIRED:e=0:i=0:c=0:t=0:intx=0:intxcp=0:u=0:k=1:excl=0:mg=0:mh=1"})
	check(t, "skylake", "ix86arch::INSTRUCTION_RETIRED:u", Options{}, want{pmu: "ix86arch", typ: 4, config: 0xc0, bits: exKern | exGuest})
	check(t, "power9", "cycles", Options{}, want{pmu: "perf", typ: 0, config: 0, bits: dflNoCore})
	check(t, "graviton2", "cycles", Options{}, want{pmu: "perf", typ: 0, config: 0, bits: dflNoCore})
	check(t, "graviton2", "armv8_pmuv3_0.l1d_cache_refill", Options{}, want{pmu: "armv8_pmuv3_0", typ: 10, config: 3})
}

func TestResolveTracepoints(t *testing.T) {
	tp := uint32(unix.PERF_TYPE_TRACEPOINT)
	check(t, "vm", "sched:sched_switch", Options{}, want{pmu: "perf", typ: tp, config: 312, bits: dflNoCore, source: "tracepoint sched/sched_switch id 312"})
	check(t, "vm", "perf::sched:sched_wakeup", Options{}, want{pmu: "perf", typ: tp, config: 318, bits: dflNoCore})
	check(t, "vm", "irq:irq_handler_entry:k", Options{}, want{pmu: "perf", typ: tp, config: 130, bits: exUser | exHv | exGuest})
}

// The tracepoint PMU's type comes from its sysfs type file when there is one.
func TestResolveTracepointTypeFromSysfs(t *testing.T) {
	sys := t.TempDir()
	dev := filepath.Join(sys, "bus", "event_source", "devices", "tracepoint")
	if err := os.MkdirAll(dev, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dev, "type"), []byte("7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fs := testFS("vm")
	fs.Sys = sys
	ev, err := fs.Resolve("sched:sched_switch")
	if err != nil || ev.Attr.Type != 7 || ev.Attr.Config != 312 {
		t.Errorf("sched:sched_switch with tracepoint/type 7: type %d config %d, %v; want type 7 config 312", ev.Attr.Type, ev.Attr.Config, err)
	}
}

func TestResolveRaw(t *testing.T) {
	// The C agent's RAW events: exclude_hv and exclude_guest, nothing else.
	check(t, "vm", "RAW:MY_EVENT", Options{RawCode: 0x5300c0, HasRawCode: true},
		want{pmu: "perf_raw", typ: unix.PERF_TYPE_RAW, config: 0x5300c0, bits: exHv | exGuest, source: "raw rawcode 0x5300c0"})
	check(t, "skylake", "RAW:zero", Options{HasRawCode: true},
		want{pmu: "perf_raw", typ: unix.PERF_TYPE_RAW, config: 0, bits: exHv | exGuest})
}

func TestResolveDynamic(t *testing.T) {
	// sysfs events carry no exclude bits, like the C agent's [dynamic].
	check(t, "vm", "msr.tsc", Options{}, want{pmu: "msr", typ: 9, config: 0, source: "sysfs msr/events/tsc (event=0x00)"})
	check(t, "vm", "software.page-faults", Options{}, want{pmu: "software", typ: 1, config: 2, source: "software PERF_COUNT_SW_PAGE_FAULTS"})
	check(t, "vm", "software.emulation-faults", Options{}, want{pmu: "software", typ: 1, config: 8})

	sk := "skylake"
	check(t, sk, "cpu.cpu-cycles", Options{}, want{pmu: "cpu", typ: 4, config: 0x3c})
	check(t, sk, "cpu.branch-misses", Options{}, want{pmu: "cpu", typ: 4, config: 0xc5})
	check(t, sk, "cpu.mem-loads", Options{}, want{pmu: "cpu", typ: 4, config: 0x1cd, c1: 3, source: "sysfs cpu/events/mem-loads (event=0xcd,umask=0x1,ldlat=3)"})
	check(t, sk, "cpu.cycles-ct", Options{}, want{pmu: "cpu", typ: 4, config: 0x3c | 1<<32 | 1<<33})
	// Bare flags mean 1: inv is bit 23.
	check(t, sk, "cpu.uops-stalled", Options{}, want{pmu: "cpu", typ: 4, config: 0xc2 | 1<<8 | 1<<23 | 1<<24})
	// A field split over config1:1,6-10,44.
	check(t, sk, "cpu.split-fe", Options{}, want{pmu: "cpu", typ: 4, config: 0x1c6, c1: 1<<1 | 0x1f<<6 | 1<<44})
	check(t, sk, "cpu.topdown-retiring", Options{}, want{pmu: "cpu", typ: 4, config: 0x8000, scale: 2, unit: "slots"})
	check(t, sk, "uncore_imc_0.cas_count_read", Options{}, want{pmu: "uncore_imc_0", typ: 17, config: 0x304, scale: 6.103515625e-5, unit: "MiB", cpus: []int{0, 18}})
	check(t, sk, "uncore_imc_0.clockticks", Options{}, want{pmu: "uncore_imc_0", typ: 17, config: 0, cpus: []int{0, 18}})
	check(t, sk, "power.energy-pkg", Options{}, want{pmu: "power", typ: 19, config: 2, scale: 2.3283064365386962890625e-10, unit: "Joules", cpus: []int{0}})
	check(t, sk, "msr.cpu_thermal_margin", Options{}, want{pmu: "msr", typ: 9, config: 5, unit: "C", snapshot: true})
	check(t, sk, "cstate_pkg.c6-residency", Options{}, want{pmu: "cstate_pkg", typ: 21, config: 2, cpus: []int{0, 18}, perPkg: true})

	// hv_24x7 placeholders take their value from the config options.
	check(t, "power9", "hv_24x7.PM_PB_CYC", Options{Params: map[string]uint64{"chip": 1}},
		want{pmu: "hv_24x7", typ: 27, config: 1 | 0x10<<16 | 1<<32})
	// For the per-partition domains (above 2) a configured lpar replaces
	// the file's lpar=0x0, as in the C agent; for the others it is ignored.
	check(t, "power9", "hv_24x7.PM_LPAR_CYC", Options{Params: map[string]uint64{"domain": 3, "core": 2, "lpar": 5}},
		want{pmu: "hv_24x7", typ: 27, config: 3 | 0x80<<16 | 2<<32, c1: 5})
	check(t, "power9", "hv_24x7.PM_LPAR_CYC", Options{Params: map[string]uint64{"domain": 2, "core": 2, "lpar": 5}},
		want{pmu: "hv_24x7", typ: 27, config: 2 | 0x80<<16 | 2<<32})
}

func TestResolvePerfSyntax(t *testing.T) {
	sk := "skylake"
	check(t, sk, "cpu/event=0x3c,umask=1/", Options{}, want{pmu: "cpu", typ: 4, config: 0x13c, source: "perf syntax cpu/event=0x3c,umask=1/"})
	// perf's modifiers: u excludes kernel and hypervisor, nothing else.
	check(t, sk, "cpu/event=0x3c/u", Options{}, want{pmu: "cpu", typ: 4, config: 0x3c, bits: exKern | exHv})
	check(t, sk, "cpu/config=0x5300c0/", Options{}, want{pmu: "cpu", typ: 4, config: 0x5300c0})
	// An alias brings its terms; later terms override them.
	check(t, sk, "cpu/mem-loads,ldlat=30/", Options{}, want{pmu: "cpu", typ: 4, config: 0x1cd, c1: 30})
	check(t, sk, "cpu/topdown-retiring/", Options{}, want{pmu: "cpu", typ: 4, config: 0x8000, scale: 2, unit: "slots"})
	check(t, sk, "uncore_imc_0/event=0x4,umask=0x3/", Options{}, want{pmu: "uncore_imc_0", typ: 17, config: 0x304, cpus: []int{0, 18}})
}

func TestResolveErrors(t *testing.T) {
	sk := "testdata/skylake/sys/bus/event_source/devices/"
	tests := []struct {
		tree, name string
		o          Options
		msg        string
	}{
		{"vm", " ", Options{}, "empty event name"},
		{"vm", "RAPL:PACKAGE_ENERGY", Options{}, `event "RAPL:PACKAGE_ENERGY" is the kernel's power/energy-pkg: event "power.energy-pkg": no PMU "power": testdata/vm/sys/bus/event_source/devices/power does not exist`},
		{"skylake", "RAPL:THERMAL_SPEC", Options{}, `event "RAPL:THERMAL_SPEC": only RAPL:PACKAGE_ENERGY, RAPL:PP0_ENERGY, RAPL:PP1_ENERGY and RAPL:DRAM_ENERGY have a perf event (the kernel's power PMU); the C agent's power limits are read from MSRs, which this agent does not do`},
		{"vm", "RAW:foo", Options{}, `event "RAW:foo": a RAW: event needs rawcode=0x<code> on its line`},
		// A VM has no core PMU: libpfm4's CPU tables are not used there.
		{"vm", "INST_RETIRED:ANY_P", Options{}, `event "INST_RETIRED:ANY_P": not an event of the libpfm4 PMUs found here (perf, perf_raw, amd64_fam1ah_zen5, amd64_fam1ah_zen5_l3), nor a tracepoint or sysfs event; write "RAW:NAME rawcode=0x<code>" or a [dynamic] pmu.event (pmdaperfevent --list-events shows both kinds)`},
		{"vm", "INSTRUCTIONS_RETIRED", Options{}, `event "INSTRUCTIONS_RETIRED": not an event of the libpfm4 PMUs found here (perf, perf_raw, amd64_fam1ah_zen5, amd64_fam1ah_zen5_l3), nor a tracepoint or sysfs event; write "RAW:NAME rawcode=0x<code>" or a [dynamic] pmu.event (pmdaperfevent --list-events shows both kinds)`},
		{"vm", "MEM_LOAD_RETIRED.L1_HIT", Options{}, `event "MEM_LOAD_RETIRED.L1_HIT": not an event of the libpfm4 PMUs found here (perf, perf_raw, amd64_fam1ah_zen5, amd64_fam1ah_zen5_l3), nor a tracepoint or sysfs event; write "RAW:NAME rawcode=0x<code>" or a [dynamic] pmu.event (pmdaperfevent --list-events shows both kinds)`},
		{"vm", "snbep_unc_imc0::UNC_M_CAS_COUNT:RD", Options{}, `event "snbep_unc_imc0::UNC_M_CAS_COUNT:RD": libpfm4 finds no PMU snbep_unc_imc0 on this machine (it finds perf, perf_raw, amd64_fam1ah_zen5, amd64_fam1ah_zen5_l3)`},
		{"skylake", "snbep_unc_imc0::UNC_M_CAS_COUNT:RD", Options{}, `event "snbep_unc_imc0::UNC_M_CAS_COUNT:RD": libpfm4 finds no PMU snbep_unc_imc0 on this machine (it finds ix86arch, perf, rapl, perf_raw, skx, skx_unc_imc0); the kernel's uncore_imc_0 has its events in ` + sk + `uncore_imc_0/events, for a [dynamic] section`},
		// Near misses get the nearest names of this machine's tables.
		{"skylake", "INST_RETIRD", Options{}, `event "INST_RETIRD": not an event of the libpfm4 PMUs found here (ix86arch, perf, rapl, perf_raw, skx, skx_unc_imc0), nor a tracepoint or sysfs event; write "RAW:NAME rawcode=0x<code>" or a [dynamic] pmu.event (pmdaperfevent --list-events shows both kinds); did you mean skx::INST_RETIRED?`},
		{"skylake", "skx::inst_retired:nosuch", Options{}, `event "skx::inst_retired:nosuch": "nosuch": no such umask or modifier for INST_RETIRED: invalid event attribute (libpfm4)`},
		{"skylake", "MEM_LOAD_RETIRED:L3_HTI", Options{}, `event "MEM_LOAD_RETIRED:L3_HTI": "L3_HTI": no such umask or modifier for MEM_LOAD_RETIRED: invalid event attribute (libpfm4); did you mean MEM_LOAD_RETIRED:L3_HIT?`},
		{"vm", "cycles:x", Options{}, `event "cycles:x": unknown modifier "x" (want u, k, h, mg or mh)`},
		{"vm", "cycles:u=2", Options{}, `event "cycles:u=2": modifier "u=2": value must be 0 or 1`},
		{"vm", "PERF_COUNT_HW_CACHE_ITLB:WRITE", Options{}, `event "PERF_COUNT_HW_CACHE_ITLB:WRITE": iTLB has no WRITE operation`},
		{"vm", "PERF_COUNT_HW_CACHE_L1D:READ:WRITE", Options{}, `event "PERF_COUNT_HW_CACHE_L1D:READ:WRITE": more than one of READ, WRITE, PREFETCH`},
		{"vm", "PERF_COUNT_HW_CACHE_L1D:MISS:ACCESS", Options{}, `event "PERF_COUNT_HW_CACHE_L1D:MISS:ACCESS": more than one of ACCESS, MISS`},
		{"vm", "PERF_COUNT_HW_CACHE_L1D:HIT", Options{}, `event "PERF_COUNT_HW_CACHE_L1D:HIT": unknown modifier "HIT" (want READ, WRITE, PREFETCH, ACCESS, MISS, u, k, h, mg or mh)`},
		{"vm", "perf_raw::xyz", Options{}, `event "perf_raw::xyz": perf_raw events are written r<hex code>, e.g. perf_raw::r01c2`},
		{"skylake", "sched:sched_switch", Options{}, `event "sched:sched_switch": no tracefs or debugfs is mounted (looked in testdata/skylake/tracing); mount it with: mount -t tracefs nodev /sys/kernel/tracing`},
		{"vm", "sched:nonesuch", Options{}, `event "sched:nonesuch": no tracepoint nonesuch in testdata/vm/tracing/events/sched`},
		{"vm", "block:block_rq_issue", Options{}, `event "block:block_rq_issue": not a generic event, and testdata/vm/tracing/events has no tracepoint subsystem block`},
		{"vm", "sched:sched_switch:q", Options{}, `event "sched:sched_switch:q": unknown modifier "q" (want u, k, h, mg or mh)`},
		{"vm", "cpu.branch-misses", Options{}, `event "cpu.branch-misses": no PMU "cpu": testdata/vm/sys/bus/event_source/devices/cpu does not exist`},
		{"vm", "msr.aperf", Options{}, `event "msr.aperf": PMU msr has no event aperf (no file testdata/vm/sys/bus/event_source/devices/msr/events/aperf)`},
		{"vm", "software.dummy", Options{}, `event "software.dummy": the software PMU of [dynamic] has only cpu-clock, task-clock, page-faults, context-switches, cpu-migrations, minor-faults, major-faults, alignment-faults, emulation-faults`},
		{"vm", "hv_24x7.PM_PB_CYC", Options{Params: map[string]uint64{"chip": 0}}, `event "hv_24x7.PM_PB_CYC": hv_24x7 parameters are only meaningful on IBM POWER; PMU hv_24x7 is not present`},
		{"vm", "hv_gpci.dispatch_timebase_by_processor", Options{}, `event "hv_gpci.dispatch_timebase_by_processor": hv_gpci parameters are only meaningful on IBM POWER; PMU hv_gpci is not present`},
		{"power9", "hv_24x7.PM_PB_CYC", Options{}, `event "hv_24x7.PM_PB_CYC": testdata/power9/sys/bus/event_source/devices/hv_24x7/events/PM_PB_CYC says chip=?: give its value with the chip:N option`},
		{"skylake", "cpu.bad-term", Options{}, `event "cpu.bad-term": ` + sk + `cpu/events/bad-term: unknown term "nosuchterm": PMU cpu has no format/nosuchterm`},
		{"skylake", "cpu.too-wide", Options{}, `event "cpu.too-wide": ` + sk + `cpu/events/too-wide: term event: value 0x1ff does not fit event=config:0-7 (8 bits, max 0xff)`},
		{"skylake", "cpu.uses-broken", Options{}, `event "cpu.uses-broken": ` + sk + `cpu/events/uses-broken: term broken: ` + sk + `cpu/format/broken: unknown field "config4" (want config, config1, config2 or config3)`},
		{"skylake", "cpu.bad-scale", Options{}, `event "cpu.bad-scale": ` + sk + `cpu/events/bad-scale.scale: "fast" is not a positive number`},
		{"skylake", "cpu/event=0x3c", Options{}, `event "cpu/event=0x3c": perf syntax is pmu/term=value,.../ with an optional u, k or h after the last slash`},
		{"skylake", "cpu/event=0x3c/x", Options{}, `event "cpu/event=0x3c/x": unknown modifier "x" after the last slash (want some of u, k, h)`},
		{"skylake", "cpu/event=0x3c,bogus=1/", Options{}, `event "cpu/event=0x3c,bogus=1/": ` + sk + `cpu: unknown term "bogus": PMU cpu has no format/bogus`},
		{"skylake", "nope/event=1/", Options{}, `event "nope/event=1/": no PMU "nope": ` + sk + `nope does not exist`},
	}
	for _, tt := range tests {
		_, err := testFS(tt.tree).ResolveWith(tt.name, tt.o)
		if err == nil || err.Error() != tt.msg {
			t.Errorf("%s: Resolve(%q) error\n got %v\nwant %s", tt.tree, tt.name, err, tt.msg)
		}
	}
}

func TestBrokenEventDoesNotSpoilPMU(t *testing.T) {
	fs := testFS("skylake")
	p, err := fs.PMU("cpu")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := p.FormatErrors["broken"]; !ok {
		t.Errorf("FormatErrors = %v, want an entry for broken", p.FormatErrors)
	}
	if len(p.Formats) != 13 {
		t.Errorf("len(Formats) = %d, want 13", len(p.Formats))
	}
	if _, err := fs.Resolve("cpu.bad-term"); err == nil {
		t.Error("cpu.bad-term resolved")
	}
	if _, err := fs.Resolve("cpu.mem-loads"); err != nil {
		t.Errorf("cpu.mem-loads after a broken sibling: %v", err)
	}
}

func BenchmarkResolveGeneric(b *testing.B) {
	fs := testFS("vm")
	for b.Loop() {
		if _, err := fs.Resolve("perf::PAGE-FAULTS:u"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkResolveSysfs(b *testing.B) {
	fs := testFS("skylake")
	for b.Loop() {
		if _, err := fs.Resolve("uncore_imc_0.cas_count_read"); err != nil {
			b.Fatal(err)
		}
	}
}

// TestResolveLibpfmCPUs: libpfm4 events count where their kernel PMU does.
func TestResolveLibpfmCPUs(t *testing.T) {
	const joule = 2.3283064365386962890625e-10
	// Uncore events on the CPUs of their PMU's cpumask, with its scale.
	check(t, "snbep", "snbep_unc_imc0::UNC_M_CAS_COUNT:RD", Options{}, want{pmu: "snbep_unc_imc0", typ: 18, config: 0x304,
		scale: 6.103515625e-5, unit: "MiB", cpus: []int{0, 8}, source: "libpfm4 snbep_unc_imc0::UNC_M_CAS_COUNT:RD:e=0:i=0:t=0:excl=0"})
	// libpfm4's RAPL PMU and the C agent's RAPL: names both land on the
	// kernel's power PMU.
	check(t, "snbep", "rapl::RAPL_ENERGY_PKG", Options{}, want{pmu: "rapl", typ: 8, config: 2, scale: joule, unit: "Joules", cpus: []int{0, 8}})
	check(t, "snbep", "RAPL:PACKAGE_ENERGY", Options{}, want{pmu: "power", typ: 8, config: 2, scale: joule, unit: "Joules", cpus: []int{0, 8},
		source: "RAPL as sysfs power/events/energy-pkg (event=0x02)"})
	check(t, "snbep", "RAPL:DRAM_ENERGY", Options{}, want{pmu: "power", typ: 8, config: 3, scale: joule, unit: "Joules", cpus: []int{0, 8}})
	// On a hybrid CPU a core event counts on the CPUs of its kernel PMU:
	// an unprefixed name is the performance cores' (adl_glc comes first in
	// libpfm4's list), opened with cpu_core's type; adl_grt's go to cpu_atom.
	check(t, "alderlake", "INSTRUCTION_RETIRED", Options{}, want{pmu: "adl_glc", typ: 4, config: 0xc0, bits: exGuest,
		cpus: []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}})
	check(t, "alderlake", "adl_grt::INST_RETIRED:ANY_P", Options{}, want{pmu: "adl_grt", typ: 10, config: 0xc0, bits: exGuest,
		cpus: []int{16, 17, 18, 19}})
	check(t, "alderlake", "ix86arch::INSTRUCTION_RETIRED", Options{}, want{pmu: "ix86arch", typ: 4, config: 0xc0, bits: exGuest,
		cpus: []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}})
	// cpu=N asks for one CPU.
	check(t, "haswell", "INST_RETIRED:ANY_P:cpu=3", Options{}, want{pmu: "hsw", typ: 4, config: 0xc0, bits: exGuest, cpus: []int{3}})
}

// TestResolveLibpfmOtherArch: an ARM or POWER machine's names are looked
// up in that libpfm4 build's tables, whatever the agent runs on. The
// wanted values are libpfm4 4.13's (its arm64 and ppc64le builds under
// qemu-user, with these fixtures' cpuinfo).
func TestResolveLibpfmOtherArch(t *testing.T) {
	for _, f := range []string{"graviton2", "power9"} {
		pmu := testFS(f).PresentNames()[2]
		if _, err := testFS(f).Resolve(pmu + "::" + map[string]string{"graviton2": "CPU_CYCLES", "power9": "PM_CYC"}[f]); err != nil && strings.Contains(err.Error(), "no encoder for its family") {
			t.Skipf("needs the encoder of %s's family in package pfm: %v", pmu, err)
		}
	}
	check(t, "graviton2", "CPU_CYCLES", Options{}, want{pmu: "arm_n1", typ: 4, config: 0x11, bits: exHv | exGuest,
		source: "libpfm4 arm_n1::CPU_CYCLES:u=1:k=1:h=0:excl=0:mg=0:mh=1"})
	check(t, "graviton2", "arm_n1::L1D_CACHE_REFILL:u", Options{}, want{pmu: "arm_n1", typ: 4, config: 0x3, bits: exKern | exHv | exGuest})
	check(t, "power9", "PM_CYC", Options{}, want{pmu: "power9", typ: 4, config: 0x1001e, bits: exHv | exGuest,
		source: "libpfm4 power9::PM_CYC:u=1:k=1:h=0:excl=0:mg=0:mh=1"})
	check(t, "power9", "power9::PM_RUN_CYC:u", Options{}, want{pmu: "power9", typ: 4, config: 0x200f4, bits: exKern | exHv | exGuest})
}

// TestResolveLibpfmAMD: Zen 3 names, and its L3 and RAPL PMUs on their
// kernel PMUs (amd_l3's and power's types and cpumasks). The wanted
// values are libpfm4 4.13's on this fixture (qemu-user with the
// fixture's CPUID and sysfs).
func TestResolveLibpfmAMD(t *testing.T) {
	const joule = 2.3283064365386962890625e-10
	check(t, "zen3", "RETIRED_INSTRUCTIONS", Options{}, want{pmu: "amd64_fam19h_zen3", typ: 4, config: 0xc0, bits: exHv | exGuest,
		source: "libpfm4 amd64_fam19h_zen3::RETIRED_INSTRUCTIONS:e=0:i=0:c=0:g=0:u=1:k=1:h=0:excl=0:mg=0:mh=1"})
	check(t, "zen3", "RETIRED_OPS:u", Options{}, want{pmu: "amd64_fam19h_zen3", typ: 4, config: 0xc1, bits: exKern | exHv | exGuest})
	check(t, "zen3", "amd64_fam19h_zen3_l3::UNC_L3_REQUESTS", Options{}, want{pmu: "amd64_fam19h_zen3_l3", typ: 8, config: 0xff04,
		cpus: []int{0, 8, 16, 24, 32, 40, 48, 56}, source: "libpfm4 amd64_fam19h_zen3_l3::UNC_L3_REQUESTS:ALL:u=1:k=1:excl=0:mg=1:mh=1"})
	check(t, "zen3", "amd64_rapl::RAPL_ENERGY_PKG", Options{}, want{pmu: "amd64_rapl", typ: 13, config: 2, scale: joule, unit: "Joules",
		cpus: []int{0}, source: "libpfm4 amd64_rapl::RAPL_ENERGY_PKG:u=1:k=1:excl=0:mg=1:mh=1"})
}

// The tracefs root found for one tracepoint is used for the next, but not
// once it is gone: a tracefs mounted elsewhere since is then found again.
func TestTracingRootFollowsTheMounts(t *testing.T) {
	dir := t.TempDir()
	proc := filepath.Join(dir, "proc")
	mounts := filepath.Join(proc, "self", "mountinfo")
	tracefs := func(name, id string) string {
		root := filepath.Join(dir, name)
		ev := filepath.Join(root, "events", "sched", "sched_switch")
		if err := os.MkdirAll(ev, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ev, "id"), []byte(id+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(mounts), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(mounts, []byte("67 22 0:13 / "+root+" rw,relatime - tracefs nodev rw\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return root
	}
	fs := &FS{FS: hostfs.FS{Sys: filepath.Join(dir, "sys"), Proc: proc}}
	first := tracefs("a", "312")
	for range 2 {
		if ev, err := fs.Resolve("sched:sched_switch"); err != nil || ev.Attr.Config != 312 {
			t.Fatalf("tracefs at %s: config %d, %v; want 312", first, ev.Attr.Config, err)
		}
	}
	if err := os.RemoveAll(first); err != nil {
		t.Fatal(err)
	}
	second := tracefs("b", "313")
	if ev, err := fs.Resolve("sched:sched_switch"); err != nil || ev.Attr.Config != 313 {
		t.Errorf("tracefs moved to %s: config %d, %v; want 313", second, ev.Attr.Config, err)
	}
}

// The [dynamic] software PMU finds its events by a scan of the software
// table, not through genericNamed's index: both must give the same row.
func TestSoftwareNamedAgreesWithGenericNamed(t *testing.T) {
	for _, name := range dynamicSoftware {
		want, ok := genericNamed(name)
		if !ok {
			t.Fatalf("genericNamed(%q) finds nothing", name)
		}
		if got := softwareNamed(name); !reflect.DeepEqual(got, want) {
			t.Errorf("softwareNamed(%q) = %+v, want %+v", name, got, want)
		}
	}
	if got := softwareNamed("cycles"); got.Name != "" {
		t.Errorf("softwareNamed(cycles) = %+v, want no software event", got)
	}
}

// genericNamed scans the tables; an index of every name, built as it was
// once, must agree with it on every name, in any case, and on names that
// are none.
func TestGenericNamedAgreesWithIndex(t *testing.T) {
	index := map[string]genericEvent{}
	add := func(e genericEvent) {
		index[strings.ToLower(e.Name)] = e
		for _, a := range e.Aliases {
			index[strings.ToLower(a)] = e
		}
		if !strings.Contains(e.Const, ":") {
			index[strings.ToLower(e.Const)] = e
		}
	}
	for _, tab := range [][]genericEvent{hardwareEvents, softwareEvents, cacheEvents()} {
		for _, e := range tab {
			add(e)
		}
	}
	if len(index) < 80 {
		t.Fatalf("the index has %d names, want every generic name", len(index))
	}
	var names []string
	for k := range index {
		names = append(names, k, strings.ToUpper(k), strings.ToUpper(k[:1])+k[1:], k+"x", k[:len(k)-1])
	}
	names = append(names, "", "-", "l1-dcache", "l1-dcache-", "L1-DCACHE-LOADS-", "llc-loads", "node-stores", "itlb-stores", "sched", "cycles:u", "K\u212a")
	for _, n := range names {
		want, wok := index[strings.ToLower(n)]
		got, gok := genericNamed(n)
		if gok != wok || !reflect.DeepEqual(got, want) {
			t.Errorf("genericNamed(%q) = %+v, %v; the index says %+v, %v", n, got, gok, want, wok)
		}
	}
}
