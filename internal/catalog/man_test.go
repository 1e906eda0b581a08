package catalog

import (
	"os"
	"strings"
	"testing"
)

// TestManPageIsUpToDate: perfevent.conf(5)'s catalog section is what
// ManSection writes now (go generate ./internal/catalog rewrites it).
func TestManPageIsUpToDate(t *testing.T) {
	src, err := os.ReadFile("../../man/perfevent.conf.5")
	if err != nil {
		t.Fatal(err)
	}
	s := string(src)
	i, j := strings.Index(s, ManBegin), strings.Index(s, ManEnd)
	if i < 0 || j < i {
		t.Fatalf("perfevent.conf(5) has no catalog section between %q and %q", ManBegin, ManEnd)
	}
	if got := s[i+len(ManBegin)+1 : j]; got != ManSection() {
		t.Errorf("perfevent.conf(5)'s catalog section is out of date: run go generate ./internal/catalog")
	}
	for _, f := range Families() {
		for _, d := range f.Metrics {
			if !strings.Contains(s, `\fB`+roff(d.Name)+`\fR (`+d.Group+`) = `+roff(d.Formula())) {
				t.Errorf("perfevent.conf(5) lacks %s's %s", f.Name, d.Name)
			}
		}
	}
}
