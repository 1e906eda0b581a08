package pfm

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"io/fs"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"unsafe"

	"perfevent/internal/pfm/tables"
)

// The catalog is libpfm4's list at the pinned commit: these counts and
// positions are what its pfmlib_pmus[] holds for each architecture's build.
func TestPMUsOrder(t *testing.T) {
	want := map[string]struct {
		n           int
		first, last string
	}{
		"amd64":   {561, "netburst", "perf_raw"},
		"arm64":   {82, "arm_ac57", "perf_raw"},
		"ppc64le": {15, "power4", "perf_raw"},
	}
	total := 0
	for _, arch := range Archs {
		pmus := ArchPMUs(arch)
		w := want[arch]
		if len(pmus) != w.n {
			t.Errorf("%s: %d PMUs, want %d", arch, len(pmus), w.n)
			continue
		}
		total += len(pmus)
		if pmus[0].Name != w.first || pmus[len(pmus)-1].Name != w.last {
			t.Errorf("%s: PMUs run from %s to %s, want %s to %s", arch, pmus[0].Name, pmus[len(pmus)-1].Name, w.first, w.last)
		}
		for i, p := range pmus {
			if p.Order != i || p.Arch != arch {
				t.Errorf("%s: PMU %d (%s) has Order %d, Arch %q", arch, i, p.Name, p.Order, p.Arch)
			}
			if p.Events != nil || p.Modifiers != nil {
				t.Errorf("%s: PMUs() gives %s with its tables", arch, p.Name)
			}
		}
	}
	if got := len(PMUs()); got != total {
		t.Errorf("PMUs() has %d PMUs, the architectures %d", got, total)
	}
	// ix86arch is the last x86 PMU, so that the named models win name lookups.
	amd := ArchPMUs("amd64")
	if p := amd[len(amd)-3]; p.Name != "ix86arch" {
		t.Errorf("amd64: the PMU before perf is %s, want ix86arch", p.Name)
	}
}

func TestPMUHeaders(t *testing.T) {
	byName := map[string]*PMU{}
	for _, p := range ArchPMUs("amd64") {
		byName[p.Name] = p
	}
	skx := byName["skx"]
	if skx == nil {
		t.Fatal("no skx")
	}
	if skx.ID != 319 || skx.Family != FamilyIntelX86 || skx.Type != PMUTypeCore || skx.PerfName != "" ||
		skx.NumCounters != 8 || skx.NumFixed != 3 || skx.SupportedPLM != PLM0|PLM3 || skx.MaxEncoding != 2 ||
		skx.CPUFamily != 6 || !slices.Equal(skx.CPUModels, []int{85}) || skx.Flags != 0x10004 {
		t.Errorf("skx header: %+v", *skx)
	}
	cha := byName["skx_unc_cha0"]
	if cha == nil || cha.Family != FamilyIntelUncore || cha.Type != PMUTypeUncore || cha.PerfName != "uncore_cha_0" {
		t.Errorf("skx_unc_cha0 header: %+v", cha)
	}
	for name, fam := range map[string]Family{
		"rapl": FamilyIntelRAPL, "amd64_rapl": FamilyAMD64, "amd64_fam19h_zen3": FamilyAMD64,
		"nhm_unc": FamilyIntelNHMUncore, "netburst": FamilyNetburst, "perf": FamilyPerf, "perf_raw": FamilyPerf,
		"ix86arch": FamilyIntelX86,
	} {
		if p := byName[name]; p == nil || p.Family != fam {
			t.Errorf("%s: %+v, want family %d", name, p, fam)
		}
	}
	if p := byName["rapl"]; p.PerfName != "power" || len(p.ModelTables) != 4 {
		t.Errorf("rapl: %+v", *p)
	}
}

