package bpf

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The bpf(2) commands used (enum bpf_cmd).
const (
	cmdMapCreate      = 0
	cmdMapLookupElem  = 1
	cmdMapUpdateElem  = 2
	cmdMapDeleteElem  = 3
	cmdProgLoad       = 5
	cmdProgTestRun    = 10
	cmdObjGetInfoByFD = 15
	cmdEnableStats    = 32
)

// objNameLen is BPF_OBJ_NAME_LEN: a name and its NUL.
const objNameLen = 16

func ptrTo[T any](p *T) pointer { return pointer{p: unsafe.Pointer(p)} }

func ptrToBytes(b []byte) pointer {
	if len(b) == 0 {
		return pointer{}
	}
	return pointer{p: unsafe.Pointer(&b[0])}
}

// bpf makes the call cmd with attr, a struct of union bpf_attr's layout
// for cmd, and returns its result (a descriptor, for the commands that
// make one).
func bpf[T any](cmd int, attr *T) (int, error) {
	for try := 0; ; try++ {
		r, _, errno := unix.Syscall(unix.SYS_BPF, uintptr(cmd), uintptr(unsafe.Pointer(attr)), unsafe.Sizeof(*attr))
		// The verifier gives up with EAGAIN when a signal is pending,
		// and the runtime sends its threads signals of its own
		// (preemption, profiling): the load starts again.
		if errno == unix.EAGAIN && cmd == cmdProgLoad && try < progLoadTries {
			continue
		}
		if errno != 0 {
			return -1, errno
		}
		return int(r), nil
	}
}

// progLoadTries bounds the loads a program's verification interrupted by
// signals may take.
const progLoadTries = 100

// objName is name as the kernel takes it: at most 15 bytes of
// [A-Za-z0-9_.], which the kernel checks.
func objName(name string) ([objNameLen]byte, error) {
	var b [objNameLen]byte
	if len(name) >= objNameLen {
		return b, fmt.Errorf("name %q is longer than %d bytes", name, objNameLen-1)
	}
	for i := range len(name) {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.') {
			return b, fmt.Errorf("name %q has %q, not a letter, digit, _ or .", name, c)
		}
	}
	copy(b[:], name)
	return b, nil
}

// errnoText is err's errno name and text, as "EPERM: operation not
// permitted", or err's text if it is no errno.
func errnoText(err error) string {
	if e, ok := err.(unix.Errno); ok {
		if name := unix.ErrnoName(e); name != "" {
			return name + ": " + e.Error()
		}
	}
	return err.Error()
}

// closeFD closes *fd once: it leaves -1 there, and a closed descriptor is
// not closed again (its number may be another file's by then).
func closeFD(fd *int) error {
	if *fd < 0 {
		return nil
	}
	err := unix.Close(*fd)
	*fd = -1
	return err
}
