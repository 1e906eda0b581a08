package setup

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"perfevent/internal/config"
	"perfevent/internal/hostfs"
	"perfevent/internal/pmu"
)

// noHardware opens what a VM without a PMU opens: everything but
// hardware and cache events.
func noHardware(ev *pmu.Event, cpus []int) bool {
	return ev.Attr.Type != unix.PERF_TYPE_HARDWARE && ev.Attr.Type != unix.PERF_TYPE_HW_CACHE && len(cpus) > 0
}

func keys(slots []CSlot) []string {
	var out []string
	for _, s := range slots {
		out = append(out, s.Key)
	}
	return out
}

// The stock configuration on a VM: [perf]'s cycles and instructions do
// not open, so msr.tsc takes cluster 2, then the nine software events by
// name; the derived section below [dynamic] gets nothing. This is what
// the C agent serves on such a machine (23 metrics).
func TestCLayoutStockOnAVM(t *testing.T) {
	data, err := os.ReadFile("testdata/perfevent.conf.stock")
	if err != nil {
		t.Fatal(err)
	}
	f, _ := config.Parse("perfevent.conf", data)
	slots := CLayout(f, fixture(t, "vm"), false, noHardware)
	want := []string{
		"hwcounters.msr.tsc",
		"hwcounters.software.alignment_faults", "hwcounters.software.context_switches",
		"hwcounters.software.cpu_clock", "hwcounters.software.cpu_migrations",
		"hwcounters.software.emulation_faults", "hwcounters.software.major_faults",
		"hwcounters.software.minor_faults", "hwcounters.software.page_faults",
		"hwcounters.software.task_clock",
	}
	if got := keys(slots); !slices.Equal(got, want) {
		t.Fatalf("CLayout =\n\t%q\nwant\n\t%q", got, want)
	}
	for _, s := range slots {
		counted := s.Key == "hwcounters.software.context_switches" || s.Key == "hwcounters.software.page_faults"
		if s.Counted != counted || s.Event == nil {
			t.Errorf("%s: Counted %v, Event %v; want Counted %v and its event", s.Key, s.Counted, s.Event, counted)
		}
	}
}

// The PMU section's events in reverse order, those that open only; a
// [dynamic] line that does not open loses its slot, an unlisted event
// keeps it; a derived section above [dynamic] comes last, if its members
// got slots.
func TestCLayoutOrder(t *testing.T) {
	const conf = `[perf]
cpu-clock
cycles
page-faults
[both:derived]
cpu-clock
page-faults
[none:derived]
cycles
[dynamic]
software.task-clock
msr.tsc
`
	f, err := config.Parse("test.conf", []byte(conf))
	if err != nil {
		t.Fatal(err)
	}
	tscFails := func(ev *pmu.Event, cpus []int) bool {
		return noHardware(ev, cpus) && ev.Name != "msr.tsc"
	}
	got := keys(CLayout(f, fixture(t, "vm"), false, tscFails))
	want := []string{
		"hwcounters.page_faults", "hwcounters.cpu_clock",
		"hwcounters.software.alignment_faults", "hwcounters.software.context_switches",
		"hwcounters.software.cpu_clock", "hwcounters.software.cpu_migrations",
		"hwcounters.software.emulation_faults", "hwcounters.software.major_faults",
		"hwcounters.software.minor_faults", "hwcounters.software.page_faults",
		"hwcounters.software.task_clock",
		"derived.both",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("CLayout =\n\t%q\nwant\n\t%q", got, want)
	}
}

// The C agent's parser gives a derived section members only after a PMU
// section and outside [dynamic]: one after [dynamic] adds its lines to
// the dynamic events (so page-faults is listed, and fails, and loses its
// slot), one before any PMU section gets none; only the last [dynamic]
// section counts.
func TestCLayoutDerivedSections(t *testing.T) {
	const conf = `[first:derived]
cpu-clock
[perf]
cpu-clock
[second:derived]
cpu-clock
[dynamic]
msr.tsc
[dynamic]
software.task-clock
[late:derived]
software.page-faults
`
	f, err := config.Parse("test.conf", []byte(conf))
	if err != nil {
		t.Fatal(err)
	}
	pageFaultsFail := func(ev *pmu.Event, cpus []int) bool {
		return noHardware(ev, cpus) && ev.Name != "software.page-faults"
	}
	slots := CLayout(f, fixture(t, "vm"), false, pageFaultsFail)
	got := keys(slots)
	want := []string{
		"hwcounters.cpu_clock",
		"hwcounters.msr.tsc",
		"hwcounters.software.alignment_faults", "hwcounters.software.context_switches",
		"hwcounters.software.cpu_clock", "hwcounters.software.cpu_migrations",
		"hwcounters.software.emulation_faults", "hwcounters.software.major_faults",
		"hwcounters.software.minor_faults",
		"hwcounters.software.task_clock",
		"derived.second",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("CLayout =\n\t%q\nwant\n\t%q", got, want)
	}
	for _, s := range slots {
		if s.Key == "hwcounters.msr.tsc" && s.Counted {
			t.Error("msr.tsc is counted, though only the last [dynamic] section, which does not list it, counts")
		}
	}
}

// In a pass, the C agent's layout takes its PMUs from the pass's listing
// of the devices directory, which the plan read, rather than list it
// again: a PMU that appears during the pass is not in it, and is in the
// next pass's.
func TestCLayoutPMUsFromThePass(t *testing.T) {
	root := t.TempDir()
	if err := os.CopyFS(root, os.DirFS("../pmu/testdata/vm")); err != nil {
		t.Fatal(err)
	}
	fs := &pmu.FS{FS: hostfs.FS{Sys: root + "/sys", Proc: root + "/proc"}, Tracing: []string{root + "/tracing"}}
	names := func() []string {
		var out []string
		for _, p := range cPMUs(fs) {
			out = append(out, p.name)
		}
		return out
	}
	end := fs.Pass()
	before := names()
	if want := []string{"msr", "software"}; !slices.Equal(before, want) {
		t.Fatalf("cPMUs = %q, want %q", before, want)
	}
	late := filepath.Join(fs.PMUDevices(), "late")
	if err := os.MkdirAll(filepath.Join(late, "events"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(late, "events", "x"), []byte("event=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := names(); !slices.Equal(got, before) {
		t.Errorf("cPMUs in the same pass = %q, want the pass's %q", got, before)
	}
	end()
	if got, want := names(), []string{"late", "msr", "software"}; !slices.Equal(got, want) {
		t.Errorf("cPMUs after the pass = %q, want %q", got, want)
	}
}