func TestLoadSKX(t *testing.T) {
	skx, err := Load("skx")
	if err != nil {
		t.Fatal(err)
	}
	if skx.Name != "skx" || skx.ID != 319 || len(skx.Events) != 88 {
		t.Fatalf("skx: %s id %d with %d events", skx.Name, skx.ID, len(skx.Events))
	}
	ev := event(t, skx, "INST_RETIRED")
	if ev.Code != 0xc0 || ev.CntMask != 0xff || ev.Flags != 0x4 || ev.ModMask != 0x1bf || ev.NumGroups != 1 ||
		ev.Desc != "Number of instructions retired (Precise Event)" {
		t.Errorf("INST_RETIRED: %+v", ev)
	}
	if len(ev.Umasks) != 4 {
		t.Fatalf("INST_RETIRED has %d umasks, want 4", len(ev.Umasks))
	}
	any := ev.Umasks[0]
	if any.Name != "ANY_P" || any.Code != 0 || any.Flags != 0x9 ||
		any.Desc != "Number of instructions retired. General Counter - architectural event" {
		t.Errorf("ANY_P: %+v", any)
	}
	tc := ev.Umasks[2]
	if tc.Name != "TOTAL_CYCLES" || tc.Code != 0xa800100 || tc.ModHW != 0x18 || tc.Equiv != "PREC_DIST:i=1:c=10" {
		t.Errorf("TOTAL_CYCLES: %+v", tc)
	}
	if pd := ev.Umasks[3]; pd.Name != "PREC_DIST" || pd.CntMask != 0x2 {
		t.Errorf("PREC_DIST: %+v", pd)
	}
	names := []string{}
	for _, m := range skx.Modifiers {
		names = append(names, m.Name)
	}
	if want := []string{"k", "u", "e", "i", "c", "t", "ldlat", "intx", "intxcp", "fe_thres"}; !slices.Equal(names, want) {
		t.Errorf("skx modifiers %q, want %q", names, want)
	}
	if m := skx.Modifiers[4]; m.Type != ModInteger {
		t.Errorf("c: %+v", m)
	}
	// skx, skl and clx share one table; the events of one model say which.
	skl, err := Load("skl")
	if err != nil {
		t.Fatal(err)
	}
	if &skl.Events[0] != &skx.Events[0] {
		t.Error("skl and skx do not share their decoded table")
	}
	again, _ := Load("skx")
	if again != skx {
		t.Error("a second Load decoded again")
	}
}

func TestLoadOtherFamilies(t *testing.T) {
	zen3, err := Load("amd64_fam19h_zen3")
	if err != nil {
		t.Fatal(err)
	}
	ev := event(t, zen3, "RETIRED_INSTRUCTIONS")
	if ev.Code != 0xc0 || ev.Umasks != nil {
		t.Errorf("zen3 RETIRED_INSTRUCTIONS: %+v", ev)
	}
	perf, err := Load("perf")
	if err != nil {
		t.Fatal(err)
	}
	if ev := event(t, perf, "PERF_COUNT_SW_CPU_CLOCK"); ev.Type != 1 || ev.Code != 0 {
		t.Errorf("PERF_COUNT_SW_CPU_CLOCK: %+v", ev)
	}
	if ev := event(t, perf, "PERF_COUNT_HW_CACHE_L1D"); ev.Type != 3 || len(ev.Umasks) != 5 || ev.Umasks[0].Name != "READ" {
		t.Errorf("PERF_COUNT_HW_CACHE_L1D: %+v", ev)
	}
	rapl, err := Load("rapl")
	if err != nil {
		t.Fatal(err)
	}
	if len(rapl.Events) != 3 || len(rapl.ModelTables) != 4 {
		t.Fatalf("rapl: %d events, %d model tables", len(rapl.Events), len(rapl.ModelTables))
	}
	for _, mt := range rapl.ModelTables {
		if slices.Contains(mt.CPUModels, 85) { // Skylake-X: the Haswell-EP table, no cores
			if len(mt.Events) != 2 || mt.Events[0].Name != "RAPL_ENERGY_PKG" || mt.Events[1].Name != "RAPL_ENERGY_DRAM" {
				t.Errorf("rapl on model 85: %+v", mt.Events)
			}
		}
	}
	ix, err := Load("ix86arch")
	if err != nil {
		t.Fatal(err)
	}
	if len(ix.Events) != 7 || ix.Events[0].Name != "UNHALTED_CORE_CYCLES" {
		t.Errorf("ix86arch: %d events, first %q", len(ix.Events), ix.Events[0].Name)
	}
	n1, err := Load("arm_n1")
	if err != nil {
		t.Fatal(err)
	}
	if ev := event(t, n1, "CPU_CYCLES"); ev.Code != 0x11 || n1.Family != FamilyARM || n1.Arch != "arm64" {
		t.Errorf("arm_n1 CPU_CYCLES: %+v on %+v", ev, n1.Arch)
	}
	p9, err := Load("power9")
	if err != nil {
		t.Fatal(err)
	}
	if ev := event(t, p9, "PM_CYC"); ev.Code != 0x1001e || ev.LongDesc != "Processor cycles" || p9.Family != FamilyPower {
		t.Errorf("power9 PM_CYC: %+v", ev)
	}
}

// Every table of every architecture decodes, and its counts match the index.
func TestLoadAll(t *testing.T) {
	var wg sync.WaitGroup
	for _, p := range PMUs() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			full, err := LoadArch(p.Arch, p.Name)
			if err != nil {
				t.Error(err)
				return
			}
			if full.Name != p.Name || full.Order != p.Order {
				t.Errorf("%s/%s: loaded %s at %d", p.Arch, p.Name, full.Name, full.Order)
			}
			for _, e := range full.Events {
				if e.Name == "" {
					t.Errorf("%s/%s: an event without a name", p.Arch, p.Name)
				}
			}
		}()
	}
	wg.Wait()
	if _, err := Load("no_such_pmu"); err == nil {
		t.Error("Load of an unknown PMU succeeded")
	}
}

