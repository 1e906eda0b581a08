package pmu

import (
	"perfevent/internal/hostfs"
	"perfevent/internal/pfm"

	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestPMUFixture(t *testing.T) {
	fs := testFS("skylake")
	p, err := fs.PMU("cpu")
	if err != nil {
		t.Fatal(err)
	}
	if p.Type != 4 || p.Caps["pmu_name"] != "skylake" || p.Caps["max_precise"] != "3" || p.CPUs != nil {
		t.Errorf("cpu PMU: type %d caps %v cpus %v", p.Type, p.Caps, p.CPUs)
	}
	if f := p.Formats["fe_split"]; f.String() != "fe_split=config1:1,6-10,44" {
		t.Errorf("fe_split = %s", f)
	}
	var names []string
	for _, e := range p.Events {
		names = append(names, e.Name)
	}
	wantNames := []string{"bad-scale", "bad-term", "branch-instructions", "branch-misses", "bus-cycles",
		"cache-misses", "cache-references", "cpu-cycles", "cycles-ct", "instructions", "mem-loads",
		"mem-stores", "ref-cycles", "split-fe", "too-wide", "topdown-retiring", "tx-start",
		"uops-stalled", "uses-broken"}
	if !reflect.DeepEqual(names, wantNames) {
		t.Errorf("events = %v\nwant %v", names, wantNames)
	}
	e, ok := p.Event("topdown-retiring")
	if !ok || e.Scale != 2 || e.Unit != "slots" || e.Text != "event=0x00,umask=0x80" || e.Err != nil {
		t.Errorf("topdown-retiring = %+v", e)
	}

	imc, err := fs.PMU("uncore_imc_0")
	if err != nil {
		t.Fatal(err)
	}
	if imc.Type != 17 || !reflect.DeepEqual(imc.CPUs, []int{0, 18}) {
		t.Errorf("uncore_imc_0: type %d cpus %v", imc.Type, imc.CPUs)
	}

	msr, _ := fs.PMU("msr")
	var msrEvents []string
	for _, e := range msr.Events {
		msrEvents = append(msrEvents, e.Name)
	}
	// .snapshot and .unit are properties, not events (the C agent lists
	// "cpu_thermal_margin.snapshot" as an event).
	if want := []string{"aperf", "cpu_thermal_margin", "mperf", "smi", "tsc"}; !reflect.DeepEqual(msrEvents, want) {
		t.Errorf("msr events = %v, want %v", msrEvents, want)
	}
}

func TestPMUsOfThisVM(t *testing.T) {
	pmus, err := testFS("vm").PMUs()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]uint32{}
	for _, p := range pmus {
		got[p.Name] = p.Type
	}
	want := map[string]uint32{"breakpoint": 5, "msr": 9, "software": 1, "tracepoint": 2, "uprobe": 8}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("PMUs = %v, want %v", got, want)
	}
}

