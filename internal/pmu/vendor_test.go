package pmu

import (
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"perfevent/internal/cpulist"
)

func vendorNames(fs *FS) []string {
	var names []string
	for _, p := range fs.VendorPMUs() {
		names = append(names, p.Name)
	}
	return names
}

// TestVendorDetection: the models libpfm4 lacks get the vendors' PMUs,
// each counted by a kernel PMU the fixture has, and they name sections.
func TestVendorDetection(t *testing.T) {
	for _, c := range []struct {
		fixture string
		want    []string
	}{
		{"meteorlake", []string{"mtl_core", "mtl_atom", "mtl_unc_arb"}},
		{"sierraforest", []string{"srf", "srf_unc_cha", "srf_unc_imc"}},
		{"cortex-a78", []string{"arm_ac78"}},
		{"cortex-a78-a55", []string{"arm_ac78"}},
		// libpfm4's models get none.
		{"skylake", nil},
		{"alderlake", nil},
		{"graviton2", nil},
		{"vm", nil},
	} {
		fs := testFS(c.fixture)
		if got := vendorNames(fs); !slices.Equal(got, c.want) {
			t.Errorf("%s: vendor PMUs %v, want %v", c.fixture, got, c.want)
		}
		present := fs.PresentNames()
		for _, w := range c.want {
			if !slices.Contains(present, w) {
				t.Errorf("%s: PresentNames %v lacks %s", c.fixture, present, w)
			}
		}
	}
	if got := testFS("sierraforest").VendorPMUs()[2].kernel; !slices.Equal(got, []string{"uncore_imc_0", "uncore_imc_1", "uncore_imc_2", "uncore_imc_3"}) {
		t.Errorf("srf_unc_imc boxes %v", got)
	}
}

