package catalog

import (
	"slices"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"perfevent/internal/counter"
	"perfevent/internal/ratio"
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

// A family is built once however many goroutines ask for it first at the
// same time: each gets the one Family.
func TestFamiliesBuiltOnceConcurrently(t *testing.T) {
	const n = 8
	all := append(slices.Clone(families), lazyFamily{once: &genericFamily})
	got := make([][n]*Family, len(all))
	var start, wg sync.WaitGroup
	start.Add(1)
	for g := 0; g < n; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start.Wait()
			for i, f := range all {
				got[i][g] = f.get()
			}
		}()
	}
	start.Done()
	wg.Wait()
	for i, f := range all {
		want := f.get()
		if want == nil || len(want.Metrics) == 0 {
			t.Fatalf("family %d: %v", i, want)
		}
		for g := 0; g < n; g++ {
			if got[i][g] != want {
				t.Errorf("%s: goroutine %d got another Family", want.Name, g)
			}
		}
	}
	if generic() != all[len(all)-1].get() {
		t.Error("generic() is not the generic family built once")
	}
}

// TestEveryFamilysGroupsFit: each family's ratios, with every operand
// opened under its first name as the catalog opens them, form perf groups
// within the family's general-purpose counters (its Fixed events and the
// software and msr ones taking none), so that no ratio of the catalog is
// counted apart. The generic family knows nothing of the machine's fixed
// counters: its instructions, cycles and three misses are five events for
// four counters, and the one that does not fit is counted apart.
func TestEveryFamilysGroupsFit(t *testing.T) {
	soft := func(sp counter.Spec) bool {
		return sp.Attr.Type == unix.PERF_TYPE_SOFTWARE || strings.HasPrefix(sp.Name, "msr.") || strings.HasPrefix(sp.Name, "power.")
	}
	for _, f := range Families() {
		var specs []counter.Spec
		for _, d := range f.Metrics {
			if err := d.Check(); err != nil {
				t.Errorf("%s: %v", f.Name, err)
			}
			for _, term := range Operands(d) {
				name := Alternatives(term)[0]
				if slices.ContainsFunc(specs, func(sp counter.Spec) bool { return sp.Name == name }) {
					continue
				}
				sp := counter.Spec{Name: name, Attr: unix.PerfEventAttr{Type: unix.PERF_TYPE_RAW}}
				if name == "cpu-clock" {
					sp.Attr.Type = unix.PERF_TYPE_SOFTWARE
				}
				specs = append(specs, sp)
			}
		}
		apart := ratio.GroupFit(specs, f.Metrics, f.Fit(soft))
		if f.Name == "generic" {
			if len(apart) != 1 || !strings.Contains(apart[0], "5 counters") {
				t.Errorf("generic: counted apart %q, want one ratio of 5 counters", apart)
			}
			continue
		}
		if len(apart) > 0 {
			t.Errorf("%s: %q", f.Name, apart)
		}
		if len(specs) == 0 || !slices.ContainsFunc(specs, func(sp counter.Spec) bool { return sp.Group != "" }) {
			t.Errorf("%s: no group formed of %d operands", f.Name, len(specs))
		}
	}
}