func TestPMUsReportsBrokenPMU(t *testing.T) {
	dir := t.TempDir()
	dev := filepath.Join(dir, "bus", "event_source", "devices")
	for _, d := range []string{"good", "bad"} {
		if err := os.MkdirAll(filepath.Join(dev, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(dev, "good", "type"), []byte("7\n"), 0o644)
	os.WriteFile(filepath.Join(dev, "bad", "type"), []byte("seven\n"), 0o644)
	pmus, err := (&FS{FS: hostfs.FS{Sys: dir}}).PMUs()
	if len(pmus) != 1 || pmus[0].Name != "good" || pmus[0].Type != 7 {
		t.Errorf("PMUs = %v", pmus)
	}
	want := filepath.Join(dev, "bad", "type") + `: type "seven" is not a number`
	if err == nil || err.Error() != want {
		t.Errorf("PMUs error = %v, want %s", err, want)
	}
}

func TestPresentNames(t *testing.T) {
	tests := []struct {
		fs   *FS
		want []string
	}{
		// This VM: AMD Zen 5 cpuinfo but no core PMU, so no libpfm4
		// model name.
		{testFS("vm"), []string{"perf", "perf_raw"}},
		// Skylake-SP stepping 4 is skx; stepping >= 5 would be clx. Its
		// memory controller counts as skx_unc_imc0 since the kernel has
		// uncore_imc_0, and RAPL as rapl since it has power.
		{testFS("skylake"), []string{"ix86arch", "perf", "rapl", "perf_raw", "skx", "skx_unc_imc0"}},
		{testFS("power9"), []string{"perf", "perf_raw", "power9"}},
		{testFS("graviton2"), []string{"perf", "perf_raw", "arm_n1"}},
		// An Intel guest without a virtual PMU: CPUID names the model, but
		// nothing can count its events.
		{&FS{FS: hostfs.FS{Sys: "testdata/vm/sys", Proc: "testdata/skylake/proc"}}, []string{"perf", "perf_raw"}},
	}
	defer func(f func(string) []*pfm.PMU) { catalogSource = f }(catalogSource)
	catalogSource = func(string) []*pfm.PMU { return fakeCatalog() }
	for _, tt := range tests {
		if got := tt.fs.PresentNames(); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: PresentNames = %v\nwant %v", tt.fs.Sys, got, tt.want)
		}
	}
}

func TestDetect(t *testing.T) {
	intel := func(model, stepping int) CPUInfo {
		return CPUInfo{Vendor: "GenuineIntel", Family: 6, Model: model, Stepping: stepping, Flags: "arch_perfmon"}
	}
	amd := func(family, model, stepping int) CPUInfo {
		return CPUInfo{Vendor: "AuthenticAMD", Family: family, Model: model, Stepping: stepping}
	}
	arm := func(impl, part int) CPUInfo { return CPUInfo{Implementer: impl, Part: part, HasArchitecture: true} }
	devices := map[string]bool{"uncore_imc_0": true, "power": true}
	tests := []struct {
		c    CPUInfo
		want []string
	}{
		{intel(85, 4), []string{"ix86arch", "perf", "rapl", "perf_raw", "skx", "skx_unc_imc0"}},
		{intel(85, 7), []string{"ix86arch", "perf", "rapl", "perf_raw", "skx_unc_imc0", "clx"}},
		{intel(60, 3), []string{"ix86arch", "perf", "hsw", "rapl", "perf_raw"}},
		{intel(45, 7), []string{"ix86arch", "perf", "snb_ep", "snbep_unc_imc0", "rapl", "perf_raw"}},
		{intel(26, 5), []string{"nhm", "nhm_unc", "ix86arch", "perf", "perf_raw"}},
		{intel(143, 8), []string{"ix86arch", "perf", "rapl", "perf_raw", "spr", "spr_unc_imc0"}},
		{intel(207, 2), []string{"ix86arch", "perf", "perf_raw", "emr", "spr_unc_imc0"}},
		{intel(106, 6), []string{"ix86arch", "perf", "rapl", "perf_raw", "icx_unc_imc0"}},
		{intel(173, 1), []string{"ix86arch", "perf", "perf_raw", "gnr", "gnr_unc_imc0"}},
		// Alder Lake's two kinds of cores, each its own PMU.
		{intel(0x97, 2), []string{"ix86arch", "perf", "perf_raw", "adl_glc", "adl_grt"}},
		{intel(0xbf, 2), []string{"ix86arch", "perf", "perf_raw", "adl_glc", "adl_grt"}},
		{CPUInfo{Vendor: "GenuineIntel", Family: 6, Model: 85, Flags: ""}, []string{"perf", "rapl", "perf_raw", "skx", "skx_unc_imc0"}},
		{CPUInfo{Vendor: "GenuineIntel", Family: 15, Model: 4, Flags: "arch_perfmon"}, []string{"netburst_p", "perf", "perf_raw"}},
		{amd(15, 5, 1), []string{"perf", "amd64_k8_revb", "perf_raw"}},
		{amd(15, 0x41, 2), []string{"perf", "amd64_k8_revf", "perf_raw"}},
		{amd(0x10, 2, 0), []string{"perf", "amd64_fam10h_barcelona", "perf_raw"}},
		{amd(0x10, 9, 0), []string{"perf", "amd64_fam10h_istanbul", "perf_raw"}},
		{amd(0x15, 1, 2), []string{"perf", "amd64_fam15h_interlagos", "amd64_fam15h_nb", "perf_raw"}},
		{amd(0x17, 1, 2), []string{"perf", "perf_raw", "amd64_fam17h", "amd64_fam17h_zen1"}},
		{amd(0x17, 49, 0), []string{"perf", "perf_raw", "amd64_fam17h_zen2", "amd64_rapl"}},
		{amd(0x19, 1, 1), []string{"perf", "perf_raw", "amd64_fam19h_zen3", "amd64_rapl", "amd64_fam19h_zen3_l3"}},
		{amd(0x19, 0x11, 1), []string{"perf", "perf_raw", "amd64_rapl", "amd64_fam19h_zen4"}},
		// Zen 4 desktop (4.13 knew only Genoa), Zen 5 and Zen 6.
		{amd(0x19, 0x61, 2), []string{"perf", "perf_raw", "amd64_rapl", "amd64_fam19h_zen4"}},
		{amd(0x1a, 2, 0), []string{"perf", "perf_raw", "amd64_fam1ah_zen5", "amd64_fam1ah_zen5_l3"}},
		{amd(0x1a, 0x44, 0), []string{"perf", "perf_raw", "amd64_fam1ah_zen5", "amd64_fam1ah_zen5_l3"}},
		{amd(0x1a, 0x70, 0), []string{"perf", "perf_raw", "amd64_fam1ah_zen5", "amd64_fam1ah_zen5_l3"}},
		{amd(0x1a, 0x50, 0), []string{"perf", "perf_raw", "amd64_fam1ah_zen6", "amd64_fam1ah_zen6_l3"}},
		{arm(0x41, 0xd0c), []string{"perf", "perf_raw", "arm_n1"}},
		{arm(0x41, 0xd4f), []string{"perf", "perf_raw", "arm_v2"}},
		{arm(0x43, 0xaf), []string{"perf", "perf_raw", "arm_thunderx2", "tx2_dmc0"}},
		{CPUInfo{Implementer: 0x41, Part: 0xd0c}, []string{"perf", "perf_raw"}},
		{CPUInfo{PVR: 0x4e}, []string{"perf", "perf_raw", "power9"}},
		{CPUInfo{PVR: 0x4d}, []string{"perf", "power8", "perf_raw", "powerpc_nest_mcs_read"}},
		{CPUInfo{}, []string{"perf", "perf_raw"}},
	}
	for _, tt := range tests {
		var got []string
		for _, p := range Detect(tt.c, fakeCatalog(), func(n string) bool { return devices[n] }) {
			got = append(got, p.Name)
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Detect(%+v) = %v, want %v", tt.c, got, tt.want)
		}
	}
}

func TestCPUInfo(t *testing.T) {
	c, err := testFS("vm").CPUInfo()
	if err != nil {
		t.Fatal(err)
	}
	if c.Vendor != "AuthenticAMD" || c.Family != 26 || c.Model != 2 || c.Stepping != 1 || !c.Flags.Has("avx512f") {
		t.Errorf("vm cpuinfo = %s %d %d %d", c.Vendor, c.Family, c.Model, c.Stepping)
	}
	p, err := testFS("power9").CPUInfo()
	if err != nil || p.Vendor != "" || p.PVR != 0x4e {
		t.Errorf("power9 cpuinfo = %+v, %v", p, err)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "cpuinfo"), []byte("processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: six\n"), 0o644)
	_, err = (&FS{FS: hostfs.FS{Proc: dir}}).CPUInfo()
	if want := filepath.Join(dir, "cpuinfo") + `:3: cpu family "six" is not a number`; err == nil || err.Error() != want {
		t.Errorf("bad cpuinfo error = %v, want %s", err, want)
	}
}