func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{`a\tb`: "a\tb", `x\\y`: `x\y`, `l1\nl2\r`: "l1\nl2\r", "plain": "plain"} {
		if got := unescape(in); got != want {
			t.Errorf("unescape(%q) = %q, want %q", in, got, want)
		}
	}
}

func event(t *testing.T, p *PMU, name string) *Event {
	t.Helper()
	for i := range p.Events {
		if p.Events[i].Name == name {
			return &p.Events[i]
		}
	}
	t.Fatalf("%s has no event %s", p.Name, name)
	return nil
}

// BenchmarkDecodeSKX decodes skx's table from the embedded file each time.
func BenchmarkDecodeSKX(b *testing.B) {
	readIndex()
	skx := find("amd64", "skx")
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := decodeTable("amd64/skl.tsv.gz", skx.size); err != nil {
			b.Fatal(err)
		}
	}
}

// readAll reads a table's text into a buffer of the size gzip's trailer
// gives; a stream the trailer does not describe whole still reads whole,
// and a damaged one fails.
func TestReadAll(t *testing.T) {
	member := func(text string) []byte {
		var b bytes.Buffer
		w := gzip.NewWriter(&b)
		w.Write([]byte(text))
		w.Close()
		return b.Bytes()
	}
	two := append(member("first member\n"), member("second\n")...)
	damaged := member("a text whose CRC will not match")
	damaged[len(damaged)-8] ^= 1
	for _, c := range []struct {
		name string
		data []byte
		want string
		err  string
	}{
		{"one member", member(strings.Repeat("E\tname\n", 1000)), strings.Repeat("E\tname\n", 1000), ""},
		{"empty", member(""), "", ""},
		{"two members", two, "first member\nsecond\n", ""},
		{"damaged", damaged, "", "gzip: invalid checksum"},
	} {
		fsys := fstest.MapFS{"t.tsv.gz": {Data: c.data}}
		f, err := fsys.Open("t.tsv.gz")
		if err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		got, err := readAll(f, zr)
		switch {
		case c.err != "" && (err == nil || err.Error() != c.err):
			t.Errorf("%s: error %v, want %q", c.name, err, c.err)
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("%s: %q, %v; want %q", c.name, got, err, c.want)
		}
	}
}

// Decoding a table makes its text once, at its size (the trailer's),
// and the arrays of its records: beside gzip's decoder (its 32 KiB window
// and tables), nothing else of the text's size.
func TestDecodeTableBytes(t *testing.T) {
	readIndex()
	skx := find("amd64", "skx")
	const file = "amd64/skl.tsv.gz"
	data, err := fs.ReadFile(tables.FS, file)
	if err != nil {
		t.Fatal(err)
	}
	text := binary.LittleEndian.Uint32(data[len(data)-4:])
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	mods, events, err := decodeTable(file, skx.size)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	records := uint64(cap(mods))*uint64(unsafe.Sizeof(Modifier{})) + uint64(cap(events))*uint64(unsafe.Sizeof(Event{})) +
		uint64(skx.size[1])*uint64(unsafe.Sizeof(Umask{}))
	const decoder = 64 << 10
	if got, limit := after.TotalAlloc-before.TotalAlloc, uint64(text)+records+decoder; got > limit {
		t.Errorf("decoding %s (%d bytes of text, %d of records) allocated %d bytes, want at most %d", file, text, records, got, limit)
	}
}

// A damaged index names the file, line and field.
func TestDecodeIndexErrors(t *testing.T) {
	row := "P\t0\t7\tskx\tintel_x86\tcore\t\t0x4\t0\t8\t3\t0x9\t2\t6\t85\tskl\t88\t400\tIntel Skylake X"
	for _, c := range []struct{ text, want string }{
		{"#kind\tname\n", "x/index.tsv:1: the header is not"},
		{indexHeader + "\n" + strings.Replace(row, "intel_x86", "vax", 1) + "\n", "x/index.tsv:2: field 5: unknown family \"vax\""},
		{indexHeader + "\n" + strings.Replace(row, "\t0x4\t", "\tfour\t", 1) + "\n", "x/index.tsv:2: field 8: \"four\" is not a number"},
		{indexHeader + "\n" + row + "\textra\n", "x/index.tsv:2: 20 fields, want 19"},
		{indexHeader + "\n" + strings.Replace(row, "P", "V", 1) + "\n", "x/index.tsv:2: a model table of skx that does not follow it"},
	} {
		_, err := decodeIndex("x", "x/index.tsv", c.text)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("decodeIndex: %v, want %q", err, c.want)
		}
	}
}

// The catalog says which libpfm4 commit it comes from.
func TestSource(t *testing.T) {
	if got, want := Source(), "libpfm4 6870a9f00412 (as bundled by PAPI 545375f7d81b)"; got != want {
		t.Errorf("Source() = %q, want %q", got, want)
	}
}
