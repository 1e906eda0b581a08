// Package pfmgolden reads the golden encodings of internal/pfm/testdata
// (what a libpfm4 says for each PMU's names; see the README in
// testdata/golden), for the tests that compare package pfm's encoders with
// them. There are two sets: Debian's libpfm4 4.13.0, which PCP's C
// pmdaperfevent links, and libpfm4 upstream at the commit the catalog was
// generated from, built from source.
package pfmgolden

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// Line is one name's answer.
type Line struct {
	Name string // as asked: "skx::INST_RETIRED:ANY_P", "INST_RETIRED:u"
	OK   bool
	Err  string // pfm_strerror's text when not OK

	Type                     uint32 // perf_event_attr.type
	Config, Config1, Config2 uint64
	Exclude                  string // the exclude bits set, of "ukhiHG", or "-"
	PMU                      string // the PMU libpfm4 resolved the name to
	FullName                 string // libpfm4's canonical name (fstr)
}

// Set is one libpfm4's goldens, named after their directory in testdata.
type Set string

const (
	Debian   Set = "golden"          // Debian 12's libpfm4 4.13.0-1
	Upstream Set = "golden-upstream" // libpfm4 at tables.Libpfm4Commit, built from source
)

// Sets are every set, Debian's first.
var Sets = []Set{Debian, Upstream}

// Dir is Debian's goldens' directory for one architecture.
func Dir(arch string) string { return Debian.Dir(arch) }

// Read gives the lines of one PMU's golden file of Debian's set.
func Read(arch, pmu string) ([]Line, error) { return Debian.Read(arch, pmu) }

// PerfTypes gives the kernel PMU types of Debian's set.
func PerfTypes(arch string) (map[string]uint32, error) { return Debian.PerfTypes(arch) }

// Dir is the set's directory for one architecture.
func (s Set) Dir(arch string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testdata", string(s), arch)
}

// Read gives the lines of one PMU's golden file, in file order.
func (s Set) Read(arch, pmu string) ([]Line, error) {
	path := filepath.Join(s.Dir(arch), pmu+".tsv.gz")
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	var lines []Line
	sc := bufio.NewScanner(zr)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		l, err := parse(sc.Text())
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", path, n, err)
		}
		lines = append(lines, l)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return lines, nil
}

func parse(s string) (Line, error) {
	f := strings.Split(s, "\t")
	if len(f) == 3 && f[1] == "ERR" {
		return Line{Name: f[0], Err: f[2]}, nil
	}
	if len(f) != 9 || f[1] != "OK" {
		return Line{}, fmt.Errorf("%d fields, want 9 (OK) or 3 (ERR)", len(f))
	}
	l := Line{Name: f[0], OK: true, Exclude: f[6], PMU: f[7], FullName: f[8]}
	t, err := strconv.ParseUint(f[2], 10, 32)
	if err != nil {
		return Line{}, fmt.Errorf("type %q: %v", f[2], err)
	}
	l.Type = uint32(t)
	for i, p := range []*uint64{&l.Config, &l.Config1, &l.Config2} {
		if *p, err = strconv.ParseUint(f[3+i], 0, 64); err != nil {
			return Line{}, fmt.Errorf("config field %q: %v", f[3+i], err)
		}
	}
	return l, nil
}

// PerfTypes gives the made-up kernel PMU types the set's goldens were made
// with, by perf_name, for pfm.Env.PerfType.
func (s Set) PerfTypes(arch string) (map[string]uint32, error) {
	path := filepath.Join(s.Dir(arch), "perf_types.tsv")
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	types := map[string]uint32{}
	for n, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if n == 0 {
			continue // header
		}
		name, v, ok := strings.Cut(line, "\t")
		t, err := strconv.ParseUint(v, 10, 32)
		if !ok || err != nil {
			return nil, fmt.Errorf("%s:%d: want perf_name TAB type", path, n+1)
		}
		types[name] = uint32(t)
	}
	return types, nil
}
