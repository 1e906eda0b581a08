package pfmgolden

import (
	"strings"
	"testing"

	"perfevent/internal/pfm"
)

// Every PMU of the catalog has a golden file of libpfm4 upstream that
// parses, and every kernel PMU name of the catalog has its made-up type.
// Debian's 4.13 has the PMUs it knows.
func TestEveryPMU(t *testing.T) {
	for _, arch := range pfm.Archs {
		set := Upstream
		types, err := set.PerfTypes(arch)
		if err != nil {
			t.Fatal(err)
		}
		lines := 0
		for _, p := range pfm.ArchPMUs(arch) {
			g, err := set.Read(arch, p.Name)
			if err != nil {
				t.Error(err)
				continue
			}
			lines += len(g)
			for _, n := range strings.Split(p.PerfName, ",") {
				if n != "" && types[n] == 0 {
					t.Errorf("%s/%s: no type for %s", arch, p.Name, n)
				}
			}
		}
		if lines == 0 {
			t.Errorf("%s: no golden lines", arch)
		}
	}
}

func TestRead(t *testing.T) {
	g, err := Read("amd64", "skx")
	if err != nil {
		t.Fatal(err)
	}
	want := Line{Name: "skx::INST_RETIRED:ANY_P", OK: true, Type: 4, Config: 0xc0, Exclude: "G", PMU: "skx",
		FullName: "skx::INST_RETIRED:ANY_P:e=0:i=0:c=0:t=0:intx=0:intxcp=0:u=1:k=1:precise=0:excl=0:mg=0:mh=1"}
	found := false
	for _, l := range g {
		if l.Name == want.Name {
			found = true
			if l != want {
				t.Errorf("got %+v\nwant %+v", l, want)
			}
		}
	}
	if !found {
		t.Errorf("no %s", want.Name)
	}
	types, _ := PerfTypes("amd64")
	if types["power"] != 66 || types["uncore_imc_0"] != 155 {
		t.Errorf("power %d, uncore_imc_0 %d", types["power"], types["uncore_imc_0"])
	}
}
