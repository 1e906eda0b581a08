package catalog

import (
	"slices"
	"testing"
)

// Detect picks a family by the PMUs listed beside its builder, before
// building it: they must be the ones the family says it covers.
func TestFamilyPMUsMatchTheirBuilders(t *testing.T) {
	for _, f := range families {
		got := f.get()
		if !slices.Equal(got.PMUs, f.pmus) {
			t.Errorf("%s: Detect matches PMUs %q, the family says %q", got.Name, f.pmus, got.PMUs)
		}
		if f.get() != got {
			t.Errorf("%s: built twice", got.Name)
		}
		for _, p := range f.pmus {
			if d := Detect([]string{"perf", p}); d != got {
				t.Errorf("Detect(%q) = %s, want %s", p, d.Name, got.Name)
			}
		}
	}
	if g := Detect([]string{"perf"}); g != generic() || g.Name != "generic" {
		t.Errorf("Detect of no known PMU = %s, want the generic family", g.Name)
	}
}
