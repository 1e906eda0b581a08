// Command pmdaperfevent is PCP's perfevent agent (domain 127) in pure Go:
// it counts the perf events that perfevent.conf names on every CPU and
// serves them to pmcd as perfevent.hwcounters.* and perfevent.derived.*.
// It gives the counters up while perfalloc holds the lock file, and says so
// in a state file beside it.
//
// Usage (pmcd starts it; the flags are the C agent's, plus a few):
//
//	pmdaperfevent [-C] [-d domain] [-l logfile] [-c config] [-U user]
//	              [-p | -u socket | -i port | -6 port] [-D debug]
//	              [--lockfile file] [--pmids file] [--poll interval] [--no-inotify]
//	pmdaperfevent --check [--c-compatible] [-c config]
//	pmdaperfevent --list-events
//	pmdaperfevent --version
//
// This directory, pmda/, is the command: the flags, the log and the signal
// loop. It is not the PMDA framework, which is internal/pmda (the protocol
// with pmcd, the metric table). The supervisor the command runs
// (generations, reloads, perfalloc's reservations, the privilege drop,
// --check) is internal/agent.
package main
