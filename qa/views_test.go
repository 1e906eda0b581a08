package qa

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Every pmrep view either shows values on this machine or says, in the
// comment above it, what it needs; and the view file explains pmrep's
// "Not one known metric found.", which is all pmrep says of an empty view.
func TestPmrepViewsSayWhatTheyNeed(t *testing.T) {
	path := filepath.Join(repoRoot(), "install", "pcp", "pmrep-perfevent-go.conf")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	if !strings.Contains(text, `"Not one known metric found."`) {
		t.Errorf("%s does not explain pmrep's \"Not one known metric found.\"", path)
	}
	l := StartLab(t, Agent{Go: true, Config: VMConfig})
	needClient(t, l, "pmrep")
	section := regexp.MustCompile(`(?m)((?:^#.*\n)*)^\[([\w-]+)\]\n`)
	views := section.FindAllStringSubmatch(text, -1)
	if len(views) == 0 {
		t.Fatalf("%s: no views", path)
	}
	for _, v := range views {
		comment, name := v[1], v[2]
		r := l.RunErr(t, "pmrep", "-c", path, "-h", l.HostSpec(), "-t", "0.5", "-s", "2", ":"+name)
		empty := strings.Contains(r.Stdout+r.Stderr, "Not one known metric found")
		switch {
		case empty && !strings.Contains(comment, "Needs"):
			t.Errorf("pmrep :%s shows nothing here and the view does not say what it needs:\n%s", name, r)
		case !empty && r.Err != nil:
			t.Errorf("pmrep :%s: %s", name, r)
		}
		t.Logf(":%s: empty here %v", name, empty)
	}
}
