package threads

import (
	"os"
	"runtime"
	"slices"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"perfevent/internal/testwait"
)

// threadIDs are the ids of the process's threads, read afresh.
func threadIDs() []int {
	ents, _ := os.ReadDir("/proc/self/task")
	var tids []int
	for _, e := range ents {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids
}

// listed lists ts between two readings of /proc/self/task and checks it
// against them: the runtime, or an earlier test's locked goroutines, may
// start or end a thread at any moment, so the listing must hold every
// thread there before and after it, and none that was in neither.
func listed(t *testing.T, ts *Tasks) []int {
	t.Helper()
	before := threadIDs()
	got := ts.List()
	after := threadIDs()
	for _, tid := range before {
		if slices.Contains(after, tid) && !slices.Contains(got, tid) {
			t.Errorf("the listing misses thread %d, there before and after it", tid)
		}
	}
	for _, tid := range got {
		if !slices.Contains(before, tid) && !slices.Contains(after, tid) {
			t.Errorf("the listing has thread %d, there neither before nor after it", tid)
		}
	}
	if len(got) == 0 || t.Failed() {
		t.Fatalf("listing %v; /proc/self/task before %v, after %v", got, before, after)
	}
	return got
}

// A listing longer than one read of the directory (more threads than its
// buffer holds entries) still has every thread.
func TestTasksListsMore(t *testing.T) {
	stop := make(chan struct{})
	var ours []int
	for range 40 {
		started := make(chan int)
		go func() {
			runtime.LockOSThread() // a thread each, which ends with it
			started <- unix.Gettid()
			<-stop
		}()
		ours = append(ours, <-started)
	}
	defer func() {
		// The threads end after their goroutines (but the process's
		// first, which the runtime keeps), and a thread that ends while
		// a later test reads the directory may hide another from that
		// read: procfs resumes a read of it by position.
		close(stop)
		if !testwait.Until(testwait.Settle, func() bool {
			return !slices.ContainsFunc(threadIDs(), func(tid int) bool { return tid != os.Getpid() && slices.Contains(ours, tid) })
		}) {
			t.Errorf("the locked goroutines' threads did not end")
		}
	}()
	ts := Open()
	defer ts.Close()
	if got := listed(t, ts); len(got) < 40 {
		t.Errorf("listing of %d threads %v, with 40 locked goroutines", len(got), got)
	}
}

// A listing reads its one descriptor of /proc/self/task again from the
// start each time: a thread started between two listings is in the second.
func TestTasksListsAgain(t *testing.T) {
	ts := Open()
	defer ts.Close()
	listed(t, ts)
	started, stop := make(chan int), make(chan struct{})
	go func() {
		runtime.LockOSThread() // a thread of its own, which ends with it
		started <- unix.Gettid()
		<-stop
	}()
	tid := <-started
	defer close(stop)
	if second := listed(t, ts); !slices.Contains(second, tid) {
		t.Errorf("second listing %v lacks thread %d, started after the first", second, tid)
	}
}

// Each reaches a thread started while it runs, in a later pass, calls f
// once for each thread, and stops as soon as f says so.
func TestTasksEach(t *testing.T) {
	ts := Open()
	defer ts.Close()
	stop := make(chan struct{})
	var locked []int
	late := 0
	calls := map[int]int{}
	passOf := map[int]int{}
	ts.Each(func(tid, pass int) bool {
		calls[tid]++
		passOf[tid] = pass
		if late == 0 {
			// A locked goroutine may take an idle thread of the runtime,
			// one the first pass lists: lock more until one is new.
			before := threadIDs()
			for late == 0 && len(locked) < 16 {
				started := make(chan int)
				go func() {
					runtime.LockOSThread() // never unlocked: the thread ends with it
					started <- unix.Gettid()
					<-stop
				}()
				tid := <-started
				locked = append(locked, tid)
				if !slices.Contains(before, tid) {
					late = tid
				}
			}
		}
		return true
	})
	defer func() {
		close(stop)
		if !testwait.Until(testwait.Settle, func() bool {
			return !slices.ContainsFunc(threadIDs(), func(tid int) bool { return tid != os.Getpid() && slices.Contains(locked, tid) })
		}) {
			t.Errorf("the locked goroutines' threads did not end")
		}
	}()
	if late == 0 {
		t.Fatalf("16 locked goroutines took threads that were there already: %v", locked)
	}
	if calls[late] != 1 || passOf[late] == 0 {
		t.Errorf("thread %d, started during the first pass: %d calls, pass %d; want 1 call, in a later pass", late, calls[late], passOf[late])
	}
	for tid, n := range calls {
		if n != 1 {
			t.Errorf("thread %d: %d calls", tid, n)
		}
	}

	n := 0
	ts.Each(func(int, int) bool { n++; return false })
	if n != 1 {
		t.Errorf("f that stops at once was called %d times", n)
	}
}
