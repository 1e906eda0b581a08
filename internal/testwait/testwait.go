// Package testwait waits, in tests, for what another goroutine or process
// does in its own time: a line in a log, a file, a counter that opened.
// It polls a condition until it holds or a bound passes; the bound is a
// failure deadline, not a timing assertion, so it is generous (a loaded
// CI machine) and a passing test never waits for it.
package testwait

import (
	"testing"
	"time"
)

// Settle is the bound for what happens within milliseconds on an idle
// machine: long enough that only a broken program misses it.
const Settle = 20 * time.Second

// The poll interval starts short, so that a test of something quick stays
// quick, and grows, so that a slow wait does not spin.
const (
	firstPoll = time.Millisecond
	lastPoll  = 100 * time.Millisecond
)

// Until polls cond until it returns true, and reports whether it did
// within timeout. A test uses it to print its own diagnosis; Eventually
// is the common case.
func Until(timeout time.Duration, cond func() bool) bool {
	_, ok := value(timeout, func() (struct{}, bool) { return struct{}{}, cond() })
	return ok
}

// Eventually fails t unless cond returns true within timeout; what says
// what the test waited for.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	start := time.Now()
	if !Until(timeout, cond) {
		t.Fatalf("still waiting for %s after %v", what, time.Since(start).Round(time.Millisecond))
	}
}

// For polls get until its second result is true and returns its first,
// or fails t, as Eventually does, when timeout passes first.
func For[T any](t testing.TB, timeout time.Duration, what string, get func() (T, bool)) T {
	t.Helper()
	start := time.Now()
	v, ok := value(timeout, get)
	if !ok {
		t.Fatalf("still waiting for %s after %v", what, time.Since(start).Round(time.Millisecond))
	}
	return v
}

// value is the one polling loop. cond is called once more after the
// deadline, so that a wait that overslept (a descheduled test) still sees
// a condition that came true meanwhile.
func value[T any](timeout time.Duration, get func() (T, bool)) (T, bool) {
	deadline := time.Now().Add(timeout)
	for pause := firstPoll; ; pause = min(2*pause, lastPoll) {
		v, ok := get()
		if ok {
			return v, true
		}
		left := time.Until(deadline)
		if left <= 0 {
			return v, false
		}
		time.Sleep(min(pause, left))
	}
}
