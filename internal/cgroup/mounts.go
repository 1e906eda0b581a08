package cgroup

import (
	"errors"
	"fmt"
)

// Hierarchy is where per-cgroup counters are bound.
type Hierarchy struct {
	Mount   string // the mount point, e.g. /sys/fs/cgroup/unified
	Version int    // 2 for the unified hierarchy, 1 for v1's perf_event controller
}

func (h Hierarchy) String() string {
	if h.Version == 1 {
		return fmt.Sprintf("cgroup v1 perf_event hierarchy at %s", h.Mount)
	}
	return fmt.Sprintf("cgroup v2 hierarchy at %s", h.Mount)
}

// ErrNoHierarchy says that neither a cgroup v2 mount nor a v1 perf_event
// one was found.
var ErrNoHierarchy = errors.New("no cgroup v2 hierarchy and no cgroup v1 perf_event hierarchy is mounted")

// FindHierarchy picks the hierarchy to count in from the text of
// /proc/self/mountinfo alone: Locate without /proc/cgroups, so a v1 mount
// with the perf_event controller, else a cgroup2 mount, /sys/fs/cgroup
// preferred to others (such as the hybrid layout's /sys/fs/cgroup/unified).
func FindHierarchy(mountinfo []byte) (Hierarchy, error) {
	h, err := Locate(nil, mountinfo)
	if _, ok := err.(*Unavailable); ok {
		return Hierarchy{}, ErrNoHierarchy
	}
	return h, err
}
