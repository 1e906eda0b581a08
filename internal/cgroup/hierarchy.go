package cgroup

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"perfevent/internal/hostfs"
)

// Controller is one line of /proc/cgroups.
type Controller struct {
	Name      string
	Hierarchy int // the v1 hierarchy the controller is bound to; 0: v2, or none
	Cgroups   int
	Enabled   bool
}

// ParseControllers reads the text of /proc/cgroups:
//
//	#subsys_name	hierarchy	num_cgroups	enabled
//	perf_event	7	1	1
//
// A line that does not parse is an error naming it; the lines before it
// are kept.
func ParseControllers(name string, text []byte) (map[string]Controller, error) {
	out := map[string]Controller{}
	sc := bufio.NewScanner(bytes.NewReader(text))
	for line := 1; sc.Scan(); line++ {
		s := sc.Text()
		if strings.HasPrefix(s, "#") || strings.TrimSpace(s) == "" {
			continue
		}
		f := strings.Fields(s)
		if len(f) != 4 {
			return out, fmt.Errorf("%s:%d: %d fields, want 4 (name, hierarchy, cgroups, enabled)", name, line, len(f))
		}
		var n [3]int
		for i := range n {
			v, err := strconv.Atoi(f[i+1])
			if err != nil || v < 0 {
				return out, fmt.Errorf("%s:%d: field %d of %s is %q, not a count", name, line, i+2, f[0], f[i+1])
			}
			n[i] = v
		}
		out[f[0]] = Controller{Name: f[0], Hierarchy: n[0], Cgroups: n[1], Enabled: n[2] != 0}
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}

// Mount is a cgroup filesystem mounted, from /proc/self/mountinfo.
type Mount struct {
	Point       string   // unescaped
	Version     int      // 1 (fstype cgroup) or 2 (cgroup2)
	Controllers []string // v1: the super options naming controllers (and others, such as rw)
}

// ParseMounts returns the cgroup and cgroup2 mounts of mountinfo's text,
// in its order (hostfs.ParseMountinfo: lines of another shape are
// skipped).
func ParseMounts(mountinfo []byte) ([]Mount, error) {
	all, err := hostfs.ParseMountinfo("mountinfo", mountinfo)
	var out []Mount
	for _, mi := range all {
		m := Mount{Point: mi.Point}
		switch mi.FSType {
		case "cgroup2":
			m.Version = 2
		case "cgroup":
			m.Version = 1
			if mi.SuperOptions != "" {
				m.Controllers = strings.Split(mi.SuperOptions, ",")
			}
		default:
			continue
		}
		out = append(out, m)
	}
	return out, err
}

// Unavailable says why no hierarchy can count per cgroup. Its text is
// the reason, for the log, --check and perfevent.cgroup.mode.
type Unavailable struct{ Reason string }

func (u *Unavailable) Error() string { return u.Reason }

// Locate finds the hierarchy that owns the perf_event controller, from
// the texts of /proc/cgroups (controllers; nil when it could not be read)
// and /proc/self/mountinfo. A controller bound to a v1 hierarchy counts
// only there, whatever else is mounted (the hybrid layout mounts cgroup2
// at /sys/fs/cgroup/unified too, where a counter would open and count
// nothing); one on no v1 hierarchy counts on v2. The error is an
// *Unavailable when the machine has no hierarchy to count on.
func Locate(controllers, mountinfo []byte) (Hierarchy, error) {
	mounts, err := ParseMounts(mountinfo)
	if err != nil {
		return Hierarchy{}, err
	}
	var v1, v2 []string
	for _, m := range mounts {
		switch {
		case m.Version == 2:
			v2 = append(v2, m.Point)
		case hasController(m.Controllers, "perf_event"):
			v1 = append(v1, m.Point)
		}
	}
	bound := 0 // the v1 hierarchy id, if known
	if controllers != nil {
		cs, err := ParseControllers("/proc/cgroups", controllers)
		c, ok := cs["perf_event"]
		switch {
		case !ok && err != nil:
			return Hierarchy{}, err
		case !ok:
			return Hierarchy{}, &Unavailable{"the kernel has no perf_event cgroup controller (/proc/cgroups does not list it)"}
		case !c.Enabled:
			return Hierarchy{}, &Unavailable{"the perf_event cgroup controller is disabled (cgroup_disable=perf_event on the kernel command line)"}
		}
		bound = c.Hierarchy
	}
	switch {
	case len(v1) > 0:
		// One hierarchy holds the controller; more than one mount of it
		// are bind mounts or the same hierarchy mounted twice.
		return Hierarchy{Mount: v1[0], Version: 1}, nil
	case bound != 0:
		return Hierarchy{}, &Unavailable{fmt.Sprintf("perf_event is bound to the cgroup v1 hierarchy %d, which is not mounted (it stays bound while it has cgroups, or for a while after its unmount)", bound)}
	case len(v2) == 0:
		return Hierarchy{}, &Unavailable{ErrNoHierarchy.Error()}
	}
	for _, m := range v2 {
		if m == "/sys/fs/cgroup" {
			return Hierarchy{Mount: m, Version: 2}, nil
		}
	}
	return Hierarchy{Mount: v2[0], Version: 2}, nil
}

// LocateOn is Locate on the files of fs.
func LocateOn(fs hostfs.FS) (Hierarchy, error) {
	info, err := os.ReadFile(fs.MountinfoFile())
	if err != nil {
		return Hierarchy{}, err
	}
	controllers, err := os.ReadFile(fs.CgroupsFile())
	if err != nil {
		controllers = nil // mountinfo alone still finds a mounted hierarchy
	}
	return Locate(controllers, info)
}

// Mode is the hierarchy, or why there is none, as perfevent.cgroup.mode
// says it: "v2 /sys/fs/cgroup", "v1 /sys/fs/cgroup/perf_event",
// "unavailable: REASON".
func Mode(h Hierarchy, err error) string {
	if err != nil {
		return "unavailable: " + err.Error()
	}
	return fmt.Sprintf("v%d %s", h.Version, h.Mount)
}

func hasController(opts []string, want string) bool {
	for _, o := range opts {
		if o == want {
			return true
		}
	}
	return false
}
