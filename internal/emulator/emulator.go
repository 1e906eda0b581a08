// Package emulator lets tests start the programs they build when the tests
// themselves run under a user-mode emulator, as `make cross` runs the
// arm64 and ppc64le unit tests under qemu-user (go test -exec
// qemu-aarch64-static). The test binary is emulated, but a program it
// starts is handed to the host kernel, which cannot execute a foreign
// binary; so such programs are started through the emulator named by
// $PERFEVENT_EMULATOR. Host programs (sh, pmcd, dbpmda) are started as
// usual: qemu-user passes execve through to the host.
//
// Without $PERFEVENT_EMULATOR every function here is a no-op wrapper.
package emulator

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Env names the emulator, e.g. PERFEVENT_EMULATOR=qemu-aarch64-static.
const Env = "PERFEVENT_EMULATOR"

// Name is the emulator the tests run under, "" for none.
func Name() string { return os.Getenv(Env) }

// Command is exec.Command for a program built for the tests' own
// architecture: the test binary itself (os.Args[0]) or one it built.
func Command(prog string, args ...string) *exec.Cmd {
	emu := Name()
	if emu == "" {
		return exec.Command(prog, args...)
	}
	// -0 keeps the program's own argv[0], which its messages may show.
	return exec.Command(emu, append([]string{"-0", prog, prog}, args...)...)
}

// Wrap makes the program built at path startable by anyone, pmcd and
// dbpmda included, under its own path: under an emulator the binary moves
// to path+".bin" and path becomes a shell script that execs the emulator
// on it, so the process keeps the script's pid.
func Wrap(path string) error {
	emu := Name()
	if emu == "" {
		return nil
	}
	emuPath, err := exec.LookPath(emu)
	if err != nil {
		return fmt.Errorf("%s=%s: %w", Env, emu, err)
	}
	bin := path + ".bin"
	if err := os.Rename(path, bin); err != nil {
		return err
	}
	script := fmt.Sprintf("#!/bin/sh\nexec %s -0 \"$0\" %s \"$@\"\n", quote(emuPath), quote(bin))
	return os.WriteFile(path, []byte(script), 0o755)
}

// Skip skips the test when it runs under an emulator, with the reason:
// for what qemu-user does not emulate (perf_event_open) or cannot do (a
// foreign program that re-executes itself).
func Skip(t testing.TB, why string) {
	t.Helper()
	if emu := Name(); emu != "" {
		t.Skipf("under %s: %s", emu, why)
	}
}

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// SkipWithoutPerfEvents skips a test that needs perf_event_open when the
// emulator does not provide it: qemu-user (7.2) answers ENOSYS. On a real
// kernel it does nothing, so a missing perf_event_open there still shows.
func SkipWithoutPerfEvents(t testing.TB) {
	t.Helper()
	emu := Name()
	if emu == "" {
		return
	}
	attr := unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_TASK_CLOCK,
		Size: uint32(unsafe.Sizeof(unix.PerfEventAttr{})), Bits: unix.PerfBitDisabled}
	fd, err := unix.PerfEventOpen(&attr, 0, -1, -1, unix.PERF_FLAG_FD_CLOEXEC)
	if err == nil {
		unix.Close(fd)
		return
	}
	if errors.Is(err, unix.ENOSYS) {
		t.Skipf("under %s: perf_event_open is not emulated (ENOSYS)", emu)
	}
}

// SkipOwnStartTime skips a test that checks a process's start time as the
// process itself reads it: qemu-user makes up field 22 (starttime) of the
// emulated process's own /proc/PID/stat, and the value drifts between
// reads, so the state file's pid-reuse check takes the process for another.
func SkipOwnStartTime(t testing.TB) {
	t.Helper()
	Skip(t, "the emulator makes up the start time in the process's own /proc/PID/stat")
}
