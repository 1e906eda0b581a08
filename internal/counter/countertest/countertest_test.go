package countertest

import (
	"errors"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"perfevent/internal/counter"
	"perfevent/internal/perf"
)

func TestFakeModelsAKernelCounter(t *testing.T) {
	o := New()
	attr := unix.PerfEventAttr{Type: 1, Config: 3}
	if o.Add("ev", 0, 1, 1, 1) {
		t.Error("Add on a counter that was never opened reported true")
	}
	c, err := o.Open("ev", &attr, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.Open("ev", &attr, 0, nil); err == nil {
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
	c, _ = o.Open("ev", &attr, 0, nil)
	o.Step(perf.Count{})
	if got, _ := c.Read(); got != (perf.Count{}) {
		t.Errorf("reopened counter reads %+v, want zeros", got)
	}
	o.FailOpen("ev", 1, unix.ENODEV)
	if _, err := o.Open("ev", &attr, 1, nil); !errors.Is(err, unix.ENODEV) {
		t.Errorf("scripted open failure: %v", err)
	}
	if o.Opens() != 2 || o.Closes() != 1 || o.Reads() != 3 || o.ReadsOf("ev", 0) != 3 || o.OpenNow() != 1 {
		t.Errorf("opens %d closes %d reads %d/%d open %d; want 2 1 3 3 1 (a read after close is not an attempt)", o.Opens(), o.Closes(), o.Reads(), o.ReadsOf("ev", 0), o.OpenNow())
	}
}

func TestFakeModelsAGroup(t *testing.T) {
	o := New()
	grp := func(config uint64, disabled bool) *unix.PerfEventAttr {
		a := &unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Config: config, Read_format: perf.GroupReadFormat}
		if disabled {
			a.Bits = unix.PerfBitDisabled
		}
		return a
	}
	lead, err := o.Open("a", grp(0, true), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := o.Open("b", grp(1, false), 0, lead)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		event  string
		attr   *unix.PerfEventAttr
		cpu    int
		leader counter.Source
		want   string
	}{
		{"c", grp(2, false), 1, lead, `"c" on cpu1 cannot join "a" on cpu0`},
		{"c", grp(2, false), 0, b, `"b" does not lead a group`},
		{"c", &unix.PerfEventAttr{}, 0, lead, "without PERF_FORMAT_GROUP"},
	} {
		if _, err := o.Open(tc.event, tc.attr, tc.cpu, tc.leader); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%s, cpu%d): %v, want %q", tc.event, tc.cpu, err, tc.want)
		}
	}
	if o.Add("b", 0, 1, 1, 1) {
		t.Error("a member of a disabled group counts")
	}
	if err := lead.Enable(); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Open("c", grp(2, false), 0, lead); err == nil || !strings.Contains(err.Error(), "after it was enabled") {
		t.Errorf("joining an enabled group: %v", err)
	}
	if g := o.Group("b", 0); len(g) != 2 || g[0] != "a" || g[1] != "b" {
		t.Errorf("Group = %q, want [a b]", g)
	}
	o.Add("a", 0, 1, 10, 5)
	o.Add("b", 0, 2, 99, 99) // a group read reports its leader's times
	vals := make([]uint64, 2)
	if en, run, err := lead.ReadGroup(vals); err != nil || en != 10 || run != 5 || vals[0] != 1 || vals[1] != 2 {
		t.Errorf("ReadGroup = %v %d %d %v, want [1 2] 10 5", vals, en, run, err)
	}
	if _, err := b.Read(); err == nil {
		t.Error("Read of a member succeeded")
	}
	o.FailRead("b", 0, unix.EIO)
	if _, _, err := lead.ReadGroup(vals); !errors.Is(err, unix.EIO) {
		t.Errorf("ReadGroup with a member's scripted failure: %v", err)
	}
	if o.Reads() != 2 || o.ReadsOf("a", 0) != 2 || o.ReadsOf("b", 0) != 2 {
		t.Errorf("reads %d, of a %d, of b %d; want 2 each: a group read is one read", o.Reads(), o.ReadsOf("a", 0), o.ReadsOf("b", 0))
	}
	if err := lead.Close(); err == nil || !strings.Contains(err.Error(), "closed while 1 of its members are open") {
		t.Errorf("closing the leader first: %v", err)
	}
}
