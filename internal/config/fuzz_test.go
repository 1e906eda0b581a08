package config

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// FuzzParse checks that Parse never panics, that every position it reports
// lies in the input, that what it keeps obeys the documented invariants, and
// that writing the result back out and parsing it again gives the same file.
//
//	go test -run '^$' -fuzz FuzzParse ./internal/config
func FuzzParse(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*.conf")
	seeds = append(seeds, "../../perfevent.conf")
	for _, path := range seeds {
		if src, err := os.ReadFile(path); err == nil {
			f.Add(src)
		}
	}
	f.Add([]byte(sections))
	f.Add([]byte(derived))
	f.Fuzz(func(t *testing.T, src []byte) {
		file, err := Parse(name, src)
		if file == nil {
			t.Fatal("nil File")
		}
		lines := strings.Count(string(src), "\n") + 1
		inRange := func(what string, p Pos) {
			if p.File != name || p.Line < 1 || p.Line > lines {
				t.Fatalf("%s at %v, outside the %d lines of input", what, p, lines)
			}
		}
		if err != nil {
			var list ErrorList
			if !errors.As(err, &list) || len(list) == 0 {
				t.Fatalf("error %v is not a non-empty ErrorList", err)
			}
			for i, e := range list {
				inRange("error", e.Pos)
				if i > 0 && e.Pos.Line < list[i-1].Pos.Line {
					t.Fatalf("errors out of line order: %v", err)
				}
			}
		}
		checkInvariants(t, file, inRange)

		text := format(file)
		for _, l := range strings.Split(text, "\n") {
			if len(l) > MaxLine {
				// Quoting can lengthen a line that was within the limit;
				// such a file cannot round-trip, by design.
				return
			}
		}
		again, err := Parse(name, []byte(text))
		if err != nil {
			t.Fatalf("re-parsing the formatted file failed: %v\n%s", err, text)
		}
		if a, b := withoutPos(file), withoutPos(again); !reflect.DeepEqual(a, b) {
			t.Fatalf("round trip changed the file:\n got %s\nwant %s\ntext:\n%s", dump(b.Sections), dump(a.Sections), text)
		}
	})
}

func checkInvariants(t *testing.T, file *File, inRange func(string, Pos)) {
	last := 0
	after := func(what string, p Pos) {
		inRange(what, p)
		if p.Line <= last {
			t.Fatalf("%s at %v does not follow line %d", what, p, last)
		}
		last = p.Line
	}
	for _, s := range file.Sections {
		after("section", s.Pos)
		switch s.Kind {
		case PMUSection:
			if len(s.PMUs) == 0 || len(s.Events) == 0 {
				t.Fatalf("PMU section %s at %v kept without names or events", s.Header(), s.Pos)
			}
			for _, n := range s.PMUs {
				if n == "" {
					t.Fatalf("empty PMU name at %v", s.Pos)
				}
			}
		case DerivedSection:
			if s.Name == "" || len(s.Groups) == 0 {
				t.Fatalf("derived section at %v kept without a name or groups", s.Pos)
			}
		}
		for _, e := range s.Events {
			after("event", e.Pos)
			if e.Name == "" || !isLetter(e.Name[0]) || badNameChar(e.Name) >= 0 {
				t.Fatalf("bad event name %q kept at %v", e.Name, e.Pos)
			}
			if e.HasRawCode != strings.HasPrefix(e.Name, "RAW:") || (e.HasRawCode && s.Kind != PMUSection) {
				t.Fatalf("rawcode on %q at %v", e.Name, e.Pos)
			}
			if s.Kind == DynamicSection && !strings.Contains(e.Name, ".") {
				t.Fatalf("dynamic event %q kept at %v", e.Name, e.Pos)
			}
			if len(e.Params) > 0 && s.Kind != DynamicSection {
				t.Fatalf("parameters on %q at %v", e.Name, e.Pos)
			}
			for _, p := range e.Params {
				if p.Name == "domain" && (p.Value < 1 || p.Value > 6) {
					t.Fatalf("domain:%d kept at %v", p.Value, e.Pos)
				}
			}
		}
		for _, g := range s.Groups {
			if len(g.Terms) == 0 || g.Pos != g.Terms[0].Pos {
				t.Fatalf("group at %v is empty or misplaced", g.Pos)
			}
			for _, m := range g.Terms {
				after("member", m.Pos)
				if math.IsInf(m.Scale, 0) || math.IsNaN(m.Scale) || m.Scale < 0 {
					t.Fatalf("scale %v kept at %v", m.Scale, m.Pos)
				}
			}
		}
	}
}

// format writes a File back out in the grammar Parse reads.
func format(f *File) string {
	var b strings.Builder
	for _, s := range f.Sections {
		names := s.PMUs
		switch s.Kind {
		case DynamicSection:
			names = []string{"dynamic"}
		case DerivedSection:
			names = []string{s.Name + ":derived"}
		}
		b.WriteByte('[')
		for i, n := range names {
			if i > 0 {
				b.WriteByte(' ')
			}
			if strings.ContainsAny(n, blanks+",]\"") || n[0] == '#' {
				n = `"` + n + `"`
			}
			b.WriteString(n)
		}
		b.WriteString("]\n")
		for _, e := range s.Events {
			b.WriteString(e.Name)
			if o := e.CPU.String(); o != "" {
				b.WriteString(" " + o)
			}
			if e.HasRawCode {
				b.WriteString(" rawcode=0x" + strconv.FormatUint(e.RawCode, 16))
			}
			for _, p := range e.Params {
				b.WriteString(" " + p.String())
			}
			b.WriteByte('\n')
		}
		for i, g := range s.Groups {
			if i > 0 {
				b.WriteString("||\n")
			}
			for _, m := range g.Terms {
				b.WriteString(m.Event)
				if o := m.CPU.String(); o != "" {
					b.WriteString(" " + o)
				}
				if m.PerfScale {
					b.WriteString(" perf_scale")
				} else if m.Scale != 1 {
					sc := strconv.FormatFloat(m.Scale, 'g', -1, 64)
					if !strings.ContainsAny(sc, ".e") {
						sc += ".0" // bare digits would read as a CPU index
					}
					b.WriteString(" " + sc)
				}
				b.WriteByte('\n')
			}
		}
	}
	return b.String()
}

// withoutPos copies f with every position cleared.
func withoutPos(f *File) *File {
	out := &File{Path: f.Path}
	for _, s := range f.Sections {
		c := *s
		c.Pos = Pos{}
		c.Events = nil
		for _, e := range s.Events {
			e.Pos = Pos{}
			c.Events = append(c.Events, e)
		}
		c.Groups = nil
		for _, g := range s.Groups {
			ng := Group{}
			for _, m := range g.Terms {
				m.Pos = Pos{}
				ng.Terms = append(ng.Terms, m)
			}
			c.Groups = append(c.Groups, ng)
		}
		out.Sections = append(out.Sections, &c)
	}
	return out
}