func TestVendorResolve(t *testing.T) {
	type want struct {
		typ             uint32
		config, config1 uint64
		cpus            string
		source          string
	}
	for _, c := range []struct {
		fixture, name string
		want          want
	}{
		// The fixed-counter pseudo-encodings and the MSR-carrying events,
		// on the P-cores first.
		{"meteorlake", "INST_RETIRED.ANY", want{4, 0x100, 0, "0-1", "github.com/intel/perfmon mtl_core::INST_RETIRED.ANY on cpu_core (event=0x0,umask=0x1)"}},
		{"meteorlake", "INST_RETIRED:ANY", want{4, 0x100, 0, "0-1", ""}},
		{"meteorlake", "inst_retired.any", want{4, 0x100, 0, "0-1", ""}},
		{"meteorlake", "mtl_atom::INST_RETIRED.ANY", want{10, 0x100, 0, "2-3", "github.com/intel/perfmon mtl_atom::INST_RETIRED.ANY on cpu_atom (event=0x0,umask=0x1)"}},
		{"meteorlake", "cpu_atom::BR_INST_RETIRED.ALL_BRANCHES", want{10, 0xc4, 0, "2-3", ""}},
		{"meteorlake", "OCR.DEMAND_DATA_RD.ANY_RESPONSE", want{4, 0x12a, 0x10001, "0-1", ""}},
		{"meteorlake", "MEM_TRANS_RETIRED.LOAD_LATENCY_GT_128", want{4, 0x1cd, 0x80, "0-1", ""}},
		{"meteorlake", "FRONTEND_RETIRED.DSB_MISS", want{4, 0x3c6, 0x11, "0-1", ""}},
		{"meteorlake", "CYCLE_ACTIVITY.STALLS_L3_MISS", want{4, 0x6<<24 | 0x6<<8 | 0xa3, 0, "0-1", ""}},
		// perf's own syntax, with the vendor's name shown.
		{"meteorlake", "cpu_core/event=0x0,umask=0x1/", want{4, 0x100, 0, "0-1", "perf syntax cpu_core/event=0x0,umask=0x1/ = mtl_core::INST_RETIRED.ANY"}},
		{"meteorlake", "cpu_atom/INST_RETIRED.ANY/", want{10, 0x100, 0, "2-3", ""}},
		{"meteorlake", "mtl_unc_arb::UNC_ARB_DAT_OCCUPANCY.RD", want{12, 0x0, 0, "", ""}},
		// Sierra Forest: E-cores on cpu, uncore on every box.
		{"sierraforest", "LONGEST_LAT_CACHE.MISS", want{4, 0x412e, 0, "", ""}},
		{"sierraforest", "UNC_M_CAS_COUNT_SCH0.RD", want{20, 0xcf05, 0, "0", ""}},
		{"sierraforest", "uncore_imc_3::UNC_M_CAS_COUNT_SCH0.RD", want{23, 0xcf05, 0, "0", ""}},
		{"sierraforest", "srf_unc_imc::UNC_M_CLOCKTICKS", want{20, 0x101, 0, "0", ""}},
		// UMaskExt continues the umask at config bit 32 (umask=config:8-15,32-63).
		{"sierraforest", "UNC_CHA_TOR_INSERTS.IA_HIT_RFO", want{30, 0xc807fd<<32 | 0x01<<8 | 0x35, 0, "0", ""}},
		// Arm's events, on the core's own PMU.
		{"cortex-a78", "L1D_CACHE_REFILL", want{8, 0x3, 0, "0-3", ""}},
		{"cortex-a78", "arm_ac78::STALL_BACKEND", want{8, 0x24, 0, "0-3", ""}},
		// On big.LITTLE, on the PMU of the Cortex-A78's CPUs, whichever
		// processor cpuinfo lists first.
		{"cortex-a78-a55", "STALL_BACKEND", want{9, 0x24, 0, "4-7", ""}},
		{"cortex-a78", "armv8_cortex_a78/L1D_CACHE_REFILL/", want{8, 0x3, 0, "0-3", "perf syntax armv8_cortex_a78/L1D_CACHE_REFILL/ = arm_ac78::L1D_CACHE_REFILL"}},
	} {
		ev, err := testFS(c.fixture).Resolve(c.name)
		if err != nil {
			t.Errorf("%s: %s: %v", c.fixture, c.name, err)
			continue
		}
		w := c.want
		if c.name == "mtl_unc_arb::UNC_ARB_DAT_OCCUPANCY.RD" {
			// Taken from the table itself: the test is the kernel PMU and its CPUs.
			w.config = ev.Attr.Config
			w.cpus = "0"
		}
		if ev.Attr.Type != w.typ || ev.Attr.Config != w.config || ev.Attr.Ext1 != w.config1 || cpulist.Format(ev.CPUs) != w.cpus {
			t.Errorf("%s: %s: type %d config %#x config1 %#x on %q; want type %d config %#x config1 %#x on %q (%s)",
				c.fixture, c.name, ev.Attr.Type, ev.Attr.Config, ev.Attr.Ext1, cpulist.Format(ev.CPUs), w.typ, w.config, w.config1, w.cpus, ev.Source)
		}
		if w.source != "" && ev.Source != w.source {
			t.Errorf("%s: %s: source %q, want %q", c.fixture, c.name, ev.Source, w.source)
		}
	}
}

