package pmu

import (
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"perfevent/internal/hostfs"
)

// Every sysfs file this package parses is kernel text, but the package also
// reads fixture trees and SYSFS_PREFIX roots that anyone can build, and
// perfevent.conf names reach Resolve verbatim. These targets check that no
// input panics and that what a parser accepts means what it says.
//
//	go test -run '^$' -fuzz '^FuzzParseFormat$' ./internal/pmu

// fixtureFiles returns the contents of every file named base under the
// fixture trees' PMU directories, to seed a target with real kernel text.
func fixtureFiles(f *testing.F, sub string) []string {
	f.Helper()
	paths, _ := filepath.Glob(filepath.Join("testdata", "*", "sys", "bus", "event_source", "devices", "*", sub, "*"))
	var out []string
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil {
			out = append(out, string(b))
		}
	}
	return out
}

// FuzzParseFormat parses a format file, then checks that the ranges are
// sorted, disjoint and within 0-63, that String gives text that parses
// back to the same Format, and that Place puts exactly the bits of v that
// fit into the field's bits and nowhere else.
func FuzzParseFormat(f *testing.F) {
	for _, text := range fixtureFiles(f, "format") {
		f.Add(text, uint64(0xff))
	}
	f.Fuzz(func(t *testing.T, text string, v uint64) {
		fm, err := ParseFormat("x", text)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		if len(fm.Ranges) == 0 || fm.Field > Config3 {
			t.Fatalf("ParseFormat(%q) = %+v", text, fm)
		}
		var mask uint64
		for i, r := range fm.Ranges {
			if r.Lo > r.Hi || r.Hi > 63 || (i > 0 && r.Lo <= fm.Ranges[i-1].Hi) {
				t.Fatalf("ParseFormat(%q): bad ranges %v", text, fm.Ranges)
			}
			for b := r.Lo; b <= r.Hi; b++ {
				mask |= 1 << b
			}
		}
		if w := fm.Width(); w < 1 || w > 64 || w != uint(popcount(mask)) {
			t.Fatalf("ParseFormat(%q): width %d for mask %#x", text, w, mask)
		}

		s := fm.String()
		name, spec, ok := strings.Cut(s, "=")
		if !ok || name != "x" {
			t.Fatalf("String() = %q", s)
		}
		again, err := ParseFormat("x", spec)
		if err != nil || !reflect.DeepEqual(again, fm) {
			t.Fatalf("ParseFormat(%q) = %+v, %v; from %q gave %+v", spec, again, err, text, fm)
		}

		word, err := fm.Place(v)
		if v > fm.Max() {
			if err == nil {
				t.Fatalf("%s: Place(%#x) accepted a value above max %#x", s, v, fm.Max())
			}
			return
		}
		if err != nil {
			t.Fatalf("%s: Place(%#x): %v", s, v, err)
		}
		if word&^mask != 0 {
			t.Fatalf("%s: Place(%#x) = %#x sets bits outside %#x", s, v, word, mask)
		}
		if got := extract(fm, word); got != v {
			t.Fatalf("%s: Place(%#x) = %#x, which reads back as %#x", s, v, word, got)
		}
	})
}

func popcount(x uint64) int {
	n := 0
	for ; x != 0; x &= x - 1 {
		n++
	}
	return n
}

// extract is Place's inverse, written bit by bit so that it shares
// nothing with Place's shifts and masks.
func extract(fm Format, word uint64) uint64 {
	var v uint64
	n := 0
	for _, r := range fm.Ranges {
		for b := r.Lo; b <= r.Hi; b++ {
			v |= (word >> b & 1) << n
			n++
		}
	}
	return v
}

// FuzzParseTerms parses a sysfs event description or the body of perf's
// pmu/.../ syntax, and checks that the terms written out again parse to
// the same list.
func FuzzParseTerms(f *testing.F) {
	for _, text := range fixtureFiles(f, "events") {
		f.Add(text)
	}
	f.Fuzz(func(t *testing.T, text string) {
		terms, err := ParseTerms(text)
		if err != nil {
			if terms != nil {
				t.Fatalf("ParseTerms(%q) returned terms and error %v", text, err)
			}
			return
		}
		if len(terms) == 0 {
			t.Fatalf("ParseTerms(%q) accepted an empty list", text)
		}
		var b strings.Builder
		for i, term := range terms {
			if term.Name == "" || term.Name != strings.TrimSpace(term.Name) || strings.ContainsAny(term.Name, ",=") {
				t.Fatalf("ParseTerms(%q): bad name %q", text, term.Name)
			}
			if term.Param && term.Value != 0 {
				t.Fatalf("ParseTerms(%q): %s=? with value %d", text, term.Name, term.Value)
			}
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(term.Name)
			if term.Param {
				b.WriteString("=?")
			} else {
				b.WriteString("=0x" + strconv.FormatUint(term.Value, 16))
			}
		}
		again, err := ParseTerms(b.String())
		if err != nil || !reflect.DeepEqual(again, terms) {
			t.Fatalf("ParseTerms(%q) = %+v, %v; from %q gave %+v", b.String(), again, err, text, terms)
		}
	})
}

// fuzzTrees are the fixture machines FuzzResolve resolves names on.
var fuzzTrees = []string{"vm", "skylake", "power9"}

// FuzzResolve resolves arbitrary perfevent.conf event names, with and
// without rawcode= and hv_24x7-style parameters, on the fixture machines.
// A name either resolves to something openable (a PMU, a source, a finite
// positive scale, its own name) or fails with an error that quotes it.
func FuzzResolve(f *testing.F) {
	f.Fuzz(func(t *testing.T, name string, tree uint8, rawcode uint64, hasRaw bool, param uint64) {
		dir := fuzzTrees[int(tree)%len(fuzzTrees)]
		fs := &FS{
			FS:      hostfs.FS{Sys: filepath.Join("testdata", dir, "sys"), Proc: filepath.Join("testdata", dir, "proc")},
			Tracing: []string{filepath.Join("testdata", dir, "tracing")},
		}
		o := Options{RawCode: rawcode, HasRawCode: hasRaw}
		if param != 0 {
			o.Params = map[string]uint64{"chip": param, "core": param, "domain": param % 8, "lpar": param}
		}
		ev, err := fs.ResolveWith(name, o)
		if err != nil {
			msg := err.Error()
			if msg == "" {
				t.Fatalf("%s: Resolve(%q): empty error", dir, name)
			}
			if trimmed := strings.TrimSpace(name); trimmed != "" && !strings.Contains(msg, strconv.Quote(trimmed)) {
				t.Fatalf("%s: Resolve(%q): error does not quote the name: %v", dir, name, err)
			}
			return
		}
		if ev.Name != strings.TrimSpace(name) || ev.PMU == "" || ev.Source == "" {
			t.Fatalf("%s: Resolve(%q) = %+v", dir, name, ev)
		}
		if !(ev.Scale > 0) || math.IsInf(ev.Scale, 0) {
			t.Fatalf("%s: Resolve(%q): scale %v", dir, name, ev.Scale)
		}
		for i, c := range ev.CPUs {
			if c < 0 || (i > 0 && c <= ev.CPUs[i-1]) {
				t.Fatalf("%s: Resolve(%q): CPUs %v", dir, name, ev.CPUs)
			}
		}
	})
}
