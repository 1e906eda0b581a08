package cgroup

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"perfevent/internal/hostfs"
)

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Locate follows the perf_event controller on the layouts of real
// machines, and says why when no hierarchy has it.
func TestLocate(t *testing.T) {
	ubuntu := string(fixture(t, "ubuntu2004.mountinfo"))
	var unmounted []string // Ubuntu's, with the v1 perf_event mount gone
	for _, l := range strings.SplitAfter(ubuntu, "\n") {
		if !strings.Contains(l, "/sys/fs/cgroup/perf_event ") {
			unmounted = append(unmounted, l)
		}
	}
	bound := string(fixture(t, "ubuntu2004.cgroups"))
	free := strings.Replace(bound, "perf_event\t3\t", "perf_event\t0\t", 1)
	cases := []struct {
		name, cgroups, mountinfo string
		want                     string // Mode
	}{
		{"RHEL 8", string(fixture(t, "rhel8.cgroups")), string(fixture(t, "rhel8.mountinfo")), "v1 /sys/fs/cgroup/perf_event"},
		// cgroup2 at /sys/fs/cgroup/unified too, where nothing would count.
		{"Ubuntu 20.04", bound, ubuntu, "v1 /sys/fs/cgroup/perf_event"},
		{"CentOS 7, co-mounted with cpu", string(fixture(t, "centos7.cgroups")), string(fixture(t, "centos7.mountinfo")), "v1 /sys/fs/cgroup/cpu,perf_event"},
		{"Debian 12", string(fixture(t, "debian12.cgroups")), string(fixture(t, "debian12.mountinfo")), "v2 /sys/fs/cgroup"},
		{"bound, unmounted", bound, strings.Join(unmounted, ""),
			"unavailable: perf_event is bound to the cgroup v1 hierarchy 3, which is not mounted (it stays bound while it has cgroups, or for a while after its unmount)"},
		{"unbound, hybrid", free, strings.Join(unmounted, ""), "v2 /sys/fs/cgroup/unified"},
		{"no /proc/cgroups", "", ubuntu, "v1 /sys/fs/cgroup/perf_event"},
		{"disabled", strings.Replace(bound, "perf_event\t3\t1\t1", "perf_event\t3\t1\t0", 1), ubuntu,
			"unavailable: the perf_event cgroup controller is disabled (cgroup_disable=perf_event on the kernel command line)"},
		{"no controller", "#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpu\t0\t1\t1\n", ubuntu,
			"unavailable: the kernel has no perf_event cgroup controller (/proc/cgroups does not list it)"},
		{"nothing mounted", free, "22 97 0:21 / /sys rw shared:2 - sysfs sysfs rw\n", "unavailable: " + ErrNoHierarchy.Error()},
		// A mount point with a space, escaped as mountinfo does.
		{"escaped", "", "35 30 0:31 / /cg\\040perf rw - cgroup none rw,perf_event,cpu\n", "v1 /cg perf"},
	}
	for _, c := range cases {
		var controllers []byte
		if c.cgroups != "" {
			controllers = []byte(c.cgroups)
		}
		h, err := Locate(controllers, []byte(c.mountinfo))
		if got := Mode(h, err); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
		var u *Unavailable
		if strings.HasPrefix(c.want, "unavailable") != errors.As(err, &u) {
			t.Errorf("%s: error %v (%T), want an *Unavailable only when unavailable", c.name, err, err)
		}
	}
}

func TestParseControllers(t *testing.T) {
	cs, err := ParseControllers("/proc/cgroups", fixture(t, "rhel8.cgroups"))
	if err != nil {
		t.Fatal(err)
	}
	if want := (Controller{Name: "perf_event", Hierarchy: 11, Cgroups: 1, Enabled: true}); cs["perf_event"] != want {
		t.Errorf("perf_event = %+v, want %+v", cs["perf_event"], want)
	}
	if len(cs) != 13 {
		t.Errorf("%d controllers, want 13", len(cs))
	}
	for _, c := range []struct{ text, err string }{
		{"#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpu\t1\t1\n", "/proc/cgroups:2: 3 fields, want 4 (name, hierarchy, cgroups, enabled)"},
		{"cpu\t1\t1\t1\nperf_event\tx\t1\t1\n", `/proc/cgroups:2: field 2 of perf_event is "x", not a count`},
	} {
		if _, err := ParseControllers("/proc/cgroups", []byte(c.text)); err == nil || err.Error() != c.err {
			t.Errorf("%q: error %v, want %s", c.text, err, c.err)
		}
	}
}

// LocateOn reads mountinfo and /proc/cgroups below the FS's procfs.
func TestLocateOn(t *testing.T) {
	proc := t.TempDir()
	fs := hostfs.FS{Proc: proc}
	if _, err := LocateOn(fs); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("no mountinfo: %v", err)
	}
	if err := os.MkdirAll(filepath.Dir(fs.MountinfoFile()), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(fs.MountinfoFile(), fixture(t, "ubuntu2004.mountinfo"), 0o644)
	bound := strings.Replace(string(fixture(t, "ubuntu2004.cgroups")), "perf_event\t3\t1\t1", "perf_event\t3\t1\t0", 1)
	os.WriteFile(fs.CgroupsFile(), []byte(bound), 0o644)
	if got := Mode(LocateOn(fs)); !strings.HasPrefix(got, "unavailable: the perf_event cgroup controller is disabled") {
		t.Errorf("with %s disabling perf_event: %q", fs.CgroupsFile(), got)
	}
	os.Remove(fs.CgroupsFile())
	if got := Mode(LocateOn(fs)); got != "v1 /sys/fs/cgroup/perf_event" {
		t.Errorf("mountinfo alone: %q", got)
	}
}

func TestParseMounts(t *testing.T) {
	ms, err := ParseMounts(fixture(t, "centos7.mountinfo"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 11 {
		t.Fatalf("%d cgroup mounts, want 11: %+v", len(ms), ms)
	}
	if m := ms[3]; m.Point != "/sys/fs/cgroup/cpu,perf_event" || m.Version != 1 || !hasController(m.Controllers, "cpu") || !hasController(m.Controllers, "perf_event") {
		t.Errorf("mount 4: %+v", m)
	}
	ms, _ = ParseMounts(fixture(t, "ubuntu2004.mountinfo"))
	if m := ms[0]; m.Point != "/sys/fs/cgroup/unified" || m.Version != 2 {
		t.Errorf("mount 1 of Ubuntu's: %+v", m)
	}
}
