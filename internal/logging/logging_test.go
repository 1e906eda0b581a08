package logging_test

import (
	"testing"

	"perfevent/internal/logging"
	"perfevent/internal/testlog"
)

// TestAsDebug: every level reaches Debugf, formatted, and nothing else.
func TestAsDebug(t *testing.T) {
	var r testlog.Recorder
	d := logging.AsDebug(&r)
	d.Infof("i %d", 1)
	d.Warningf("w %s", "x")
	d.Errorf("e")
	d.Debugf("d %q", "y")
	want := []string{"Debug: i 1", "Debug: w x", "Debug: e", `Debug: d "y"`}
	got := r.Lines()
	if len(got) != len(want) {
		t.Fatalf("lines %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d: %q, want %q", i, got[i], want[i])
		}
	}
}

// TestNilDiscards: Or and AsDebug make nil a Logger that can be called.
func TestNilDiscards(t *testing.T) {
	for _, l := range []logging.Logger{logging.Or(nil), logging.AsDebug(nil)} {
		if l != logging.Discard {
			t.Errorf("%T, want Discard", l)
		}
		l.Errorf("nothing %d", 1)
	}
	var r testlog.Recorder
	if logging.Or(&r) != logging.Logger(&r) {
		t.Error("Or changed a non-nil Logger")
	}
}