// A vendor core event gets libpfm4's exclude bits, modifiers included;
// an uncore one none, and no modifiers.
func TestVendorModifiers(t *testing.T) {
	fs := testFS("meteorlake")
	plain, err := fs.Resolve("INST_RETIRED.ANY")
	if err != nil {
		t.Fatal(err)
	}
	user, err := fs.Resolve("INST_RETIRED.ANY:u")
	if err != nil {
		t.Fatal(err)
	}
	if plain.Attr.Bits != exGuest || user.Attr.Bits != exGuest|exKern {
		t.Errorf("bits %#x and :u %#x, want %#x and %#x", plain.Attr.Bits, user.Attr.Bits, exGuest, exGuest|exKern)
	}
	if _, err := testFS("sierraforest").Resolve("UNC_M_CLOCKTICKS:u"); err == nil || !strings.Contains(err.Error(), "uncore event, which takes no modifiers") {
		t.Errorf("uncore with :u: %v", err)
	}
	unc, _ := testFS("sierraforest").Resolve("UNC_M_CLOCKTICKS")
	if unc.Attr.Bits != 0 {
		t.Errorf("uncore bits %#x", unc.Attr.Bits)
	}
	// A typo gets the nearest vendor names.
	if _, err := fs.Resolve("INST_RETIRD.ANY"); err == nil || !strings.Contains(err.Error(), "nor of the vendor's list for this CPU (mtl_core, mtl_atom, mtl_unc_arb)") ||
		!strings.Contains(err.Error(), "did you mean mtl_core::INST_RETIRED.ANY, ") {
		t.Errorf("a typo: %v", err)
	}
	// A name of another model is refused with the usual advice.
	if _, err := fs.Resolve("UNC_CHA_TOR_INSERTS.IA_HIT_RFO"); err == nil || !strings.Contains(err.Error(), "mtl_core") {
		t.Errorf("Sierra Forest's event on Meteor Lake: %v", err)
	}
}

// On a model libpfm4 knows, perf's EVENT.UMASK is libpfm4's EVENT:UMASK:
// libpfm4 takes a dot for a colon.
func TestPerfSpellingOnLibpfmModel(t *testing.T) {
	fs := testFS("skylake")
	for dotted, colon := range map[string]string{
		"INST_RETIRED.ANY_P":        "INST_RETIRED:ANY_P",
		"skx::INST_RETIRED.ANY_P:u": "skx::INST_RETIRED:ANY_P:u",
		"UNC_M_CAS_COUNT.RD":        "UNC_M_CAS_COUNT:RD",
		"inst_retired.any_p":        "INST_RETIRED:ANY_P",
	} {
		a, err := fs.Resolve(dotted)
		if err != nil {
			t.Errorf("%s: %v", dotted, err)
			continue
		}
		b, err := fs.Resolve(colon)
		if err != nil {
			t.Fatalf("%s: %v", colon, err)
		}
		if a.Attr != b.Attr || a.Source != b.Source {
			t.Errorf("%s: %+v %q; %s gives %+v", dotted, a.Attr, a.Source, colon, b.Attr)
		}
	}
}

func TestVendorListing(t *testing.T) {
	ls, _ := testFS("sierraforest").ListEvents()
	got, err := FilterListings(ls, "srf_unc_imc", "*::unc_m_cas_count_sch0.rd")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Name != "srf_unc_imc::UNC_M_CAS_COUNT_SCH0.RD" || got[0].Kind != KindVendor || got[0].Desc == "" {
		t.Fatalf("listing %+v", got)
	}
	if s := got[0].String(); !strings.HasPrefix(s, "srf_unc_imc::UNC_M_CAS_COUNT_SCH0.RD OR UNC_M_CAS_COUNT_SCH0.RD [vendor: ") {
		t.Errorf("line %q", s)
	}
	// Every listed vendor name resolves, by its full name and by its
	// alias, to the same encoding.
	for fixture, least := range map[string]int{"meteorlake": 500, "sierraforest": 400, "cortex-a78": 100} {
		fs := testFS(fixture)
		ls, _ = fs.ListEvents()
		n := 0
		for _, l := range ls {
			if l.Kind != KindVendor {
				continue
			}
			n++
			full, err := fs.Resolve(l.Name)
			if err != nil {
				t.Errorf("%s: listed %s: %v", fixture, l.Name, err)
				continue
			}
			// A bare name shared by two core types is the P-core's, and
			// listed as its alias only.
			_, ev, _ := strings.Cut(l.Name, "::")
			bare, err := fs.Resolve(ev)
			switch {
			case err != nil:
				t.Errorf("%s: %s: %v", fixture, ev, err)
			case len(l.Aliases) == 1 && bare.Source != full.Source:
				t.Errorf("%s: alias %s is %s, not %s", fixture, ev, bare.Source, full.Source)
			case len(l.Aliases) == 0 && bare.Source == full.Source:
				t.Errorf("%s: %s lacks its alias %s", fixture, l.Name, ev)
			}
		}
		if n < least {
			t.Errorf("%s: %d vendor events listed", fixture, n)
		}
	}
}

