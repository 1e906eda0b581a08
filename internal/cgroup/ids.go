package cgroup

import (
	"sync"

	"golang.org/x/sys/unix"
)

// DefaultKeep is how many cgroups that went away IDs remembers, their
// instance id and last values, for when the same path comes back.
const DefaultKeep = 4096

// IDs numbers cgroup paths and remembers each one's last values, so that an
// instance never goes back: a path keeps its id, and its values continue,
// across reloads, CPU hotplug, perfalloc, and its cgroup being removed and
// made again (a service restarted), as PCP's cgroup.* instances keep
// theirs. Share one IDs between the Trackers of successive reloads.
//
// What it holds is bounded: the live cgroups, and the last DefaultKeep
// that went away. A path forgotten that way starts again from zero if it
// returns, and its id goes back to a pool from which new paths are
// numbered, oldest freed first, so that ids stay below the most cgroups
// ever counted at once plus DefaultKeep, however many come and go over
// weeks. A live cgroup's id is never given to another.
type IDs struct {
	mu      sync.Mutex
	by      map[string]*idEntry
	gone    []goneRef // paths no longer held, oldest first; may hold stale refs
	nGone   int       // entries with no holder
	free    []int32   // ids of forgotten paths, oldest first
	next    int32
	keep    int
	counter uint64
}

type idEntry struct {
	id      int32
	holders int                 // members of any Tracker counting this path
	last    map[valueKey]uint64 // the last values of its instance
	goneAt  uint64              // which release left it unheld
}

type goneRef struct {
	path string
	at   uint64
}

// valueKey names one event as configured, so that a value carries only to
// the same event (a reload may change what an event name means).
type valueKey struct {
	name string
	attr unix.PerfEventAttr
}

// NewIDs returns an empty numbering; the first path gets id 0.
func NewIDs() *IDs { return NewIDsKeeping(DefaultKeep) }

// NewIDsKeeping is NewIDs remembering keep cgroups that went away.
func NewIDsKeeping(keep int) *IDs {
	return &IDs{by: map[string]*idEntry{}, keep: max(keep, 0)}
}

// ID returns the id of path, numbering it if it is new. It holds nothing.
func (n *IDs) ID(path string) int32 {
	id, _ := n.acquire(path)
	n.release(path, nil)
	return id
}

// Len is the number of paths remembered, live or gone.
func (n *IDs) Len() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.by)
}

// acquire holds path's id for a counted cgroup and returns it with the
// last values its instance served (nil if none).
func (n *IDs) acquire(path string) (int32, map[valueKey]uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	e := n.by[path]
	if e == nil {
		e = &idEntry{id: n.newID()}
		n.by[path] = e
	} else if e.holders == 0 {
		n.nGone--
	}
	e.holders++
	last := make(map[valueKey]uint64, len(e.last))
	for k, v := range e.last {
		last[k] = v
	}
	return e.id, last
}

func (n *IDs) newID() int32 {
	if len(n.free) > 0 {
		id := n.free[0]
		n.free = n.free[1:]
		return id
	}
	id := n.next
	n.next++
	return id
}

// release lets go of what acquire held, with the instance's values as
// served last. An instance's values only grow, so each is kept as the
// largest any holder reported.
func (n *IDs) release(path string, last map[valueKey]uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	e := n.by[path]
	if e == nil || e.holders == 0 {
		return
	}
	for k, v := range last {
		if e.last == nil {
			e.last = map[valueKey]uint64{}
		}
		e.last[k] = max(e.last[k], v)
	}
	e.holders--
	if e.holders > 0 {
		return
	}
	n.counter++
	e.goneAt = n.counter
	n.gone = append(n.gone, goneRef{path, e.goneAt})
	n.nGone++
	n.forget()
}

// forget drops the oldest unheld paths beyond keep.
func (n *IDs) forget() {
	for n.nGone > n.keep && len(n.gone) > 0 {
		g := n.gone[0]
		n.gone = n.gone[1:]
		if e := n.by[g.path]; e != nil && e.holders == 0 && e.goneAt == g.at {
			delete(n.by, g.path)
			n.free = append(n.free, e.id)
			n.nGone--
		}
	}
	// A path that flaps leaves a stale ref per release: compact them
	// away before they outnumber the live ones.
	if len(n.gone) > 2*n.nGone+64 {
		kept := make([]goneRef, 0, n.nGone)
		for _, g := range n.gone {
			if e := n.by[g.path]; e != nil && e.holders == 0 && e.goneAt == g.at {
				kept = append(kept, g)
			}
		}
		n.gone = kept
	}
	// Slices taken from the front keep their old arrays; copy when
	// most of it is dead.
	if cap(n.free) > 64 && len(n.free) < cap(n.free)/4 {
		n.free = append([]int32(nil), n.free...)
	}
}
