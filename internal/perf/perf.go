// Package perf is the thin layer over the perf_event_open(2) ABI that
// internal/counter needs: open one system-wide counter on one CPU, read its
// {value, time_enabled, time_running} triple, close it; or open several as a
// group on one CPU and read all their values with one read() of the leader.
//
// It deliberately knows nothing about event names, scaling or bookkeeping so
// that everything above it can be tested against a fake.
package perf

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ReadFormat is the read_format every counter is opened with. The two times
// let the reader scale a multiplexed count up to the whole enabled period.
const ReadFormat = unix.PERF_FORMAT_TOTAL_TIME_ENABLED | unix.PERF_FORMAT_TOTAL_TIME_RUNNING

// GroupReadFormat is the read_format of every counter of a group, leader
// and members alike, as perf(1) does it: a read of the leader returns the
// group's two times and then one value per counter, leader first.
const GroupReadFormat = unix.PERF_FORMAT_GROUP | ReadFormat

// AttrSize is the size of unix.PerfEventAttr as the kernel should see it in
// attr.size. Kernels older than this struct accept it as long as the fields
// they do not know are zero, which they are for counting events.
const AttrSize = uint32(unsafe.Sizeof(unix.PerfEventAttr{}))

// readSize is the byte length of one read() with ReadFormat: three u64.
const readSize = 24

// groupHeader is nr, time_enabled and time_running ahead of a group's
// values; each value is one more u64.
const groupHeader = 3

// Count is one reading of a counter. All three fields are cumulative since
// the descriptor was opened.
type Count struct {
	Value   uint64 // events counted while running
	Enabled uint64 // ns the event was enabled (wanted to count)
	Running uint64 // ns the event was actually on the PMU
}

// FD is one open perf event descriptor: a counter of its own, or the
// leader or a member of a group.
type FD struct {
	fd     int
	cpu    int
	group  bool   // opened with GroupReadFormat
	leader *FD    // a member's leader; nil for a leader or a counter of its own
	n      int    // a leader's counters, itself included; 0 for a member
	buf    []byte // reused so that reads do not allocate; a leader's grows as members join
}

// OpenCPU opens attr system-wide (every task) on one CPU, in a group of its
// own, close-on-exec. attr must already carry Size and Read_format (see
// ReadFormat); the caller owns every other bit.
func OpenCPU(attr *unix.PerfEventAttr, cpu int) (*FD, error) {
	if attr.Read_format != ReadFormat {
		return nil, fmt.Errorf("perf: attr.read_format is %#x, want %#x (TOTAL_TIME_ENABLED|TOTAL_TIME_RUNNING)", attr.Read_format, ReadFormat)
	}
	return openCPU(attr, NoCgroup, cpu)
}

// NoCgroup in a cgroup argument means every task on the CPU.
const NoCgroup = -1

// OpenCgroupCPU is OpenCPU restricted to the tasks of one cgroup
// (PERF_FLAG_PID_CGROUP): cgroup is a descriptor of the cgroup's directory,
// in the v2 hierarchy or in v1's perf_event one. The kernel counts only
// while a task of that cgroup (or of one below it) runs on the CPU.
func OpenCgroupCPU(attr *unix.PerfEventAttr, cgroup, cpu int) (*FD, error) {
	if attr.Read_format != ReadFormat {
		return nil, fmt.Errorf("perf: attr.read_format is %#x, want %#x (TOTAL_TIME_ENABLED|TOTAL_TIME_RUNNING)", attr.Read_format, ReadFormat)
	}
	return openCPU(attr, cgroup, cpu)
}

func openCPU(attr *unix.PerfEventAttr, cgroup, cpu int) (*FD, error) {
	pid, flags := target(cgroup)
	fd, err := unix.PerfEventOpen(attr, pid, cpu, -1, flags)
	if err != nil {
		// Kept as the bare errno so that callers can classify it.
		return nil, err
	}
	return &FD{fd: fd, cpu: cpu, buf: make([]byte, readSize)}, nil
}

