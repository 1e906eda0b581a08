// Package cgrouptest helps tests that count real cgroups: a busy loop
// started inside a cgroup, and a task's own time on CPU to check counts
// against.
package cgrouptest

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// Busy starts a shell loop that spins inside the cgroup directory dir (it
// joins through cgroup.procs before it spins) and kills it when the test
// ends. Register it after whatever removes dir: a cgroup with a task in it
// cannot be removed. It returns the loop's pid.
func Busy(tb testing.TB, dir string) int {
	tb.Helper()
	pid, _ := BusyStop(tb, dir)
	return pid
}

// BusyStop is Busy, with a function that kills the loop and waits for it
// to be gone, so that its cgroup can be removed before the test ends.
func BusyStop(tb testing.TB, dir string) (pid int, stop func()) {
	tb.Helper()
	loop := exec.Command("sh", "-c", `echo $$ > "$1/cgroup.procs" && exec sh -c 'while :; do :; done'`, "sh", dir)
	loop.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := loop.Start(); err != nil {
		tb.Fatal(err)
	}
	var once sync.Once
	stop = func() { once.Do(func() { loop.Process.Kill(); loop.Wait() }) }
	tb.Cleanup(stop)
	return loop.Process.Pid, stop
}

// OnCPU is the nanoseconds task pid has run, from /proc/PID/schedstat.
func OnCPU(tb testing.TB, pid int) uint64 {
	tb.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", pid))
	if err != nil {
		tb.Fatal(err)
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		tb.Fatalf("/proc/%d/schedstat is empty", pid)
	}
	ns, err := strconv.ParseUint(f[0], 10, 64)
	if err != nil {
		tb.Fatalf("/proc/%d/schedstat: %v", pid, err)
	}
	return ns
}
