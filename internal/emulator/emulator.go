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
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
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
