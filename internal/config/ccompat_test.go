package config

import (
	"regexp"
	"strings"
	"testing"
)

func TestCCompat(t *testing.T) {
	src := "[perf]\ncpu-clock\n  task-clock\n" +
		"[dynamic]\nsoftware.page-faults\nnosuch.event\n" +
		"[ms:derived]\ncpu-clock 1e-6\ntask-clock 0.000001\n" +
		"[hsw,perf]\ncycles\n" +
		"[dynamic]\nsoftware.cpu-clock\n"
	f, err := Parse("c.conf", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	present := func(pmu string) bool { return pmu == "software" }
	var got []string
	for _, e := range CCompat(f, []byte(src), present) {
		got = append(got, e.Error())
	}
	want := []string{
		`c.conf:3: the C agent rejects the whole file here ("Syntax error on line: 3"): it reads names and headers only at the start of a line; remove the leading blanks`,
		"c.conf:8: the C agent reads the scale 1e-6 as a CPU index and then rejects the whole file: write scales with a point and a digit after it, e.g. 0.000000001 for 1e-9",
		"c.conf:10: the C agent splits section headers on blanks only, so a comma joins the names around it into one; separate PMU names with blanks",
		"c.conf:7: the C agent 6.0.3 ignores derived sections that follow [dynamic] (line 4): move [ms:derived] above it",
		"c.conf:12: the C agent uses only the last [dynamic] section and drops the one at line 4; merge them",
		"c.conf:6: nosuch.event: this machine has no PMU nosuch; the C agent skips the line without a word, so a typo goes unnoticed there",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	empty, _ := Parse("empty.conf", []byte("# nothing\n"))
	if errs := CCompat(empty, []byte("# nothing\n"), present); len(errs) != 1 || errs[0].Pos.Line != 0 || errs[0].Msg != `empty.conf has no events: the C agent refuses to start ("Unable to create perf instance")` {
		t.Errorf("empty file: %v", errs)
	}
}

// isCScale is the C lexer's scale written out: it agrees with the regular
// expression of it on every string of up to six bytes over digits, the
// point, the exponent's letters and signs, and a letter that is none.
func TestIsCScaleIsTheCLexersScale(t *testing.T) {
	re := regexp.MustCompile(`^[0-9]*\.[0-9]+([eE][-+]?[0-9]+)?$`)
	const alphabet = "09.eE+-a"
	var walk func(s string)
	walk = func(s string) {
		if got, want := isCScale(s), re.MatchString(s); got != want {
			t.Fatalf("isCScale(%q) = %v, the C lexer's scale says %v", s, got, want)
		}
		if len(s) < 6 {
			for i := 0; i < len(alphabet); i++ {
				walk(s + alphabet[i:i+1])
			}
		}
	}
	walk("")
	if !isCScale("0.000000001") || !isCScale(".5e-3") || isCScale("1e-9") || isCScale("1.") {
		t.Error("isCScale: 0.000000001 and .5e-3 are scales; 1e-9 and 1. are not")
	}
}
