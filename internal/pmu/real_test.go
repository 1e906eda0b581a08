package pmu

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"perfevent/internal/emulator"
	"perfevent/internal/hostfs"
	"perfevent/internal/testneed"
)

// TestThisMachine resolves names against the real /sys. It needs the
// kernel's msr PMU (x86) and only reads.
func TestThisMachine(t *testing.T) {
	fs := &FS{FS: hostfs.FS{Sys: "/sys", Proc: "/proc"}}
	b, err := os.ReadFile("/sys/bus/event_source/devices/msr/type")
	if err != nil {
		t.Skip("needs the msr PMU in /sys/bus/event_source/devices (x86 with CONFIG_PERF_EVENTS_MSR)")
	}
	msrType, _ := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 32)

	ev, err := fs.Resolve("msr.tsc")
	if err != nil {
		t.Fatal(err)
	}
	if ev.Attr.Type != uint32(msrType) || ev.Attr.Config != 0 || ev.Attr.Bits != 0 || ev.PMU != "msr" {
		t.Errorf("msr.tsc = %+v, want type %d config 0", ev.Attr, msrType)
	}
	ev, err = fs.Resolve("software.page-faults")
	if err != nil {
		t.Fatal(err)
	}
	if ev.Attr.Type != unix.PERF_TYPE_SOFTWARE || ev.Attr.Config != unix.PERF_COUNT_SW_PAGE_FAULTS {
		t.Errorf("software.page-faults = %+v, want type 1 config 2", ev.Attr)
	}
	names := fs.PresentNames()
	for _, n := range []string{"perf", "perf_raw"} {
		found := false
		for _, m := range names {
			found = found || m == n
		}
		if !found {
			t.Errorf("PresentNames = %v, missing %s", names, n)
		}
	}
	if _, err := fs.ListEvents(); err != nil {
		t.Logf("ListEvents: %v", err)
	}
}

// TestThisMachineTracepoint needs a mounted tracefs; it does not mount one
// itself, as unit tests leave the machine as they found it.
func TestThisMachineTracepoint(t *testing.T) {
	fs := &FS{FS: hostfs.FS{Sys: "/sys", Proc: "/proc"}}
	root, ok := fs.tracingRoot()
	if !ok {
		t.Skip("needs tracefs mounted (mount -t tracefs nodev /sys/kernel/tracing)")
	}
	b, err := os.ReadFile(root + "/events/sched/sched_switch/id")
	if err != nil {
		t.Skipf("needs read access to %s/events/sched/sched_switch/id: %v", root, err)
	}
	id, _ := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	ev, err := fs.Resolve("sched:sched_switch")
	if err != nil {
		t.Fatal(err)
	}
	if ev.Attr.Type != unix.PERF_TYPE_TRACEPOINT || ev.Attr.Config != id {
		t.Errorf("sched:sched_switch = %+v, want type 2 config %d", ev.Attr, id)
	}
}

// TestThisMachineKernelAccepts opens each resolved attr once on CPU 0, to
// prove the kernel accepts the exclude bits we choose for each PMU.
func TestThisMachineKernelAccepts(t *testing.T) {
	testneed.SystemWide(t)
	emulator.SkipWithoutPerfEvents(t)
	fs := &FS{FS: hostfs.FS{Sys: "/sys", Proc: "/proc"}}
	names := []string{"page-faults", "perf::CONTEXT-SWITCHES:u", "cpu-clock:k", "software.task-clock"}
	if _, err := os.Stat("/sys/bus/event_source/devices/msr"); err == nil {
		names = append(names, "msr.tsc")
	}
	if _, ok := fs.tracingRoot(); ok {
		names = append(names, "sched:sched_switch")
	}
	for _, n := range names {
		ev, err := fs.Resolve(n)
		if err != nil {
			t.Errorf("Resolve(%q): %v", n, err)
			continue
		}
		a := ev.Attr
		a.Size = uint32(unsafe.Sizeof(a))
		a.Bits |= unix.PerfBitDisabled
		fd, err := unix.PerfEventOpen(&a, -1, 0, -1, unix.PERF_FLAG_FD_CLOEXEC)
		if err != nil {
			t.Errorf("perf_event_open(%q = %+v): %v", n, ev.Attr, err)
			continue
		}
		unix.Close(fd)
	}
}

// TestHostIntelArch: CPUID leaf 0xa agrees with what /proc/cpuinfo says
// of this CPU: present, version 1 or more, on Intel with arch_perfmon;
// absent elsewhere.
func TestHostIntelArch(t *testing.T) {
	c, err := (&FS{FS: hostfs.FS{Proc: "/proc"}}).CPUInfo()
	if err != nil {
		t.Skip("needs /proc/cpuinfo")
	}
	a := hostIntelArch()
	switch {
	case c.Vendor == "GenuineIntel" && c.Flags.Has("arch_perfmon"):
		if a == nil || a.Version < 1 {
			t.Errorf("arch_perfmon, but CPUID leaf 0xa gives %+v", a)
		}
	case c.Vendor != "GenuineIntel":
		if a != nil {
			t.Errorf("a %s CPU, but CPUID leaf 0xa gives %+v", c.Vendor, a)
		}
	}
}
