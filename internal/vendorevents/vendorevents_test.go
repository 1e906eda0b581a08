package vendorevents

import (
	"encoding/json"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// terms parses a table's term list into name → value.
func terms(t *testing.T, s string) map[string]uint64 {
	t.Helper()
	m := map[string]uint64{}
	for _, item := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(item, "=")
		n, err := strconv.ParseUint(v, 0, 64)
		if !ok || err != nil {
			t.Fatalf("term %q of %q", item, s)
		}
		m[k] = n
	}
	return m
}

func num(t *testing.T, s string) uint64 {
	t.Helper()
	s, _, _ = strings.Cut(s, ",") // "0x2A,0x2B": the first code
	if s == "" {
		return 0
	}
	v, err := strconv.ParseUint(s, 0, 64)
	if err != nil {
		t.Fatalf("%q is not a number", s)
	}
	return v
}

// TestTablesMatchVendorJSON decodes the committed tables and compares
// each sample event, as its vendor's JSON gives it, with what the table
// says: every code the JSON sets must be there with its value, and
// nothing else.
func TestTablesMatchVendorJSON(t *testing.T) {
	b, err := os.ReadFile("testdata/samples.json")
	if err != nil {
		t.Fatal(err)
	}
	var samples []struct {
		PMU, Source string
		Event       map[string]any
	}
	if err := json.Unmarshal(b, &samples); err != nil {
		t.Fatal(err)
	}
	if len(samples) < 20 {
		t.Fatalf("only %d samples", len(samples))
	}
	for _, s := range samples {
		str := func(k string) string { v, _ := s.Event[k].(string); return v }
		name := str("EventName")
		want := map[string]uint64{}
		if name != "" { // Intel
			want["event"] = num(t, str("EventCode"))
			want["umask"] = num(t, str("UMask"))
			for json, term := range map[string]string{"UMaskExt": "umask_ext", "CounterMask": "cmask", "Invert": "inv",
				"EdgeDetect": "edge", "AnyThread": "any", "PortMask": "ch_mask", "FCMask": "fc_mask"} {
				if v := num(t, str(json)); v != 0 {
					want[term] = v
				}
			}
			switch msr := strings.ToLower(str("MSRIndex")); msr {
			case "", "0", "0x00":
			case "0x1a6,0x1a7", "0x1a6", "0x1a7":
				want["offcore_rsp"] = num(t, str("MSRValue"))
			case "0x3f6":
				want["ldlat"] = num(t, str("MSRValue"))
			case "0x3f7":
				want["frontend"] = num(t, str("MSRValue"))
			default:
				t.Fatalf("%s: sample MSR %s", name, msr)
			}
		} else { // Arm
			name = str("name")
			want["event"] = uint64(s.Event["code"].(float64))
		}
		p := Lookup(s.PMU)
		if p == nil {
			t.Errorf("%s (%s): no vendor PMU %s", name, s.Source, s.PMU)
			continue
		}
		ev, ok := p.Event(name)
		if !ok {
			t.Errorf("%s (%s): not in %s", name, s.Source, s.PMU)
			continue
		}
		got := terms(t, ev.Terms)
		if len(got) != len(want) {
			t.Errorf("%s::%s = %s; the JSON gives %v", s.PMU, name, ev.Terms, want)
			continue
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s::%s: %s = %#x; the JSON gives %#x (%s)", s.PMU, name, k, got[k], v, ev.Terms)
			}
		}
		brief := strings.Join(strings.Fields(str("BriefDescription")+str("description")), " ")
		if !strings.HasPrefix(brief, strings.TrimSuffix(ev.Desc, "...")) {
			t.Errorf("%s::%s: description %q is not the JSON's %q", s.PMU, name, ev.Desc, brief)
		}
	}
}

// TestModelsServed counts the CPU models served from the vendors' tables
// rather than libpfm4's, and checks that each table decodes.
func TestModelsServed(t *testing.T) {
	pmus, err := PMUs()
	if err != nil {
		t.Fatal(err)
	}
	intel, arm, events := map[string]bool{}, map[string]bool{}, 0
	for _, p := range pmus {
		evs, err := p.Events()
		if err != nil || len(evs) == 0 {
			t.Errorf("%s: %d events, %v", p.Name, len(evs), err)
		}
		events += len(evs)
		switch p.Catalog.Vendor {
		case "intel":
			for _, m := range p.models {
				intel[m] = true
			}
		case "arm":
			arm[p.Name] = true
		}
	}
	t.Logf("vendor tables: %d PMUs, %d events; %d Intel models (family-model), %d Arm cores", len(pmus), events, len(intel), len(arm))
	// The counts change only when the tables are regenerated.
	if len(intel) != 23 || len(arm) != 23 {
		t.Errorf("%d Intel models and %d Arm cores; the committed tables serve 23 and 23", len(intel), len(arm))
	}
	for _, c := range Catalogs() {
		if len(c.Commit) != 40 || len(c.LibpfmCommit) != 40 {
			t.Errorf("%s: commit %q, libpfm4 commit %q", c.Vendor, c.Commit, c.LibpfmCommit)
		}
	}
}

