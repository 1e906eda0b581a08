package pfm

// Temporary harness: compares the uncore, RAPL and AMD64 encoders with
// libpfm4's answers in PFM_UA_GOLDEN (a directory of <pmu>.tsv made with
// the libpfm4 oracle, kernel PMU types numbered from 100 in the sorted
// order of the perf names), until the generator's goldens land.

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

func uaEnv() Env {
	names := map[string]bool{}
	for _, p := range PMUs() {
		if p.Arch == "amd64" && p.PerfName != "" && (p.Family == FamilyIntelUncore || p.Family == FamilyIntelRAPL || p.Family == FamilyAMD64) {
			names[p.PerfName] = true
		}
	}
	var sorted []string
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	types := map[string]uint32{}
	for i, n := range sorted {
		types[n] = uint32(100 + i)
	}
	return Env{PerfType: func(n string) (uint32, error) {
		t, ok := types[n]
		if !ok {
			return 0, fmt.Errorf("no such PMU")
		}
		return t, nil
	}}
}

func TestUAGolden(t *testing.T) {
	dir := os.Getenv("PFM_UA_GOLDEN")
	if dir == "" {
		t.Skip("needs PFM_UA_GOLDEN")
	}
	saved := loadPMU
	t.Cleanup(func() { loadPMU = saved })
	loadPMU = Load
	env := uaEnv()
	files, _ := filepath.Glob(filepath.Join(dir, "*.tsv"))
	total, bad := 0, 0
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		n, nbad := 0, 0
		for sc.Scan() {
			fields := strings.Split(sc.Text(), "\t")
			if len(fields) < 3 {
				continue // a name longer than the oracle's line buffer
			}
			pname, _, ok := strings.Cut(fields[0], "::")
			if !ok || strings.ToLower(pname) != pname {
				pname = strings.TrimSuffix(filepath.Base(f), ".tsv")
			}
			p, err := loadPMU(pname)
			if err != nil {
				t.Fatal(err)
			}
			if len(fields) > 7 && fields[7] == "?" {
				fields[7] = pname // the oracle names only the PMU it was forced to
			}
			n++
			if d := goldenDiff(fields[0], fields, env, []string{p.Name}); d != "" {
				nbad++
				if nbad <= 12 {
					t.Errorf("%s: %s", fields[0], d)
				}
			}
		}
		fh.Close()
		total += n
		bad += nbad
		t.Logf("%-28s %6d names %5d differ", strings.TrimSuffix(filepath.Base(f), ".tsv"), n, nbad)
	}
	t.Logf("total %d names, %d differ", total, bad)
}
