package pfm

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"perfevent/internal/pfm/tables"
)

// Archs are the libpfm4 builds the catalog holds, in the order PMUs gives them.
var Archs = []string{"amd64", "arm64", "ppc64le"}

var catalog struct {
	once   sync.Once
	pmus   []*PMU
	byArch map[string][]*PMU

	mu     sync.Mutex
	loaded map[*PMU]*loadedPMU // keyed by header
	tables map[string]*loadedTable
}

type loadedPMU struct {
	once sync.Once
	pmu  *PMU
	err  error
}

type loadedTable struct {
	once   sync.Once
	mods   []Modifier
	events []Event
	err    error
}

// PMUs gives the header of every PMU in the catalog (Events, Modifiers and
// ModelTables' Events are nil): each architecture's PMUs in libpfm4's list
// order, architectures in the order of Archs. It reads only the index, once.
// The PMUs are shared: callers must not modify them.
func PMUs() []*PMU {
	readIndex()
	return catalog.pmus
}

// ArchPMUs is PMUs for one architecture ("amd64", "arm64", "ppc64le").
func ArchPMUs(arch string) []*PMU {
	readIndex()
	return catalog.byArch[arch]
}

// Load gives the PMU named name, with its tables, decoded on first use
// and shared afterwards (callers must not modify it). A name that several
// builds have (perf, perf_raw) gives the host architecture's, or else the
// first in Archs order.
func Load(name string) (*PMU, error) {
	readIndex()
	h := find(runtime.GOARCH, name)
	for _, a := range Archs {
		if h == nil {
			h = find(a, name)
		}
	}
	if h == nil {
		return nil, fmt.Errorf("pfm: no PMU %q in libpfm4's tables (commit %.12s)", name, tables.Libpfm4Commit)
	}
	return load(h)
}

// LoadArch is Load for one architecture's build.
func LoadArch(arch, name string) (*PMU, error) {
	readIndex()
	h := find(arch, name)
	if h == nil {
		return nil, fmt.Errorf("pfm: no PMU %q in libpfm4's %s tables (commit %.12s)", name, arch, tables.Libpfm4Commit)
	}
	return load(h)
}

