// Package hostfs says where the kernel's filesystems of this machine are
// mounted: sysfs and procfs. One FS is built at start-up, from the
// environment, and handed to every package that reads them, so that a
// test points all of them at a fake tree by filling in one value, and the
// paths that several packages read are spelt once, here.
package hostfs

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"perfevent/internal/cpulist"
)

// FS is where the kernel's filesystems are. The zero value is the running
// system's usual mount points.
type FS struct {
	// Sys is the sysfs mount point; "" is "/sys".
	Sys string
	// Proc is the procfs mount point; "" is "/proc".
	Proc string
	// CPUInfo, if set, is read instead of <Proc>/cpuinfo. Tests describe
	// another CPU with it while reading the rest of /proc (locks,
	// mounts, processes) from the machine they run on.
	CPUInfo string
}

// Default is the running system's FS. Like the C agent it honours
// SYSFS_PREFIX (used by its parse_events.c for PMU devices) and
// SYSFS_MOUNT_POINT (used by its architecture.c for CPU lists), so that
// its test harnesses work unchanged; both name the sysfs mount point, and
// SYSFS_PREFIX wins when both are set.
func Default() FS {
	var fs FS
	if v := os.Getenv("SYSFS_MOUNT_POINT"); v != "" {
		fs.Sys = v
	}
	if v := os.Getenv("SYSFS_PREFIX"); v != "" {
		fs.Sys = v
	}
	return fs
}

// SysPath joins elem below the sysfs mount point.
func (fs FS) SysPath(elem ...string) string {
	root := fs.Sys
	if root == "" {
		root = "/sys"
	}
	return filepath.Join(append([]string{root}, elem...)...)
}

// ProcPath joins elem below the procfs mount point.
func (fs FS) ProcPath(elem ...string) string {
	root := fs.Proc
	if root == "" {
		root = "/proc"
	}
	return filepath.Join(append([]string{root}, elem...)...)
}

// OnlineFile is the kernel's list of online CPUs.
func (fs FS) OnlineFile() string { return fs.SysPath("devices", "system", "cpu", "online") }

// OnlineCPUs returns the kernel ids of the online CPUs, from OnlineFile.
func (fs FS) OnlineCPUs() ([]int, error) {
	path := fs.OnlineFile()
	b, err := ReadFile(path)
	if err != nil {
		return nil, err
	}
	cpus, err := cpulist.Parse(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cpus, nil
}

// CPUDir is the sysfs directory of one CPU (topology, cache, ...).
func (fs FS) CPUDir(cpu int) string {
	return fs.SysPath("devices", "system", "cpu", "cpu"+strconv.Itoa(cpu))
}

// NodesDir holds the NUMA nodes, node0, node1, ...
func (fs FS) NodesDir() string { return fs.SysPath("devices", "system", "node") }

// PMUDevices is the directory holding one entry per registered PMU.
func (fs FS) PMUDevices() string { return fs.SysPath("bus", "event_source", "devices") }

// PMUDir is the sysfs directory of the PMU name (type, format, events, ...).
func (fs FS) PMUDir(name string) string { return filepath.Join(fs.PMUDevices(), name) }

// CPUInfoFile is /proc/cpuinfo, or CPUInfo when set.
func (fs FS) CPUInfoFile() string {
	if fs.CPUInfo != "" {
		return fs.CPUInfo
	}
	return fs.ProcPath("cpuinfo")
}

// MountinfoFile is this process's mount table.
func (fs FS) MountinfoFile() string { return fs.ProcPath("self", "mountinfo") }

// Mounts reads and parses MountinfoFile.
func (fs FS) Mounts() ([]Mount, error) {
	path := fs.MountinfoFile()
	b, err := ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseMountinfo(path, b)
}

// CgroupsFile lists the kernel's cgroup controllers and their v1
// hierarchies.
func (fs FS) CgroupsFile() string { return fs.ProcPath("cgroups") }

// LocksFile lists every file lock in the system, with its owner.
func (fs FS) LocksFile() string { return fs.ProcPath("locks") }

// ParanoidFile is the sysctl kernel.perf_event_paranoid, which decides
// what an unprivileged perf_event_open may count.
func (fs FS) ParanoidFile() string { return fs.ProcPath("sys", "kernel", "perf_event_paranoid") }
