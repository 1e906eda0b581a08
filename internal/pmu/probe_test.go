package pmu

import (
	"testing"

	"golang.org/x/sys/unix"

	"perfevent/internal/counter/countertest"
)

func TestProbeMarks(t *testing.T) {
	fs := testFS("power9")
	all, _ := fs.ListEvents()
	var ls []Listing
	for _, l := range all {
		switch l.Name {
		case "cpu-clock", "cpu-cycles", "hv_24x7.PM_PB_CYC":
			ls = append(ls, l)
		}
	}
	if len(ls) != 3 {
		t.Fatalf("power9 tree lists %d of the 3 events", len(ls))
	}
	o := countertest.New()
	o.FailOpen("cpu-cycles", countertest.AnyCPU, unix.ENOENT)
	fs.Probe(ls, o)
	want := map[string]string{
		"cpu-clock":         "[ok]",
		"cpu-cycles":        "[cannot open: not supported on this machine (e.g. a VM without a hardware PMU) (ENOENT)]",
		"hv_24x7.PM_PB_CYC": "[not probed: needs parameters]",
	}
	for _, l := range ls {
		if got := l.Probe.mark(); got != want[l.Name] {
			t.Errorf("%s: mark %q, want %q", l.Name, got, want[l.Name])
		}
	}
	// Each probe opens once and closes at once: nothing is left open.
	if opens, closes := o.Opens(), o.Closes(); opens != 1 || closes != 1 {
		t.Errorf("opens %d, closes %d; want 1 and 1 (cpu-clock only)", opens, closes)
	}
	if a, ok := o.Attr("cpu-clock", 0); !ok || a.Bits&unix.PerfBitDisabled == 0 {
		t.Errorf("cpu-clock: opened on cpu0 %v, attr bits %#x; want it opened there, disabled", ok, a.Bits)
	}
}
