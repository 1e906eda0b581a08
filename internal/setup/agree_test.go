package setup

import (
	"slices"
	"strings"
	"testing"

	"perfevent/internal/config"
	"perfevent/internal/config/configtest"
)

// Names the PMNS cannot carry are refused line by line, and the rest is served.
func TestNamesThatCannotBeServedAreRefusedBySection(t *testing.T) {
	src := configtest.Corpus(t)["../config/testdata/fuzz/FuzzParse/names"]
	f, perr := config.Parse("names.conf", src)
	p := Make(f, perr, fixture(t, "vm"), false)
	text := notes(p)
	for _, want := range []string{
		`PROBLEM names.conf:3: [x.value:derived]: metric perfevent.derived.x.value.value would sit below perfevent.derived.x.value, the metric of line 1; section skipped`,
		`PROBLEM names.conf:5: derived name ".lead" has an empty part`,
		`PROBLEM names.conf:7: derived name "trail." has an empty part`,
		`PROBLEM names.conf:9: derived name "d..d" has an empty part`,
		`PROBLEM names.conf:11: [active.x:derived]: metric perfevent.derived.active.x.value would sit below perfevent.derived.active, the agent's own metric; section skipped`,
		`PROBLEM names.conf:18: RAW:a.dutycycle: metric perfevent.hwcounters.RAW_a.dutycycle.value would sit below perfevent.hwcounters.RAW_a.dutycycle, the metric of line 17; line skipped`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("notes lack %q:\n%s", want, text)
		}
	}
	var got []string
	for _, d := range p.Derived {
		got = append(got, d.Metric)
	}
	if !slices.Equal(got, []string{"x", "ok"}) {
		t.Errorf("derived %v, want x and ok", got)
	}
}
