package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"perfevent/internal/perf"
)

// Unreached says that the cgroups below the root of a hierarchy have no
// perf_event controller of their own, so that nothing can count them
// apart: a perf counter bound to one fails with ENOENT (which the Tracker
// takes for a cgroup that vanished), and cgroup-switches, which the
// kernel fires only between tasks of different perf_event cgroups, never
// fires between them, so BPF counting would charge every slice to the
// wrong cgroup. Its text is the reason and the remedy, for the log,
// --check and perfevent.cgroup.counting.
//
// On cgroup v2 the kernel gives every cgroup the perf_event controller
// implicitly, but only from when the root's cgroup.subtree_control is
// first written (systemd does at boot) or a controller moves between
// hierarchies: a host that boots without systemd and never writes it has
// none below the root.
type Unreached struct{ Reason string }

func (u *Unreached) Error() string { return u.Reason }

// probeTries bounds the children of the root tried. An ENOENT from one
// removed meanwhile says nothing, and one from a child being removed may
// come while its directory is still there: the probe asks the next ones
// too, and any that takes the counter settles it.
const probeTries = 3

// Reach says whether counters can be bound to the cgroups below the root
// of h, by opening a dummy software event on cpu bound to a child of the
// root with PERF_FLAG_PID_CGROUP: one perf_event_open and close where
// they can, as the mode is chosen (up to probeTries where they cannot).
// It is nil as well when it cannot tell (no child to try, an open
// refused for another reason: the counters' own opens report those);
// else an *Unreached.
func Reach(h Hierarchy, cpu int) error {
	return reach(h, cpu, openDummy)
}

// openDummy opens and closes a dummy software event bound to the cgroup
// whose directory is path, on cpu.
func openDummy(path string, cpu int) error {
	dir, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	attr := unix.PerfEventAttr{
		Type:        unix.PERF_TYPE_SOFTWARE,
		Config:      unix.PERF_COUNT_SW_DUMMY,
		Size:        perf.AttrSize,
		Bits:        unix.PerfBitDisabled,
		Read_format: perf.ReadFormat,
	}
	fd, err := perf.OpenCgroupCPU(&attr, dir, cpu)
	if err != nil {
		return err
	}
	return fd.Close()
}

// reach is Reach with the open given: open binds a counter on cpu to the
// cgroup whose directory is its path.
func reach(h Hierarchy, cpu int, open func(path string, cpu int) error) error {
	entries, err := os.ReadDir(h.Mount)
	if err != nil {
		return nil
	}
	tried, refused := 0, ""
	for _, e := range entries {
		if !e.IsDir() || tried == probeTries {
			continue
		}
		tried++
		path := filepath.Join(h.Mount, e.Name())
		before, err := os.Stat(path)
		if err != nil {
			continue
		}
		err = open(path, cpu)
		if !errors.Is(err, unix.ENOENT) {
			return nil
		}
		if after, err := os.Stat(path); err != nil || !os.SameFile(before, after) {
			continue // removed, or removed and made again, meanwhile
		}
		if refused == "" {
			refused = e.Name()
		}
	}
	if refused == "" {
		return nil
	}
	return &Unreached{Reason: unreached(h, refused)}
}

// unreached is the reason and the remedy for a hierarchy whose cgroups
// below the root, child among them, have no perf_event controller.
func unreached(h Hierarchy, child string) string {
	if h.Version != 2 {
		return fmt.Sprintf("the cgroups below the root of the %s have no perf_event controller (a counter bound to /%s fails with ENOENT), so nothing can count them apart", h, child)
	}
	// Only enabling a controller the root does not have yet makes the
	// kernel give the implicit ones to the cgroups below: an empty write,
	// or one of a controller already there, changes nothing.
	example := "echo +pids > " + filepath.Join(h.Mount, "cgroup.subtree_control")
	if b, err := os.ReadFile(filepath.Join(h.Mount, "cgroup.controllers")); err == nil {
		have, _ := os.ReadFile(filepath.Join(h.Mount, "cgroup.subtree_control"))
		on := strings.Fields(string(have))
		example = ""
		for _, c := range strings.Fields(string(b)) {
			if !slices.Contains(on, c) {
				example = "echo +" + c + " > " + filepath.Join(h.Mount, "cgroup.subtree_control")
				break
			}
		}
	}
	how := "write a controller it does not list yet to " + filepath.Join(h.Mount, "cgroup.subtree_control")
	if example != "" {
		how += " (" + example + ")"
	}
	return fmt.Sprintf("the cgroups below the root of the %s have no perf_event controller (a counter bound to /%s fails with ENOENT), so neither BPF nor perf counters can count them apart: the kernel gives them the controller once the root's cgroup.subtree_control is first written, as systemd does at boot; %s, or run under systemd", h, child, how)
}