func TestListEvents(t *testing.T) {
	ls, err := testFS("skylake").ListEvents()
	// No tracefs in this tree: the listing is complete otherwise.
	if err == nil || !strings.Contains(err.Error(), "tracepoints: no tracefs or debugfs is mounted") {
		t.Errorf("ListEvents error = %v", err)
	}
	kinds := map[Kind]int{}
	byName := map[string]Listing{}
	libpfm := map[string]int{}
	for _, l := range ls {
		if l.Kind == KindLibpfm {
			libpfm[l.Group]++
		} else {
			kinds[l.Kind]++
		}
		byName[l.Name] = l
	}
	// libpfm4's tables of the PMUs it finds on a Skylake-SP, but perf's;
	// libpfm4 4.13 lists 86 events for skx (pfm_get_pmu_info nevents).
	if len(libpfm) != 4 || libpfm["skx"] != 86 || libpfm["ix86arch"] != 7 || libpfm["rapl"] == 0 || libpfm["skx_unc_imc0"] == 0 {
		t.Errorf("libpfm4 events per PMU = %v", libpfm)
	}
	if got := byName["skx::MEM_LOAD_RETIRED"].String(); !strings.HasPrefix(got, "skx::MEM_LOAD_RETIRED [libpfm4: ") || !strings.Contains(got, "\n    :L3_HIT  ") {
		t.Errorf("MEM_LOAD_RETIRED = %s", got)
	}
	// 10 hardware, 32 cache (perf list's table), 12 software, and the
	// sysfs events of the fixture plus the 9 synthetic software ones.
	want := map[Kind]int{KindHardware: 10, KindCache: 32, KindSoftware: 12, KindDynamic: 19 + 3 + 1 + 5 + 2 + 9}
	if !reflect.DeepEqual(kinds, want) {
		t.Errorf("kinds = %v, want %v", kinds, want)
	}
	if ls[0].String() != "cpu-cycles OR cycles OR PERF_COUNT_HW_CPU_CYCLES [hardware: CPU cycles]" {
		t.Errorf("first = %s", ls[0])
	}
	if got := byName["uncore_imc_0.cas_count_read"].String(); got != "uncore_imc_0.cas_count_read [dynamic: event=0x04,umask=0x03; scale 6.103515625e-05 MiB]" {
		t.Errorf("cas_count_read = %s", got)
	}
	var dyn []string
	for _, l := range ls {
		if l.Kind == KindDynamic {
			dyn = append(dyn, l.Name)
		}
	}
	if dyn[0] != "cpu.bad-scale" || dyn[len(dyn)-10] != "uncore_imc_0.clockticks" || dyn[len(dyn)-9] != "software.cpu-clock" {
		t.Errorf("dynamic order = %v", dyn)
	}
	if l := byName["cpu.bad-term"]; l.Err == nil {
		t.Error("cpu.bad-term listed without its error")
	}
	if l := byName["software.page-faults"]; l.Group != "software" || l.Kind != KindDynamic {
		t.Errorf("software.page-faults = %+v", l)
	}
	if _, ok := byName["L1-icache-stores"]; ok {
		t.Error("L1-icache-stores listed; perf has no such event")
	}

	vm, err := testFS("vm").ListEvents()
	if err != nil {
		t.Fatal(err)
	}
	var tps []string
	for _, l := range vm {
		if l.Kind == KindTracepoint {
			tps = append(tps, l.Group+"/"+l.Name)
		}
	}
	if want := []string{"irq/irq:irq_handler_entry", "sched/sched:sched_switch", "sched/sched:sched_wakeup"}; !reflect.DeepEqual(tps, want) {
		t.Errorf("tracepoints = %v, want %v", tps, want)
	}
	// Every listed name resolves, except the fixture's deliberately
	// broken ones.
	for i, l := range append(ls, vm...) {
		fs := testFS("skylake")
		if i >= len(ls) {
			fs = testFS("vm")
		}
		name := l.Name
		if len(l.Umasks) > 0 {
			// Not every libpfm4 event has a default umask.
			name += ":" + l.Umasks[0].Name
		}
		if _, err := fs.Resolve(name); err != nil && l.Err == nil {
			t.Errorf("listed %q does not resolve: %v", l.Name, err)
		}
	}
}

