package bpfcount

import (
	"errors"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"perfevent/internal/testneed"
)

// TestKernelFailedLoadLeavesNothing has the kernel refuse the program
// after every map is made and mapped (a license the kernel does not lend
// bpf_perf_event_read_value to), and checks the error and that Load
// closed and unmapped all it had made.
func TestKernelFailedLoadLeavesNothing(t *testing.T) {
	testneed.Root(t, "to make BPF maps and load programs (CAP_BPF)")
	events := []unix.PerfEventAttr{
		{Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_TASK_CLOCK},
		{Type: unix.PERF_TYPE_HARDWARE, Config: unix.PERF_COUNT_HW_INSTRUCTIONS},
	}
	// Loaded once as it should be, so that what the runtime and the
	// first calls open for good is open before the count.
	c, err := Load(Options{Events: events, Cgroups: 8})
	if err != nil {
		SkipUnlessUnsupported(t, err)
	}
	c.Close()
	fds, maps := open(t)
	defer func(l string) { license = l }(license)
	license = "Proprietary"
	_, err = Load(Options{Events: events, Cgroups: 8})
	if !errors.Is(err, unix.EINVAL) {
		t.Fatalf("a program of a proprietary license: %v, want EINVAL", err)
	}
	for _, want := range []string{"bpfcount: load program pe_cgrp_switch (perf_event): EINVAL", "the verifier's log:", "GPL"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q:\n%v", want, err)
		}
	}
	if f, m := open(t); f != fds || m != maps {
		t.Errorf("%d descriptors and %d mappings of BPF maps before the failed Load, %d and %d after", fds, maps, f, m)
	}
}

// open counts the process's descriptors, and its mappings of BPF maps
// (the runtime maps and splits other mappings as it likes).
func open(t *testing.T) (fds, maps int) {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("needs /proc/self/fd: %v", err)
	}
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skipf("needs /proc/self/maps: %v", err)
	}
	return len(ents), strings.Count(string(b), "bpf-map")
}
