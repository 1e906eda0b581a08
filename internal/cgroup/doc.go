// Package cgroup finds the cgroups an administrator asked the agent to
// count and keeps one counter.Set per cgroup: each of the cgroup events on
// every CPU, opened with PERF_FLAG_PID_CGROUP on the cgroup's directory, so
// that the kernel counts only while a task of that cgroup runs there.
//
// # Hierarchies
//
// A counter bound to a cgroup counts only in the hierarchy that owns the
// perf_event controller (Locate, from /proc/cgroups and
// /proc/self/mountinfo): a v1 hierarchy mounted with it, at any mount point
// and with any other controllers, else the cgroup v2 hierarchy (pure v2 at
// /sys/fs/cgroup, or the hybrid layout's /sys/fs/cgroup/unified when
// perf_event is not on v1). A v1 hierarchy unmounted keeps the controller
// while it has cgroups: then nothing can count, and Locate says so
// (Unavailable). Below the root of v2, cgroups have the controller only
// once the root's cgroup.subtree_control has been written: Reach probes
// for it, and without it nothing can count them apart (Unreached).
// Either way a cgroup is named by its path relative to the mount, with a
// leading slash ("/system.slice/pmcd.service"): the names PCP's own
// cgroup.* metrics give, so the two join.
//
// # Configuration
//
// cgroups.conf (ParseConfig) lists path patterns, the configured events to
// count per cgroup, a cap on the number of cgroups and one on their
// descriptors. In a pattern, "*" and the other path.Match forms match
// within one path component, and a component "**" matches any number of
// components, none included. Patterns are priorities: under the caps a
// cgroup of an earlier pattern displaces one of a later pattern.
//
// # Discovery
//
// A Tracker rescans the tree when inotify reports a directory created or
// removed in it, once more a second later (inotify misses what happens
// below directories it was not yet watching), and every Rescan interval
// anyway: 30 s with inotify, 1 s without it. Rescans that inotify asks
// for keep to a pace under churn, and open only what the previous one saw. A scan reads only the directories below
// which a pattern can still match. New matching cgroups are opened and
// become instances; vanished ones are closed and dropped.
//
// # Values that never go back
//
// A cgroup is known by its directory's inode (its cgroup id): a path that
// names another cgroup than the one counted was removed and made again,
// and is opened anew. The instance, though, belongs to the path, as PCP's
// cgroup.* instances do: IDs keeps each path's id and last values across
// re-creations and across the Trackers of successive generations (reload,
// CPU hotplug; Tracker.Carry hands the values over), so a value continues
// rather than restart. IDs forgets the oldest paths gone beyond a bound,
// and numbers new paths from the ids it forgot.
//
// # Cost
//
// Descriptors are cgroups × events × CPUs. Software events of a cgroup are
// grouped per CPU by internal/counter, so a fetch makes one read() per
// cgroup per CPU for them; other events take one read() each.
//
// With Options.BPF (internal/bpfcount) the descriptors are events × CPUs
// and one cgroup-switches event per CPU, whatever the cgroups: a cgroup is
// a slot in a BPF map, its directory is not held, and a fetch runs the
// program once per CPU and reads the sums from memory. The values mean
// the same: per cgroup, summed over CPUs, scaled per CPU by
// enabled/running, never going back.
package cgroup
