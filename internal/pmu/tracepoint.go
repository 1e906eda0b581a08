package pmu

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// errNoTracefs explains how to make tracepoints available.
func (fs *FS) errNoTracefs() error {
	return fmt.Errorf("no tracefs or debugfs is mounted (looked in %s); mount it with: mount -t tracefs nodev /sys/kernel/tracing",
		strings.Join(fs.tracingCandidates(), ", "))
}

// tracepointID reads events/<subsys>/<event>/id. The bool result reports
// whether the subsystem exists, to tell a misspelt tracepoint from a name
// that was never meant to be one.
func (fs *FS) tracepointID(root, subsys, event string) (uint64, string, bool, error) {
	sdir := filepath.Join(root, "events", subsys)
	path := filepath.Join(sdir, event, "id")
	s, err := readTrimmed(path)
	if err != nil {
		// Whether the subsystem exists matters only now: a stat of it
		// for every tracepoint cost a system call each.
		if st, err := os.Stat(sdir); err != nil || !st.IsDir() {
			return 0, "", false, nil
		}
		if os.IsNotExist(err) {
			return 0, path, true, fmt.Errorf("no tracepoint %s in %s", event, sdir)
		}
		return 0, path, true, err
	}
	id, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, path, true, fmt.Errorf("%s: id %q is not a number", path, s)
	}
	return id, path, true, nil
}

// tracepointNames lists the tracepoints of subsys ("subsys:event"), or
// of every subsystem when subsys is "", for suggestions.
func (fs *FS) tracepointNames(root, subsys string) []string {
	var out []string
	subs := []string{subsys}
	if subsys == "" {
		subs = nil
		ents, _ := os.ReadDir(filepath.Join(root, "events"))
		for _, e := range ents {
			if e.IsDir() {
				subs = append(subs, e.Name())
			}
		}
	}
	for _, s := range subs {
		ents, _ := os.ReadDir(filepath.Join(root, "events", s))
		for _, e := range ents {
			if e.IsDir() {
				out = append(out, s+":"+e.Name())
			}
		}
	}
	return out
}

// Nearest returns up to three of names nearest to name (edit distance,
// ignoring case, within a third of its length or 2), nearest first.
func Nearest(name string, names []string) []string {
	return nearest(name, names, func(n string) string { return n })
}

// didYouMean is "; did you mean A, B?" for the names nearest to name
// (edit distance, ignoring case), or "" when none is near.
func didYouMean(name string, names []string) string {
	s := nearest(name, names, func(n string) string { return n })
	if len(s) == 0 {
		return ""
	}
	return "; did you mean " + strings.Join(s, ", ") + "?"
}

func (fs *FS) rememberTracepoint(subsys, event string, id uint64) {
	fs.tpMu.Lock()
	defer fs.tpMu.Unlock()
	if fs.tpIDs == nil {
		fs.tpIDs = map[string]uint64{}
	}
	fs.tpIDs[subsys+"/"+event] = id
}

// cachedTracepoint is the id an earlier resolution found, if any.
func (fs *FS) cachedTracepoint(subsys, event string) (uint64, bool) {
	fs.tpMu.Lock()
	defer fs.tpMu.Unlock()
	id, ok := fs.tpIDs[subsys+"/"+event]
	return id, ok
}

// tracepointType is the tracepoint PMU's type: fixed by the kernel ABI,
// but read from sysfs when there so that tests and odd kernels agree.
// Only the type file, once per pass: this runs for every tracepoint
// configured.
func (fs *FS) tracepointType() uint32 {
	if t, ok := fs.typeOf("tracepoint"); ok {
		return t
	}
	return unix.PERF_TYPE_TRACEPOINT
}

// Tracepoints lists "subsys:event" for every tracepoint with an id file,
// sorted. It fails with advice when no tracefs is mounted.
func (fs *FS) Tracepoints() ([]string, error) {
	root, ok := fs.tracingRoot()
	if !ok {
		if d := fs.tracingDenied(); d != "" {
			return nil, fmt.Errorf("tracepoints: %s is readable by root only", d)
		}
		return nil, fmt.Errorf("tracepoints: %w", fs.errNoTracefs())
	}
	subs, err := os.ReadDir(filepath.Join(root, "events"))
	if err != nil {
		return nil, err
	}
	var names []string
	for _, s := range subs {
		if !s.IsDir() {
			continue
		}
		evs, err := os.ReadDir(filepath.Join(root, "events", s.Name()))
		if err != nil {
			continue
		}
		for _, e := range evs {
			if !e.IsDir() {
				continue
			}
			if _, err := os.Stat(filepath.Join(root, "events", s.Name(), e.Name(), "id")); err == nil {
				names = append(names, s.Name()+":"+e.Name())
			}
		}
	}
	slices.Sort(names)
	return names, nil
}
