package cpulist

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for in, want := range map[string][]int{
		"0-3,8,10-11\n": {0, 1, 2, 3, 8, 10, 11},
		"0,18":          {0, 18},
		"5,1-2,2":       {1, 2, 5},
		"":              nil,
	} {
		got, err := Parse(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("Parse(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for in, msg := range map[string]string{
		"a":       `bad CPU number "a" in list "a"`,
		"3-1":     `bad CPU range "3-1" in list "3-1"`,
		"0-99999": `CPU 99999 out of range in list "0-99999"`,
		"-1":      `bad CPU number "" in list "-1"`,
	} {
		if _, err := Parse(in); err == nil || err.Error() != msg {
			t.Errorf("Parse(%q) error = %v, want %s", in, err, msg)
		}
	}
}

func TestFormat(t *testing.T) {
	for _, tc := range []struct {
		in   []int
		want string
	}{
		{nil, ""},
		{[]int{0}, "0"},
		{[]int{0, 1}, "0-1"},
		{[]int{0, 1, 2, 3, 5, 7, 8}, "0-3,5,7-8"},
		{[]int{2, 4, 6}, "2,4,6"},
	} {
		if got := Format(tc.in); got != tc.want {
			t.Errorf("Format(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// FuzzParse parses a kernel CPU list and checks that the result is
// sorted, distinct and in range, and that writing it back as ranges gives
// the same CPUs.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"0", "0-3", "0-3,8,10-11", "0,2-3\n", " 1 , 0 ", "0-65535", "3-1", "-1", "0-", ",", "1,1,1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cpus, err := Parse(s)
		if err != nil {
			if cpus != nil {
				t.Fatalf("Parse(%q) returned CPUs and error %v", s, err)
			}
			return
		}
		if strings.TrimSpace(s) == "" {
			if cpus != nil {
				t.Fatalf("Parse(%q) = %v, want nil", s, cpus)
			}
			return
		}
		if len(cpus) == 0 {
			t.Fatalf("Parse(%q) accepted a list of nothing", s)
		}
		for i, c := range cpus {
			if c < 0 || c >= 1<<16 || (i > 0 && c <= cpus[i-1]) {
				t.Fatalf("Parse(%q) = %v: not sorted, distinct and in 0-65535", s, cpus)
			}
		}
		text := Format(cpus)
		again, err := Parse(text)
		if err != nil || !slices.Equal(again, cpus) {
			t.Fatalf("Parse(%q) = %v, %v; from %q gave %v", text, again, err, s, cpus)
		}
	})
}

func TestDescribe(t *testing.T) {
	for _, tc := range []struct {
		cpus []int
		want string
	}{
		{nil, "no CPUs"},
		{[]int{3}, "cpu3"},
		{[]int{0, 1, 2, 3, 5}, "cpus 0-3,5"},
		{[]int{1, 0}, "cpus 1,0"},
	} {
		if got := Describe(tc.cpus); got != tc.want {
			t.Errorf("Describe(%v) = %q, want %q", tc.cpus, got, tc.want)
		}
	}
}
