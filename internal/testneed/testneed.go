// Package testneed skips a test that this host or user cannot run: one
// that needs root, another user, or the kernel's perf_event_open. Each
// skip says what is missing, so that `go test ./...` as an ordinary user
// on a laptop passes and says what it left out, and root on a machine
// with perf events runs everything.
package testneed

import (
	"os"
	"os/user"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Root skips tb unless the process runs as root; why completes "needs
// root, …" (for example "to give the file to another user").
func Root(tb testing.TB, why string) {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("needs root, " + why)
	}
}

// User returns the user called name, or skips tb when there is none.
func User(tb testing.TB, name string) *user.User {
	tb.Helper()
	u, err := user.Lookup(name)
	if err != nil {
		tb.Skipf("needs a user called %s: %v", name, err)
	}
	return u
}

// softwarePMU is where the kernel lists its software events; it is there
// when the kernel has perf events at all.
const softwarePMU = "/sys/bus/event_source/devices/software"

// PerfEvents skips tb unless the kernel has perf events.
func PerfEvents(tb testing.TB) {
	tb.Helper()
	if _, err := os.Stat(softwarePMU); err != nil {
		tb.Skipf("needs perf_event support (%s)", softwarePMU)
	}
}

// SystemWide skips tb unless it may count system-wide as the agent does:
// as root, with perf_event_open opening a cpu-clock on CPU 0 for every
// process. Software events need no PMU, so this holds in a VM too.
func SystemWide(tb testing.TB) {
	tb.Helper()
	Root(tb, "to count system-wide with perf_event_open")
	attr := unix.PerfEventAttr{
		Type:   unix.PERF_TYPE_SOFTWARE,
		Config: unix.PERF_COUNT_SW_CPU_CLOCK,
		Size:   uint32(unsafe.Sizeof(unix.PerfEventAttr{})),
	}
	fd, err := unix.PerfEventOpen(&attr, -1, 0, -1, unix.PERF_FLAG_FD_CLOEXEC)
	if err != nil {
		tb.Skipf("needs perf_event_open: cpu-clock on cpu0: %v", err)
	}
	unix.Close(fd)
}
