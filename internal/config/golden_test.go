package config

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the parser's output")

// TestGolden parses each testdata/*.conf and compares a full listing of the
// result, errors included, with testdata/*.golden.
func TestGolden(t *testing.T) {
	confs, err := filepath.Glob("testdata/*.conf")
	if err != nil || len(confs) == 0 {
		t.Fatalf("no testdata/*.conf: %v", err)
	}
	for _, conf := range confs {
		t.Run(filepath.Base(conf), func(t *testing.T) {
			src, err := os.ReadFile(conf)
			if err != nil {
				t.Fatal(err)
			}
			f, err := Parse(filepath.Base(conf), src)
			got := listing(f, err)
			golden := strings.TrimSuffix(conf, ".conf") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("%s differs from %s:\n--- got\n%s--- want\n%s", conf, golden, got, want)
			}
		})
	}
}

// listing renders a parse result one item per line.
func listing(f *File, err error) string {
	var b strings.Builder
	var list ErrorList
	errors.As(err, &list)
	for _, e := range list {
		fmt.Fprintf(&b, "error %s\n", e)
	}
	for _, s := range f.Sections {
		fmt.Fprintf(&b, "%d: %s section %s\n", s.Pos.Line, s.Kind, s.Header())
		for _, e := range s.Events {
			fmt.Fprintf(&b, "  %d: event %s cpu=%q", e.Pos.Line, e.Name, e.CPU.String())
			if e.HasRawCode {
				fmt.Fprintf(&b, " rawcode=%#x", e.RawCode)
			}
			for _, p := range e.Params {
				fmt.Fprintf(&b, " %s", p)
			}
			b.WriteByte('\n')
		}
		for i, g := range s.Groups {
			fmt.Fprintf(&b, "  %d: group %d\n", g.Pos.Line, i+1)
			for _, m := range g.Terms {
				fmt.Fprintf(&b, "    %d: member %s cpu=%q scale=%g perf_scale=%v\n",
					m.Pos.Line, m.Event, m.CPU.String(), m.Scale, m.PerfScale)
			}
		}
	}
	return b.String()
}

// TestShippedConfig checks the perfevent.conf at the top of the repository:
// it must parse cleanly, with [perf] (present everywhere) holding both the
// generic hardware and the software events, and every derived member
// naming one of them.
func TestShippedConfig(t *testing.T) {
	f, err := ParseFile("../../perfevent.conf")
	if err != nil {
		t.Fatalf("the shipped perfevent.conf has errors:\n%v", err)
	}
	sec, why := f.ChoosePMUSection(func(pmu string) bool { return pmu == "perf" })
	if sec == nil || sec.PMUs[0] != "perf" {
		t.Fatalf("on a machine with only the generic PMU no [perf] section is chosen: %q", why)
	}
	var names []string
	for _, e := range sec.Events {
		names = append(names, e.Name)
		if e.CPU.Kind != CPUDefault {
			t.Errorf("%v: %s has CPU option %s; the defaults should count on every CPU", e.Pos, e.Name, e.CPU)
		}
	}
	for _, want := range []string{
		"cycles", "instructions", "branch-instructions", "branch-misses",
		"cache-references", "cache-misses", "stalled-cycles-frontend", "stalled-cycles-backend",
		"cpu-clock", "task-clock", "page-faults", "context-switches",
		"cpu-migrations", "minor-faults", "major-faults",
	} {
		if !slices.Contains(names, want) {
			t.Errorf("[perf] lacks %s", want)
		}
	}
	// On a VM without a hardware PMU only the software events open; every
	// derived section must still have a group made of them, or of hardware
	// events on real hardware.
	software := []string{"cpu-clock", "task-clock", "page-faults", "context-switches", "cpu-migrations", "minor-faults", "major-faults"}
	vmOK := 0
	for _, d := range f.DerivedSections() {
		for _, g := range d.Groups {
			for _, m := range g.Terms {
				if !slices.Contains(names, m.Event) {
					t.Errorf("%v: derived member %s is not an event of [perf]", m.Pos, m.Event)
				}
			}
		}
		_, err := d.ChooseGroup(func(ev string) ([]int, bool) {
			return []int{0, 1}, slices.Contains(software, ev)
		})
		if err == nil {
			vmOK++
		}
	}
	if vmOK < 2 {
		t.Errorf("only %d derived metrics work on a VM without a hardware PMU", vmOK)
	}
	// PCP 6.0.3's C agent ignores derived sections that follow [dynamic].
	sawDynamic := false
	for _, s := range f.Sections {
		switch s.Kind {
		case DynamicSection:
			sawDynamic = true
		case DerivedSection:
			if sawDynamic {
				t.Errorf("%v: %s follows [dynamic]; the C agent would ignore it", s.Pos, s.Header())
			}
		}
	}
	dyn := f.DynamicEvents()
	if len(dyn) == 0 || dyn[0].Name != "msr.tsc" {
		t.Errorf("[dynamic] events = %+v, want msr.tsc", dyn)
	}
}