// target is perf_event_open's pid and flags for a cgroup descriptor or
// NoCgroup.
func target(cgroup int) (pid int, flags int) {
	if cgroup == NoCgroup {
		return -1, unix.PERF_FLAG_FD_CLOEXEC
	}
	return cgroup, unix.PERF_FLAG_FD_CLOEXEC | unix.PERF_FLAG_PID_CGROUP
}

// OpenGroupCPU opens attr system-wide on one CPU as part of a group,
// close-on-exec. With a nil leader the counter leads a new group; otherwise
// it joins leader, which must be a group leader opened on the same CPU and
// still open. attr must carry GroupReadFormat. A member is never read on its
// own: read the group with the leader's ReadGroup. Close the members before
// their leader: a leader closed first leaves them as counters of their own.
//
// Open the leader disabled (attr.disabled) and Enable it once the last
// member has joined. A member that joins a group already counting on its
// CPU is not scheduled until the group is next scheduled in, which for a
// CPU-wide group may be never: on Linux 6.18, page-faults or task-clock
// joining an enabled cpu-clock leader read 0 for good.
func OpenGroupCPU(attr *unix.PerfEventAttr, cpu int, leader *FD) (*FD, error) {
	return OpenGroupCgroupCPU(attr, NoCgroup, cpu, leader)
}

// OpenGroupCgroupCPU is OpenGroupCPU restricted to one cgroup's tasks, as
// OpenCgroupCPU. Every member of a group counts the same cgroup.
func OpenGroupCgroupCPU(attr *unix.PerfEventAttr, cgroup, cpu int, leader *FD) (*FD, error) {
	if attr.Read_format != GroupReadFormat {
		return nil, fmt.Errorf("perf: attr.read_format is %#x, want %#x (GROUP|TOTAL_TIME_ENABLED|TOTAL_TIME_RUNNING) for a group", attr.Read_format, GroupReadFormat)
	}
	groupFD := -1
	if leader != nil {
		switch {
		case !leader.group || leader.leader != nil:
			return nil, fmt.Errorf("perf: the group_fd given for cpu%d is not a group leader", cpu)
		case leader.fd < 0:
			return nil, fmt.Errorf("perf: the group leader on cpu%d is closed", cpu)
		case leader.cpu != cpu:
			return nil, fmt.Errorf("perf: a member on cpu%d cannot join a group on cpu%d", cpu, leader.cpu)
		}
		groupFD = leader.fd
	}
	pid, flags := target(cgroup)
	fd, err := unix.PerfEventOpen(attr, pid, cpu, groupFD, flags)
	if err != nil {
		return nil, err
	}
	if leader != nil {
		leader.n++
		leader.buf = make([]byte, 8*(groupHeader+leader.n))
		return &FD{fd: fd, cpu: cpu, group: true, leader: leader}, nil
	}
	return &FD{fd: fd, cpu: cpu, group: true, n: 1, buf: make([]byte, 8*(groupHeader+1))}, nil
}

// Read returns the current cumulative count. A read that returns fewer than
// 24 bytes means the kernel put the event into an error state (for example
// its CPU went offline); that is reported as an error, not as zeros.
func (f *FD) Read() (Count, error) {
	if f.fd < 0 {
		return Count{}, fmt.Errorf("perf: read of a closed descriptor")
	}
	if f.group {
		return Count{}, fmt.Errorf("perf: Read of a group counter on cpu%d; read its leader with ReadGroup", f.cpu)
	}
	n, err := rawRead(f.fd, f.buf[:])
	if err != nil {
		return Count{}, err
	}
	if n != readSize {
		return Count{}, fmt.Errorf("perf: short read of %d bytes (want %d): the event is in an error state", n, readSize)
	}
	return Count{
		Value:   binary.NativeEndian.Uint64(f.buf[0:8]),
		Enabled: binary.NativeEndian.Uint64(f.buf[8:16]),
		Running: binary.NativeEndian.Uint64(f.buf[16:24]),
	}, nil
}

