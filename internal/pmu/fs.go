package pmu

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"perfevent/internal/hostfs"
	"perfevent/internal/pfm"
)

// FS is where the package reads the kernel's description of its PMUs.
// Construct it with Default or fill in the fields; the zero value of the
// unexported state is ready to use. An FS is safe for concurrent use.
type FS struct {
	// FS is where sysfs and procfs are. PMUs are read from its
	// PMUDevices, online CPUs from its OnlineFile; of procfs, only
	// cpuinfo and mountinfo are read.
	hostfs.FS
	// IntelArch is what CPUID leaf 0xa says, which libpfm4's ix86arch
	// PMU depends on and /proc/cpuinfo does not show; Default reads it
	// from this CPU. Nil stands for libpfm4's assumption when it cannot
	// ask (version 3, every architectural event).
	IntelArch *pfm.IntelArchPerfmon
	// Tracing lists candidate tracefs roots, tried in order. When empty,
	// the tracefs and debugfs mounts listed in mountinfo are tried,
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

// Default returns an FS for the running system, at hostfs.Default.
func Default() *FS {
	return &FS{FS: hostfs.Default(), IntelArch: hostIntelArch()}
}

// devicesDir is the directory holding one entry per registered PMU.
func (fs *FS) devicesDir() string {
	return fs.PMUDevices()
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
	mounts, _ := fs.Mounts() // without them, the usual places
	for _, m := range mounts {
		switch m.FSType {
		case "tracefs":
			add(m.Point)
		case "debugfs":
			add(filepath.Join(m.Point, "tracing"))
		}
	}
	add(fs.SysPath("kernel", "tracing"))
	add(fs.SysPath("kernel", "debug", "tracing"))
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
	b, err := hostfs.ReadFile(path)
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
