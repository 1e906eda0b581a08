package qa

import (
	"bufio"
	"compress/gzip"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"perfevent/internal/pfm"
	"perfevent/internal/pfm/pfmgolden"
)

// The committed goldens of internal/pfm are what this machine's libpfm4
// says. Core PMUs only: they need no sysfs PMU types, and forcing the PMU
// makes the answers independent of the CPU (see the goldens' README).
func TestOracleMatchesGoldens(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the amd64 goldens need an amd64 libpfm4")
	}
	o := BuildOracle(t)
	for _, pmu := range []string{"skx", "icx", "spr", "hsw", "amd64_fam17h_zen2", "amd64_fam19h_zen3", "amd64_fam19h_zen4"} {
		t.Run(pmu, func(t *testing.T) {
			names, want := readGolden(t, filepath.Join(repoRoot(), "internal", "pfm", "testdata", "golden", "amd64", pmu+".tsv.gz"))
			got, err := o.Encode([]string{"LIBPFM_ENCODE_INACTIVE=1", "LIBPFM_FORCE_PMU=" + pmu}, names...)
			if err != nil {
				t.Fatal(err)
			}
			bad := 0
			for i := range want {
				if got[i] != want[i] {
					if bad++; bad <= 5 {
						t.Errorf("libpfm4 now says\n\t%s\nthe golden\n\t%s", got[i], want[i])
					}
				}
			}
			if bad > 0 {
				t.Errorf("%d of %d lines differ: regenerate with go run ./internal/pfm/gengolden", bad, len(want))
			}
		})
	}
}

// Every event and unit mask that this machine's libpfm4 (Debian's 4.13)
// offers on a PMU is in the catalog, generated from libpfm4 upstream's
// sources, with the same event code, but where upstream changed the entry
// (pfmgolden.UpstreamChanged). PMUs newer than 4.13 are the upstream
// goldens' to check. (libpfm4 leaves out the events of other models and
// revisions, which the catalog keeps with their Model or revision flags.)
func TestOracleCatalog(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the catalog's amd64 tables need an amd64 libpfm4")
	}
	o := BuildOracle(t)
	env := []string{"LIBPFM_ENCODE_INACTIVE=1"}
	events, umasks := 0, 0
	for _, h := range pfm.ArchPMUs("amd64") {
		if !in413("amd64", h.Name) {
			continue
		}
		p, err := pfm.LoadArch("amd64", h.Name)
		if err != nil {
			t.Fatal(err)
		}
		lines, err := o.Events(env, p.Name)
		if err != nil {
			t.Fatal(err)
		}
		// The public API lists the table in order, without the events of
		// other models and revisions; walk the catalog alongside it, by
		// position, since a few tables have one name twice.
		next := 0
		var ev *pfm.Event
		changed := false
		for _, line := range lines {
			if line == "" {
				continue
			}
			f := strings.Split(line, "\t")
			if len(f) != 3 {
				t.Fatalf("%s: pfmoracle -e printed %q", p.Name, line)
			}
			if pfmgolden.UpstreamChanged("amd64", p.Name, f[1]) != "" && f[0] == "E" {
				ev, changed = nil, true
				continue
			}
			if f[0] == "U" && changed {
				continue
			}
			changed = false
			switch f[0] {
			case "E":
				events++
				ev = nil
				for ; next < len(p.Events) && ev == nil; next++ {
					if e := &p.Events[next]; e.Name == f[1] && (e.Model == 0 || int(e.Model) == p.ID) {
						ev = e
					}
				}
				if ev == nil {
					t.Errorf("%s: libpfm4 has %s, the catalog does not (at that place)", p.Name, f[1])
					continue
				}
				code, err := strconv.ParseUint(f[2], 0, 64)
				// The public API spells a Pentium 4 event's code with its ESCR.
				if err != nil || (code != ev.Code && p.Family != pfm.FamilyNetburst) {
					t.Errorf("%s::%s: libpfm4 says code %s, the catalog %#x", p.Name, f[1], f[2], ev.Code)
				}
			case "U":
				umasks++
				if ev != nil && !hasUmask(ev, f[1]) {
					t.Errorf("%s::%s: libpfm4 has unit mask %s, the catalog does not", p.Name, ev.Name, f[1])
				}
			}
		}
	}
	t.Logf("%d events and %d unit masks of libpfm4 found in the catalog", events, umasks)
}

// in413 says whether Debian's libpfm4 4.13 has a PMU: the ones it has
// have goldens of Debian's.
func in413(arch, pmu string) bool {
	_, err := os.Stat(filepath.Join(pfmgolden.Debian.Dir(arch), pmu+".tsv.gz"))
	return err == nil
}

func hasUmask(e *pfm.Event, name string) bool {
	for _, u := range e.Umasks {
		if u.Name == name {
			return true
		}
	}
	return false
}

func readGolden(t *testing.T, path string) (names, lines []string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	sc := bufio.NewScanner(zr)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, _, _ := strings.Cut(sc.Text(), "\t")
		names = append(names, name)
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if len(lines) == 0 {
		t.Fatalf("%s: empty", path)
	}
	return names, lines
}
