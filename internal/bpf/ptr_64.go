//go:build !(386 || arm || mips || mipsle)

package bpf

import "unsafe"

// pointer is a __aligned_u64 of union bpf_attr that holds an address. It
// is a Go pointer, not an integer, so that the garbage collector keeps
// what it points to alive, and moves it along, until the call.
type pointer struct{ p unsafe.Pointer }
