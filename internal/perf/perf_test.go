package perf

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"perfevent/internal/emulator"
	"perfevent/internal/testneed"
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
	testneed.SystemWide(t)
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
	testneed.SystemWide(t)
	emulator.SkipWithoutPerfEvents(t)
	attr := unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_CPU_CLOCK,
		Size: AttrSize, Read_format: ReadFormat}
	// CPU ids past nr_cpu_ids are EINVAL; only possible-but-offline CPUs
	// give ENODEV. No machine this runs on has 4096 CPUs.
	_, err := OpenCPU(&attr, 4095)
	if !errors.Is(err, unix.EINVAL) {
		t.Errorf("cpu4095: %v, want EINVAL", err)
	}
}

func TestOpenGroupCPURequiresGroupReadFormat(t *testing.T) {
	attr := unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Size: AttrSize, Read_format: ReadFormat}
	_, err := OpenGroupCPU(&attr, 0, nil)
	if err == nil || !strings.Contains(err.Error(), "read_format is 0x3") || !strings.Contains(err.Error(), "GROUP") {
		t.Errorf("OpenGroupCPU with ReadFormat: %v", err)
	}
}

// TestGroupRead opens three software events as a group on cpu0, the way
// internal/counter does: leader disabled, members, enable.
func TestGroupRead(t *testing.T) {
	testneed.SystemWide(t)
	open := func(config uint64, cpu int, leader *FD) (*FD, error) {
		attr := unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Config: config, Size: AttrSize, Read_format: GroupReadFormat}
		if leader == nil {
			attr.Bits = unix.PerfBitDisabled
		}
		return OpenGroupCPU(&attr, cpu, leader)
	}
	leader, err := open(unix.PERF_COUNT_SW_CPU_CLOCK, 0, nil)
	if err != nil {
		t.Skipf("needs perf_event_open: %v", err)
	}
	defer leader.Close()
	// task-clock and context-switches move on any CPU that runs at all.
	var members []*FD
	for _, config := range []uint64{unix.PERF_COUNT_SW_TASK_CLOCK, unix.PERF_COUNT_SW_CONTEXT_SWITCHES} {
		m, err := open(config, 0, leader)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		members = append(members, m)
	}
	if _, err := open(unix.PERF_COUNT_SW_PAGE_FAULTS, 1, leader); err == nil || !strings.Contains(err.Error(), "on cpu1 cannot join a group on cpu0") {
		t.Errorf("joining from another CPU: %v", err)
	}
	if _, err := open(unix.PERF_COUNT_SW_PAGE_FAULTS, 0, members[0]); err == nil || !strings.Contains(err.Error(), "not a group leader") {
		t.Errorf("joining a member: %v", err)
	}
	if err := leader.Enable(); err != nil {
		t.Fatal(err)
	}
	if _, err := leader.Read(); err == nil || !strings.Contains(err.Error(), "ReadGroup") {
		t.Errorf("Read of a leader: %v", err)
	}
	if _, _, err := members[0].ReadGroup(make([]uint64, 3)); err == nil {
		t.Error("ReadGroup of a member succeeded")
	}
	if _, _, err := leader.ReadGroup(make([]uint64, 2)); err == nil || !strings.Contains(err.Error(), "room for 2 values; the group has 3") {
		t.Errorf("ReadGroup with too little room: %v", err)
	}
	a := make([]uint64, 3)
	b := make([]uint64, 3)
	en1, run1, err := leader.ReadGroup(a)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	en2, run2, err := leader.ReadGroup(b)
	if err != nil {
		t.Fatal(err)
	}
	if en2 <= en1 || run2 != en2 || run1 != en1 {
		t.Errorf("times %d/%d then %d/%d: want growth and running == enabled", en1, run1, en2, run2)
	}
	for i, name := range []string{"cpu-clock", "task-clock", "context-switches"} {
		if b[i] <= a[i] {
			t.Errorf("%s went from %d to %d: a member that joined before the enable must count", name, a[i], b[i])
		}
	}
	// Disabling the leader stops the whole group: every value and both
	// times stand still until it is enabled again, then carry on.
	if err := leader.Disable(); err != nil {
		t.Fatal(err)
	}
	c := make([]uint64, 3)
	en3, run3, err := leader.ReadGroup(c)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	d := make([]uint64, 3)
	en4, run4, err := leader.ReadGroup(d)
	if err != nil {
		t.Fatal(err)
	}
	if en4 != en3 || run4 != run3 || d[0] != c[0] || d[1] != c[1] || d[2] != c[2] {
		t.Errorf("disabled for 20 ms the group went from %v %d/%d to %v %d/%d; want it to stand still", c, en3, run3, d, en4, run4)
	}
	if err := leader.Enable(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	en5, _, err := leader.ReadGroup(d)
	if err != nil {
		t.Fatal(err)
	}
	if en5 <= en4 || d[0] <= c[0] || d[1] <= c[1] {
		t.Errorf("enabled again, the group went from %v (enabled %d) to %v (enabled %d); want it to count on", c, en4, d, en5)
	}
	// A closed member leaves the group, and the leader's reads shrink.
	members[1].Close()
	if _, _, err := leader.ReadGroup(make([]uint64, 2)); err != nil {
		t.Errorf("ReadGroup after a member closed: %v", err)
	}
	leader.Close()
	if _, _, err := leader.ReadGroup(make([]uint64, 2)); err == nil {
		t.Error("ReadGroup after Close succeeded")
	}
	if err := leader.Enable(); err == nil {
		t.Error("Enable after Close succeeded")
	}
	if err := leader.Disable(); err == nil {
		t.Error("Disable after Close succeeded")
	}
}

func TestOpenCgroupCPURequiresReadFormat(t *testing.T) {
	attr := unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Size: AttrSize}
	if _, err := OpenCgroupCPU(&attr, 0, 0); err == nil || !strings.Contains(err.Error(), "read_format is 0x0") {
		t.Errorf("OpenCgroupCPU without read_format: %v", err)
	}
}

// A descriptor that is not a cgroup directory is refused by the kernel,
// and the errno comes back bare, for callers to classify.
func TestOpenCgroupCPUNotACgroup(t *testing.T) {
	testneed.SystemWide(t)
	dir, err := os.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	attr := unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_CPU_CLOCK,
		Size: AttrSize, Read_format: ReadFormat}
	fd, err := OpenCgroupCPU(&attr, int(dir.Fd()), 0)
	if err == nil {
		fd.Close()
		t.Fatal("a temporary directory was accepted as a cgroup")
	}
	var errno unix.Errno
	if !errors.As(err, &errno) {
		t.Errorf("error %v (%T) is not a bare errno", err, err)
	}
}