// Enable starts a counter opened disabled, such as a group's leader once its
// members have joined; enabling the leader starts the whole group.
func (f *FD) Enable() error {
	if f.fd < 0 {
		return fmt.Errorf("perf: enabling a closed descriptor")
	}
	return unix.IoctlSetInt(f.fd, unix.PERF_EVENT_IOC_ENABLE, 0)
}

// Disable stops a counter without closing it: the kernel stops its count
// and both its times until Enable, and a group's leader stops the whole
// group (the members are scheduled only with it, and a group read reports
// the leader's times). What the open reserved stays reserved.
func (f *FD) Disable() error {
	if f.fd < 0 {
		return fmt.Errorf("perf: disabling a closed descriptor")
	}
	return unix.IoctlSetInt(f.fd, unix.PERF_EVENT_IOC_DISABLE, 0)
}

// ReadGroup reads a group with one read() of its leader: the group's
// cumulative time_enabled and time_running, and each counter's cumulative
// value into values, in the order they joined (the leader first). values
// must have room for exactly the group's counters. A read whose size or
// count does not match that is an error, not zeros: the kernel returns 0
// bytes once the group is in an error state (for example its CPU went
// offline).
func (f *FD) ReadGroup(values []uint64) (enabled, running uint64, err error) {
	switch {
	case f.fd < 0:
		return 0, 0, fmt.Errorf("perf: read of a closed descriptor")
	case !f.group || f.leader != nil:
		return 0, 0, fmt.Errorf("perf: ReadGroup on cpu%d of a counter that does not lead a group", f.cpu)
	case len(values) != f.n:
		return 0, 0, fmt.Errorf("perf: ReadGroup on cpu%d with room for %d values; the group has %d counters", f.cpu, len(values), f.n)
	}
	n, err := rawRead(f.fd, f.buf)
	if err != nil {
		return 0, 0, err
	}
	if n != len(f.buf) {
		return 0, 0, fmt.Errorf("perf: short read of %d bytes from the group on cpu%d (want %d): the group is in an error state", n, f.cpu, len(f.buf))
	}
	if nr := binary.NativeEndian.Uint64(f.buf[0:8]); nr != uint64(f.n) {
		return 0, 0, fmt.Errorf("perf: the group on cpu%d reports %d counters, want %d", f.cpu, nr, f.n)
	}
	for i := range values {
		values[i] = binary.NativeEndian.Uint64(f.buf[8*(groupHeader+i):])
	}
	return binary.NativeEndian.Uint64(f.buf[8:16]), binary.NativeEndian.Uint64(f.buf[16:24]), nil
}

// rawRead reads a counter without telling the Go runtime that a system
// call is under way. A counter read never blocks: at worst the kernel runs
// it on the counter's CPU by an interprocessor call and waits for it, tens
// of microseconds. Told, the runtime wakes its monitor thread (sysmon) on
// the first call after an idle spell, and a fetch at a low rate pays for
// that wake-up and the monitor's look around, not for the read.
func rawRead(fd int, p []byte) (int, error) {
	for {
		n, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
		switch e {
		case 0:
			return int(n), nil
		case unix.EINTR:
			continue
		}
		return 0, e
	}
}

// Close releases the descriptor and with it the PMU slot. Closing twice is
// harmless.
func (f *FD) Close() error {
	if f.fd < 0 {
		return nil
	}
	err := unix.Close(f.fd)
	f.fd = -1
	// The kernel drops a closed member from its group, and the leader's
	// reads shrink with it.
	if l := f.leader; l != nil && l.fd >= 0 {
		l.n--
		l.buf = l.buf[:8*(groupHeader+l.n)]
	}
	return err
}