func TestScaleFor(t *testing.T) {
	fs := testFS("skylake")
	tests := []struct {
		ev    Event
		scale float64
		unit  string
		ok    bool
	}{
		// What libpfm4 would give for an Intel event: PERF_TYPE_RAW, which
		// is the cpu PMU's type. The C agent's lookup needs both event and
		// umask non-zero and would miss this one.
		{Event{Attr: attr(4, 0x8000, 0)}, 2, "slots", true},
		{Event{Attr: attr(17, 0x304, 0)}, 6.103515625e-5, "MiB", true},
		{Event{Attr: attr(17, 0x30c, 0)}, 0, "", false},
		{Event{Attr: attr(4, 0x3c, 0)}, 0, "", false},
		{Event{Attr: attr(0, 0, 0)}, 0, "", false},
		{Event{Scale: 0.5, Unit: "Joules"}, 0.5, "Joules", true},
	}
	for _, tt := range tests {
		s, u, ok := fs.ScaleFor(tt.ev)
		if s != tt.scale || u != tt.unit || ok != tt.ok {
			t.Errorf("ScaleFor(%+v) = %g %q %v, want %g %q %v", tt.ev.Attr, s, u, ok, tt.scale, tt.unit, tt.ok)
		}
	}
	ev, err := fs.ResolveWith("RAW:topdown", Options{RawCode: 0x8000, HasRawCode: true})
	if err != nil {
		t.Fatal(err)
	}
	if s, u, ok := fs.ScaleFor(ev); s != 2 || u != "slots" || !ok {
		t.Errorf("ScaleFor(RAW:topdown) = %g %q %v", s, u, ok)
	}
}

