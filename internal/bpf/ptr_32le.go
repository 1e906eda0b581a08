//go:build 386 || arm || mipsle

package bpf

import "unsafe"

// pointer is a __aligned_u64 of union bpf_attr that holds an address: on
// a little-endian 32-bit machine, its low half.
type pointer struct {
	p unsafe.Pointer
	_ uint32
}
