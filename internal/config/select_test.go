package config

import (
	"reflect"
	"slices"
	"testing"
)

const sections = `[amd64_fam10h_barcelona amd64_fam10h_shanghai]
a
[hsw]
b
[dynamic]
msr.tsc
[ipc:derived]
b
[skl snb]
c
[perf]
d
`

func TestChoosePMUSection(t *testing.T) {
	f := mustParse(t, sections)
	tests := []struct {
		name    string
		present []string
		chosen  int // line of the chosen header, 0 for none
		why     []string
	}{{
		name:    "first matching section wins over the later generic one",
		present: []string{"perf", "snb"},
		chosen:  9,
		why: []string{
			"perfevent.conf:1: [amd64_fam10h_barcelona amd64_fam10h_shanghai] skipped: no PMU named amd64_fam10h_barcelona or amd64_fam10h_shanghai on this machine",
			"perfevent.conf:3: [hsw] skipped: no PMU named hsw on this machine",
			"perfevent.conf:9: [skl snb] chosen: PMU snb is present",
			"perfevent.conf:11: [perf] not used: [skl snb] at line 9 comes first",
		},
	}, {
		name:    "file order, not machine order",
		present: []string{"hsw", "amd64_fam10h_shanghai"},
		chosen:  1,
		why: []string{
			"perfevent.conf:1: [amd64_fam10h_barcelona amd64_fam10h_shanghai] chosen: PMU amd64_fam10h_shanghai is present",
			"perfevent.conf:3: [hsw] not used: [amd64_fam10h_barcelona amd64_fam10h_shanghai] at line 1 comes first",
			"perfevent.conf:9: [skl snb] not used: [amd64_fam10h_barcelona amd64_fam10h_shanghai] at line 1 comes first",
			"perfevent.conf:11: [perf] not used: [amd64_fam10h_barcelona amd64_fam10h_shanghai] at line 1 comes first",
		},
	}, {
		name:    "nothing matches",
		present: nil,
		chosen:  0,
		why: []string{
			"perfevent.conf:1: [amd64_fam10h_barcelona amd64_fam10h_shanghai] skipped: no PMU named amd64_fam10h_barcelona or amd64_fam10h_shanghai on this machine",
			"perfevent.conf:3: [hsw] skipped: no PMU named hsw on this machine",
			"perfevent.conf:9: [skl snb] skipped: no PMU named skl or snb on this machine",
			"perfevent.conf:11: [perf] skipped: no PMU named perf on this machine",
			"perfevent.conf: no PMU section names a PMU of this machine; only [dynamic] and derived sections apply",
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sec, why := f.ChoosePMUSection(func(pmu string) bool { return slices.Contains(tc.present, pmu) })
			line := 0
			if sec != nil {
				line = sec.Pos.Line
				if sec.Kind != PMUSection {
					t.Errorf("chose a %v section", sec.Kind)
				}
			}
			if line != tc.chosen {
				t.Errorf("chose the section at line %d, want %d", line, tc.chosen)
			}
			if !reflect.DeepEqual(why, tc.why) {
				t.Errorf("why:\n got %q\nwant %q", why, tc.why)
			}
		})
	}
}

func TestOrList(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want string
	}{{nil, ""}, {[]string{"a"}, "a"}, {[]string{"a", "b"}, "a or b"}, {[]string{"a", "b", "c"}, "a, b or c"}} {
		if got := orList(tc.in); got != tc.want {
			t.Errorf("orList(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

const derived = `[bw:derived]
imc0_rd node perf_scale
imc0_wr node perf_scale
||
cas_rd 0.5
cas_wr cpu 0.5
||
rd_any
`

func TestChooseGroup(t *testing.T) {
	f := mustParse(t, derived)
	sec := f.Sections[0]
	two, one := []int{0, 1}, []int{0}
	tests := []struct {
		name      string
		available map[string][]int
		group     int // line of the chosen group, 0 for none
		err       string
	}{{
		name:      "first complete group wins",
		available: map[string][]int{"imc0_rd": one, "imc0_wr": one, "cas_rd": two, "cas_wr": two, "rd_any": two},
		group:     2,
	}, {
		name:      "a missing member moves on",
		available: map[string][]int{"imc0_rd": one, "cas_rd": two, "cas_wr": two},
		group:     5,
	}, {
		name:      "the default and cpu agree",
		available: map[string][]int{"cas_rd": two, "cas_wr": two},
		group:     5,
	}, {
		name:      "last group",
		available: map[string][]int{"rd_any": two},
		group:     8,
	}, {
		name:      "nothing usable",
		available: map[string][]int{"imc0_wr": one, "cas_rd": two, "cas_wr": one},
		err: "perfevent.conf:1: derived metric bw is unavailable: the group at line 2 lacks imc0_rd; " +
			"the group at line 5 mixes CPU counts: cas_rd counts on 2 CPUs but cas_wr on 1; " +
			"the group at line 8 lacks rd_any",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, err := sec.ChooseGroup(func(ev string) ([]int, bool) {
				cpus, ok := tc.available[ev]
				return cpus, ok
			})
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("err = %v\nwant %s", err, tc.err)
				}
				if g != nil {
					t.Errorf("got a group with an error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if g.Pos.Line != tc.group {
				t.Errorf("chose the group at line %d, want %d", g.Pos.Line, tc.group)
			}
		})
	}
}

func TestChooseGroupCPUOptionMismatch(t *testing.T) {
	f := mustParse(t, "[x:derived]\na node\nb cpu_rr\n||\nc\nd 1\n")
	_, err := f.Sections[0].ChooseGroup(func(string) ([]int, bool) { return []int{0}, true })
	want := "perfevent.conf:1: derived metric x is unavailable: " +
		"the group at line 2 mixes CPU options: a has node but b has cpu_rr; " +
		"the group at line 5 mixes CPU options: c has cpu (the default) but d has 1"
	if err == nil || err.Error() != want {
		t.Errorf("err = %v\nwant %s", err, want)
	}
}

func TestChooseGroupOnOtherSections(t *testing.T) {
	f := mustParse(t, "[perf]\ncycles\n")
	_, err := f.Sections[0].ChooseGroup(func(string) ([]int, bool) { return nil, true })
	if err == nil || err.Error() != "perfevent.conf:1: [perf] is not a derived section" {
		t.Errorf("err = %v", err)
	}
	empty := &Section{Pos: at(3), Kind: DerivedSection, Name: "e"}
	_, err = empty.ChooseGroup(func(string) ([]int, bool) { return nil, true })
	if err == nil || err.Error() != "perfevent.conf:3: [e:derived] has no members" {
		t.Errorf("err = %v", err)
	}
}
