package pfm

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"perfevent/internal/pfm/pfmgolden"
)

func TestRAPL(t *testing.T) {
	checkLibpfm4(t, fakeSysfs, `
rapl::RAPL_ENERGY_CORES OK 102 0x1 0 0 - rapl rapl::RAPL_ENERGY_CORES:excl=0
rapl::RAPL_ENERGY_PKG:period=1000 OK 102 0x2 0 0 - rapl rapl::RAPL_ENERGY_PKG:period=1000:freq=1000:excl=0
rapl::RAPL_ENERGY_CORES:u ERR invalid event attribute
`)
	// Without a "power" PMU, libpfm4 falls back to the core PMU's type.
	checkLibpfm4(t, Env{}, `
rapl::RAPL_ENERGY_PKG OK 4 0x2 0 0 - rapl rapl::RAPL_ENERGY_PKG:excl=0
`)
}

// Detected on a server model, RAPL has DRAM but not the cores' counter;
// on a client with PSYS, that too (libpfm4's answers under an emulated
// CPU of that model).
func TestRAPLModelTables(t *testing.T) {
	server, client := fakeSysfs, fakeSysfs
	server.IntelModel, client.IntelModel = 63, 78
	checkLibpfm4(t, server, `
rapl::RAPL_ENERGY_CORES ERR event not found
rapl::RAPL_ENERGY_DRAM OK 102 0x3 0 0 - rapl rapl::RAPL_ENERGY_DRAM:excl=0
`)
	checkLibpfm4(t, client, `
rapl::RAPL_ENERGY_PSYS OK 102 0x5 0 0 - rapl rapl::RAPL_ENERGY_PSYS:excl=0
rapl::RAPL_ENERGY_DRAM ERR event not found
`)
}

// The goldens of RAPL detected, not forced, on each class of CPU model
// (rapl.model<N>: libpfm4 under an emulated family 6 model N CPU).
func TestRAPLGoldensByModel(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(pfmgolden.Dir("amd64"), "rapl.model*.tsv.gz"))
	if len(files) == 0 {
		t.Skip("needs the RAPL goldens in testdata/golden/amd64 (made by gengolden)")
	}
	env, err := goldenMachine(pfmgolden.Debian, "amd64")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".tsv.gz")
		if env.IntelModel, err = strconv.Atoi(strings.TrimPrefix(name, "rapl.model")); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		lines, err := pfmgolden.Read("amd64", name)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range lines {
			if d := goldenDiff(l.Name, goldenWant(l), env, []string{"rapl"}); d != "" {
				t.Errorf("%s: %s: %s", name, l.Name, d)
			}
		}
		t.Logf("%s: %d names compared", name, len(lines))
	}
}
