package cgroup

import (
	"errors"
	"fmt"
	"strings"
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

// unescape undoes mountinfo's octal escapes of space, tab, newline and
// backslash (\040 and so on).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1:i+4]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(s string) bool {
	if len(s) != 3 {
		return false
	}
	for i := 0; i < 3; i++ {
		if s[i] < '0' || s[i] > '7' {
			return false
		}
	}
	return true
}