func TestDetect(t *testing.T) {
	names := func(c CPU) string {
		var n []string
		for _, p := range Detect(c) {
			if !p.Uncore() {
				n = append(n, p.Name)
			}
		}
		return strings.Join(n, " ")
	}
	for _, c := range []struct {
		cpu  CPU
		want string
	}{
		{CPU{Vendor: "GenuineIntel", Family: 6, Model: 0xaa, Stepping: 4}, "mtl_atom mtl_core"},
		{CPU{Vendor: "GenuineIntel", Family: 6, Model: 0xc5, Stepping: 2}, "arl_atom arl_core arl_lpatom"},
		{CPU{Vendor: "GenuineIntel", Family: 6, Model: 0xc6, Stepping: 2}, "arl_atom arl_core"},
		{CPU{Vendor: "GenuineIntel", Family: 6, Model: 0xaf, Stepping: 3}, "srf"},
		{CPU{Vendor: "GenuineIntel", Family: 18, Model: 1}, "nvl_atom nvl_core"},
		{CPU{Vendor: "GenuineIntel", Family: 6, Model: 0x55, Stepping: 4}, ""}, // Skylake-X: libpfm4's
		{CPU{Vendor: "GenuineIntel", Family: 6, Model: 0xa}, ""},               // no prefix match of 0xAA
		{CPU{Vendor: "AuthenticAMD", Family: 6, Model: 0xaa}, ""},
		{CPU{Implementer: 0x41, Part: 0xd41}, "arm_ac78"},
		{CPU{Implementer: 0x41, Part: 0xd0c}, ""}, // Neoverse N1: libpfm4's
	} {
		if got := names(c.cpu); got != c.want {
			t.Errorf("%+v: %q, want %q", c.cpu, got, c.want)
		}
	}
	var unc []string
	for _, p := range Detect(CPU{Vendor: "GenuineIntel", Family: 6, Model: 0xad, Stepping: 1}) {
		unc = append(unc, p.Name)
	}
	// Granite Rapids: libpfm4 has the core and the memory controllers.
	if got := strings.Join(unc, " "); !strings.Contains(got, "gnr_unc_cha") || strings.Contains(got, "gnr_unc_imc") || strings.Contains(got, "gnr ") {
		t.Errorf("Granite Rapids: %s", got)
	}
}

// intelPattern is mapfile.csv's pattern as a regular expression over the
// whole CPUID string, its stepping optional.
func intelPattern(p string) string { return `^(?:` + p + `)(?:-[0-9A-F]+)?$` }

// A pattern read as literal CPUID strings matches what the pattern as a
// regular expression matches, on every family, model and stepping near
// the tables'.
func TestLiteralPatterns(t *testing.T) {
	pmus, err := PMUs()
	if err != nil {
		t.Fatal(err)
	}
	literal := 0
	for _, p := range pmus {
		if p.Catalog.Vendor != "intel" || p.models == nil {
			continue
		}
		literal++
		re := regexp.MustCompile(intelPattern(strings.Join(p.models, "|")))
		for _, fam := range []int{6, 18, 19} {
			for model := 0; model < 0x100; model++ {
				for _, step := range []int{0, 1, 0xb, 0x10} {
					c := CPU{Vendor: "GenuineIntel", Family: fam, Model: model, Stepping: step}
					if got, want := p.Matches(c), re.MatchString(c.IntelID()); got != want {
						t.Fatalf("%s on %s: %v, the pattern says %v", p.Name, c.IntelID(), got, want)
					}
				}
			}
		}
	}
	if literal == 0 {
		t.Error("no Intel pattern is read as literal strings")
	}
}

// A pattern in the index, which tables/gen would have expanded, is an
// error that names the file and line, not a PMU that matches nothing.
func TestIndexRefusesPatterns(t *testing.T) {
	index := "# generated by gen from github.com/intel/perfmon 6dadedf3aa483393943e044ba5ec88a4507cd040 (BSD-3-Clause); do not edit\n" +
		"pmu\tmatch\tkernel\tfile\tversion\tdesc\n" +
		"adln\tGenuineIntel-6-BE\tcpu\tadln.tsv.gz\t1.40\tIntel Alder Lake cores\n" +
		"skx\tGenuineIntel-6-55-[01234]\tcpu\tskx.tsv.gz\t1.0\tIntel Skylake-SP cores\n"
	pmus, _, err := loadIndex(index, "intel")
	if err == nil || !strings.Contains(err.Error(), "intel/index.tsv:4: match \"GenuineIntel-6-55-[01234]\" is a pattern") {
		t.Errorf("loadIndex = %d PMUs, %v; want the error of line 4", len(pmus), err)
	}
	pmus, _, err = loadIndex(strings.Replace(index, "-[01234]", "-0|GenuineIntel-6-55-1", 1), "intel")
	if err != nil || len(pmus) != 2 || !pmus[1].Matches(CPU{Vendor: "GenuineIntel", Family: 6, Model: 0x55, Stepping: 1}) || pmus[1].Matches(CPU{Vendor: "GenuineIntel", Family: 6, Model: 0x55, Stepping: 2}) {
		t.Errorf("loadIndex of the expanded pattern = %v, %v", pmus, err)
	}
}
