package cgroup

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// maxWalk bounds the directories one scan reads. Whoever may make cgroups
// (a delegated subtree) could otherwise make every rescan of a "**"
// pattern as slow as they like.
const maxWalk = 10000

// match is a cgroup that matches a pattern: prio is the index of the
// first pattern it matches, the lower the sooner counted under the cap;
// ino is its directory's inode as the scan read it (0 if unknown).
type match struct {
	path string
	prio int
	ino  uint64
}

// node is a directory the scan read.
type node struct {
	path string
	ino  uint64
}

// scan lists the cgroups below mount that match patterns, shallower
// first, then by name. dirs are the directories whose children can still
// match: the ones to watch. A directory that vanishes during the walk is
// skipped. After maxWalk directories the walk stops, and truncated says so.
// The walk also stops, with a partial answer, once yield (if not nil)
// says so.
func scan(mount string, patterns []string, yield func() bool) (matched []match, dirs []node, truncated bool) {
	limit := depth(patterns)
	first := func(p string) int {
		for i, pat := range patterns {
			if Match(pat, p) {
				return i
			}
		}
		return -1
	}
	var st unix.Stat_t
	if unix.Stat(mount, &st) != nil {
		return nil, nil, false
	}
	root := node{"/", st.Ino}
	if i := first("/"); i >= 0 {
		matched = append(matched, match{"/", i, root.ino}) // the root cgroup: every task
	}
	var r dirReader
	level := []node{root}
	for d := 0; len(level) > 0 && (limit < 0 || d < limit); d++ {
		var next []node
		for _, parent := range level {
			if !slices.ContainsFunc(patterns, func(p string) bool { return below(p, parent.path) }) {
				continue // nothing below can match: not read, not watched
			}
			if yield != nil && yield() {
				return matched, dirs, false
			}
			if len(dirs) == maxWalk {
				return matched, dirs, true
			}
			n := len(next)
			var err error
			next, err = r.subdirs(filepath.Join(mount, parent.path), strings.TrimSuffix(parent.path, "/")+"/", next)
			if err != nil {
				next = next[:n]
				continue // removed meanwhile, or unreadable: nothing below to count
			}
			dirs = append(dirs, parent)
		}
		slices.SortFunc(next, func(a, b node) int { return strings.Compare(a.path, b.path) })
		for _, p := range next {
			if i := first(p.path); i >= 0 {
				matched = append(matched, match{p.path, i, p.ino})
			}
		}
		level = next
	}
	return matched, dirs, false
}

// choose picks at most max of matched: by pattern, the earlier first; for
// one pattern, those counted already first (so that a new cgroup never
// pushes out one of the same pattern that has values), then in matched's
// order. An earlier pattern's cgroup does push out a later one's: a user
// who makes cgroups by the thousand under a pattern low in the list must
// not blind counting for the services above it. It returns the chosen
// paths in matched's order and those left out for the cap.
func choose(matched []match, counted map[string]bool, max int) (chosen, left []string) {
	order := make([]int, len(matched))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		x, y := matched[order[a]], matched[order[b]]
		if x.prio != y.prio {
			return x.prio < y.prio
		}
		return counted[x.path] && !counted[y.path]
	})
	take := make([]bool, len(matched))
	for _, i := range order[:min(max, len(order))] {
		take[i] = true
	}
	for i, m := range matched {
		if take[i] {
			chosen = append(chosen, m.path)
		} else {
			left = append(left, m.path)
		}
	}
	return chosen, left
}

// dirReader reads directories with getdents(2), which gives each entry's
// inode (a cgroup's id) and type with no further system call, into one
// buffer it keeps.
type dirReader struct {
	buf []byte
}

// subdirs appends the subdirectories of dir to out, each named prefix +
// its name, with its inode.
func (r *dirReader) subdirs(dir, prefix string, out []node) ([]node, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return out, err
	}
	defer unix.Close(fd)
	if r.buf == nil {
		r.buf = make([]byte, 16<<10)
	}
	for {
		n, err := unix.Getdents(fd, r.buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n <= 0 {
			return out, err
		}
		// struct linux_dirent64: ino u64, off s64, reclen u16, type u8, name.
		for b := r.buf[:n]; len(b) > 0; {
			if len(b) < 19 {
				return out, fmt.Errorf("%s: short directory entry", dir)
			}
			reclen := int(binary.NativeEndian.Uint16(b[16:18]))
			if reclen < 19 || reclen > len(b) {
				return out, fmt.Errorf("%s: directory entry of %d bytes", dir, reclen)
			}
			ino, typ, name := binary.NativeEndian.Uint64(b[0:8]), b[18], b[19:reclen]
			b = b[reclen:]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			if string(name) == "." || string(name) == ".." {
				continue
			}
			switch typ {
			case unix.DT_DIR:
			case unix.DT_UNKNOWN: // a file system that does not say
				var st unix.Stat_t
				if unix.Fstatat(fd, string(name), &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
					continue
				}
			default:
				continue
			}
			out = append(out, node{prefix + string(name), ino})
		}
	}
}