func TestTracefsFromMounts(t *testing.T) {
	dir := t.TempDir()
	tr := filepath.Join(dir, "mnt", "trace")
	os.MkdirAll(filepath.Join(tr, "events", "sched", "sched_switch"), 0o755)
	os.WriteFile(filepath.Join(tr, "events", "sched", "sched_switch", "id"), []byte("372\n"), 0o644)
	os.MkdirAll(filepath.Join(dir, "proc", "self"), 0o755)
	os.WriteFile(filepath.Join(dir, "proc", "self", "mountinfo"), []byte("67 22 0:13 / "+tr+" rw,relatime - tracefs tracefs rw\n33 21 0:7 / /mnt/debug\\040fs rw - debugfs debugfs rw\n"), 0o644)
	fs := &FS{FS: hostfs.FS{Sys: filepath.Join(dir, "sys"), Proc: filepath.Join(dir, "proc")}}
	ev, err := fs.Resolve("sched:sched_switch")
	if err != nil || ev.Attr.Config != 372 || ev.Attr.Type != 2 {
		t.Errorf("Resolve via mounts = %+v, %v", ev.Attr, err)
	}
	want := []string{tr, "/mnt/debug fs/tracing", filepath.Join(dir, "sys", "kernel", "tracing"), filepath.Join(dir, "sys", "kernel", "debug", "tracing")}
	if got := fs.tracingCandidates(); !reflect.DeepEqual(got, want) {
		t.Errorf("candidates = %v, want %v", got, want)
	}
}

