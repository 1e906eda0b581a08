package threads

import (
	"bytes"
	"slices"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Tasks lists the threads of the process from one descriptor of
// /proc/self/task, read again from its start for each listing: a caller
// that lists them several times spares a walk of procfs for each open of
// the directory.
type Tasks struct {
	fd int // -1: not open
}

// Open opens the listing. A listing that cannot be opened lists nothing.
func Open() *Tasks {
	fd, err := unix.Open("/proc/self/task", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		fd = -1
	}
	return &Tasks{fd: fd}
}

// List returns the thread ids, or none if the directory cannot be read.
// The buffer is small: a Go program has a handful of threads, each entry
// takes 24 bytes, and a buffer of its own size class would be fresh memory
// for the kernel to fault in.
func (t *Tasks) List() []int {
	if t.fd < 0 {
		return nil
	}
	if _, err := unix.Seek(t.fd, 0, 0); err != nil {
		return nil
	}
	var buf [512]byte
	tids := make([]int, 0, 16)
	for {
		n, err := unix.Getdents(t.fd, buf[:])
		if err == unix.EINTR {
			continue
		}
		if err != nil || n <= 0 {
			break
		}
		tids = appendTIDs(tids, buf[:n])
	}
	return tids
}

// maxPasses bounds Each's listings: the runtime starts threads at its own
// pace, and a caller must not chase them for ever.
const maxPasses = 4

// Each calls f once for each thread of the process, listing the threads
// again until a listing finds none that f has not been called for: a
// thread the runtime starts during a pass, from one that f has not reached
// yet, does not inherit what f does to the others. It stops after
// maxPasses listings, or as soon as f returns false. pass counts the
// listings from 0: a thread of a later pass was started during the calls.
func (t *Tasks) Each(f func(tid, pass int) bool) {
	seen := make([]int, 0, 16)
	for pass := range maxPasses {
		found := false
		for _, tid := range t.List() {
			if slices.Contains(seen, tid) {
				continue
			}
			found = true
			seen = append(seen, tid)
			if !f(tid, pass) {
				return
			}
		}
		if !found {
			return
		}
	}
}

// appendTIDs appends the numeric names of the linux_dirent64 records in b.
func appendTIDs(tids []int, b []byte) []int {
	const nameOff = int(unsafe.Offsetof(unix.Dirent{}.Name))
	for len(b) >= nameOff {
		reclen := int(*(*uint16)(unsafe.Pointer(&b[unsafe.Offsetof(unix.Dirent{}.Reclen)])))
		if reclen < nameOff || reclen > len(b) {
			break
		}
		name := b[nameOff:reclen]
		if i := bytes.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		if tid, err := strconv.Atoi(string(name)); err == nil {
			tids = append(tids, tid)
		}
		b = b[reclen:]
	}
	return tids
}

// Close closes the listing; calls after the first do nothing.
func (t *Tasks) Close() {
	if t.fd >= 0 {
		unix.Close(t.fd)
		t.fd = -1
	}
}
