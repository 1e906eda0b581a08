//go:build mips

package bpf

import "unsafe"

// pointer is a __aligned_u64 of union bpf_attr that holds an address: on
// a big-endian 32-bit machine, its low half, the second.
type pointer struct {
	_ uint32
	p unsafe.Pointer
}
