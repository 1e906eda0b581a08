// Package agent is the perfevent agent's supervisor: what pmdaperfevent
// runs between pmcd and the packages that plan, open and serve counters.
//
// An Agent holds the generation being served (plan, counters, table,
// per-cgroup counters) and replaces it whole when the configuration is
// read again (Reload, on SIGHUP) or the online CPUs change, so that a fetch
// in flight finishes with the generation its table came from. It closes the
// counters while perfalloc holds the lock file and reopens them after, at
// a pace a flapping lock cannot push beyond one reopen per 100 ms, and
// keeps the state file that tells perfalloc so. It runs start-up in the
// order that lets the agent give up root: the user to run as, the lock file
// and state directory, spare descriptors around the counters, the PMID map,
// then the drop to that user with only the capability to open counters.
//
// Plan→Spec (count, buildTable) is shared with Check, which is
// pmdaperfevent --check: what the configuration means on this machine,
// line by line. The plan is setup's and is never changed; what opening it
// gave (which counters count where, why others do not, the derived metrics
// that allows) is the supervisor's own record (opened), and the log and
// --check print the plan's notes, then the record's.
//
// The command (package main in pmda/) keeps the flags, the log and the
// signal loop; internal/pmda is the PMDA framework the Agent serves
// through.
package agent
