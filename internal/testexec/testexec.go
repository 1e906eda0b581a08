// Package testexec starts the other processes that tests need: the test
// binary itself again, as a helper that plays a role (Helper, Role) or to
// run one test apart, perhaps as another user (Rerun, RerunAs), and the
// module's own programs, built for the test (Build, BuildTemp).
//
// A test needs another process when what it checks belongs to a process:
// POSIX record locks (F_GETLK does not report the caller's own), the
// effective uid (shared by every thread), a capability set. Everything
// here starts programs through internal/emulator, so that it works too
// when the tests run under qemu-user (make cross).
package testexec

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"perfevent/internal/emulator"
)

// roleEnv tells a test binary started by Helper which role to play.
const roleEnv = "PERFEVENT_TEST_ROLE"

// Role returns the role Helper started this process for, or "" in a test
// binary that go test started. TestMain looks at it before running tests.
func Role() string { return os.Getenv(roleEnv) }

// Helper returns the test binary, to be started to play role with env
// added to its environment. It runs none of the tests: its TestMain sees
// Role and does the part instead. Its stderr is the test's.
func Helper(role string, env ...string) *exec.Cmd {
	cmd := emulator.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), roleEnv+"="+role), env...)
	cmd.Stderr = os.Stderr
	return cmd
}

// rerunEnv names the test that a test binary started by Rerun runs.
const rerunEnv = "PERFEVENT_TEST_RERUN"

// Rerunning reports whether this process is the one Rerun started for t:
// then t does in this process what it could not do in go test's.
func Rerunning(t testing.TB) bool { return os.Getenv(rerunEnv) == t.Name() }

// Rerun runs t again, alone, in a new process of the test binary, and
// fails t unless it passes there (or skips it if it skips there). The
// test tells the two apart with Rerunning.
func Rerun(t *testing.T) {
	t.Helper()
	rerun(t, os.Args[0], nil)
}

// RerunAs is Rerun in a process of uid and gid, which must be able to
// read the test's package directory. The test binary is copied where that
// user may run it, and TMPDIR (t.TempDir) is a directory of the user's
// own. Only root can do this.
func RerunAs(t *testing.T, uid, gid int) {
	t.Helper()
	dir := reachableTempDir(t)
	bin := filepath.Join(dir, filepath.Base(os.Args[0]))
	data, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(tmp, uid, gid); err != nil {
		t.Fatal(err)
	}
	rerun(t, bin, &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}, "TMPDIR="+tmp)
}

func rerun(t *testing.T, bin string, attr *syscall.SysProcAttr, env ...string) {
	t.Helper()
	// -test.run matches each level of a subtest's name on its own.
	levels := strings.Split(t.Name(), "/")
	for i, l := range levels {
		levels[i] = "^" + regexp.QuoteMeta(l) + "$"
	}
	cmd := emulator.Command(bin, "-test.run", strings.Join(levels, "/"), "-test.v", "-test.count=1")
	cmd.Env = append(append(os.Environ(), rerunEnv+"="+t.Name()), env...)
	cmd.SysProcAttr = attr
	out, err := cmd.CombinedOutput()
	switch {
	case err == nil && strings.Contains(string(out), "--- PASS: "+t.Name()+" "):
	case err == nil && strings.Contains(string(out), "--- SKIP: "+t.Name()+" "):
		t.Skipf("skipped in the child process:\n%s", out)
	default:
		t.Fatalf("in a child process: %v\n%s", err, out)
	}
}

// Go returns the go command for tests that build programs: the one of
// the toolchain that built the test, or else the one in $PATH.
func Go() string {
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); fileExists(p) {
		return p
	}
	return "go"
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// Build builds the main package pkg (as go build names it, relative to
// the test's package directory) into the file bin, as the Makefile builds
// the commands: without cgo, so that a privilege drop reaches every
// thread. Under an emulator bin is wrapped to start through it
// (emulator.Wrap).
func Build(pkg, bin string) error {
	cmd := exec.Command(Go(), "build", "-o", bin, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
	}
	return emulator.Wrap(bin)
}

// BuildTemp builds pkg (see Build) into a directory of t's that every
// user may enter, and returns the program's path: name in that directory.
func BuildTemp(t testing.TB, pkg, name string) string {
	t.Helper()
	bin := filepath.Join(reachableTempDir(t), name)
	if err := Build(pkg, bin); err != nil {
		t.Fatal(err)
	}
	return bin
}

// reachableTempDir is t.TempDir, opened to every user: the testing
// package makes it and its parent mode 0700.
func reachableTempDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
