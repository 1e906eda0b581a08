package agent

import (
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"perfevent/internal/cgroup"
)

// The agent says why nothing is counted per cgroup, in the log at Warning
// and in perfevent.cgroup.mode, and follows the hierarchy when perf_event
// moves, without a restart.
func TestCgroupHierarchyFollowed(t *testing.T) {
	type found struct {
		h   cgroup.Hierarchy
		err error
	}
	const why = "perf_event is bound to the cgroup v1 hierarchy 3, which is not mounted"
	var now atomic.Pointer[found]
	now.Store(&found{err: &cgroup.Unavailable{Reason: why}})
	mount := t.TempDir() // no cgroup: every open fails, which is not the point here
	h := startAgentWith(t, "0-1", "[perf]\ncpu-clock\n", func(a *Agent) {
		if err := os.WriteFile(filepath.Join(filepath.Dir(a.o.Config), "cgroups.conf"), []byte("cgroup /\nevent cpu-clock\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		a.locate = func() (cgroup.Hierarchy, error) { f := now.Load(); return f.h, f.err }
	})
	h.waitLog(t, "Warning: cgroups: "+why+"; nothing is counted per cgroup")
	if !h.watchesHierarchy() {
		t.Error("counting per cgroup, the agent does not watch the hierarchy")
	}
	if got := h.mode(t); got != "unavailable: "+why {
		t.Errorf("perfevent.cgroup.mode = %q", got)
	}

	now.Store(&found{h: cgroup.Hierarchy{Mount: mount, Version: 1}})
	h.a.checkHierarchy()
	want := "v1 " + mount
	h.waitLog(t, `cgroups: perfevent.cgroup.mode is now "`+want+`" (was "unavailable: `+why+`"); rebuilding the counters`)
	if got := h.mode(t); got != want {
		t.Errorf("perfevent.cgroup.mode = %q after the mount, want %q", got, want)
	}
	// Nothing changed: nothing is rebuilt.
	reloads := strings.Count(h.log.String(), "reload done")
	h.a.checkHierarchy()
	if n := strings.Count(h.log.String(), "reload done"); n != reloads {
		t.Errorf("%d rebuilds without a change of hierarchy", n-reloads)
	}
}

// Without cgroups.conf no change of hierarchy alters what is served: the
// agent starts no watch, nor its thread, until a reload counts per cgroup.
func TestHierarchyWatchedOnlyWhenCounting(t *testing.T) {
	h := startAgentWith(t, "0-1", "[perf]\ncpu-clock\n", func(a *Agent) {
		a.locate = func() (cgroup.Hierarchy, error) { return cgroup.Hierarchy{Mount: t.TempDir(), Version: 2}, nil }
	})
	if h.watchesHierarchy() {
		t.Fatal("the agent watches the hierarchy with nothing counted per cgroup")
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(h.a.o.Config), "cgroups.conf"), []byte("cgroup /\nevent cpu-clock\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if !h.a.rebuild() {
		t.Fatal("the reload failed")
	}
	if !h.watchesHierarchy() {
		t.Error("after a reload that counts per cgroup, the agent does not watch the hierarchy")
	}
}

// watchesHierarchy says whether the agent has started its hierarchy watch.
func (h *tester) watchesHierarchy() bool {
	h.a.mu.Lock()
	defer h.a.mu.Unlock()
	return h.a.hier != nil
}

// mode fetches perfevent.cgroup.mode.
func (h *tester) mode(t *testing.T) string {
	t.Helper()
	id, err := h.c.PMID("perfevent.cgroup.mode")
	if err != nil {
		t.Fatal(err)
	}
	r, err := h.c.Fetch(id)
	if err != nil || r.Sets[0].Err() != nil || len(r.Sets[0].Values) != 1 {
		t.Fatalf("fetching perfevent.cgroup.mode: %v, %+v", err, r)
	}
	return r.Sets[0].Values[0].String()
}
