package pmu

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"perfevent/internal/hostfs"
)

// skylakeCoreEvents are raw core events of the skylake tree (libpfm4's
// skx PMU, type 4): each one's scale is looked up on the kernel's cpu PMU.
var skylakeCoreEvents = []string{
	"INST_RETIRED:ANY_P", "UOPS_ISSUED:ANY", "BR_MISP_RETIRED:ALL_BRANCHES", "L2_RQSTS:MISS",
	"MEM_LOAD_RETIRED:L3_MISS", "OFFCORE_REQUESTS:DEMAND_DATA_RD", "ICACHE_64B:IFTAG_MISS",
	"DTLB_LOAD_MISSES:MISS_CAUSES_A_WALK", "cpu.mem-loads", "cpu/event=0x3c/",
}

// BenchmarkResolveCoreEvents is the cost per raw core event of resolving a
// configuration of them on the skylake tree: without a pass each event
// reads the cpu PMU's directory again; in a pass (as the agent resolves a
// configuration) the first does and the others share that read.
func BenchmarkResolveCoreEvents(b *testing.B) {
	fs := testFS("skylake")
	fs.LibpfmPMUs() // the catalog is decoded once per process, not per pass
	resolveAll := func(b *testing.B) {
		for _, n := range skylakeCoreEvents {
			if _, err := fs.Resolve(n); err != nil {
				b.Fatal(err)
			}
		}
	}
	perEvent := func(b *testing.B) {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(skylakeCoreEvents)), "ns/event")
	}
	b.Run("each-reads-sysfs", func(b *testing.B) {
		for b.Loop() {
			resolveAll(b)
		}
		perEvent(b)
	})
	b.Run("one-pass", func(b *testing.B) {
		for b.Loop() {
			end := fs.Pass()
			resolveAll(b)
			end()
		}
		perEvent(b)
	})
}

// copyTree copies a fixture's sys tree, so that a test may change it.
func copyTree(t *testing.T, fixture string) *FS {
	t.Helper()
	src := filepath.Join("testdata", fixture)
	dst := t.TempDir()
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return &FS{FS: hostfs.FS{Sys: filepath.Join(dst, "sys"), Proc: filepath.Join(dst, "proc")}, Tracing: []string{filepath.Join(dst, "tracing")}}
}

