package pfm

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// The goldens were made with a fake sysfs giving every perf_name of the
// architecture's catalog a type (testdata/golden/<arch>/perf_types.tsv);
// the families whose PMUs have kernel PMUs of their own see the same.
func init() {
	env := Env{PerfType: goldenPerfType}
	for _, f := range []Family{FamilyIntelUncore, FamilyIntelRAPL, FamilyAMD64, FamilyIntelNHMUncore} {
		goldenEnv[f] = env
	}
}

var goldenPerfTypes map[string]uint32

func goldenPerfType(name string) (uint32, error) {
	if goldenPerfTypes == nil {
		goldenPerfTypes = map[string]uint32{}
		file := filepath.Join("testdata", "golden", runtime.GOARCH, "perf_types.tsv")
		f, err := os.Open(file)
		if err != nil {
			return 0, err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for line := 1; sc.Scan(); line++ {
			if strings.HasPrefix(sc.Text(), "#") {
				continue
			}
			pmu, typ, _ := strings.Cut(sc.Text(), "\t")
			n, err := strconv.ParseUint(typ, 10, 32)
			if err != nil {
				return 0, fmt.Errorf("%s:%d: %v", file, line, err)
			}
			goldenPerfTypes[pmu] = uint32(n)
		}
	}
	t, ok := goldenPerfTypes[name]
	if !ok {
		return 0, fmt.Errorf("no kernel PMU %s", name)
	}
	return t, nil
}
