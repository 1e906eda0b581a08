package testexec

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"perfevent/internal/testneed"
)

func TestMain(m *testing.M) {
	switch Role() {
	case "":
		os.Exit(m.Run())
	case "echo":
		fmt.Printf("echo %s\n", os.Getenv("TESTEXEC_WORD"))
		os.Exit(0)
	}
	fmt.Printf("no role %q\n", Role())
	os.Exit(2)
}

func TestHelperPlaysItsRole(t *testing.T) {
	out, err := Helper("echo", "TESTEXEC_WORD=hello").Output()
	if err != nil || string(out) != "echo hello\n" {
		t.Errorf("helper said %q, %v; want \"echo hello\\n\"", out, err)
	}
}

func TestRerun(t *testing.T) {
	if Rerunning(t) {
		// The child's parent is go test's process of the test binary.
		if want := os.Getenv("TESTEXEC_PARENT"); want != fmt.Sprint(os.Getppid()) {
			t.Errorf("parent %d, want %s", os.Getppid(), want)
		}
		return
	}
	t.Setenv("TESTEXEC_PARENT", fmt.Sprint(os.Getpid()))
	Rerun(t)
}

// Subtests are rerun alone, each level of the name matched exactly.
func TestRerunSubtest(t *testing.T) {
	t.Run("a b", func(t *testing.T) {
		if !Rerunning(t) {
			Rerun(t)
		}
	})
	t.Run("a", func(t *testing.T) {
		if Rerunning(t) {
			t.Error(`"a" ran when "a b" was rerun`)
		}
	})
}

func TestRerunAs(t *testing.T) {
	if Rerunning(t) {
		if uid := os.Geteuid(); uid != 65534 {
			t.Errorf("euid %d, want 65534", uid)
		}
		var st syscall.Stat_t
		if err := syscall.Stat(os.TempDir(), &st); err != nil || st.Uid != 65534 {
			t.Errorf("TMPDIR %s: owner %d, %v; want the user's own", os.TempDir(), st.Uid, err)
		}
		if err := os.WriteFile(filepath.Join(t.TempDir(), "f"), nil, 0o600); err != nil {
			t.Errorf("t.TempDir is not writable: %v", err)
		}
		return
	}
	testneed.Root(t, "to run a process as uid 65534")
	RerunAs(t, 65534, 65534)
}

func TestBuildTemp(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program; skipped with -short")
	}
	bin := BuildTemp(t, "./testdata/hello", "hello")
	out, err := exec.Command(bin).CombinedOutput()
	if want := fmt.Sprintf("hello from uid %d\n", os.Geteuid()); err != nil || string(out) != want {
		t.Errorf("hello said %q, %v; want %q", out, err, want)
	}
	if os.Geteuid() != 0 {
		return
	}
	// Every user may run it.
	cmd := exec.Command(bin)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "uid 65534") {
		t.Errorf("as nobody: %q, %v", out, err)
	}
}
