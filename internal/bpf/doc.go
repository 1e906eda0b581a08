// Package bpf makes the bpf(2) system calls the agent needs: maps created
// and updated, programs loaded (the verifier's log in the error when the
// kernel refuses one), programs run on a chosen CPU, and the possible
// CPUs the maps are sized by. Its instructions are built by package asm.
//
// It keeps what internal/bpfcount used of github.com/cilium/ebpf, behind
// the same names, without what that library links (ELF and BTF readers,
// go/format, encoding/xml, crypto), whose initialisation every start of
// the agent paid for. An error names the map or program, the command and
// the errno, and wraps the errno (errors.Is(err, unix.EPERM)); every
// descriptor is closed on the way out of a failure.
package bpf
