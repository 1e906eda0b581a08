package cgroup

import (
	"bufio"
	"bytes"
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
// /proc/self/mountinfo: a cgroup2 mount, /sys/fs/cgroup preferred to
// others (such as the hybrid layout's /sys/fs/cgroup/unified), else a v1
// cgroup mount with the perf_event controller.
func FindHierarchy(mountinfo []byte) (Hierarchy, error) {
	var v2, v1 []string
	sc := bufio.NewScanner(bytes.NewReader(mountinfo))
	for sc.Scan() {
		// id parent major:minor root mount-point options [optional...] - fstype source super-options
		line := sc.Text()
		sep := strings.Index(line, " - ")
		if sep < 0 {
			continue
		}
		pre, post := strings.Fields(line[:sep]), strings.Fields(line[sep+3:])
		if len(pre) < 5 || len(post) < 1 {
			continue
		}
		mount := unescape(pre[4])
		switch post[0] {
		case "cgroup2":
			v2 = append(v2, mount)
		case "cgroup":
			if len(post) >= 3 && hasOption(post[2], "perf_event") {
				v1 = append(v1, mount)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return Hierarchy{}, fmt.Errorf("reading mountinfo: %w", err)
	}
	for _, m := range v2 {
		if m == "/sys/fs/cgroup" {
			return Hierarchy{Mount: m, Version: 2}, nil
		}
	}
	if len(v2) > 0 {
		return Hierarchy{Mount: v2[0], Version: 2}, nil
	}
	if len(v1) > 0 {
		return Hierarchy{Mount: v1[0], Version: 1}, nil
	}
	return Hierarchy{}, ErrNoHierarchy
}

func hasOption(opts, want string) bool {
	for _, o := range strings.Split(opts, ",") {
		if o == want {
			return true
		}
	}
	return false
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
