package pmda

import (
	"strings"
	"testing"
)

func TestParseHelp(t *testing.T) {
	src := `#
# help for the example agent
#

@ example.version Agent version
The version of the example agent.
Second line.


@ 127.2.0 The values of the counter
@ 127.2 per cpu
Instance domain of the counters.
@ example.bare
`
	h, err := ParseHelp(strings.NewReader(src), "help")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]HelpText{
		"example.version": {"Agent version", "The version of the example agent.\nSecond line.", 5},
		"127.2.0":         {"The values of the counter", "", 10},
		"127.2":           {"per cpu", "Instance domain of the counters.", 11},
		"example.bare":    {"", "", 13},
	}
	if len(h) != len(want) {
		t.Fatalf("got %d entries: %+v", len(h), h)
	}
	for k, w := range want {
		if h[k] != w {
			t.Errorf("%s = %+v, want %+v", k, h[k], w)
		}
	}
	for src, msg := range map[string]string{
		"@\n":                   "help:1: \"@\" without",
		"text\n@ a b\n":         "help:1: text before the first",
		"@ a x\n@ b y\n@ a z\n": "help:3: a already has help text at line 1",
	} {
		if _, err := ParseHelp(strings.NewReader(src), "help"); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%q: %v, want %q", src, err, msg)
		}
	}
}
