package metrics

import (
	"flag"
	"fmt"
	"strings"
	"testing"

	"perfevent/internal/counter"
	"perfevent/internal/counter/countertest"
	"perfevent/internal/pdu"
	"perfevent/internal/testgolden"
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
	testgolden.Check(t, "testdata/help.txt", got, *updateHelp)
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

// A counter's MakeAbout is called for its help, when a client asks, not
// by Build.
func TestMakeAboutWhenAsked(t *testing.T) {
	fake := countertest.New()
	set, err := counter.New([]counter.Spec{{Name: "cpu-clock", CPUs: []int{0}}}, counter.Config{Opener: fake})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := set.Open(); err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	made := 0
	table, _, err := Build(Spec{Version: "test", Set: set, Clusters: NewClusters(),
		Counters: []Counter{{Event: 0, Metric: "cpu_clock", MakeAbout: func() string { made++; return "Made." }}}})
	if err != nil {
		t.Fatal(err)
	}
	if made != 0 {
		t.Fatalf("Build called MakeAbout %d times", made)
	}
	m, ok := table.Metric(pdu.NewPMID(Domain, FirstOwn, ItemDutycycle))
	if !ok {
		t.Fatal("no cpu_clock.dutycycle")
	}
	if help := m.LongHelp(); !strings.HasPrefix(help, oneLineDutycycle+".\n\nMade.\n") || made != 1 {
		t.Errorf("help %q after %d calls of MakeAbout", help, made)
	}
}