// Default reads the sysfs that SYSFS_PREFIX names, as the C agent does.
func TestDefaultHonoursCEnvironment(t *testing.T) {
	t.Setenv("SYSFS_MOUNT_POINT", "")
	t.Setenv("SYSFS_PREFIX", "testdata/vm/sys")
	fs := Default()
	if fs.Sys != "testdata/vm/sys" {
		t.Errorf("with SYSFS_PREFIX: Sys = %s", fs.Sys)
	}
	if cpus, err := fs.OnlineCPUs(); err != nil || !reflect.DeepEqual(cpus, []int{0, 1}) {
		t.Errorf("OnlineCPUs = %v, %v", cpus, err)
	}
}

func attr(typ uint32, config, ext1 uint64) unix.PerfEventAttr {
	return unix.PerfEventAttr{Type: typ, Config: config, Ext1: ext1}
}

// TestNoSysfs: in a container without /sys/bus/event_source, generic
// names still resolve and sysfs names fail with the path that is missing.
func TestNoSysfs(t *testing.T) {
	dir := t.TempDir()
	fs := &FS{FS: hostfs.FS{Sys: filepath.Join(dir, "sys"), Proc: filepath.Join(dir, "proc")}, Tracing: []string{filepath.Join(dir, "tracing")}}
	ev, err := fs.Resolve("page-faults")
	if err != nil || ev.Attr.Type != 1 || ev.Attr.Config != 2 || ev.Attr.Bits != dflNoCore {
		t.Errorf("page-faults = %+v, %v", ev.Attr, err)
	}
	if got := fs.PresentNames(); !reflect.DeepEqual(got, []string{"perf", "perf_raw"}) {
		t.Errorf("PresentNames = %v", got)
	}
	_, err = fs.Resolve("msr.tsc")
	want := `event "msr.tsc": no PMU "msr": ` + filepath.Join(dir, "sys", "bus", "event_source", "devices", "msr") + " does not exist"
	if err == nil || err.Error() != want {
		t.Errorf("msr.tsc error = %v, want %s", err, want)
	}
	ls, err := fs.ListEvents()
	if err == nil || len(ls) != 10+32+12+9 {
		t.Errorf("ListEvents = %d listings, %v", len(ls), err)
	}
}

func TestFilterListings(t *testing.T) {
	ls, _ := testFS("skylake").ListEvents()
	names := func(ls []Listing) []string {
		var n []string
		for _, l := range ls {
			s := l.Name
			for _, u := range l.Umasks {
				s += ":" + u.Name
			}
			n = append(n, s)
		}
		return n
	}
	got, err := FilterListings(ls, "skx", "l3_hit")
	if err != nil {
		t.Fatal(err)
	}
	// Names match whole (every umask kept), or by their umasks (those kept).
	want := []string{
		"skx::MEM_LOAD_L3_HIT_RETIRED:XSNP_MISS:XSNP_HIT:XSNP_HITM:XSNP_NONE",
		"skx::MEM_LOAD_UOPS_L3_HIT_RETIRED:XSNP_MISS:XSNP_HIT:XSNP_HITM:XSNP_NONE",
		"skx::MEM_LOAD_RETIRED:L3_HIT",
		"skx::MEM_LOAD_UOPS_RETIRED:L3_HIT",
		"skx::OFFCORE_RESPONSE_0:L3_HITM:L3_HITE:L3_HITS:L3_HITF:L3_HITMESF:L3_HIT",
		"skx::OFFCORE_RESPONSE_1:L3_HITM:L3_HITE:L3_HITS:L3_HITF:L3_HITMESF:L3_HIT",
	}
	if !reflect.DeepEqual(names(got), want) {
		t.Errorf("--pmu skx --match l3_hit = %v, want %v", names(got), want)
	}
	got, _ = FilterListings(ls, "PERF", "*-dcache-load*")
	if want := []string{"L1-dcache-loads", "L1-dcache-load-misses"}; !reflect.DeepEqual(names(got), want) {
		t.Errorf("--pmu perf --match '*-dcache-load*' = %v, want %v", names(got), want)
	}
	got, _ = FilterListings(ls, "uncore_imc_0", "")
	if len(got) != 3 || got[0].Name != "uncore_imc_0.cas_count_read" {
		t.Errorf("--pmu uncore_imc_0 = %v", names(got))
	}
	if _, err := FilterListings(ls, "", "[x"); err == nil {
		t.Error("a bad glob is accepted")
	}
}

