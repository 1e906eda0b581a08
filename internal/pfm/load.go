package pfm

import (
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"io"
	"io/fs"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"perfevent/internal/pfm/tables"
	"perfevent/internal/tsv"
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

// ArchPMUsByID is ArchPMUs in the order of libpfm4's PMU ids, in which
// pfm_for_all_pmus walks them. Every start asks for it, so it is
// generated, not built: the PMUs are the same as ArchPMUs gives.
func ArchPMUsByID(arch string) []*PMU {
	for _, a := range generatedIndex {
		if a.arch == arch {
			return a.byID
		}
	}
	return nil
}

// Load gives the PMU named name, with its tables, decoded on first use
// and shared afterwards (callers must not modify it). A name that several
// builds have (perf, perf_raw) gives the host architecture's, or else the
// first in Archs order.
func Load(name string) (*PMU, error) {
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
	h := find(arch, name)
	if h == nil {
		return nil, fmt.Errorf("pfm: no PMU %q in libpfm4's %s tables (commit %.12s)", name, arch, tables.Libpfm4Commit)
	}
	return load(h)
}

func find(arch, name string) *PMU {
	for _, a := range generatedIndex {
		if a.arch != arch {
			continue
		}
		t := &a.sketch
		i, ok := slices.BinarySearchFunc(a.byName, name, func(k uint16, name string) int {
			r := &t.rows[k]
			return strings.Compare(t.names[r.name:int(r.name)+int(r.nameLen)], name)
		})
		if !ok {
			return nil
		}
		return a.byID[a.byName[i]]
	}
	return nil
}

// entry gives *m's entry for k, made on first use (and the map with
// it), under the catalog's lock; the entry's own sync.Once then decodes
// without holding it.
func entry[K comparable, V any](m *map[K]*V, k K) *V {
	catalog.mu.Lock()
	defer catalog.mu.Unlock()
	if *m == nil {
		*m = map[K]*V{}
	}
	v := (*m)[k]
	if v == nil {
		v = new(V)
		(*m)[k] = v
	}
	return v
}

func load(h *PMU) (*PMU, error) {
	l := entry(&catalog.loaded, h)
	l.once.Do(func() { l.pmu, l.err = loadTables(h) })
	return l.pmu, l.err
}

func loadTables(h *PMU) (*PMU, error) {
	p := *h
	p.full = true
	t := table(h.Arch, h.table, h.size)
	if t.err != nil {
		return nil, t.err
	}
	p.Modifiers, p.Events = t.mods, t.events
	if len(h.ModelTables) > 0 {
		p.ModelTables = make([]ModelTable, len(h.ModelTables))
		for i, mt := range h.ModelTables {
			vt := table(h.Arch, mt.table, mt.size)
			if vt.err != nil {
				return nil, vt.err
			}
			p.ModelTables[i] = mt
			p.ModelTables[i].Events = vt.events
		}
	}
	return &p, nil
}

// table decodes a table file once; PMUs that share it share its events.
// The tables every machine needs (perf's) are compiled in.
func table(arch, name string, size [2]int) *loadedTable {
	key := arch + "/" + name
	t := entry(&catalog.tables, key)
	t.once.Do(func() {
		for _, g := range generatedTables {
			if g.key == key {
				t.mods, t.events = g.mods, g.events
				return
			}
		}
		t.mods, t.events, t.err = decodeTable(key+".tsv.gz", size)
	})
	return t
}

// The index is generated Go (index_gen.go, from each architecture's
// index.tsv): decoding it at every start cost more than the rest of
// the catalog's work there.
type generatedArch struct {
	arch   string
	pmus   []PMU
	byName []uint16 // rows of sketch (and byID) by Name, then Order: a lookup reads the sketches' names
	byID   []*PMU   // by ID, then Order: pointers into pmus
	sketch sketchTable
}

// generatedTable is a table compiled in rather than decoded.
type generatedTable struct {
	key    string // arch/table
	mods   []Modifier
	events []Event
}

// readIndex makes the lists of PMUs() and ArchPMUs(), which listings
// and tests use; a start needs neither.
func readIndex() {
	catalog.once.Do(func() {
		catalog.byArch = map[string][]*PMU{}
		for _, a := range generatedIndex {
			pmus := make([]*PMU, len(a.pmus))
			for i := range a.pmus {
				pmus[i] = &a.pmus[i]
			}
			catalog.byArch[a.arch] = pmus
			catalog.pmus = append(catalog.pmus, pmus...)
		}
	})
}

// mayHave reports whether p's table may have an event of this name, by
// the generated hashes of its names; false means it has none, and a
// lookup need not decode the table.
func (p *PMU) mayHave(event string) bool {
	if p.names == nil {
		return true
	}
	_, ok := slices.BinarySearch(p.names, nameHash(event))
	return ok
}

// nameHash is FNV-1a of the name in ASCII upper case, as libpfm4
// compares names.
func nameHash(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		h ^= uint32(c)
		h *= 16777619
	}
	return h
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

// The table files' header lines name their columns; a table whose header
// differs was written by another generator.
const tableHeader = "#M\tindex\tname\ttype\tdesc\n" +
	"#E\tname\tcode\tcntmsk\tflags\tmodmsk\tmodmsk_req\tngrp\tmodel\ttype\tequiv\tdesc\tlongdesc\n" +
	"#U\tname\tcode\tcntmsk\tfilter0\tfilter1\tflags\tmodel\tgrpid\tmodhw\tmodmsk_req\tequiv\tdesc\n"

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
	text, err := readAll(f, zr)
	if err != nil {
		return nil, nil, fmt.Errorf("pfm: %s: %v", file, err)
	}
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
		n := tsv.Split(line, cols[:])
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

// readAll decompresses a table into one string, which the decoded names
// and descriptions are slices of. gzip's trailer gives the size, so the
// text is read into a buffer of its size and that buffer becomes the string:
// no buffer grows by doubling, and none is copied.
func readAll(f fs.File, zr *gzip.Reader) (string, error) {
	size := -1
	if ra, ok := f.(io.ReaderAt); ok {
		if st, err := f.Stat(); err == nil && st.Size() >= 4 {
			var isize [4]byte
			if _, err := ra.ReadAt(isize[:], st.Size()-4); err == nil {
				size = int(binary.LittleEndian.Uint32(isize[:]))
			}
		}
	}
	if size < 0 {
		var b strings.Builder
		_, err := io.Copy(&b, zr)
		return b.String(), err
	}
	b := make([]byte, size+1)
	n, err := io.ReadFull(zr, b)
	switch err {
	case nil:
		// More than the trailer says: a stream of several members,
		// whose last one the trailer describes.
		rest, err := io.ReadAll(zr)
		return string(b) + string(rest), err
	case io.EOF, io.ErrUnexpectedEOF:
		// The whole text, and io.EOF after it: gzip checked its CRC.
	default:
		return "", err
	}
	if n == 0 {
		return "", nil
	}
	// b is not written again, nor kept but as this string.
	return unsafe.String(&b[0], n), nil
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
	// Without fmt: package pmu calls this at every start.
	short := func(commit string) string { return commit[:min(len(commit), 12)] }
	s := "libpfm4 " + short(tables.Libpfm4Commit)
	if tables.PAPICommit != "" {
		s += " (as bundled by PAPI " + short(tables.PAPICommit) + ")"
	}
	return s
}
