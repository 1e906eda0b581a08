package privilege

import (
	"slices"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"perfevent/internal/testneed"
)

func TestSomeAvg10(t *testing.T) {
	for _, c := range []struct {
		text  string
		share float64
		ok    bool
	}{
		{"some avg10=0.21 avg60=1.05 avg300=6.13 total=19206679212\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n", 0.21, true},
		// Before Linux 5.13 the cpu file had no "full" line.
		{"some avg10=37.50 avg60=12.00 avg300=3.00 total=123", 37.5, true},
		{"full avg10=9.00 avg60=0.00 avg300=0.00 total=0\nsome avg10=4.99 avg60=0 avg300=0 total=0\n", 4.99, true},
		{"some avg60=1.00 total=5\n", 0, false},
		{"some avg10=lots avg60=1.00\n", 0, false},
		{"", 0, false},
	} {
		share, ok := someAvg10([]byte(c.text))
		if share != c.share || ok != c.ok {
			t.Errorf("someAvg10(%q) = %v, %v; want %v, %v", c.text, share, ok, c.share, c.ok)
		}
	}
}

// With the CPUs uncontended, Drop makes its own calls on every thread and
// none to lift or put back a thread: no thread's nice value moves.
func TestDropUncontendedDoesNotBoost(t *testing.T) {
	testneed.Root(t, "as Drop refuses to start otherwise")
	real, realContended := allThreadsSyscall, contended
	t.Cleanup(func() { allThreadsSyscall, contended = real, realContended })
	contended = func() bool { return false }
	nice := ownNice(t)
	var traps []uintptr
	allThreadsSyscall = func(trap, a1, a2, a3 uintptr) (uintptr, uintptr, syscall.Errno) {
		traps = append(traps, trap)
		if got := threadNices(t); !slices.Equal(slices.Compact(got), []int{nice}) {
			t.Errorf("call %d: thread nice values %v, want all %d as before", len(traps), got, nice)
		}
		return 0, 0, 0
	}
	a := Account{Name: "someone", UID: 1234, GID: 567, Groups: []int{567}}
	if _, err := a.Drop(unix.CAP_PERFMON); err != nil {
		t.Fatal(err)
	}
	want := []uintptr{unix.SYS_PRCTL, unix.SYS_SETGROUPS, unix.SYS_SETRESGID, unix.SYS_SETRESUID, unix.SYS_CAPSET, unix.SYS_PRCTL}
	if !slices.Equal(traps, want) || len(want) != dropCallCount {
		t.Errorf("all-thread calls %v, want %v", traps, want)
	}
}
