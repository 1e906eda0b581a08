package testwait

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// recorder is a testing.TB whose Fatalf records instead of stopping the
// test, so that a test can see what Eventually and For report.
type recorder struct {
	testing.TB
	fatal []string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.fatal = append(r.fatal, fmt.Sprintf(format, args...))
}

func TestUntilReturnsOnceTheConditionHolds(t *testing.T) {
	calls := 0
	if !Until(Settle, func() bool { calls++; return calls == 4 }) {
		t.Fatalf("Until gave up after %d calls of a condition true at the 4th", calls)
	}
	if calls != 4 {
		t.Errorf("the condition was called %d times, want 4 (it holds at the 4th)", calls)
	}
}

func TestUntilGivesUpAfterTheTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	calls := 0
	start := time.Now()
	if Until(timeout, func() bool { calls++; return false }) {
		t.Fatal("Until reported a condition that never holds as met")
	}
	if waited := time.Since(start); waited < timeout {
		t.Errorf("Until gave up after %v, before its timeout of %v", waited, timeout)
	}
	// Sleeps are never shorter than asked: with pauses of 1, 2, 4 … 64 ms
	// and then 100 ms, 300 ms hold at most 10 of them; a fixed 1 ms poll
	// would call the condition hundreds of times.
	if calls < 2 || calls > 11 {
		t.Errorf("the condition was called %d times in %v, want 2 to 11 (a growing interval)", calls, timeout)
	}
}

func TestEventuallyNamesWhatAndHowLong(t *testing.T) {
	r := &recorder{TB: t}
	Eventually(r, 50*time.Millisecond, "the answer", func() bool { return false })
	if len(r.fatal) != 1 {
		t.Fatalf("Eventually reported %d failures of a condition that never holds, want 1: %q", len(r.fatal), r.fatal)
	}
	msg := r.fatal[0]
	if !strings.HasPrefix(msg, "still waiting for the answer after ") || !strings.HasSuffix(msg, "ms") {
		t.Errorf("Eventually failed with %q, want \"still waiting for the answer after …ms\"", msg)
	}

	r = &recorder{TB: t}
	n := 0
	Eventually(r, Settle, "the third call", func() bool { n++; return n == 3 })
	if len(r.fatal) != 0 {
		t.Errorf("Eventually failed a condition that held: %q", r.fatal)
	}
}

func TestForReturnsTheValue(t *testing.T) {
	r := &recorder{TB: t}
	n := 0
	got := For(r, Settle, "n to reach 3", func() (int, bool) { n++; return n * 10, n == 3 })
	if got != 30 || len(r.fatal) != 0 {
		t.Errorf("For = %d with failures %q, want 30 and none", got, r.fatal)
	}

	r = &recorder{TB: t}
	For(r, 20*time.Millisecond, "nothing", func() (int, bool) { return 0, false })
	if len(r.fatal) != 1 || !strings.HasPrefix(r.fatal[0], "still waiting for nothing after ") {
		t.Errorf("For of a value that never comes failed with %q, want one \"still waiting for nothing after …\"", r.fatal)
	}
}
