package ratio

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	text := `# my ratios
l1d_miss_ratio = L1-dcache-load-misses / L1-dcache-loads
faults_per_cpu_second = page-faults/cpu-clock * 1e9 per-second   # comment
bad line here
zero = a / b * 0
nan = a / b * x
`
	defs, err := Parse("ratios.conf", []byte(text))
	if len(defs) != 2 {
		t.Fatalf("got %d definitions: %+v", len(defs), defs)
	}
	if d := defs[0]; d.Name != "l1d_miss_ratio" || !slices.Equal(d.Num, []string{"L1-dcache-load-misses"}) || d.Den != "L1-dcache-loads" || d.Scale != 1 || d.Unit != Pure {
		t.Errorf("first: %+v", d)
	}
	if d := defs[1]; d.Name != "faults_per_cpu_second" || !slices.Equal(d.Num, []string{"page-faults"}) || d.Den != "cpu-clock" || d.Scale != 1e9 || d.Unit != PerSecond {
		t.Errorf("second: %+v", d)
	}
	for _, want := range []string{"ratios.conf:4: want", "ratios.conf:5: ratio \"zero\": scale 0", "ratios.conf:6: scale \"x\""} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v; want it to mention %q", err, want)
		}
	}
}

func TestParseFileMissingIsEmpty(t *testing.T) {
	defs, err := ParseFile(filepath.Join(t.TempDir(), "ratios.conf"))
	if defs != nil || err != nil {
		t.Errorf("missing file: %v, %v", defs, err)
	}
}

func TestParseSumsAndWallClock(t *testing.T) {
	text := "imc = uncore_imc_*.cas_count_read + uncore_imc_*.cas_count_write / duration_time * 64e9 bytes-per-second\n" +
		"faults=minor-faults+major-faults/cpu-clock*1e9 per-second\n" +
		"empty = a + / b\n" +
		"spaced = a b / c\n"
	defs, err := Parse("r.conf", []byte(text))
	if len(defs) != 2 {
		t.Fatalf("got %+v, %v", defs, err)
	}
	d := defs[0]
	if !slices.Equal(d.Num, []string{"uncore_imc_*.cas_count_read", "uncore_imc_*.cas_count_write"}) || d.Den != Elapsed || d.Scale != 64e9 || d.Unit != BytesPerSecond {
		t.Errorf("imc: %+v", d)
	}
	if d := defs[1]; !slices.Equal(d.Num, []string{"minor-faults", "major-faults"}) || d.Den != "cpu-clock" || d.Scale != 1e9 || d.Unit != PerSecond {
		t.Errorf("faults: %+v", d)
	}
	if d.About != "(uncore_imc_*.cas_count_read + uncore_imc_*.cas_count_write) / duration_time × 6.4e+10, defined at r.conf:1." {
		t.Errorf("about: %q", d.About)
	}
	for _, want := range []string{"r.conf:3: want", "r.conf:4: want"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v; want it to mention %q", err, want)
		}
	}
}

// TestGroupSwitches: ratios.conf turns the catalog's groups off and on in
// order, and names a group this machine's catalog lacks.
func TestGroupSwitches(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ratios.conf")
	if err := os.WriteFile(path, []byte("disable catalog\nenable topdown\ndisable nosuch\nmine = a / b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cat := []Def{
		{Name: "ipc", Group: "ipc", Num: []string{"i"}, Den: "c", Scale: 1},
		{Name: "topdown_retiring", Group: "topdown", Num: []string{"r"}, Den: "s", Scale: 1},
	}
	defs, user, off, errs := DefsWith(path, cat)
	if user != 1 || defs[0].Name != "mine" || defs[1].Name != "topdown_retiring" || defs[2].Name != Builtin[0].Name {
		t.Errorf("defs %v, user %d", defs[:3], user)
	}
	if !slices.Equal(off, []string{"ipc"}) {
		t.Errorf("off %v, want [ipc]", off)
	}
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), `no group "nosuch"`) {
		t.Errorf("errs %v", errs)
	}
}

// validName is the grammar's ratio name, written out: it agrees with the
// regular expression of the grammar on every string of up to four bytes
// over letters, digits and the bytes around them.
func TestValidNameIsTheGrammarsName(t *testing.T) {
	re := regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]*$`)
	const alphabet = "@AZ[`az{/09:_-.\xc3"
	var walk func(s string)
	n := 0
	walk = func(s string) {
		n++
		if got, want := validName(s), re.MatchString(s); got != want {
			t.Fatalf("validName(%q) = %v, the grammar says %v", s, got, want)
		}
		if len(s) < 4 {
			for i := 0; i < len(alphabet); i++ {
				walk(s + alphabet[i:i+1])
			}
		}
	}
	walk("")
	if !validName("ipc") || !validName("l1d_miss_ratio") || validName("1ipc") || validName("") {
		t.Error("validName: ipc, l1d_miss_ratio yes; 1ipc and the empty name no")
	}
	t.Logf("%d names", n)
}
