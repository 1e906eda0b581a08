package pmu

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseFormat(t *testing.T) {
	tests := []struct {
		text  string
		field Field
		bits  []BitRange
		width uint
	}{
		{"config:0-7\n", Config, []BitRange{{0, 7}}, 8},
		{"config:18", Config, []BitRange{{18, 18}}, 1},
		{"config1:0-15", Config1, []BitRange{{0, 15}}, 16},
		{"config2:0-63", Config2, []BitRange{{0, 63}}, 64},
		{"config1:1,6-10,44", Config1, []BitRange{{1, 1}, {6, 10}, {44, 44}}, 7},
		// Ranges out of order still fill from the lowest bit up.
		{"config:44,1,6-10", Config, []BitRange{{1, 1}, {6, 10}, {44, 44}}, 7},
		{"config3:0-3", Config3, []BitRange{{0, 3}}, 4},
	}
	for _, tt := range tests {
		f, err := ParseFormat("x", tt.text)
		if err != nil {
			t.Errorf("ParseFormat(%q): %v", tt.text, err)
			continue
		}
		if f.Field != tt.field || !reflect.DeepEqual(f.Ranges, tt.bits) || f.Width() != tt.width {
			t.Errorf("ParseFormat(%q) = %v %v width %d, want %v %v width %d", tt.text, f.Field, f.Ranges, f.Width(), tt.field, tt.bits, tt.width)
		}
	}
}

func TestParseFormatErrors(t *testing.T) {
	tests := map[string]string{
		"config0-7":     `"config0-7" is not field:bits`,
		"config4:0-7":   `unknown field "config4" (want config, config1, config2 or config3)`,
		"config:64":     `bad bit "64" in "config:64"`,
		"config:7-0":    `bad bit range "7-0" in "config:7-0"`,
		"config:x":      `bad bit "x" in "config:x"`,
		"config:0-7,5":  `overlapping bit ranges in "config:0-7,5"`,
		"config:":       `bad bit "" in "config:"`,
		"config:1-2-3":  `bad bit range "1-2-3" in "config:1-2-3"`,
		"config1:0-999": `bad bit range "0-999" in "config1:0-999"`,
	}
	for text, want := range tests {
		_, err := ParseFormat("x", text)
		if err == nil || err.Error() != want {
			t.Errorf("ParseFormat(%q) error = %v, want %s", text, err, want)
		}
	}
}

func TestFormatPlace(t *testing.T) {
	multi, _ := ParseFormat("fe", "config1:1,6-10,44")
	tests := []struct {
		f    string
		v    uint64
		want uint64
	}{
		{"config:0-7", 0x3c, 0x3c},
		{"config:8-15", 0x1, 0x100},
		{"config:0-63", ^uint64(0), ^uint64(0)},
		{"config:63", 1, 1 << 63},
		// Low value bits go to the lowest range: bit 0 -> 1, bits 1-5 ->
		// 6-10, bit 6 -> 44.
		{"config1:1,6-10,44", 0x7f, 1<<1 | 0x1f<<6 | 1<<44},
		{"config1:1,6-10,44", 0x40, 1 << 44},
		{"config1:1,6-10,44", 0x3, 1<<1 | 1<<6},
	}
	for _, tt := range tests {
		f, err := ParseFormat("x", tt.f)
		if err != nil {
			t.Fatal(err)
		}
		got, err := f.Place(tt.v)
		if err != nil || got != tt.want {
			t.Errorf("%s.Place(%#x) = %#x, %v; want %#x", tt.f, tt.v, got, err, tt.want)
		}
	}
	if _, err := multi.Place(0x80); err == nil || err.Error() != "value 0x80 does not fit fe=config1:1,6-10,44 (7 bits, max 0x7f)" {
		t.Errorf("Place(0x80) error = %v", err)
	}
}

func TestParseTerms(t *testing.T) {
	got, err := ParseTerms("event=0xc2, umask=0x1,inv,cmask=1,chip=?\n")
	if err != nil {
		t.Fatal(err)
	}
	want := []Term{{"event", 0xc2, false}, {"umask", 1, false}, {"inv", 1, false}, {"cmask", 1, false}, {"chip", 0, true}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ParseTerms = %+v, want %+v", got, want)
	}
	for text, msg := range map[string]string{
		"":                          "empty term list",
		"event=0x3c,":               `empty term in "event=0x3c,"`,
		"event=zz":                  `term event: value "zz" is not a number`,
		"=1":                        `empty term in "=1"`,
		"event=0x1ffffffffffffffff": `term event: value "0x1ffffffffffffffff" is not a number`,
	} {
		if _, err := ParseTerms(text); err == nil || err.Error() != msg {
			t.Errorf("ParseTerms(%q) error = %v, want %s", text, err, msg)
		}
	}
}

// The flags of the first processor are there by their whole names, and
// nothing else is: not a prefix of one, not another processor's, not "".
func TestCPUFlags(t *testing.T) {
	text := "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 85\n" +
		"flags\t\t: fpu vme\tavx512f arch_perfmon  pni\n\nprocessor\t: 1\nflags\t\t: fpu sse4_2\n"
	c, err := parseCPUInfo("cpuinfo", strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	for flag, want := range map[string]bool{
		"fpu": true, "vme": true, "avx512f": true, "arch_perfmon": true, "pni": true,
		"avx512": false, "arch": false, "sse4_2": false, "": false, "fpu vme": false,
	} {
		if got := c.Flags.Has(flag); got != want {
			t.Errorf("Flags %q: Has(%q) = %v, want %v", c.Flags, flag, got, want)
		}
	}
	if CPUFlags("").Has("fpu") {
		t.Error(`CPUFlags("").Has("fpu") = true`)
	}
}
