package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"perfevent/internal/testwait"
)

// exitBound is how long SIGTERM may take to end the agent, whatever it
// is doing; it is a liveness bound, not a speed target.
const exitBound = 2 * time.Second

// A FIFO or /dev/zero put in the place of any of the three configuration
// files, then SIGHUP: the reload must neither block (a FIFO used to hold
// the agent's lock for ever, so that perfalloc's reservation was never
// confirmed and SIGTERM did nothing) nor read without end (/dev/zero grew
// the agent by 200 MB/s). After it a reservation is confirmed, counters
// are served, and SIGTERM ends the agent.
func TestNoConfigFileWedgesTheAgent(t *testing.T) {
	for _, name := range []string{"perfevent.conf", "ratios.conf", "cgroups.conf"} {
		for _, kind := range []string{"fifo", "zero"} {
			t.Run(name+"/"+kind, func(t *testing.T) {
				h := startPMDA(t, "[perf]\ncpu-clock\npage-faults\n")
				path := filepath.Join(h.dir, name)
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
				h.cmd.Process.Signal(syscall.SIGHUP)
				refused := path + " is " + what + ", not a regular file"
				if name == "perfevent.conf" {
					h.waitLog(t, "reload: "+refused+"; still serving the previous configuration")
				} else {
					h.waitLog(t, refused)
					h.waitLog(t, "reload done")
				}
				if _, release := h.reserve(t); release != nil {
					release()
				}
				if vals, _ := h.fetch("perfevent.hwcounters.cpu_clock.value"); len(vals) == 0 {
					t.Error("cpu_clock is no longer served")
				}
				rss := vmRSS(t, h.cmd.Process.Pid)
				if rss > 200<<10 {
					t.Errorf("the agent's RSS is %d kB", rss)
				}
				h.terminate(t)
			})
		}
	}
}

// terminate sends SIGTERM and checks that the agent ends within exitBound.
func (h *pmcd) terminate(t *testing.T) {
	t.Helper()
	start := time.Now()
	h.cmd.Process.Signal(syscall.SIGTERM)
	h.SetTimeout(exitBound)
	if err := h.Wait(); err != nil {
		t.Errorf("after SIGTERM: %v", err)
	}
	t.Logf("ended %v after SIGTERM", time.Since(start).Round(time.Millisecond))
}

// vmRSS is a process's resident set in kB.
func vmRSS(t *testing.T, pid int) int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "VmRSS:" {
			n := 0
			for _, c := range f[1] {
				n = n*10 + int(c-'0')
			}
			return n
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}

// ratios.conf and cgroups.conf of mode 0600 root, read at start-up, must
// still be read by a reload as the agent's user: they used to vanish, the
// log saying that the new configuration was served.
func TestRootOnlyFilesSurviveAReloadAsUser(t *testing.T) {
	needPerf(t)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "ratios.conf"), []byte("faults_per_clock = page-faults / cpu-clock\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "cgroups.conf"), []byte("cgroup /\nevent cpu-clock\n"), 0o600)
	h := startPMDAIn(t, dir, "[perf]\ncpu-clock\npage-faults\n", "-U", "nobody")
	h.waitLog(t, "running as nobody")
	if _, code := h.pmid("perfevent.ratio.faults_per_clock"); code != 0 {
		t.Fatalf("the ratio before the reload: %v", code)
	}
	h.cmd.Process.Signal(syscall.SIGHUP)
	h.waitLog(t, "reload done")
	if _, code := h.pmid("perfevent.ratio.faults_per_clock"); code != 0 {
		t.Errorf("the ratio after a reload as nobody: %v", code)
	}
	data, _ := os.ReadFile(h.log)
	if n := strings.Count(string(data), "cgroups: "+filepath.Join(dir, "cgroups.conf")+" counts 1 events per cgroup"); n != 1 {
		t.Errorf("cgroups.conf's plan line is logged %d times, want once, at start-up", n)
	}
	// The reload logs only what changed: cgroups.conf read as root read it
	// leaves the plan as it was.
	if !strings.Contains(string(data), "reload done: the new configuration is served") || !strings.Contains(string(data), "the plan is unchanged") {
		t.Errorf("the reload as nobody changed the plan (cgroups.conf or ratios.conf not read as at start-up):\n%s", data)
	}
	if strings.Contains(string(data), "permission denied") {
		t.Errorf("the log has a permission denied")
	}
}

// A storm of SIGHUPs, one every millisecond, makes a few reloads, not one each:
// they are coalesced, and the last one reads the file as it was after the
// last signal. The log grows by a few lines per reload only.
func TestSIGHUPStormIsCoalesced(t *testing.T) {
	h := startPMDA(t, "[perf]\ncpu-clock\n")
	h.waitLog(t, "serving 1 counters")
	before, _ := os.ReadFile(h.log)
	const storm = 1000
	for i := range storm {
		if i == storm-10 {
			os.WriteFile(h.conf, []byte("[perf]\ncpu-clock\npage-faults\n"), 0o644)
		}
		h.cmd.Process.Signal(syscall.SIGHUP)
		time.Sleep(time.Millisecond) // the pace of a shell loop of kill
	}
	// The file as the last signals found it is served in the end.
	testwait.Eventually(t, testwait.Settle, "page_faults, added before the last SIGHUPs, to be served", func() bool {
		_, code := h.pmid("perfevent.hwcounters.page_faults.value")
		return code == 0
	})
	h.terminate(t)
	after, _ := os.ReadFile(h.log)
	added := strings.TrimPrefix(string(after), string(before))
	reloads := strings.Count(added, "reload done")
	lines := strings.Count(added, "\n")
	t.Logf("%d SIGHUPs: %d reloads, %d log lines", storm, reloads, lines)
	if reloads < 1 || reloads > 5 {
		t.Errorf("%d SIGHUPs made %d reloads, want 1 to 5", storm, reloads)
	}
	if lines > 50 {
		t.Errorf("%d SIGHUPs added %d log lines, want at most 50:\n%s", storm, lines, added)
	}
}
