package testlog

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// TestBufferConcurrentWrites: lines written from many goroutines while
// another reads all arrive whole (go test -race checks the locking).
func TestBufferConcurrentWrites(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				fmt.Fprintf(&b, "g%d line %d\n", g, i)
				_ = b.String()
			}
		}()
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 800 {
		t.Fatalf("%d lines, want 800", len(lines))
	}
	seen := map[string]bool{}
	for _, l := range lines {
		seen[l] = true
	}
	if len(seen) != 800 || !seen["g7 line 99"] || !seen["g0 line 0"] {
		t.Errorf("lines lost or torn: %d distinct", len(seen))
	}
}

// TestRecorder: each message is kept whole with its level, a trailing
// newline dropped.
func TestRecorder(t *testing.T) {
	var r Recorder
	r.Infof("a %d", 1)
	r.Warningf("b %s\n", "c")
	r.Errorf("d")
	r.Debugf("e")
	want := "Info: a 1\nWarning: b c\nError: d\nDebug: e"
	if got := r.String(); got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got := fmt.Sprint(r.Texts()); got != "[a 1 b c d e]" {
		t.Errorf("Texts() = %s", got)
	}
}
