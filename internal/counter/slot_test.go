package counter

import (
	"testing"
	"unsafe"
)

// There is a slot per event per CPU, thousands at every start of a large
// machine: each byte of it costs kilobytes there.
func TestSlotSize(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the size is set for 64-bit words")
	}
	if got := unsafe.Sizeof(slot{}); got > 88 {
		t.Errorf("a slot takes %d bytes, want at most 88", got)
	}
}
