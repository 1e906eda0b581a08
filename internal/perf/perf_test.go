package perf

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestOpenCPURequiresReadFormat(t *testing.T) {
	attr := unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Size: AttrSize}
	_, err := OpenCPU(&attr, 0)
	if err == nil || !strings.Contains(err.Error(), "read_format is 0x0") {
		t.Errorf("OpenCPU without read_format: %v", err)
	}
}

func TestAttrSizeIsAKernelVersion(t *testing.T) {
	// The kernel accepts any size it knows or larger; a size between two
	// published versions would mean the Go struct is not laid out as ABI.
	switch AttrSize {
	case unix.PERF_ATTR_SIZE_VER7, unix.PERF_ATTR_SIZE_VER8, unix.PERF_ATTR_SIZE_VER9:
	default:
		t.Errorf("AttrSize %d is not a published perf_event_attr size", AttrSize)
	}
}

func TestReadCPUClock(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root and perf_event_open (system-wide cpu-clock)")
	}
	attr := unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_CPU_CLOCK,
		Size: AttrSize, Read_format: ReadFormat}
	fd, err := OpenCPU(&attr, 0)
	if err != nil {
		t.Skipf("needs perf_event_open: %v", err)
	}
	a, err := fd.Read()
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	b, err := fd.Read()
	if err != nil {
		t.Fatal(err)
	}
	if b.Value <= a.Value || b.Enabled <= a.Enabled || b.Running != b.Enabled {
		t.Errorf("readings %+v then %+v: want growth and running == enabled", a, b)
	}
	if err := fd.Close(); err != nil {
		t.Fatal(err)
	}
	if err := fd.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := fd.Read(); err == nil {
		t.Error("Read after Close succeeded")
	}
}

func TestOpenMissingCPU(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root and perf_event_open")
	}
	attr := unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_CPU_CLOCK,
		Size: AttrSize, Read_format: ReadFormat}
	// CPU ids past nr_cpu_ids are EINVAL; only possible-but-offline CPUs
	// give ENODEV. No machine this runs on has 4096 CPUs.
	_, err := OpenCPU(&attr, 4095)
	if !errors.Is(err, unix.EINVAL) {
		t.Errorf("cpu4095: %v, want EINVAL", err)
	}
}
