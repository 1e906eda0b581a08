package hostfs

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestDefaultHonoursCEnvironment(t *testing.T) {
	t.Setenv("SYSFS_PREFIX", "")
	t.Setenv("SYSFS_MOUNT_POINT", "")
	fs := Default()
	if fs != (FS{}) || fs.OnlineFile() != "/sys/devices/system/cpu/online" || fs.LocksFile() != "/proc/locks" ||
		fs.MountinfoFile() != "/proc/self/mountinfo" || fs.CgroupsFile() != "/proc/cgroups" || fs.CPUInfoFile() != "/proc/cpuinfo" {
		t.Errorf("Default() = %+v: %s %s %s %s %s", fs, fs.OnlineFile(), fs.LocksFile(), fs.MountinfoFile(), fs.CgroupsFile(), fs.CPUInfoFile())
	}
	t.Setenv("SYSFS_MOUNT_POINT", "/tmp/a")
	if fs := Default(); fs.Sys != "/tmp/a" || fs.PMUDir("cpu") != "/tmp/a/bus/event_source/devices/cpu" {
		t.Errorf("with SYSFS_MOUNT_POINT: %+v, PMUDir(cpu) %s", fs, fs.PMUDir("cpu"))
	}
	t.Setenv("SYSFS_PREFIX", "/tmp/b")
	if fs := Default(); fs.Sys != "/tmp/b" || fs.Proc != "" {
		t.Errorf("with SYSFS_PREFIX: %+v", fs)
	}
}

func TestPaths(t *testing.T) {
	fs := FS{Sys: "/x/sys", Proc: "/x/proc"}
	for got, want := range map[string]string{
		fs.OnlineFile():     "/x/sys/devices/system/cpu/online",
		fs.CPUDir(12):       "/x/sys/devices/system/cpu/cpu12",
		fs.NodesDir():       "/x/sys/devices/system/node",
		fs.PMUDevices():     "/x/sys/bus/event_source/devices",
		fs.PMUDir("msr"):    "/x/sys/bus/event_source/devices/msr",
		fs.CPUInfoFile():    "/x/proc/cpuinfo",
		fs.MountinfoFile():  "/x/proc/self/mountinfo",
		fs.CgroupsFile():    "/x/proc/cgroups",
		fs.LocksFile():      "/x/proc/locks",
		fs.ParanoidFile():   "/x/proc/sys/kernel/perf_event_paranoid",
		fs.ProcPath("a/b"):  "/x/proc/a/b",
		fs.SysPath("a", ""): "/x/sys/a",
	} {
		if got != want {
			t.Errorf("%s, want %s", got, want)
		}
	}
	fs.CPUInfo = "/y/cpuinfo"
	if got := fs.CPUInfoFile(); got != "/y/cpuinfo" {
		t.Errorf("CPUInfoFile with CPUInfo set = %s", got)
	}
}

func TestOnlineCPUs(t *testing.T) {
	dir := t.TempDir()
	fs := FS{Sys: dir}
	if err := os.MkdirAll(filepath.Dir(fs.OnlineFile()), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(fs.OnlineFile(), []byte("0-2,8\n"), 0o644)
	if cpus, err := fs.OnlineCPUs(); err != nil || !reflect.DeepEqual(cpus, []int{0, 1, 2, 8}) {
		t.Errorf("OnlineCPUs = %v, %v", cpus, err)
	}
	os.WriteFile(fs.OnlineFile(), []byte("0-x\n"), 0o644)
	if _, err := fs.OnlineCPUs(); err == nil || !strings.HasPrefix(err.Error(), fs.OnlineFile()+": ") {
		t.Errorf("a bad list: err = %v, want one naming %s", err, fs.OnlineFile())
	}
	os.Remove(fs.OnlineFile())
	if _, err := fs.OnlineCPUs(); !os.IsNotExist(err) {
		t.Errorf("no list: err = %v", err)
	}
}

// The running machine's table parses whole: every line is a mount, and
// the table holds / and /proc.
func TestMountsOfThisMachine(t *testing.T) {
	raw, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Skipf("needs /proc/self/mountinfo: %v", err)
	}
	ms, err := FS{}.Mounts()
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Count(string(raw), "\n")
	if len(ms) < lines-1 || len(ms) > lines+1 { // a mount may come or go between the reads
		t.Errorf("%d mounts from %d lines", len(ms), lines)
	}
	var root, proc bool
	for _, m := range ms {
		root = root || m.Point == "/"
		proc = proc || m.Point == "/proc" && m.FSType == "proc"
	}
	if !root || !proc {
		t.Errorf("no / (%v) or no /proc (%v) in %+v", root, proc, ms)
	}
	if _, err := (FS{Proc: t.TempDir()}).Mounts(); !os.IsNotExist(err) {
		t.Errorf("a procfs without mountinfo: err = %v", err)
	}
}
