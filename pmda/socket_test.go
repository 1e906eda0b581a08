package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"perfevent/internal/testneed"
	"perfevent/internal/testwait"
)

// In socket mode the agent, still root, creates its socket in
// $PCP_RUN_DIR, a directory pcp owns. No chmod or chown by path may follow
// the bind: traced from the start to the accept, the agent makes none (an
// fchown or fchmod of a descriptor it vetted is fine), and the socket is
// pcp's, mode 0660, all the same. (-U root: the privilege drop, which
// waits for every thread, crawls under ptrace, and comes after the bind.)
func TestSocketIsNeverChmoddedByPath(t *testing.T) {
	needPerf(t)
	strace, err := exec.LookPath("strace")
	if err != nil {
		t.Skip("needs strace (scripts/setup installs it)")
	}
	pcp := testneed.User(t, "pcp")
	uid, _ := strconv.Atoi(pcp.Uid)
	gid, _ := strconv.Atoi(pcp.Gid)
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	run := filepath.Join(dir, "run")
	os.Mkdir(run, 0o775)
	if err := os.Chown(run, uid, gid); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(run, "perfevent.socket")
	trace := filepath.Join(dir, "trace")
	conf := filepath.Join(dir, "perfevent.conf")
	os.WriteFile(conf, []byte("[perf]\ncpu-clock\n"), 0o644)
	cmd := exec.Command(strace, "-f", "--seccomp-bpf", "-qq", "-e", "signal=none", "-o", trace,
		"-e", "trace=chmod,fchmodat,chown,lchown,fchownat,fchown,fchmod",
		agentBinary(t), "-U", "root", "-u", sock, "-c", conf, "-l", filepath.Join(dir, "log"),
		"--lockfile", filepath.Join(dir, "perflock"), "--pmids", filepath.Join(dir, "pmids"))
	cmd.Env = append(os.Environ(), "PCP_USER=pcp")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	testwait.Until(testwait.Settle, func() bool { return syscall.Lstat(sock, &st) == nil })
	// The agent goes on with its start-up until it waits for pmcd.
	testwait.Until(testwait.Settle, func() bool {
		data, _ := os.ReadFile(filepath.Join(dir, "log"))
		return strings.Contains(string(data), "serving ")
	})
	// SIGTERM to the agent, strace's child, not to strace: strace
	// detaching from a busy tracee can take its time.
	children, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", cmd.Process.Pid, cmd.Process.Pid))
	for _, f := range strings.Fields(string(children)) {
		if pid, err := strconv.Atoi(f); err == nil {
			syscall.Kill(pid, syscall.SIGTERM)
		}
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		for _, f := range strings.Fields(string(children)) {
			if pid, err := strconv.Atoi(f); err == nil {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		<-exited
		t.Error("the traced agent was still running 10 s after SIGTERM")
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFSOCK || st.Uid != uint32(uid) || st.Gid != uint32(gid) || st.Mode&0o777 != 0o660 {
		t.Errorf("the socket: mode %o uid %d gid %d; want a socket of pcp (%d:%d), 0660", st.Mode, st.Uid, st.Gid, uid, gid)
	}
	data, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	// fchownat(fd, "", ..., AT_EMPTY_PATH) acts on a descriptor, not a name.
	// (strace 6.1 knows no fchmodat2; the agent has no use for it.)
	byPath := regexp.MustCompile(`\b(chmod|lchown|chown)\(|\b(fchmodat|fchownat)\((AT_FDCWD|\d+), "[^"]`)
	for _, line := range strings.Split(string(data), "\n") {
		if byPath.MatchString(line) {
			t.Errorf("a change by path: %s", line)
		}
	}
	if t.Failed() {
		t.Logf("traced:\n%s", data)
	}
}
