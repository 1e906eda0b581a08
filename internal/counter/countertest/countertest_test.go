package countertest

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"

	"perfevent/internal/perf"
)

func TestFakeModelsAKernelCounter(t *testing.T) {
	o := New()
	attr := unix.PerfEventAttr{Type: 1, Config: 3}
	if o.Add("ev", 0, 1, 1, 1) {
		t.Error("Add on a counter that was never opened reported true")
	}
	c, err := o.Open("ev", &attr, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.Open("ev", &attr, 0); err == nil {
		t.Error("a second open of the same (event, cpu) succeeded")
	}
	if a, ok := o.Attr("ev", 0); !ok || a.Config != 3 {
		t.Errorf("Attr = %+v, %v", a, ok)
	}
	o.Add("ev", 0, 10, 20, 10)
	o.Step(perf.Count{Value: 1, Enabled: 2, Running: 2})
	got, err := c.Read()
	if want := (perf.Count{Value: 11, Enabled: 22, Running: 12}); err != nil || got != want {
		t.Errorf("Read = %+v, %v; want %+v", got, err, want)
	}
	o.FailRead("ev", AnyCPU, unix.EIO)
	if _, err := c.Read(); !errors.Is(err, unix.EIO) {
		t.Errorf("Read with a scripted failure: %v", err)
	}
	o.FailRead("ev", AnyCPU, nil)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err == nil {
		t.Error("closing twice succeeded")
	}
	if _, err := c.Read(); err == nil {
		t.Error("read after close succeeded")
	}
	// A reopened counter starts from zero, like a new perf descriptor.
	c, _ = o.Open("ev", &attr, 0)
	o.Step(perf.Count{})
	if got, _ := c.Read(); got != (perf.Count{}) {
		t.Errorf("reopened counter reads %+v, want zeros", got)
	}
	o.FailOpen("ev", 1, unix.ENODEV)
	if _, err := o.Open("ev", &attr, 1); !errors.Is(err, unix.ENODEV) {
		t.Errorf("scripted open failure: %v", err)
	}
	if o.Opens() != 2 || o.Closes() != 1 || o.Reads() != 3 || o.ReadsOf("ev", 0) != 3 || o.OpenNow() != 1 {
		t.Errorf("opens %d closes %d reads %d/%d open %d; want 2 1 3 3 1 (a read after close is not an attempt)", o.Opens(), o.Closes(), o.Reads(), o.ReadsOf("ev", 0), o.OpenNow())
	}
}
