package pmu

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"perfevent/internal/pfm"
)

// FS is where the package reads the kernel's description of its PMUs.
// Construct it with Default or fill in the fields; the zero value of the
// unexported state is ready to use. An FS is safe for concurrent use.
type FS struct {
	// Sys is the sysfs mount point, normally "/sys". PMUs are read from
	// <Sys>/bus/event_source/devices and online CPUs from
	// <Sys>/devices/system/cpu/online.
	Sys string
	// Proc is the procfs mount point, normally "/proc". Only cpuinfo and
	// mounts are read.
	Proc string
	// IntelArch is what CPUID leaf 0xa says, which libpfm4's ix86arch
	// PMU depends on and /proc/cpuinfo does not show; Default reads it
	// from this CPU. Nil stands for libpfm4's assumption when it cannot
	// ask (version 3, every architectural event).
	IntelArch *pfm.IntelArchPerfmon
	// Tracing lists candidate tracefs roots, tried in order. When empty,
	// the tracefs and debugfs mounts listed in <Proc>/mounts are tried,
	// then <Sys>/kernel/tracing and <Sys>/kernel/debug/tracing.
	Tracing []string

	// tpIDs remembers every tracepoint id this FS resolved, by
	// "subsys/event". The agent resolves its configuration as root at
	// start-up and again, as its own user, at each reload; tracefs is
	// normally root's alone (0700), so a reload can only get the ids
	// that start-up saw from here. See resolveTracepoint.
	tpMu   sync.Mutex
	tpIDs  map[string]uint64
	tpRoot string // the tracefs root last found; see tracingRoot

	once sync.Once
	plm  plm // privilege levels the core PMU can filter; see supportedPLM

	passMu sync.Mutex
	pass   *pass // the configuration pass under way; see Pass

	cpuOnce sync.Once
	cpu     CPUInfo // the first processor of <Proc>/cpuinfo; see CPUInfo
	cpuErr  error

	detectOnce sync.Once
	active     []*pfm.PMU // libpfm4's active PMUs; see LibpfmPMUs
	arch       string     // their libpfm4 build

	vendorOnce sync.Once
	vendor     []*vendorPMU // the vendors' PMUs found here; see VendorPMUs
}

// Default returns an FS for the running system. Like the C agent it
// honours SYSFS_PREFIX (used by its parse_events.c for PMU devices) and
// SYSFS_MOUNT_POINT (used by its architecture.c for CPU lists) so that its
// test harnesses work unchanged; both name the sysfs mount point, and
// SYSFS_PREFIX wins when both are set.
func Default() *FS {
	sys := "/sys"
	if v := os.Getenv("SYSFS_MOUNT_POINT"); v != "" {
		sys = v
	}
	if v := os.Getenv("SYSFS_PREFIX"); v != "" {
		sys = v
	}
	return &FS{Sys: sys, Proc: "/proc", IntelArch: hostIntelArch()}
}

func (fs *FS) sysPath(elem ...string) string {
	root := fs.Sys
	if root == "" {
		root = "/sys"
	}
	return filepath.Join(append([]string{root}, elem...)...)
}

func (fs *FS) procPath(elem ...string) string {
	root := fs.Proc
	if root == "" {
		root = "/proc"
	}
	return filepath.Join(append([]string{root}, elem...)...)
}

// devicesDir is the directory holding one entry per registered PMU.
func (fs *FS) devicesDir() string {
	return fs.sysPath("bus", "event_source", "devices")
}

// tracingCandidates lists the places a tracefs may be found, in the order
// they are tried.
func (fs *FS) tracingCandidates() []string {
	if len(fs.Tracing) > 0 {
		return fs.Tracing
	}
	var dirs []string
	seen := map[string]bool{}
	add := func(d string) {
		if !seen[d] {
			seen[d] = true
			dirs = append(dirs, d)
		}
	}
	// A tracefs mounted somewhere unusual is still found through mounts.
	if f, err := os.Open(fs.procPath("mounts")); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 3 {
				continue
			}
			switch fields[2] {
			case "tracefs":
				add(fields[1])
			case "debugfs":
				add(filepath.Join(fields[1], "tracing"))
			}
		}
	}
	add(fs.sysPath("kernel", "tracing"))
	add(fs.sysPath("kernel", "debug", "tracing"))
	return dirs
}

// tracingRoot returns the first candidate that holds an events directory.
// The last root found is tried first: this runs for every tracepoint
// configured, and finding the candidates means reading the mount table.
func (fs *FS) tracingRoot() (string, bool) {
	fs.tpMu.Lock()
	last := fs.tpRoot
	fs.tpMu.Unlock()
	if last != "" && hasEvents(last) {
		return last, true
	}
	for _, d := range fs.tracingCandidates() {
		if hasEvents(d) {
			fs.tpMu.Lock()
			fs.tpRoot = d
			fs.tpMu.Unlock()
			return d, true
		}
	}
	return "", false
}

func hasEvents(root string) bool {
	st, err := os.Stat(filepath.Join(root, "events"))
	return err == nil && st.IsDir()
}

// tracingDenied names the first candidate that exists but that this
// process may not search (tracefs is mode 0700, root's), or "".
func (fs *FS) tracingDenied() string {
	for _, d := range fs.tracingCandidates() {
		if _, err := os.Stat(filepath.Join(d, "events")); errors.Is(err, os.ErrPermission) {
			return d
		}
	}
	return ""
}

// readTrimmed reads a small sysfs or procfs attribute file.
func readTrimmed(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// isPathElem reports whether s is one plain path element, safe to join
// below a sysfs or tracefs directory.
func isPathElem(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsAny(s, "/\x00")
}
