package pcpconf

import (
	"maps"
	"strings"
	"testing"
)

// FuzzParse feeds arbitrary text to Parse as pcp.conf. Keys kept must be
// what an assignment line could name, and every pair written back as
// NAME="value" must parse to the same map.
//
//	go test -run '^$' -fuzz '^FuzzParse$' ./internal/pcpconf
func FuzzParse(f *testing.F) {
	f.Fuzz(func(t *testing.T, text string) {
		m, err := Parse(strings.NewReader(text))
		if m == nil || err != nil {
			t.Fatalf("Parse = %v, %v", m, err)
		}
		var b strings.Builder
		for k, v := range m {
			if strings.ContainsAny(k, " \t\n=") || strings.HasPrefix(k, "#") {
				t.Fatalf("kept key %q", k)
			}
			if strings.ContainsRune(v, '\n') || strings.HasPrefix(v, `"`) || strings.HasSuffix(v, `'`) {
				t.Fatalf("kept value %q for %s", v, k)
			}
			b.WriteString(k + `="` + v + "\"\n")
		}
		if again, _ := Parse(strings.NewReader(b.String())); !maps.Equal(again, m) {
			t.Fatalf("written back as\n%s\nparses to %q, want %q", b.String(), again, m)
		}
	})
}

// FuzzParseLineByLine: Parse keeps what reading the text a line at a time
// with strings' functions keeps, the way it was read before it cut the
// whole text at once.
//
//	go test -run '^$' -fuzz '^FuzzParseLineByLine$' ./internal/pcpconf
func FuzzParseLineByLine(f *testing.F) {
	f.Add("# c\nPCP_A=\"/a\"\n B = x\nC\t=y\r\n  PCP_D='d'  \nE==\"\nnot one\n\u00a0F=\u2028g\u0085\n=v\n")
	f.Fuzz(func(t *testing.T, text string) {
		want := map[string]string{}
		for _, line := range strings.SplitAfter(text, "\n") {
			if line = strings.TrimSpace(line); line != "" && line[0] != '#' {
				name, value, ok := strings.Cut(line, "=")
				if ok && !strings.ContainsAny(name, " \t") {
					want[name] = strings.Trim(value, `"'`)
				}
			}
		}
		got, err := Parse(strings.NewReader(text))
		if err != nil || !maps.Equal(got, want) {
			t.Fatalf("Parse = %q, %v; line by line %q", got, err, want)
		}
	})
}
