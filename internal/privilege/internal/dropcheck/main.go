// Command dropcheck drops to a user with privilege.Drop and then tries to
// open a system-wide counter, for the package's tests: credentials cannot
// be restored, so the drop happens in a process of its own.
//
// With -threads N it first parks N goroutines on threads of their own, as
// the agent's runtime has several threads by the time it drops, and it
// reports how long the drop took and whether every thread was changed.
package main

import (
	"flag"
	"fmt"
	"maps"
	"os"
	"runtime"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"perfevent/internal/perf"
	"perfevent/internal/privilege"
)

func main() {
	threads := flag.Int("threads", 0, "park this many goroutines on threads of their own first")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: dropcheck [-threads N] USER")
		os.Exit(2)
	}
	park := make(chan struct{})
	for range *threads {
		started := make(chan struct{})
		go func() {
			runtime.LockOSThread()
			close(started)
			<-park
		}()
		<-started
	}
	name := flag.Arg(0)
	c := privilege.CounterCapability()
	var acct privilege.Account
	var nice int
	var mask unix.CPUSet
	if name != "-" {
		var err error
		if acct, err = privilege.LookupAccount(name); err != nil {
			fmt.Println("lookup:", err)
			os.Exit(1)
		}
		before := len(tasks())
		prio, err := unix.Getpriority(unix.PRIO_PROCESS, 0)
		if err != nil {
			fmt.Println("getpriority:", err)
			os.Exit(1)
		}
		nice = 20 - prio // the system call returns 20 - nice
		if err := unix.SchedGetaffinity(0, &mask); err != nil {
			fmt.Println("sched_getaffinity:", err)
			os.Exit(1)
		}
		start := time.Now()
		id, err := acct.Drop(c)
		took := time.Since(start)
		if err != nil {
			fmt.Println("drop:", err)
			os.Exit(1)
		}
		fmt.Printf("dropped to %s uid %d keeping %s\n", id.User, id.UID, privilege.Name(id.Capability))
		fmt.Printf("drop took %d ns on %d threads\n", took.Nanoseconds(), before)
	}
	st, err := privilege.ReadStatus(0)
	if err != nil {
		fmt.Println("status:", err)
		os.Exit(1)
	}
	fmt.Printf("uids %v capeff %#x capprm %#x capinh %#x nonewprivs %v\n", st.UIDs, st.CapEff, st.CapPrm, st.CapInh, st.NoNewPrivs)
	if name != "-" {
		all, err := privilege.ReadThreads(0)
		if err != nil {
			fmt.Println("threads:", err)
			os.Exit(1)
		}
		var bad []string
		for _, tid := range slices.Sorted(maps.Keys(all)) {
			if s := all[tid]; !s.Dropped(acct, c) {
				bad = append(bad, fmt.Sprintf("thread %d: uids %v gids %v groups %v capeff %#x capprm %#x capinh %#x capamb %#x nonewprivs %v",
					tid, s.UIDs, s.GIDs, s.Groups, s.CapEff, s.CapPrm, s.CapInh, s.CapAmb, s.NoNewPrivs))
			}
		}
		if len(bad) == 0 {
			fmt.Printf("every thread dropped (%d)\n", len(all))
		}
		// What the agent checks after its drop: the kernel's answers to
		// the calling thread's system calls.
		if self, err := privilege.Self(); err != nil || !self.Dropped(acct, c) {
			bad = append(bad, fmt.Sprintf("self: uids %v gids %v groups %v capeff %#x capprm %#x capinh %#x capamb %#x nonewprivs %v (err %v)",
				self.UIDs, self.GIDs, self.Groups, self.CapEff, self.CapPrm, self.CapInh, self.CapAmb, self.NoNewPrivs, err))
		} else {
			fmt.Println("self dropped")
		}
		for _, b := range bad {
			fmt.Println(b)
		}
		// Drop raises its threads' priority and puts them on one CPU for
		// the calls: none may keep either.
		var raised []string
		for _, tid := range slices.Sorted(maps.Keys(all)) {
			if prio, err := unix.Getpriority(unix.PRIO_PROCESS, tid); err == nil && 20-prio != nice {
				raised = append(raised, fmt.Sprintf("thread %d: nice %d", tid, 20-prio))
			}
			var m unix.CPUSet
			if err := unix.SchedGetaffinity(tid, &m); err == nil && m != mask {
				raised = append(raised, fmt.Sprintf("thread %d: on %d CPUs of %d", tid, m.Count(), mask.Count()))
			}
		}
		if len(raised) == 0 {
			fmt.Printf("every thread back to nice %d on %d CPUs\n", nice, mask.Count())
		}
		for _, r := range raised {
			fmt.Println(r)
		}
	}
	attr := unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_CPU_CLOCK}
	attr.Size = perf.AttrSize
	fd, err := unix.PerfEventOpen(&attr, -1, 0, -1, unix.PERF_FLAG_FD_CLOEXEC)
	if err != nil {
		fmt.Println("perf_event_open on cpu0:", err)
		return
	}
	unix.Close(fd)
	fmt.Println("perf_event_open on cpu0: ok")
}

func tasks() []os.DirEntry {
	ents, _ := os.ReadDir("/proc/self/task")
	return ents
}
