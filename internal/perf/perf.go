// Package perf is the thin layer over the perf_event_open(2) ABI that
// internal/counter needs: open one system-wide counter on one CPU, read its
// {value, time_enabled, time_running} triple, close it.
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

// AttrSize is the size of unix.PerfEventAttr as the kernel should see it in
// attr.size. Kernels older than this struct accept it as long as the fields
// they do not know are zero, which they are for counting events.
const AttrSize = uint32(unsafe.Sizeof(unix.PerfEventAttr{}))

// readSize is the byte length of one read() with ReadFormat: three u64.
const readSize = 24

// Count is one reading of a counter. All three fields are cumulative since
// the descriptor was opened.
type Count struct {
	Value   uint64 // events counted while running
	Enabled uint64 // ns the event was enabled (wanted to count)
	Running uint64 // ns the event was actually on the PMU
}

// FD is one open perf event descriptor.
type FD struct {
	fd  int
	buf [readSize]byte // reused so that Read does not allocate
}

// OpenCPU opens attr system-wide (every task) on one CPU, in a group of its
// own, close-on-exec. attr must already carry Size and Read_format (see
// ReadFormat); the caller owns every other bit.
func OpenCPU(attr *unix.PerfEventAttr, cpu int) (*FD, error) {
	if attr.Read_format != ReadFormat {
		return nil, fmt.Errorf("perf: attr.read_format is %#x, want %#x (TOTAL_TIME_ENABLED|TOTAL_TIME_RUNNING)", attr.Read_format, ReadFormat)
	}
	fd, err := unix.PerfEventOpen(attr, -1, cpu, -1, unix.PERF_FLAG_FD_CLOEXEC)
	if err != nil {
		// Kept as the bare errno so that callers can classify it.
		return nil, err
	}
	return &FD{fd: fd}, nil
}

// Read returns the current cumulative count. A read that returns fewer than
// 24 bytes means the kernel put the event into an error state (for example
// its CPU went offline); that is reported as an error, not as zeros.
func (f *FD) Read() (Count, error) {
	if f.fd < 0 {
		return Count{}, fmt.Errorf("perf: read of a closed descriptor")
	}
	n, err := unix.Read(f.fd, f.buf[:])
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

// Close releases the descriptor and with it the PMU slot. Closing twice is
// harmless.
func (f *FD) Close() error {
	if f.fd < 0 {
		return nil
	}
	err := unix.Close(f.fd)
	f.fd = -1
	return err
}