func find(arch, name string) *PMU {
	for _, p := range catalog.byArch[arch] {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// entry gives m's entry for k, made on first use, under the catalog's lock;
// the entry's own sync.Once then decodes without holding it.
func entry[K comparable, V any](m map[K]*V, k K) *V {
	catalog.mu.Lock()
	defer catalog.mu.Unlock()
	v := m[k]
	if v == nil {
		v = new(V)
		m[k] = v
	}
	return v
}

func load(h *PMU) (*PMU, error) {
	l := entry(catalog.loaded, h)
	l.once.Do(func() { l.pmu, l.err = loadTables(h) })
	return l.pmu, l.err
}

func loadTables(h *PMU) (*PMU, error) {
	p := *h
	t := table(h.Arch, tableNames[h])
	if t.err != nil {
		return nil, t.err
	}
	p.Modifiers, p.Events = t.mods, t.events
	if len(h.ModelTables) > 0 {
		p.ModelTables = make([]ModelTable, len(h.ModelTables))
		for i, mt := range h.ModelTables {
			vt := table(h.Arch, mt.table)
			if vt.err != nil {
				return nil, vt.err
			}
			p.ModelTables[i] = ModelTable{CPUModels: mt.CPUModels, Events: vt.events, table: mt.table}
		}
	}
	return &p, nil
}

// table decodes a table file once; PMUs that share it share its events.
func table(arch, name string) *loadedTable {
	key := arch + "/" + name
	t := entry(catalog.tables, key)
	t.once.Do(func() {
		file := key + ".tsv.gz"
		t.mods, t.events, t.err = decodeTable(file, tableSizes[key])
	})
	return t
}

// tableNames and tableSizes are filled with the index, which is read once.
var (
	tableNames = map[*PMU]string{}
	tableSizes = map[string][2]int{} // events and unit masks, to allocate once
)

func readIndex() {
	catalog.once.Do(func() {
		catalog.byArch = map[string][]*PMU{}
		catalog.loaded = map[*PMU]*loadedPMU{}
		catalog.tables = map[string]*loadedTable{}
		for _, arch := range Archs {
			file := arch + "/index.tsv"
			b, err := fs.ReadFile(tables.FS, file)
			if err != nil {
				continue // an architecture not generated
			}
			pmus, err := decodeIndex(arch, file, string(b), tableNames, tableSizes)
			if err != nil {
				// The index is generated and checked by the tests: a bad one
				// is a broken build, not bad input.
				panic(err)
			}
			catalog.byArch[arch] = pmus
			catalog.pmus = append(catalog.pmus, pmus...)
		}
	})
}

const indexHeader = "#kind\torder\tid\tname\tfamily\ttype\tperf_name\tflags\trev\tnum_cntrs\tnum_fixed\tsupported_plm\tmax_encoding\tcpu_family\tcpu_models\ttable\tnevents\tnumasks\tdesc"

var families = map[string]Family{
	"intel_x86":       FamilyIntelX86,
	"intel_uncore":    FamilyIntelUncore,
	"intel_rapl":      FamilyIntelRAPL,
	"intel_nhm_unc":   FamilyIntelNHMUncore,
	"netburst":        FamilyNetburst,
	"amd64":           FamilyAMD64,
	"arm":             FamilyARM,
	"arm_kunpeng_unc": FamilyARMKunpengUncore,
	"arm_tx2_unc":     FamilyARMTX2Uncore,
	"power":           FamilyPower,
	"power_torrent":   FamilyPowerTorrent,
	"perf":            FamilyPerf,
	"unknown":         FamilyUnknown,
}

var pmuTypes = map[string]PMUType{
	"core":       PMUTypeCore,
	"uncore":     PMUTypeUncore,
	"os_generic": PMUTypeOSGeneric,
	"unknown":    PMUTypeUnknown,
}

var modTypes = map[string]ModifierType{
	"none":      ModNone,
	"umask":     ModUmask,
	"bool":      ModBool,
	"int":       ModInteger,
	"raw_umask": ModRawUmask,
}

// fields reads one line's tab-separated fields as numbers and strings,
// keeping the first error with the file, line and column it came from.
type fields struct {
	file string
	line int
	f    []string
	err  error
}

func (r *fields) fail(i int, format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%s:%d: field %d: %s", r.file, r.line, i+1, fmt.Sprintf(format, args...))
	}
}

func (r *fields) uint(i int, bits int) uint64 {
	v, err := strconv.ParseUint(r.f[i], 0, bits)
	if err != nil {
		r.fail(i, "%q is not a number", r.f[i])
	}
	return v
}

func (r *fields) int(i int) int {
	v, err := strconv.ParseInt(r.f[i], 0, 64)
	if err != nil {
		r.fail(i, "%q is not a number", r.f[i])
	}
	return int(v)
}

func (r *fields) str(i int) string { return unescape(r.f[i]) }

func (r *fields) ints(i int) []int {
	if r.f[i] == "" {
		return nil
	}
	parts := strings.Split(r.f[i], ",")
	v := make([]int, len(parts))
	for k, s := range parts {
		n, err := strconv.Atoi(s)
		if err != nil {
			r.fail(i, "%q is not a list of numbers", r.f[i])
		}
		v[k] = n
	}
	return v
}

// decodeIndex reads one architecture's index, and notes each PMU's table
// file in names and each table's size in sizes.
func decodeIndex(arch, file, text string, names map[*PMU]string, sizes map[string][2]int) ([]*PMU, error) {
	var pmus []*PMU
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if lines[0] != indexHeader {
		return nil, fmt.Errorf("%s:1: the header is not %q", file, indexHeader)
	}
	var f []string // one line's fields, reused: a PMU keeps substrings, not the slice
	for n, line := range lines[1:] {
		f = splitInto(f[:0], line, '\t')
		r := fields{file: file, line: n + 2, f: f}
		if len(r.f) != 19 {
			return nil, fmt.Errorf("%s:%d: %d fields, want 19", file, r.line, len(r.f))
		}
		fam, ok := families[r.f[4]]
		if !ok {
			r.fail(4, "unknown family %q", r.f[4])
		}
		typ, ok := pmuTypes[r.f[5]]
		if !ok {
			r.fail(5, "unknown PMU type %q", r.f[5])
		}
		p := &PMU{
			Name:         r.str(3),
			Desc:         r.str(18),
			ID:           r.int(2),
			Order:        r.int(1),
			Family:       fam,
			Type:         typ,
			PerfName:     r.str(6),
			Flags:        uint32(r.uint(7, 32)),
			Rev:          r.int(8),
			NumCounters:  r.int(9),
			NumFixed:     r.int(10),
			SupportedPLM: uint32(r.uint(11, 32)),
			MaxEncoding:  r.int(12),
			CPUFamily:    r.int(13),
			CPUModels:    r.ints(14),
			Arch:         arch,
		}
		key := arch + "/" + r.f[15]
		sizes[key] = [2]int{r.int(16), r.int(17)}
		if r.err != nil {
			return nil, r.err
		}
		switch r.f[0] {
		case "P":
			names[p] = r.f[15]
			pmus = append(pmus, p)
		case "V":
			if len(pmus) == 0 || pmus[len(pmus)-1].Name != p.Name {
				return nil, fmt.Errorf("%s:%d: a model table of %s that does not follow it", file, r.line, p.Name)
			}
			last := pmus[len(pmus)-1]
			last.ModelTables = append(last.ModelTables, ModelTable{CPUModels: p.CPUModels, table: r.f[15]})
		default:
			return nil, fmt.Errorf("%s:%d: unknown record kind %q", file, r.line, r.f[0])
		}
	}
	return pmus, nil
}

// splitInto is strings.Split into dst's storage: the index is decoded at
// every start, and a slice a line was most of what that allocated.
func splitInto(dst []string, s string, sep byte) []string {
	for {
		i := strings.IndexByte(s, sep)
		if i < 0 {
			return append(dst, s)
		}
		dst = append(dst, s[:i])
		s = s[i+1:]
	}
}

// The table files' header lines name their columns; a table whose header
// differs was written by another generator.
var tableHeader = strings.Join([]string{
	"#M\tindex\tname\ttype\tdesc",
	"#E\tname\tcode\tcntmsk\tflags\tmodmsk\tmodmsk_req\tngrp\tmodel\ttype\tequiv\tdesc\tlongdesc",
	"#U\tname\tcode\tcntmsk\tfilter0\tfilter1\tflags\tmodel\tgrpid\tmodhw\tmodmsk_req\tequiv\tdesc",
}, "\n") + "\n"

func decodeTable(file string, size [2]int) ([]Modifier, []Event, error) {
	f, err := tables.FS.Open(file)
	if err != nil {
		return nil, nil, fmt.Errorf("pfm: %v", err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, nil, fmt.Errorf("pfm: %s: %v", file, err)
	}
	var buf bytes.Buffer
	if st, err := f.Stat(); err == nil {
		buf.Grow(int(st.Size()) * 6)
	}
	if _, err := io.Copy(&buf, zr); err != nil {
		return nil, nil, fmt.Errorf("pfm: %s: %v", file, err)
	}
	// One string holds the whole table; names and descriptions are slices of it.
	text := buf.String()
	if !strings.HasPrefix(text, tableHeader) {
		return nil, nil, fmt.Errorf("pfm: %s: the header is not the one this decoder reads", file)
	}
	text = text[len(tableHeader):]
	lineNo := strings.Count(tableHeader, "\n")

	var mods []Modifier
	events := make([]Event, 0, size[0])
	umasks := make([]Umask, 0, size[1]) // every event's Umasks are a slice of this
	var cols [13]string
	for len(text) > 0 {
		lineNo++
		line, rest, _ := strings.Cut(text, "\n")
		text = rest
		n := split(line, cols[:])
		r := fields{file: file, line: lineNo, f: cols[:n]}
		kind := cols[0]
		want := 13
		if kind == "M" {
			want = 5
		}
		if n != want {
			return nil, nil, fmt.Errorf("pfm: %s:%d: %d fields in a %q record, want %d", file, lineNo, n, kind, want)
		}
		switch kind {
		case "M":
			t, ok := modTypes[cols[3]]
			if !ok {
				r.fail(3, "unknown modifier type %q", cols[3])
			}
			if r.int(1) != len(mods) {
				r.fail(1, "modifier %s out of order", cols[1])
			}
			mods = append(mods, Modifier{Name: r.str(2), Type: t, Desc: r.str(4)})
		case "E":
			if len(events) > 0 {
				e := &events[len(events)-1]
				e.Umasks = umasks[len(umasks)-len(e.Umasks) : len(umasks) : len(umasks)]
			}
			events = append(events, Event{
				Name:       r.str(1),
				Code:       r.uint(2, 64),
				CntMask:    r.uint(3, 64),
				Flags:      uint32(r.uint(4, 32)),
				ModMask:    uint32(r.uint(5, 32)),
				ModMaskReq: uint32(r.uint(6, 32)),
				NumGroups:  uint16(r.uint(7, 16)),
				Model:      uint16(r.uint(8, 16)),
				Type:       uint32(r.uint(9, 32)),
				Equiv:      r.str(10),
				Desc:       r.str(11),
				LongDesc:   r.str(12),
			})
		case "U":
			if len(events) == 0 {
				return nil, nil, fmt.Errorf("pfm: %s:%d: a unit mask before any event", file, lineNo)
			}
			umasks = append(umasks, Umask{
				Name:       r.str(1),
				Code:       r.uint(2, 64),
				CntMask:    r.uint(3, 64),
				Filters:    [2]uint64{r.uint(4, 64), r.uint(5, 64)},
				Flags:      uint32(r.uint(6, 32)),
				Model:      uint16(r.uint(7, 16)),
				Group:      uint16(r.uint(8, 16)),
				ModHW:      uint32(r.uint(9, 32)),
				ModMaskReq: uint32(r.uint(10, 32)),
				Equiv:      r.str(11),
				Desc:       r.str(12),
			})
			// Count them here; the slice is cut when the event is complete.
			e := &events[len(events)-1]
			e.Umasks = umasks[len(umasks)-len(e.Umasks)-1 : len(umasks)]
		default:
			return nil, nil, fmt.Errorf("pfm: %s:%d: unknown record kind %q", file, lineNo, kind)
		}
		if r.err != nil {
			return nil, nil, fmt.Errorf("pfm: %v", r.err)
		}
	}
	if len(events) > 0 {
		e := &events[len(events)-1]
		e.Umasks = umasks[len(umasks)-len(e.Umasks) : len(umasks) : len(umasks)]
	}
	for i := range events {
		if len(events[i].Umasks) == 0 {
			events[i].Umasks = nil
		}
	}
	return mods, events, nil
}

// split cuts line at tabs into cols and returns how many fields it had
// (more than len(cols) counts as len(cols)+1).
func split(line string, cols []string) int {
	n := 0
	for {
		i := strings.IndexByte(line, '\t')
		if n == len(cols) {
			return n + 1
		}
		if i < 0 {
			cols[n] = line
			return n + 1
		}
		cols[n] = line[:i]
		line = line[i+1:]
		n++
	}
}

// unescape undoes the dumper's escapes (\\ \t \n \r); most strings have none
// and stay slices of the table's text.
func unescape(s string) string {
	if strings.IndexByte(s, '\\') < 0 {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\\' && i+1 < len(s) {
			i++
			switch s[i] {
			case 't':
				c = '\t'
			case 'n':
				c = '\n'
			case 'r':
				c = '\r'
			default:
				c = s[i]
			}
		}
		b.WriteByte(c)
	}
	return b.String()
}

// Source says where the catalog comes from, for a listing's provenance:
// "libpfm4 6870a9f00412 (as bundled by PAPI 545375f7d81b)".
func Source() string {
	s := fmt.Sprintf("libpfm4 %.12s", tables.Libpfm4Commit)
	if tables.PAPICommit != "" {
		s += fmt.Sprintf(" (as bundled by PAPI %.12s)", tables.PAPICommit)
	}
	return s
}
