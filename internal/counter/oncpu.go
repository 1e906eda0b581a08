package counter

import (
	"errors"
	"runtime"
	"slices"
	"sync"

	"golang.org/x/sys/unix"
)

// Disabling or enabling a counter bound to a CPU runs on that CPU: from
// another, the kernel sends it an interprocessor call and waits for it,
// some µs each, far more in a VM. The per-cgroup counters release one
// group per cgroup and CPU (614 at 307 cgroups on 2 CPUs), so ReleaseAll
// and ResumeAll make each CPU's ioctls from a thread bound to that CPU,
// the CPUs in parallel: local calls, with no interprocessor call.

// onCPUs gathers work to run on given CPUs.
type onCPUs struct{ work map[int][]func() }

func (o *onCPUs) add(cpu int, f func()) {
	if o.work == nil {
		o.work = map[int][]func(){}
	}
	o.work[cpu] = append(o.work[cpu], f)
}

// run runs each CPU's work in order on a thread bound to that CPU, on as
// many threads at once as GOMAXPROCS allows, and returns when every piece
// has. Where a thread cannot be bound (a CPU outside the agent's cpuset,
// or gone offline), it runs the work where it is: the same result, at
// the price of the interprocessor calls. A negative CPU's work runs
// unbound.
func (o *onCPUs) run() {
	cpus := make([]int, 0, len(o.work))
	for cpu := range o.work {
		cpus = append(cpus, cpu)
	}
	slices.Sort(cpus)
	next := make(chan int, len(cpus))
	for _, cpu := range cpus {
		next <- cpu
	}
	close(next)
	var wg sync.WaitGroup
	for range min(len(cpus), runtime.GOMAXPROCS(0)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			var was unix.CPUSet
			restore := unix.SchedGetaffinity(0, &was) == nil
			for cpu := range next {
				runBound(cpu, o.work[cpu])
			}
			// A thread whose affinity cannot be put back ends with its
			// goroutine, still locked.
			if restore && unix.SchedSetaffinity(0, &was) == nil {
				runtime.UnlockOSThread()
			}
		}()
	}
	wg.Wait()
}

// runBound binds the calling thread, locked to its goroutine, to cpu and
// runs work there.
func runBound(cpu int, work []func()) {
	if cpu >= 0 {
		var set unix.CPUSet
		set.Set(cpu)
		unix.SchedSetaffinity(0, &set) // on failure, from wherever it runs
	}
	for _, f := range work {
		f()
	}
}

// ReleaseAll releases each Set of sets, as Release does, and returns what
// each did and its error (nil when all went well). Every counter of every
// Set is stopped when it returns; the leaders' disables are made on
// their CPUs, see onCPUs. The Sets must be distinct; the caller must not
// run two ReleaseAll or ResumeAll on Sets they share at once.
func ReleaseAll(sets []*Set) ([]Released, []error) {
	defer lockOps(sets)()
	sts := make([]*stopping, len(sets))
	opErrs := make([][]error, len(sets))
	var run onCPUs
	for i, s := range sets {
		if sts[i] = s.stop(); sts[i] != nil {
			opErrs[i] = sts[i].ioctls(&run, Source.Disable)
		}
	}
	run.run()
	rels := make([]Released, len(sets))
	var errs []error
	for i, s := range sets {
		if sts[i] == nil {
			continue
		}
		var err error
		rels[i], err = s.stopped(sts[i], opErrs[i])
		errs = appendAt(errs, i, len(sets), err)
	}
	return rels, errs
}

// ResumeAll resumes each Set of sets, as Resume does, the leaders'
// enables made on their CPUs as in ReleaseAll.
func ResumeAll(sets []*Set) ([]Resumed, []error) {
	defer lockOps(sets)()
	sts := make([]*stopping, len(sets))
	opErrs := make([][]error, len(sets))
	res := make([]Resumed, len(sets))
	var run onCPUs
	for i, s := range sets {
		if sts[i], res[i] = s.start(); sts[i] != nil {
			opErrs[i] = sts[i].ioctls(&run, Source.Enable)
		}
	}
	run.run()
	var errs []error
	for i, s := range sets {
		if sts[i] == nil {
			continue
		}
		r, es := s.started(sts[i], opErrs[i])
		res[i] = r
		errs = appendAt(errs, i, len(sets), errors.Join(es...))
	}
	return res, errs
}

// lockOps takes the opMu of every Set of sets, as Release and Resume
// each take their own, and returns what unlocks them.
func lockOps(sets []*Set) (unlock func()) {
	for _, s := range sets {
		s.opMu.Lock()
	}
	return func() {
		for _, s := range sets {
			s.opMu.Unlock()
		}
	}
}

// appendAt sets errs[i] to err, making errs n long at the first error.
func appendAt(errs []error, i, n int, err error) []error {
	if err == nil {
		return errs
	}
	if errs == nil {
		errs = make([]error, n)
	}
	errs[i] = err
	return errs
}
