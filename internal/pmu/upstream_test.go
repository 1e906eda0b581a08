package pmu

import (
	"testing"
)

// TestZen5Listing: on the Zen 5 virtual machine of the vm fixture (this
// project's test machine: family 0x1a model 2, no kernel core PMU)
// --list-events --pmu amd64_fam1ah_zen5 lists the 81 events libpfm4
// upstream counts for it, each one resolves, and the L3's are marked as
// needing the kernel's amd_l3 PMU, which the machine lacks.
func TestZen5Listing(t *testing.T) {
	fs := testFS("vm")
	all, _ := fs.ListEvents()
	ls, err := FilterListings(all, "amd64_fam1ah_zen5", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 81 {
		t.Errorf("amd64_fam1ah_zen5: %d events listed, libpfm4 counts 81", len(ls))
	}
	for _, l := range ls {
		name := l.Name
		if len(l.Umasks) > 0 {
			name += ":" + l.Umasks[0].Name
		}
		ev, err := fs.Resolve(name)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if ev.PMU != "amd64_fam1ah_zen5" || ev.Attr.Type != 4 {
			t.Errorf("%s: PMU %s type %d, want amd64_fam1ah_zen5 type 4", name, ev.PMU, ev.Attr.Type)
		}
	}
	l3, _ := FilterListings(all, "amd64_fam1ah_zen5_l3", "")
	if len(l3) == 0 {
		t.Fatal("amd64_fam1ah_zen5_l3 lists nothing")
	}
	for _, l := range l3 {
		if l.Err == nil {
			t.Errorf("%s: listed as usable without an amd_l3 kernel PMU", l.Name)
		}
	}
	// A section naming the CPU's PMU is not chosen without a core PMU.
	for _, n := range fs.PresentNames() {
		if n != "perf" && n != "perf_raw" {
			t.Errorf("PresentNames has %s on a machine without a core PMU", n)
		}
	}
}
