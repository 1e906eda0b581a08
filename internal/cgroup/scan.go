package cgroup

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// IDs numbers cgroup paths for the life of the agent: a path keeps its id
// (also when it is removed and created again, as PCP's cgroup.* instances
// do), and no id is ever given to another path. Share one IDs between the
// Trackers of successive reloads.
type IDs struct {
	mu   sync.Mutex
	ids  map[string]int32
	next int32
}

// NewIDs returns an empty numbering; the first path gets id 0.
func NewIDs() *IDs { return &IDs{ids: map[string]int32{}} }

// ID returns the id of path, numbering it if it is new.
func (n *IDs) ID(path string) int32 {
	n.mu.Lock()
	defer n.mu.Unlock()
	id, ok := n.ids[path]
	if !ok {
		id = n.next
		n.next++
		n.ids[path] = id
	}
	return id
}

// maxWalk bounds the directories one scan reads. Whoever may make cgroups
// (a delegated subtree) could otherwise make every rescan of a "**"
// pattern as slow as they like.
const maxWalk = 10000

// scan lists the cgroups below mount that match patterns, by path, in the
// order they are taken under a cap: shallower first, then by name. dirs
// are the directories whose children can still match: the ones to watch.
// A directory that vanishes during the walk is skipped. After maxWalk
// directories the walk stops, and truncated says so.
func scan(mount string, patterns []string) (matched, dirs []string, truncated bool) {
	limit := depth(patterns)
	for _, pat := range patterns {
		if Match(pat, "/") {
			matched = append(matched, "/") // the root cgroup: every task
			break
		}
	}
	level := []string{"/"}
	for d := 0; len(level) > 0 && (limit < 0 || d < limit); d++ {
		var next []string
		for _, parent := range level {
			if len(dirs) == maxWalk {
				return matched, dirs, true
			}
			ents, err := os.ReadDir(filepath.Join(mount, parent))
			if err != nil {
				continue // removed meanwhile, or unreadable: nothing below to count
			}
			dirs = append(dirs, parent)
			for _, e := range ents {
				if !e.IsDir() {
					continue
				}
				next = append(next, strings.TrimSuffix(parent, "/")+"/"+e.Name())
			}
		}
		sort.Strings(next)
		for _, p := range next {
			for _, pat := range patterns {
				if Match(pat, p) {
					matched = append(matched, p)
					break
				}
			}
		}
		level = next
	}
	return matched, dirs, false
}

// choose picks at most max of matched, keeping those counted already
// (so that a new cgroup never pushes out one that has values), then
// adding new ones in matched's order. It returns the chosen paths in
// matched's order and those left out for the cap.
func choose(matched []string, counted map[string]bool, max int) (chosen, left []string) {
	n := 0
	for _, p := range matched {
		if counted[p] {
			n++
		}
	}
	for _, p := range matched {
		switch {
		case counted[p]:
			chosen = append(chosen, p)
		case n < max:
			chosen = append(chosen, p)
			n++
		default:
			left = append(left, p)
		}
	}
	return chosen, left
}
