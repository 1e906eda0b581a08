package qa

import (
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"perfevent/internal/reservation"
)

// Install --lock-group creates the group and has the agent give the lock
// file to it, mode 0640: nobody outside the group cannot reserve the
// counters, nobody in it can; --max-hold reaches the agent too. Install
// without them puts back the default, 0644.
func TestInstallLockGroup(t *testing.T) {
	e := Setup(t)
	GoAgentOnly(t)
	e.Keep(t)
	if _, err := exec.LookPath("groupadd"); err != nil {
		unmet(t, "needs groupadd (passwd) for Install --lock-group")
	}
	const group = "perfalloc-qa"
	if _, err := user.LookupGroup(group); err == nil {
		t.Fatalf("group %s exists already: a test left it behind? (groupdel %s)", group, group)
	}
	lock := reservation.DefaultLockPath()
	t.Cleanup(func() {
		e.InstallGo(t, Pipe)
		os.Chown(lock, -1, 0)
		exec.Command("groupdel", group).Run()
	})

	r := e.Exec(Cmd{Dir: e.Home, Args: []string{"./Install", "--pipe", "--lock-group=" + group, "--max-hold=1h"}})
	if r.Err != nil {
		t.Fatalf("Install --lock-group:\n%s", r)
	}
	for _, want := range []string{"Install: created group " + group, "Install: only root and members of group " + group + " may reserve the counters (lock file mode 0640)", "Install: counting resumes when a reservation has lasted 1h", "Check perfevent metrics have appeared"} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("Install's transcript lacks %q:\n%s", want, r.Stdout)
		}
	}
	if line := e.PMCDLine(t); !strings.Contains(line, " -lockgroup "+group+" -lockmode 0640 -max-hold 1h") {
		t.Errorf("pmcd.conf line: %q", line)
	}
	g, err := user.LookupGroup(group)
	if err != nil {
		t.Fatal(err)
	}
	gid, _ := strconv.Atoi(g.Gid)
	waitFor(t, 10*time.Second, "the lock file to be 0640 and the group's", func() bool {
		var st syscall.Stat_t
		return syscall.Stat(lock, &st) == nil && st.Mode&0o7777 == 0o640 && int(st.Gid) == gid
	})
	e.WaitForMetric(t, "perfevent.active", 10*time.Second)
	if out := e.Run(t, "pmprobe", "-v", "perfevent.reservation.max_hold"); !strings.Contains(out, " 1 3600") {
		t.Errorf("perfevent.reservation.max_hold: %q, want 3600", out)
	}

	perfalloc := filepath.Join(e.Home, "perfalloc")
	as := func(groups ...uint32) (string, int) {
		cmd := exec.Command(perfalloc, "-f", lock, "true")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: groups}}
		out, _ := cmd.CombinedOutput()
		return string(out), cmd.ProcessState.ExitCode()
	}
	want := "perfalloc: lock file " + lock + ": permission denied (mode 0640, group " + group + "): only root and members of group " + group + " may reserve the counters here"
	if out, rc := as(); rc != 1 || !strings.HasPrefix(out, want) {
		t.Errorf("nobody outside %s: rc %d %q\nwant rc 1 %q", group, rc, out, want)
	}
	if out, rc := as(uint32(gid)); rc != 0 {
		t.Errorf("nobody in %s: rc %d %q, want 0", group, rc, out)
	}

	// Install again without the options: anyone may reserve.
	e.InstallGo(t, Pipe)
	waitFor(t, 10*time.Second, "the lock file to be 0644 again", func() bool {
		var st syscall.Stat_t
		return syscall.Stat(lock, &st) == nil && st.Mode&0o7777 == 0o644
	})
	if out, rc := as(); rc != 0 {
		t.Errorf("nobody after Install without --lock-group: rc %d %q, want 0", rc, out)
	}
}