// TestVendorPMUsReadCPUInfoOnce: on an x86 machine the vendor lists take
// the model from the cpuinfo that detection read, and do not read the
// whole file again (every processor of a large machine) to look for Arm
// cores. An Arm fixture still finds its cores: TestVendorDetection.
func TestVendorPMUsReadCPUInfoOnce(t *testing.T) {
	fs := testFS("sierraforest")
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	// With the closes watched too, no two opens are next to each other in
	// the queue, where inotify would merge them into one event.
	if _, err := unix.InotifyAddWatch(fd, fs.CPUInfoFile(), unix.IN_OPEN|unix.IN_CLOSE); err != nil {
		t.Fatal(err)
	}
	if len(fs.VendorPMUs()) == 0 {
		t.Fatal("sierraforest: no vendor PMU; the fixture should have Intel's lists' PMUs")
	}
	// A watch on a file names nothing: each event is the bare header.
	buf := make([]byte, 64*unix.SizeofInotifyEvent)
	n, err := unix.Read(fd, buf)
	if err != nil && err != unix.EAGAIN {
		t.Fatal(err)
	}
	opens := 0
	for b := buf[:max(n, 0)]; len(b) >= unix.SizeofInotifyEvent; b = b[unix.SizeofInotifyEvent:] {
		if ev := (*unix.InotifyEvent)(unsafe.Pointer(&b[0])); ev.Mask&unix.IN_OPEN != 0 {
			opens++
		}
	}
	if opens != 1 {
		t.Errorf("%s opened %d times by detection and the vendor lists, want once", fs.CPUInfoFile(), opens)
	}
}

// The Arm cores parseCPUInfo gathers on its way through an Arm cpuinfo
// are those a read of the file for them finds, for every fixture; an x86
// cpuinfo, read only to its second processor, leaves them to that read.
func TestCPUInfoGathersArmCores(t *testing.T) {
	dirs, err := os.ReadDir("testdata")
	if err != nil {
		t.Fatal(err)
	}
	arm := 0
	for _, d := range dirs {
		fs := testFS(d.Name())
		c, err := fs.CPUInfo()
		if err != nil {
			continue
		}
		read := fs.readArmCores()
		switch {
		case c.Vendor != "" && c.coresRead && len(read) > 0:
			t.Errorf("%s: an x86 cpuinfo gathered Arm cores %v", d.Name(), c.cores)
		case c.coresRead && !reflect.DeepEqual(c.cores, read):
			t.Errorf("%s: parseCPUInfo gathered cores %v, a read finds %v", d.Name(), c.cores, read)
		}
		if c.Implementer != 0 {
			arm++
			if !c.coresRead || len(c.cores) == 0 {
				t.Errorf("%s: Arm cpuinfo, cores gathered %v (read to its end: %v)", d.Name(), c.cores, c.coresRead)
			}
			if got := fs.armCores(); !reflect.DeepEqual(got, read) {
				t.Errorf("%s: armCores = %v, a read finds %v", d.Name(), got, read)
			}
		}
	}
	if arm < 4 {
		t.Errorf("%d Arm fixtures, want the 4 or more of testdata", arm)
	}
	big, _ := testFS("biglittle").CPUInfo()
	if len(big.cores) != 2 || len(big.cores[0].cpus)+len(big.cores[1].cpus) < 4 {
		t.Errorf("biglittle: cores %v, want two kinds with their CPUs", big.cores)
	}
}
