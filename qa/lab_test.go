package qa

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"perfevent/internal/hostfs"
)

// Both agents come up under a lab pmcd, answer through -h and through
// the default connection, and go away with the test.
func TestLab(t *testing.T) {
	for _, a := range []Agent{{Go: true}, {Go: false}, {Go: true, Socket: true}} {
		name := "c"
		if a.Go {
			name = "go"
		}
		if a.Socket {
			name += "-socket"
		}
		t.Run(name, func(t *testing.T) {
			var pid, pmcd int
			t.Run("up", func(t *testing.T) {
				l := StartLab(t, a)
				pid, pmcd = l.AgentPID(t), l.PMCDPID()
				exe, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
				if !strings.HasPrefix(exe, l.Dir+"/bin/pmdaperfevent-lab-") {
					t.Errorf("agent pid %d runs %q, want the lab's copy", pid, exe)
				}
				// 12 counters of VMConfig on each online CPU; cycles fails.
				want := 12 * len(onlineCPUs(t))
				for _, args := range [][]string{
					{"-v", "perfevent.active"},
					{"-h", l.HostSpec(), "-v", "perfevent.active"},
					{"-h", "unix:" + l.PMCDSocket, "-v", "perfevent.active"},
				} {
					out := l.Run(t, "pmprobe", args...)
					if got := strings.TrimSpace(out); got != "perfevent.active 1 "+strconv.Itoa(want) {
						t.Errorf("pmprobe %s: %q, want %d active counters", strings.Join(args, " "), got, want)
					}
				}
				if _, err := os.Stat(l.LockFile()); err != nil {
					t.Errorf("lock file: %v", err)
				}
				if a.Go {
					if _, err := os.Stat(l.StateFile()); err != nil {
						t.Errorf("state file: %v", err)
					}
				}
				if r := l.RunErr(t, "pminfo", "kernel.all.load"); r.Err == nil {
					t.Errorf("the lab pmcd knows kernel.all.load: it is not private:\n%s", r)
				}

				newPID := l.RestartAgent(t)
				if newPID == pid {
					t.Errorf("RestartAgent: pid %d unchanged", pid)
				}
				l.Restart(t)
				if l.PMCDPID() == pmcd {
					t.Errorf("Restart: pmcd pid %d unchanged", pmcd)
				}
				pid, pmcd = l.AgentPID(t), l.PMCDPID()
				l.Run(t, "pminfo", "-f", "perfevent.active")
			})
			for _, p := range []int{pid, pmcd} {
				if _, err := os.Stat("/proc/" + strconv.Itoa(p) + "/exe"); p != 0 && err == nil {
					if exe, _ := os.Readlink("/proc/" + strconv.Itoa(p) + "/exe"); strings.Contains(exe, "-lab-") {
						t.Errorf("pid %d (%s) still runs after the test", p, exe)
					}
				}
			}
		})
	}
}

// onlineCPUs lists the CPUs the kernel has online.
func onlineCPUs(t testing.TB) []int {
	t.Helper()
	cpus, err := (hostfs.FS{}).OnlineCPUs()
	if err != nil {
		t.Fatal(err)
	}
	return cpus
}
