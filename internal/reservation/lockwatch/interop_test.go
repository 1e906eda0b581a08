package lockwatch

import (
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"
)

// cPerfalloc is PCP's C perfalloc, where Debian installs it.
const cPerfalloc = "/var/lib/pcp/pmdas/perfevent/perfalloc"

// The agent side must see C perfalloc's lock, hints included: C perfalloc
// only opens the file and locks it.
func TestWatcherSeesCPerfalloc(t *testing.T) {
	if _, err := os.Stat(cPerfalloc); err != nil {
		t.Skip("needs PCP's C perfalloc at " + cPerfalloc)
	}
	path, lf := tempLockFile(t)
	ch := make(chan Status, 8)
	w, err := Watch(lf, Options{Poll: time.Hour}, func(st Status) { ch <- st }) // hints only
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	nextStatus(t, ch)

	cmd := exec.Command(cPerfalloc, "-D", "-f", path)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	if st := nextStatus(t, ch); !st.Reserved || !slices.Equal(st.Holders, []int{cmd.Process.Pid}) {
		t.Fatalf("C perfalloc running: %+v, want reserved by %d", st, cmd.Process.Pid)
	}
	cmd.Process.Signal(syscall.SIGINT)
	if st := nextStatus(t, ch); st.Reserved {
		t.Fatalf("C perfalloc stopped: %+v", st)
	}
	// Exit 0, or death by the SIGINT if it came before the handler was set.
	if err := cmd.Wait(); err != nil && cmd.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGINT {
		t.Errorf("C perfalloc: %v", err)
	}
}
