package qa

import (
	"bufio"
	"compress/gzip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
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
