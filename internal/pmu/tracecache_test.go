package pmu

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"perfevent/internal/testexec"
)

// A reload runs as the agent's user, who cannot read tracefs: the ids that
// start-up resolved as root keep being served, and a tracepoint seen for
// the first time is refused with the reason and the remedy.
func TestTracepointsResolvedBeforeThePrivilegeDrop(t *testing.T) {
	if testexec.Rerunning(t) || os.Geteuid() != 0 {
		tracefsDenied(t) // as an ordinary user
		return
	}
	// As root no mode keeps us out: run the check as nobody.
	testexec.RerunAs(t, 65534, 65534)
}

func tracefsDenied(t *testing.T) {
	tracing := filepath.Join(t.TempDir(), "tracing")
	events := filepath.Join(tracing, "events", "sched")
	for _, ev := range []string{"sched_switch", "sched_wakeup"} {
		if err := os.MkdirAll(filepath.Join(events, ev), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(events, "sched_switch", "id"), []byte("312\n"), 0o644)
	os.WriteFile(filepath.Join(events, "sched_wakeup", "id"), []byte("318\n"), 0o644)
	fs := testFS("vm")
	fs.Tracing = []string{tracing}

	ev, err := fs.Resolve("sched:sched_switch")
	if err != nil || ev.Attr.Config != 312 {
		t.Fatalf("with tracefs readable: %+v, %v", ev, err)
	}
	// tracefs as the kernel mounts it: root's, mode 0700.
	if err := os.Chmod(tracing, 0); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(tracing, 0o755)

	ev, err = fs.Resolve("sched:sched_switch")
	if err != nil || ev.Attr.Config != 312 || ev.Attr.Type != fs.tracepointType() {
		t.Errorf("a tracepoint resolved before: %+v, %v", ev, err)
	}
	if !strings.Contains(ev.Source, "as resolved at start-up") {
		t.Errorf("source %q does not say where the id came from", ev.Source)
	}
	_, err = fs.Resolve("sched:sched_wakeup")
	want := `event "sched:sched_wakeup": tracepoint sched:sched_wakeup is not resolvable after the privilege drop (` + tracing + ` is readable by root only); restart the agent to add new tracepoints`
	if err == nil || err.Error() != want {
		t.Errorf("a new tracepoint:\n got %v\nwant %s", err, want)
	}
	if _, err := fs.Tracepoints(); err == nil || !strings.Contains(err.Error(), "readable by root only") {
		t.Errorf("Tracepoints: %v", err)
	}
}