// TestPassSeesAChangedSysfs: a pass reads each PMU once, and the next pass
// (a reload, or the rebuild after a CPU went offline) reads it again: a
// changed cpumask, a changed event and a PMU that went away are all seen.
func TestPassSeesAChangedSysfs(t *testing.T) {
	fs := copyTree(t, "skylake")
	devices := fs.devicesDir()
	write := func(rel, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(devices, rel), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	resolve := func(name string) Event {
		t.Helper()
		ev, err := fs.Resolve(name)
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}

	end := fs.Pass()
	first := resolve("uncore_imc_0.cas_count_read")
	if !slices.Equal(first.CPUs, []int{0, 18}) || first.Attr.Config != 0x304 {
		t.Fatalf("before the change: cpus %v config %#x", first.CPUs, first.Attr.Config)
	}
	// The kernel moves an uncore PMU's cpumask off a CPU going offline.
	write("uncore_imc_0/cpumask", "1,18\n")
	write("uncore_imc_0/events/cas_count_read", "event=0x04,umask=0x0f\n")
	if ev := resolve("uncore_imc_0.cas_count_read"); !slices.Equal(ev.CPUs, first.CPUs) || ev.Attr.Config != first.Attr.Config {
		t.Errorf("within the pass: cpus %v config %#x, want the pass's first read (%v %#x)", ev.CPUs, ev.Attr.Config, first.CPUs, first.Attr.Config)
	}
	end()

	end = fs.Pass()
	if ev := resolve("uncore_imc_0.cas_count_read"); !slices.Equal(ev.CPUs, []int{1, 18}) || ev.Attr.Config != 0xf04 {
		t.Errorf("the next pass: cpus %v config %#x, want [1 18] 0xf04", ev.CPUs, ev.Attr.Config)
	}
	// A caller that changes what it was given does not change the pass's copy.
	ev := resolve("uncore_imc_0.cas_count_read")
	ev.CPUs[0] = 7
	if again := resolve("uncore_imc_0.cas_count_read"); !slices.Equal(again.CPUs, []int{1, 18}) {
		t.Errorf("an event's CPUs are the pass's: %v", again.CPUs)
	}
	end()

	if err := os.RemoveAll(filepath.Join(devices, "uncore_imc_0")); err != nil {
		t.Fatal(err)
	}
	end = fs.Pass()
	if _, err := fs.Resolve("uncore_imc_0.cas_count_read"); err == nil {
		t.Error("a PMU that went away still resolves in a new pass")
	}
	if names, _ := fs.PMUNames(); slices.Contains(names, "uncore_imc_0") {
		t.Errorf("PMUNames in a new pass: %v", names)
	}
	end()

	// Outside a pass nothing is kept.
	write("cpu/events/mem-loads", "event=0xcd,umask=0x2\n")
	if ev := resolve("cpu.mem-loads"); ev.Attr.Config != 0x2cd {
		t.Errorf("outside a pass: config %#x, want 0x2cd", ev.Attr.Config)
	}
	write("cpu/events/mem-loads", "event=0xcd,umask=0x3\n")
	if ev := resolve("cpu.mem-loads"); ev.Attr.Config != 0x3cd {
		t.Errorf("outside a pass, after a change: config %#x, want 0x3cd", ev.Attr.Config)
	}
}

// TestPassReadsEachPMUOnce counts the reads of a pass with many events on
// one PMU, and checks that a pass started during another leaves the older
// one's reads behind.
func TestPassReadsEachPMUOnce(t *testing.T) {
	fs := testFS("skylake")
	reads := map[string]int{}
	read := func(name string) (*PMU, error) {
		reads[name]++
		return fs.readPMU(name)
	}
	end := fs.Pass()
	for range 5 {
		if _, err := fs.cachedPMU("cpu", read); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := fs.cachedPMU("nosuch", read); err == nil {
		t.Error("PMU nosuch read")
	}
	fs.cachedPMU("nosuch", read)
	if reads["cpu"] != 1 || reads["nosuch"] != 1 {
		t.Errorf("reads in one pass: %v, want one each", reads)
	}
	endLater := fs.Pass()
	fs.cachedPMU("cpu", read)
	end() // the older pass ending leaves the newer one in place
	fs.cachedPMU("cpu", read)
	endLater()
	if reads["cpu"] != 2 {
		t.Errorf("cpu read %d times over two passes, want 2", reads["cpu"])
	}
	fs.cachedPMU("cpu", read)
	if reads["cpu"] != 3 {
		t.Errorf("cpu read %d times after the passes, want 3", reads["cpu"])
	}
}

// TestPassReadsEachTracepointOnce: in a pass a tracepoint's id is read
// once, however often it is resolved (the plan and the C agent's layout
// both resolve it); the next pass reads it again.
func TestPassReadsEachTracepointOnce(t *testing.T) {
	fs := copyTree(t, "vm")
	idFile := filepath.Join(fs.Tracing[0], "events", "sched", "sched_switch", "id")
	id := func() uint64 {
		t.Helper()
		ev, err := fs.Resolve("sched:sched_switch")
		if err != nil {
			t.Fatal(err)
		}
		return ev.Attr.Config
	}
	was := id()
	end := fs.Pass()
	if got := id(); got != was {
		t.Fatalf("id %d in the pass, %d outside", got, was)
	}
	if err := os.WriteFile(idFile, []byte("4242\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := id(); got != was {
		t.Errorf("the same pass read the id again: %d, want %d", got, was)
	}
	end()
	end = fs.Pass()
	defer end()
	if got := id(); got != 4242 {
		t.Errorf("the next pass: id %d, want the new 4242", got)
	}
}

// TestPassResolvesEachNameOnce: in a pass a name resolves once, to the
// same event, each caller with CPUs of its own; the next pass resolves it
// afresh.
func TestPassResolvesEachNameOnce(t *testing.T) {
	fs := copyTree(t, "skylake")
	const name = "uncore_imc_0.cas_count_read"
	outside, err := fs.Resolve(name)
	if err != nil {
		t.Fatal(err)
	}
	end := fs.Pass()
	first, err := fs.Resolve(name)
	if err != nil {
		t.Fatal(err)
	}
	if len(first.CPUs) == 0 {
		t.Fatalf("%s: no CPUs: %+v", name, first)
	}
	first.CPUs[0] = -1 // a caller's change stays its own
	ev := filepath.Join(fs.Sys, "bus", "event_source", "devices", "uncore_imc_0", "events", "cas_count_read")
	if err := os.WriteFile(ev, []byte("event=0x05,umask=0x03\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	again, err := fs.Resolve(name)
	if err != nil {
		t.Fatal(err)
	}
	if again.Attr != outside.Attr || !slices.Equal(again.CPUs, outside.CPUs) || again.Source != outside.Source {
		t.Errorf("resolved again in the pass: %+v, want %+v", again, outside)
	}
	// Again, it costs the key and the copy of the CPUs, not a resolution.
	for _, n := range []string{name, "INST_RETIRED:ANY_P", "cpu-clock"} {
		if allocs := testing.AllocsPerRun(10, func() { fs.Resolve(n) }); allocs > 3 {
			t.Errorf("%s resolved again in the pass: %.0f allocations", n, allocs)
		}
	}
	if _, err := fs.ResolveWith("RAW:x", Options{RawCode: 0x1, HasRawCode: true}); err != nil {
		t.Fatal(err)
	}
	if raw, err := fs.ResolveWith("RAW:x", Options{RawCode: 0x2, HasRawCode: true}); err != nil || raw.Attr.Config != 0x2 {
		t.Errorf("RAW:x with rawcode 0x2 in the same pass: config %#x, %v", raw.Attr.Config, err)
	}
	end()
	end = fs.Pass()
	defer end()
	if next, err := fs.Resolve(name); err != nil || next.Attr.Config == outside.Attr.Config {
		t.Errorf("the next pass: %+v, %v; want the new encoding", next, err)
	}
}

// TestPassListsPMUsOnce: in a pass, whether a PMU exists is answered from
// the pass's one listing of the devices directory, not by a stat per
// question, and names of PMUs that are not there fail as they do outside
// a pass, without reading their files.
func TestPassListsPMUsOnce(t *testing.T) {
	fs := copyTree(t, "skylake")
	missing := []string{"nosuch.event", "cpu.nosuch", "hv_24x7.x", "uncore_imc_9.cas_count_read", "snbep_unc_imc0::UNC_M_CAS_COUNT:RD"}
	outside := map[string]string{}
	for _, n := range missing {
		_, err := fs.Resolve(n)
		if err == nil {
			t.Fatalf("%s resolves outside a pass", n)
		}
		outside[n] = err.Error()
	}
	end := fs.Pass()
	if !fs.hasPMU("cpu") || fs.hasPMU("late") {
		t.Fatalf("in a pass: hasPMU(cpu) %v, hasPMU(late) %v; want true, false", fs.hasPMU("cpu"), fs.hasPMU("late"))
	}
	late := filepath.Join(fs.PMUDevices(), "late")
	if err := os.MkdirAll(filepath.Join(late, "events"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(late, "type"), []byte("42\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if fs.hasPMU("late") {
		t.Error("a PMU that appeared during the pass: hasPMU stat'ed it rather than use the pass's listing")
	}
	if _, err := fs.PMU("late"); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("PMU late in the pass that listed none: %v, want that it does not exist", err)
	}
	for _, n := range missing {
		if _, err := fs.Resolve(n); err == nil || err.Error() != outside[n] {
			t.Errorf("%s in a pass: %v\nwant, as outside: %s", n, err, outside[n])
		}
	}
	end()
	end = fs.Pass()
	defer end()
	if !fs.hasPMU("late") {
		t.Error("the next pass does not see PMU late")
	}
	if p, err := fs.PMU("late"); err != nil || p.Type != 42 {
		t.Errorf("PMU late in the next pass: %+v, %v", p, err)
	}
}

// TestPassTypeAllocatesNothing: in a pass, a PMU's type asked again (as
// every tracepoint configured asks the tracepoint PMU's) is the pass's
// read, without so much as its path joined.
func TestPassTypeAllocatesNothing(t *testing.T) {
	fs := testFS("vm")
	end := fs.Pass()
	defer end()
	want, ok := fs.typeOf("tracepoint")
	if !ok || want != 2 {
		t.Fatalf("typeOf(tracepoint) = %d, %v; want 2", want, ok)
	}
	if allocs := testing.AllocsPerRun(10, func() { fs.typeOf("tracepoint") }); allocs != 0 {
		t.Errorf("typeOf(tracepoint) again in the pass: %.0f allocations, want none", allocs)
	}
}

// Within a pass PMUNames reads the directory once and gives every caller
// that one list, without a copy each: a start asks for it dozens of times,
// and a large server lists a hundred PMUs or more (a box of each uncore unit).
func TestPassSharesPMUNames(t *testing.T) {
	fs := testFS("sapphirerapids")
	end := fs.Pass()
	defer end()
	first, err := fs.PMUNames()
	if err != nil || len(first) < 10 {
		t.Fatalf("PMUNames: %d names, %v; the fixture lists 20", len(first), err)
	}
	if n := testing.AllocsPerRun(10, func() { fs.PMUNames() }); n != 0 {
		t.Errorf("PMUNames in a pass makes %v objects a call, want 0", n)
	}
	if again, _ := fs.PMUNames(); &again[0] != &first[0] {
		t.Error("PMUNames in a pass gave a list of its own")
	}
}
