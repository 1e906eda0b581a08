package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// fakeV2 is a v2 root with the given children, controllers and
// subtree_control.
func fakeV2(t *testing.T, children []string, controllers, subtree string) Hierarchy {
	t.Helper()
	root := t.TempDir()
	for _, c := range children {
		if err := os.Mkdir(filepath.Join(root, c), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, text := range map[string]string{"cgroup.controllers": controllers, "cgroup.subtree_control": subtree, "cgroup.procs": "1\n"} {
		if err := os.WriteFile(filepath.Join(root, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return Hierarchy{Mount: root, Version: 2}
}

// Only ENOENT from every child tried that is still there says that the
// controller does not reach the cgroups; any other answer leaves the
// choice to the counters' own opens.
func TestReachDecides(t *testing.T) {
	for _, c := range []struct {
		err       error
		unreached bool
	}{
		{nil, false},
		{unix.ENOENT, true},
		{fmt.Errorf("opening: %w", unix.ENOENT), true},
		{unix.EACCES, false}, // perf_event_paranoid, without CAP_PERFMON
		{unix.EBADF, false},  // not a cgroup directory
		{unix.EINVAL, false}, // a kernel without CONFIG_CGROUP_PERF
		{unix.EMFILE, false},
	} {
		h := fakeV2(t, []string{"init.scope", "system.slice"}, "cpuset cpu io memory pids\n", "")
		var tried []string
		err := reach(h, 1, func(path string, cpu int) error {
			if cpu != 1 {
				t.Errorf("probed CPU %d, want 1", cpu)
			}
			tried = append(tried, filepath.Base(path))
			return c.err
		})
		var u *Unreached
		if got := errors.As(err, &u); got != c.unreached {
			t.Errorf("open %v: Reach = %v, want unreached %v", c.err, err, c.unreached)
			continue
		}
		want := "init.scope"
		if c.unreached {
			want = "init.scope system.slice" // each one asked
		}
		if got := strings.Join(tried, " "); got != want {
			t.Errorf("open %v: tried %v, want [%s]", c.err, tried, want)
		}
		if !c.unreached {
			continue
		}
		for _, want := range []string{
			"below the root of the cgroup v2 hierarchy at " + h.Mount,
			"a counter bound to /init.scope fails with ENOENT",
			"neither BPF nor perf counters can count them",
			"echo +cpuset > " + filepath.Join(h.Mount, "cgroup.subtree_control"),
			"run under systemd",
		} {
			if !strings.Contains(u.Reason, want) {
				t.Errorf("the reason lacks %q: %s", want, u.Reason)
			}
		}
	}
}

// The remedy names a controller the root does not enable yet: writing one
// already there changes nothing.
func TestReachNamesANewController(t *testing.T) {
	for _, c := range []struct{ controllers, subtree, want, not string }{
		{"cpu pids\n", "cpu\n", "echo +pids > ", "echo +cpu "},
		{"cpu pids\n", "cpu pids\n", "write a controller it does not list yet to ", "echo +"},
		{"", "", "write a controller it does not list yet to ", "echo +"},
	} {
		h := fakeV2(t, []string{"a"}, c.controllers, c.subtree)
		err := reach(h, 0, func(string, int) error { return unix.ENOENT })
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), c.not) {
			t.Errorf("controllers %q, subtree_control %q: %v; want %q and not %q", c.controllers, c.subtree, err, c.want, c.not)
		}
	}
}

// A child removed between the listing and the open answers ENOENT too:
// the probe tries the next, up to probeTries, and says nothing if every
// one went.
func TestReachSkipsChildrenRemoved(t *testing.T) {
	h := fakeV2(t, []string{"a", "b", "c", "d", "e"}, "pids\n", "")
	var tried []string
	gone := func(path string, _ int) error {
		tried = append(tried, filepath.Base(path))
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		return unix.ENOENT
	}
	if err := reach(h, 0, gone); err != nil || strings.Join(tried, " ") != "a b c" {
		t.Errorf("every child removed: %v after %v, want nil after [a b c]", err, tried)
	}

	h = fakeV2(t, []string{"a", "b"}, "pids\n", "")
	tried = nil
	err := reach(h, 0, func(path string, cpu int) error {
		if filepath.Base(path) == "a" {
			return gone(path, cpu)
		}
		tried = append(tried, filepath.Base(path))
		return unix.ENOENT
	})
	var u *Unreached
	if !errors.As(err, &u) || !strings.Contains(u.Reason, "bound to /b fails") || strings.Join(tried, " ") != "a b" {
		t.Errorf("a removed, b there: %v after %v, want Unreached naming /b after [a b]", err, tried)
	}

	// One child refuses while its directory is still there (a cgroup
	// being removed), the next takes the counter: the controller reaches
	// the cgroups.
	h = fakeV2(t, []string{"a", "b", "c"}, "pids\n", "")
	tried = nil
	err = reach(h, 0, func(path string, cpu int) error {
		tried = append(tried, filepath.Base(path))
		if filepath.Base(path) == "a" {
			return unix.ENOENT
		}
		return nil
	})
	if err != nil || strings.Join(tried, " ") != "a b" {
		t.Errorf("a refused, b took it: %v after %v, want nil after [a b]", err, tried)
	}
}

// A root without children, or one that cannot be read, has nothing to
// probe.
func TestReachWithoutChildren(t *testing.T) {
	never := func(path string, _ int) error {
		t.Errorf("probed %s", path)
		return unix.ENOENT
	}
	if err := reach(fakeV2(t, nil, "pids\n", ""), 0, never); err != nil {
		t.Errorf("no child: %v", err)
	}
	if err := reach(Hierarchy{Mount: filepath.Join(t.TempDir(), "none"), Version: 2}, 0, never); err != nil {
		t.Errorf("no root: %v", err)
	}
}