// TestListedEventCounts: --list-events shows a PMU's events as libpfm4
// counts them (pfm_get_pmu_info's nevents, from LIBPFM_FORCE_PMU=NAME
// pfmoracle -l with libpfm4 upstream at the catalog's commit, built from
// source): shared tables hold other models' and other revisions' events,
// which are left out.
func TestListedEventCounts(t *testing.T) {
	for name, n := range map[string]int{
		"amd64_k8_revb": 83, "amd64_k8_revg": 87, "amd64_fam10h_barcelona": 116, "amd64_fam10h_istanbul": 123,
		"amd64_fam17h_zen2": 58, "amd64_fam19h_zen3": 62, "amd64_fam19h_zen4": 77,
		"skx": 86, "clx": 86, "icx": 71, "snb_ep": 83, "hsw": 74,
		"amd64_fam1ah_zen5": 81, "amd64_fam1ah_zen6": 84, "gnr": 75, "emr": 73, "spr": 73,
		"adl_glc": 68, "adl_grt": 27,
	} {
		p, err := pfm.LoadArch("amd64", name)
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for i := range p.Events {
			if belongs(p, p.Events[i].Model, p.Events[i].Flags) {
				got++
			}
		}
		if got != n {
			t.Errorf("%s: %d events, libpfm4 lists %d", name, got, n)
		}
	}
}

// BenchmarkScaleFor is the lookup the agent makes for every event libpfm4
// encodes, on the skylake tree (eight PMUs): an Intel core event, found on
// the cpu PMU, and a software event, which no PMU directory describes.
func BenchmarkScaleFor(b *testing.B) {
	fs := testFS("skylake")
	for _, bb := range []struct {
		name  string
		ev    Event
		scale float64
	}{
		{"raw", Event{Attr: attr(4, 0x8000, 0)}, 2},
		{"software", Event{Attr: attr(1, 0, 0)}, 0},
	} {
		b.Run(bb.name, func(b *testing.B) {
			for b.Loop() {
				if s, _, _ := fs.ScaleFor(bb.ev); s != bb.scale {
					b.Fatalf("ScaleFor = %g, want %g", s, bb.scale)
				}
			}
		})
	}
}

// eachFile reads a directory's files in the order of their names and
// passes over its subdirectories; a missing directory has no files, and
// one that cannot be listed is an error.
func TestEachFile(t *testing.T) {
	dir := t.TempDir()
	for n, text := range map[string]string{"umask": "config:8-15\n", "event": "config:0-7\n", "edge": "config:18\n"} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "power"), 0o755); err != nil {
		t.Fatal(err)
	}
	var got []string
	if err := eachFile(dir, func(n, text string) { got = append(got, n+"="+text) }); err != nil {
		t.Fatal(err)
	}
	want := []string{"edge=config:18\n", "event=config:0-7\n", "umask=config:8-15\n"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("eachFile gave %q, want %q", got, want)
	}
	got = nil
	if err := eachFile(filepath.Join(dir, "missing"), func(n, _ string) { got = append(got, n) }); err != nil || got != nil {
		t.Errorf("eachFile(missing) = %v, called for %q; want nil, no calls", err, got)
	}
	if err := eachFile(filepath.Join(dir, "event"), func(string, string) {}); err == nil {
		t.Error("eachFile(a file) = nil, want an error")
	}
}
