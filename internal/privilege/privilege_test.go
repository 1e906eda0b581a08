package privilege

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"perfevent/internal/emulator"
	"perfevent/internal/testexec"
)

func TestReadStatusSelf(t *testing.T) {
	st, err := ReadStatus(0)
	if err != nil {
		t.Fatal(err)
	}
	if st.UIDs[0] != os.Getuid() || st.UIDs[1] != os.Geteuid() {
		t.Errorf("uids %v, want real %d effective %d", st.UIDs, os.Getuid(), os.Geteuid())
	}
	if os.Geteuid() == 0 && st.CapEff&(1<<unix.CAP_SYS_ADMIN) == 0 {
		t.Errorf("root without CAP_SYS_ADMIN: CapEff %#x", st.CapEff)
	}
}

func TestOnly(t *testing.T) {
	s := Status{UIDs: [4]int{999, 999, 999, 999}, CapEff: 1 << unix.CAP_PERFMON, CapPrm: 1 << unix.CAP_PERFMON}
	if !s.Only(999, unix.CAP_PERFMON) {
		t.Error("Only(999, CAP_PERFMON) = false")
	}
	s.UIDs[2] = 0 // a saved uid of root could take root back
	if s.Only(999, unix.CAP_PERFMON) {
		t.Error("Only ignored a saved root uid")
	}
	s.UIDs[2] = 999
	s.CapPrm |= 1 << unix.CAP_SYS_ADMIN
	if s.Only(999, unix.CAP_PERFMON) {
		t.Error("Only ignored an extra permitted capability")
	}
}

// TestDrop drops to nobody in a child process: after it, the child runs as
// nobody everywhere with exactly the counter capability, and can still open
// a counter on a CPU, which an unprivileged process cannot.
func TestDrop(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to drop privileges")
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skip("needs a user called nobody")
	}
	if _, err := os.Stat("/sys/bus/event_source/devices/software"); err != nil {
		t.Skip("needs perf_event support")
	}
	emulator.SkipWithoutPerfEvents(t)
	bin := testexec.BuildTemp(t, "./internal/dropcheck", "dropcheck") // nobody runs it too

	c := CounterCapability()
	out, err := exec.Command(bin, "nobody").CombinedOutput()
	if err != nil {
		t.Fatalf("dropcheck: %v\n%s", err, out)
	}
	bit := uint64(1) << c
	for _, want := range []string{
		fmt.Sprintf("dropped to nobody uid %s keeping %s\n", nobody.Uid, Name(c)),
		fmt.Sprintf("uids [%[1]s %[1]s %[1]s %[1]s] capeff %#[2]x capprm %#[2]x capinh 0x0 nonewprivs true\n", nobody.Uid, bit),
		"perf_event_open on cpu0: ok\n",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("dropcheck output lacks %q:\n%s", want, out)
		}
	}

	// The same open without the capability: refused, which is what makes
	// the kept capability necessary (unless perf_event_paranoid allows
	// everyone, as on some developer machines).
	if data, _ := os.ReadFile("/proc/sys/kernel/perf_event_paranoid"); strings.TrimSpace(string(data)) >= "1" {
		plain := exec.Command(bin, "-")
		uid := mustAtoi(t, nobody.Uid)
		plain.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
		out, err := plain.CombinedOutput()
		if err != nil {
			t.Fatalf("dropcheck as plain nobody: %v\n%s", err, out)
		}
		if !strings.Contains(string(out), "perf_event_open on cpu0: permission denied") && !strings.Contains(string(out), "operation not permitted") {
			t.Errorf("an unprivileged nobody could open a CPU-wide counter:\n%s", out)
		}
	}
}

func TestDropRefusals(t *testing.T) {
	if _, err := Drop("no-such-user-here", unix.CAP_PERFMON); err == nil || !strings.Contains(err.Error(), "no-such-user-here") {
		t.Errorf("unknown user: %v", err)
	}
	if os.Geteuid() == 0 {
		if _, err := Drop("root", unix.CAP_PERFMON); err == nil || err.Error() != "user root is root" {
			t.Errorf("root: %v", err)
		}
	}
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	var n int
	if _, err := fmt.Sscan(s, &n); err != nil {
		t.Fatal(err)
	}
	return n
}
