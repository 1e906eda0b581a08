package cgroup

import (
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// maxWalk bounds the directories one scan reads. Whoever may make cgroups
// (a delegated subtree) could otherwise make every rescan of a "**"
// pattern as slow as they like.
const maxWalk = 10000

// match is a cgroup that matches a pattern: prio is the index of the
// first pattern it matches, the lower the sooner counted under the cap.
type match struct {
	path string
	prio int
}

// scan lists the cgroups below mount that match patterns, shallower
// first, then by name. dirs are the directories whose children can still
// match: the ones to watch. A directory that vanishes during the walk is
// skipped. After maxWalk directories the walk stops, and truncated says so.
// The walk also stops, with a partial answer, once yield (if not nil)
// says so.
func scan(mount string, patterns []string, yield func() bool) (matched []match, dirs []string, truncated bool) {
	limit := depth(patterns)
	first := func(p string) int {
		for i, pat := range patterns {
			if Match(pat, p) {
				return i
			}
		}
		return -1
	}
	if i := first("/"); i >= 0 {
		matched = append(matched, match{"/", i}) // the root cgroup: every task
	}
	level := []string{"/"}
	for d := 0; len(level) > 0 && (limit < 0 || d < limit); d++ {
		var next []string
		for _, parent := range level {
			if !slices.ContainsFunc(patterns, func(p string) bool { return below(p, parent) }) {
				continue // nothing below can match: not read, not watched
			}
			if yield != nil && yield() {
				return matched, dirs, false
			}
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
			if i := first(p); i >= 0 {
				matched = append(matched, match{p, i})
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
