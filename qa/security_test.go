package qa

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A configuration that is not a regular file: a FIFO hung the
// root agent before it spoke to pmcd and left it behind pmcd; /dev/zero
// grew it to gigabytes. Now either is refused at once, the agent serves
// version and active, a reload of it blocks neither a reservation nor
// signals, and the agent ends when its pipe closes.
func TestSecurityConfigNotARegularFile(t *testing.T) {
	t.Run("fifo", func(t *testing.T) {
		dir := t.TempDir()
		os.Chmod(dir, 0o755)
		fifo := filepath.Join(dir, "perfevent.conf")
		if err := syscall.Mkfifo(fifo, 0o644); err != nil {
			t.Fatal(err)
		}
		l := StartLab(t, Agent{Go: true, Args: []string{"-c", fifo}, Inactive: true})
		checkStatic(t, l)
		waitLog(t, l, fifo+" is a FIFO, not a regular file; serving perfevent.version and perfevent.active only", 0)
		syscall.Kill(l.AgentPID(t), syscall.SIGHUP)
		waitLog(t, l, "reload: "+fifo+" is a FIFO, not a regular file; still serving the previous configuration", Settle)
		reserveWorks(t, l, perfallocBinary(t, l), 0)

		// pmcd dies without a word to its agents: only the pipe tells.
		pid := l.AgentPID(t)
		l.pmcd.Process.Kill()
		if !l.waitGone(pid, Settle) {
			t.Errorf("the agent (pid %d) still runs %v after pmcd's pipe closed", pid, Settle)
		}
	})
	t.Run("device", func(t *testing.T) {
		l := StartLab(t, Agent{Go: true, Args: []string{"-c", "/dev/zero"}, Inactive: true})
		checkStatic(t, l)
		waitLog(t, l, "/dev/zero is a device, not a regular file", 0)
		status := readFile(t, fmt.Sprintf("/proc/%d/status", l.AgentPID(t)))
		var kb int
		for _, line := range strings.Split(status, "\n") {
			if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				fmt.Sscan(rest, &kb)
			}
		}
		if kb == 0 || kb > 100<<10 {
			t.Errorf("the agent's RSS is %d kB; want a few MB", kb)
		}
	})
}

// pmcd.conf's -U goes from the default, pcp, to root: the map and the state
// directory that the agent made as pcp are adopted, every PMID stays and
// perfalloc's confirmation works. Before, root refused both and served
// nothing.
func TestSecurityUserChange(t *testing.T) {
	// The map in a directory the agent makes, as its default one is.
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	pmidsPath := filepath.Join(dir, "perfevent", "pmids")
	l := StartLab(t, Agent{Go: true, Args: []string{"-pmids", pmidsPath}})
	want := activeAll(t, l)
	// A reload that numbers a new name: the map is now written by pcp.
	writeFile(t, l.Conf, VMConfig+"\n[dynamic]\nsoftware.cpu-migrations\n")
	syscall.Kill(l.AgentPID(t), syscall.SIGHUP)
	waitLog(t, l, "reload done", Settle)
	before := pmids(t, l)
	var st syscall.Stat_t
	if err := syscall.Stat(pmidsPath, &st); err != nil || st.Uid == 0 {
		t.Fatalf("the PMID map after a reload as pcp: uid %d, %v; want pcp's", st.Uid, err)
	}

	l.Agent.Args = append(l.Agent.Args, "-U", "root")
	l.Restart(t)
	samePMIDs(t, before, pmids(t, l), false)
	reserveWorks(t, l, perfallocBinary(t, l), activeAll(t, l))
	log := readFile(t, l.AgentLog)
	for _, bad := range []string{"belongs to uid", "PMID map", "perfalloc will not be able to confirm"} {
		if strings.Contains(log, bad) {
			t.Errorf("the agent as root logs %q:\n%s", bad, tail(l.AgentLog, 20))
		}
	}
	if want == 0 {
		t.Error("no counter at the start")
	}
}

// A FIFO or /dev/zero as ratios.conf or cgroups.conf, under the real
// pmcd: SIGHUP reloads, refusing the file by name (a FIFO used to hang
// the reload in open while it held the agent's lock, and /dev/zero grew
// the agent without end); perfalloc's reservation is then confirmed, and
// SIGTERM ends the agent.
func TestSecurityConfigFilesCannotWedgeTheAgent(t *testing.T) {
	for _, name := range []string{"ratios.conf", "cgroups.conf"} {
		for _, kind := range []string{"fifo", "zero"} {
			t.Run(name+"/"+kind, func(t *testing.T) {
				l := StartLab(t, Agent{Go: true})
				want := active(t, l)
				path := filepath.Join(filepath.Dir(l.Conf), name)
				os.Remove(path)
				what := "a FIFO"
				if kind == "fifo" {
					if err := syscall.Mkfifo(path, 0o644); err != nil {
						t.Fatal(err)
					}
				} else {
					what = "a device"
					if err := os.Symlink("/dev/zero", path); err != nil {
						t.Fatal(err)
					}
				}
				pid := l.AgentPID(t)
				syscall.Kill(pid, syscall.SIGHUP)
				waitLog(t, l, path+" is "+what+", not a regular file", Settle)
				waitLog(t, l, "reload done: the new configuration is served", Settle)
				reserveWorks(t, l, perfallocBinary(t, l), want)
				start := time.Now()
				syscall.Kill(pid, syscall.SIGTERM)
				if !l.waitGone(pid, 2*time.Second) {
					t.Fatalf("the agent (pid %d) still runs 2 s after SIGTERM", pid)
				}
				t.Logf("gone %v after SIGTERM", time.Since(start).Round(time.Millisecond))
			})
		}
	}
}
