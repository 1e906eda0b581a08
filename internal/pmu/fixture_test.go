package pmu

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// fixtures are the machines under testdata whose libpfm4 PMU list is
// known, in testdata/NAME/libpfm4-pmus (each file says how it was made).
var fixtures = []string{"snbep", "haswell", "skylake", "icelake-sp", "zen2", "zen3", "zen4", "graviton2", "power9", "vm", "alderlake",
	"zen5", "sapphirerapids", "graniterapids", "neoverse-v2", "neoverse-v3", "biglittle"}

// libpfmGolden reads a fixture's libpfm4-pmus file.
func libpfmGolden(t *testing.T, fixture string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", fixture, "libpfm4-pmus"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			names = append(names, l)
		}
	}
	return names
}

// TestFixtureDetection: on every fixture the agent finds the PMUs libpfm4
// finds, in its order.
func TestFixtureDetection(t *testing.T) {
	for _, f := range fixtures {
		want := libpfmGolden(t, f)
		if got := testFS(f).libpfmNames(); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: LibpfmPMUs = %v\nlibpfm4 gives %v", f, got, want)
		}
	}
}
