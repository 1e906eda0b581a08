package main

import (
	rtmetrics "runtime/metrics"

	"perfevent/internal/pmda"
)

// logRuntime writes one line about the Go runtime (SIGUSR1). It lets a
// soak test, or an administrator who suspects a leak, tell a live heap
// that grows from one that is only settling, without a debugger: RSS alone
// also moves with the garbage collector and the scavenger.
func logRuntime(log *pmda.Logger) {
	s := []rtmetrics.Sample{
		{Name: "/sched/goroutines:goroutines"},
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/gc/heap/live:bytes"},
		{Name: "/memory/classes/total:bytes"},
		{Name: "/gc/cycles/total:gc-cycles"},
	}
	rtmetrics.Read(s)
	v := make([]uint64, len(s))
	for i := range s {
		if s[i].Value.Kind() == rtmetrics.KindUint64 {
			v[i] = s[i].Value.Uint64()
		}
	}
	log.Infof("runtime: %d goroutines, heap %d kB (%d kB live at the last GC), %d kB mapped, %d GC cycles",
		v[0], v[1]>>10, v[2]>>10, v[3]>>10, v[4])
}
