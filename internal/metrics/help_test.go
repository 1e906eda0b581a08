package metrics

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

var updateHelp = flag.Bool("update-help", false, "rewrite testdata/help.txt from the table built now")

// Every metric's texts, as a client reads them, are the ones in testdata:
// the counters', the derived metric's, each kind of ratio's and its
// operands', the C agent's names with and without values.
func TestHelpTexts(t *testing.T) {
	_, set, table, _ := newSource(t)
	defer set.Close()
	var b strings.Builder
	for i := range table.Metrics() {
		m := &table.Metrics()[i]
		fmt.Fprintf(&b, "%s\n  %q\n  %q\n", m.Name, m.OneLine, m.LongHelp())
	}
	got := b.String()
	if *updateHelp {
		if err := os.WriteFile("testdata/help.txt", []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile("testdata/help.txt")
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := range min(len(gl), len(wl)) {
			if gl[i] != wl[i] {
				t.Fatalf("testdata/help.txt differs at line %d:\n got %s\nwant %s", i+1, gl[i], wl[i])
			}
		}
		t.Fatalf("testdata/help.txt: %d lines, want %d", len(gl), len(wl))
	}
}

// Build leaves the counters', ratios' and reservations' long help to be
// written when a client asks for it (pmda.Metric.MakeHelp): a start-up
// writes none of it.
func TestBuildWritesNoLongHelp(t *testing.T) {
	_, set, table, _ := newSource(t)
	defer set.Close()
	n := 0
	for _, m := range table.Metrics() {
		if !strings.HasPrefix(m.Name, "perfevent.hwcounters.") && !strings.HasPrefix(m.Name, "perfevent.ratio.") {
			continue
		}
		n++
		if m.Help != "" || m.MakeHelp == nil {
			t.Errorf("%s: Build wrote its help (%d bytes), or has none to make", m.Name, len(m.Help))
		}
	}
	if n == 0 {
		t.Fatal("no counter or ratio in the table")
	}
}
