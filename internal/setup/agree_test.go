package setup

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"perfevent/internal/config"
)

// corpus returns the config fuzz corpus and the config fixtures, by name.
func corpus(t *testing.T) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	seeds, _ := filepath.Glob("../config/testdata/fuzz/FuzzParse/*")
	for _, path := range seeds {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		// "go test fuzz v1", then []byte("...") for the one argument.
		_, arg, _ := bytes.Cut(data, []byte("\n"))
		arg = bytes.TrimSpace(arg)
		quoted, ok := bytes.CutPrefix(arg, []byte("[]byte("))
		src, err := strconv.Unquote(string(bytes.TrimSuffix(quoted, []byte(")"))))
		if !ok || err != nil {
			t.Fatalf("%s: not a []byte corpus entry: %v", path, err)
		}
		out[path] = []byte(src)
	}
	confs, _ := filepath.Glob("../config/testdata/*.conf")
	confs = append(confs, "../../perfevent.conf")
	for _, path := range confs {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		out[path] = data
	}
	if len(out) < 10 {
		t.Fatalf("only %d inputs", len(out))
	}
	return out
}

// Names the PMNS cannot carry are refused line by line, and the rest is served.
func TestNamesThatCannotBeServedAreRefusedBySection(t *testing.T) {
	src := corpus(t)["../config/testdata/fuzz/FuzzParse/names"]
	f, perr := config.Parse("names.conf", src)
	p := Make(f, perr, fixture(t, "vm"), false)
	text := notes(p)
	for _, want := range []string{
		`PROBLEM names.conf:3: [x.value:derived]: metric perfevent.derived.x.value.value would sit below perfevent.derived.x.value, the metric of line 1; section skipped`,
		`PROBLEM names.conf:5: derived name ".lead" has an empty part`,
		`PROBLEM names.conf:7: derived name "trail." has an empty part`,
		`PROBLEM names.conf:9: derived name "d..d" has an empty part`,
		`PROBLEM names.conf:11: [active.x:derived]: metric perfevent.derived.active.x.value would sit below perfevent.derived.active, the agent's own metric; section skipped`,
		`PROBLEM names.conf:18: RAW:a.dutycycle: metric perfevent.hwcounters.RAW_a.dutycycle.value would sit below perfevent.hwcounters.RAW_a.dutycycle, the metric of line 17; line skipped`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("notes lack %q:\n%s", want, text)
		}
	}
	var got []string
	for _, d := range p.Derived {
		got = append(got, d.Metric)
	}
	if !slices.Equal(got, []string{"x", "ok"}) {
		t.Errorf("derived %v, want x and ok", got)
	}
}
