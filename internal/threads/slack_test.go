package threads

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"perfevent/internal/testneed"
)

// timerSlack is what /proc/<tid>/timerslack_ns says of thread tid.
func timerSlack(t *testing.T, tid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(tid) + "/timerslack_ns")
	if err != nil {
		t.Fatal(err)
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatalf("thread %d: timerslack_ns %q: %v", tid, b, err)
	}
	return time.Duration(ns)
}

// realTime says whether thread tid runs under a real-time policy, whose
// slack the kernel keeps at 0.
func realTime(tid int) bool {
	a, err := unix.SchedGetAttr(tid, 0)
	return err == nil && (a.Policy == unix.SCHED_FIFO || a.Policy == unix.SCHED_RR)
}

// As root, every thread of the process takes the slack, the runtime's own
// included, and threads started afterwards inherit it.
func TestSetTimerSlackReachesEveryThread(t *testing.T) {
	testneed.Root(t, "as setting another thread's timer slack takes CAP_SYS_NICE")
	const d = 3 * time.Millisecond
	defer SetTimerSlack(DefaultTimerSlack)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	n, err := SetTimerSlack(d)
	if err != nil {
		t.Fatal(err)
	}
	tids := threadIDs()
	if n < 2 || n > len(tids) {
		t.Errorf("SetTimerSlack set %d threads; the process has %d", n, len(tids))
	}
	if got := timerSlack(t, unix.Gettid()); got != d {
		t.Errorf("the caller's slack is %v, want %v", got, d)
	}
	started, stop := make(chan int), make(chan struct{})
	defer close(stop)
	go func() {
		runtime.LockOSThread() // a thread of its own, which ends with it
		started <- unix.Gettid()
		<-stop
	}()
	<-started
	for _, tid := range threadIDs() {
		if realTime(tid) {
			continue
		}
		if got := timerSlack(t, tid); got != d {
			t.Errorf("thread %d has slack %v, want %v (threads %v)", tid, got, d, tids)
		}
	}
}

// Back to the default, the caller's slack reads as the kernel's own.
func TestSetOwnTimerSlackDefault(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if realTime(0) {
		t.Skip("needs a thread without a real-time policy, whose slack the kernel keeps at 0")
	}
	if err := SetOwnTimerSlack(time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if got := timerSlack(t, unix.Gettid()); got != time.Millisecond {
		t.Errorf("slack %v after setting 1ms", got)
	}
	if err := SetOwnTimerSlack(0); err != nil {
		t.Fatal(err)
	}
	if got := timerSlack(t, unix.Gettid()); got != DefaultTimerSlack {
		t.Errorf("slack %v after setting the default, want %v", got, DefaultTimerSlack)
	}
}
