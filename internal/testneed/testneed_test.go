package testneed

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// recorder is a testing.TB whose Skip records instead of ending the test,
// so that a test can see what the helpers say.
type recorder struct {
	testing.TB
	skipped []string
}

func (r *recorder) Helper() {}

func (r *recorder) Skip(args ...any) { r.skipped = append(r.skipped, fmt.Sprint(args...)) }

func (r *recorder) Skipf(format string, args ...any) {
	r.skipped = append(r.skipped, fmt.Sprintf(format, args...))
}

func TestRootSkipsOthersAndSaysWhy(t *testing.T) {
	r := &recorder{TB: t}
	Root(r, "to give the file to another user")
	if os.Geteuid() == 0 {
		if len(r.skipped) != 0 {
			t.Errorf("Root skipped root: %q", r.skipped)
		}
		return
	}
	if len(r.skipped) != 1 || r.skipped[0] != "needs root, to give the file to another user" {
		t.Errorf("Root as uid %d said %q, want \"needs root, to give the file to another user\"", os.Geteuid(), r.skipped)
	}
}

func TestUserSkipsAnUnknownName(t *testing.T) {
	r := &recorder{TB: t}
	if u := User(r, "root"); len(r.skipped) != 0 || u.Uid != "0" {
		t.Errorf("User(root) = %+v, skips %q; want uid 0 and no skip", u, r.skipped)
	}
	r = &recorder{TB: t}
	User(r, "no such user, surely")
	if len(r.skipped) != 1 || !strings.HasPrefix(r.skipped[0], "needs a user called no such user, surely: ") {
		t.Errorf("User of an unknown name skipped with %q, want one \"needs a user called no such user, surely: …\"", r.skipped)
	}
}

func TestSystemWideAgreesWithTheHost(t *testing.T) {
	r := &recorder{TB: t}
	SystemWide(r)
	if os.Geteuid() != 0 {
		// Root's skip comes first; the open that follows may skip too
		// (the recorder does not stop at the first).
		if len(r.skipped) == 0 || r.skipped[0] != "needs root, to count system-wide with perf_event_open" {
			t.Errorf("SystemWide as uid %d said %q", os.Geteuid(), r.skipped)
		}
		return
	}
	if _, err := os.Stat(softwarePMU); err != nil {
		if len(r.skipped) != 1 || !strings.HasPrefix(r.skipped[0], "needs perf_event_open: cpu-clock on cpu0: ") {
			t.Errorf("SystemWide as root without %s said %q", softwarePMU, r.skipped)
		}
		return
	}
	// Root on a kernel with perf events: a software cpu-clock opens
	// unless perf_event_open is forbidden (a seccomp filter, a container).
	if len(r.skipped) > 1 || (len(r.skipped) == 1 && !strings.HasPrefix(r.skipped[0], "needs perf_event_open: ")) {
		t.Errorf("SystemWide as root said %q", r.skipped)
	}
}

func TestPerfEventsFollowsTheSoftwarePMU(t *testing.T) {
	r := &recorder{TB: t}
	PerfEvents(r)
	_, err := os.Stat(softwarePMU)
	if want := err != nil; (len(r.skipped) == 1) != want || len(r.skipped) > 1 {
		t.Errorf("PerfEvents with %s (stat: %v) skipped %q", softwarePMU, err, r.skipped)
	}
}
