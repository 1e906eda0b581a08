package agent

import (
	"fmt"

	"perfevent/internal/cpuhotplug"
	"perfevent/internal/cpulist"
)

// watchCPUs follows CPUs going offline and coming back. A change rebuilds
// the generation, exactly as a reload does: the plan is made again against
// the new online list (so the PMUs' cpumasks, which the kernel moves off an
// offlined CPU, are read again too), the counters of an offlined CPU are
// closed and its cpuN instances leave the instance domains, and a CPU that
// came back gets counters and instances again. Values continue
// (counter.Set.Carry) on every CPU that stayed.
func (a *Agent) watchCPUs(opts cpuhotplug.Options) {
	opts.FS = a.fs.FS
	if opts.Log == nil {
		opts.Log = a.log
	}
	online := a.gen.Load().plan.Online
	if online == nil {
		// No plan was made (the configuration could not be read): a
		// change now is not a reason to try again, a SIGHUP is.
		online, _ = a.fs.OnlineCPUs()
	}
	a.cpus = cpuhotplug.Watch(online, opts, a.cpusChanged)
}

// checkCPUs is called when a counter's read starts failing: a CPU that went
// offline is one reason. It never blocks (it runs inside a fetch).
func (a *Agent) checkCPUs() {
	if w := a.cpus; w != nil {
		w.Check()
	}
}

// cpusChanged runs on the hotplug watcher's goroutine. Like a reload it
// waits while perfalloc holds the counters (the holder was promised the
// PMU), and it takes its turn in the reopen pacing, so that a CPU flapping
// on and off costs at most one rebuild per minReopen. It takes the lock
// that reservations need only to open and swap, as a reload does.
func (a *Agent) cpusChanged(online []int) {
	a.rebuildFor(fmt.Sprintf("CPUs online now: %s", cpulist.Format(online)))
}

// rebuildFor rebuilds the generation for a change of the machine that why
// names, as a reload does: after perfalloc's release if the counters are
// reserved now (the holder was promised the PMU), otherwise at once, in
// its turn in the reopen pacing and outside the lock that reservations
// need but to open and swap.
func (a *Agent) rebuildFor(why string) {
	a.mu.Lock()
	reserved := a.holding()
	if reserved {
		a.reloadDue = true
	}
	a.mu.Unlock()
	if reserved {
		a.log.Infof("%s; the counters follow when perfalloc releases them", why)
		return
	}
	a.log.Infof("%s; rebuilding the counters", why)
	a.pace()
	a.buildMu.Lock()
	defer a.buildMu.Unlock()
	a.rebuild()
}
