// Package bpfcount counts events per cgroup with descriptors that do not
// grow with the cgroups, as perf stat --for-each-cgroup --bpf-counters
// does: each event is opened once per CPU, system-wide, into a BPF perf
// event array, and a BPF program attached to a cgroup-switches event on
// each CPU reads them at every switch between cgroups and charges the
// delta since the previous switch to the nearest counted cgroup of the
// task switched out: its own, or else its nearest counted ancestor. A
// perf cgroup event counts the cgroups below its own too, so Read adds
// to a cgroup's sums those of the counted cgroups below it (tree.go).
// The agent names the cgroups it counts by id in a hash map, which gives
// each its slot in an array of sums: per CPU for an event that may be
// multiplexed, which is scaled by its enabled and running times on each
// CPU; one total per cgroup, added to atomically from every CPU, for a
// software event or a tracepoint, which never is (Totalled), so that a
// cgroup of those costs 24 bytes per event however many CPUs. The walk up a task's levels,
// a helper call and a hash lookup per level, is done once per cgroup and
// CPU until the counted set changes: the program keeps what it found in a
// small cache per CPU, keyed by the task's cgroup id, and the agent raises
// a generation in that map at every change of the hash map, which sends
// every cgroup through the walk again. What remains at a switch is perf's
// dispatch to the program and reading each event, which BenchmarkDispatch
// and BenchmarkSwitch measure.
//
// Before a read, Sync runs the same program on each CPU through
// BPF_PROG_TEST_RUN, so that the cgroup running there now is charged what
// it has counted since it was switched in.
//
// Unlike a perf cgroup counter, which the kernel switches when a task
// moves to another cgroup, the program sees only switches between tasks:
// the slice in progress when a task moves is charged to its new cgroup.
//
// The program is assembled here (program.go) with package bpf/asm, its
// loops over events and cgroup levels unrolled, so that nothing but Go
// builds it, and the maps made and the programs loaded through package
// bpf: the agent links neither an ELF nor a BTF reader. It needs
// cgroup v2 (the ancestors' ids are of the default hierarchy) and Linux
// 5.13 (cgroup-switches). The kernel fires cgroup-switches between tasks
// of different perf_event cgroups, so the v2 hierarchy must hold that
// controller, as it does once the root's cgroup.subtree_control has been
// written (systemd does at boot): before, or with perf_event bound to a
// v1 hierarchy, a switch between v2 cgroups that share a perf_event
// cgroup runs no program, and its slice goes to the next cgroup switched
// out. Load needs CAP_BPF and CAP_PERFMON; what the
// descriptors allow afterwards with CAP_PERFMON alone is in
// RELIABILITY.md.
package bpfcount
