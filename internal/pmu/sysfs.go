package pmu

import (
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"perfevent/internal/cpulist"
	"perfevent/internal/hostfs"

	"golang.org/x/sys/unix"
)

// PMU is one directory of /sys/bus/event_source/devices.
type PMU struct {
	Name string
	Dir  string // the PMU's sysfs directory
	Type uint32 // the perf_event_attr.type that selects it
	// CPUs is the PMU's cpumask (uncore PMUs: one CPU per package) or, for
	// hybrid core PMUs, its cpus file. Nil means every online CPU.
	CPUs []int
	// Caps holds the caps/ directory, e.g. "pmu_name" = "skylake".
	Caps    map[string]string
	Formats map[string]Format
	Events  []PMUEvent // sorted by name
	// FormatErrors records format files that could not be parsed. An event
	// using one of them fails; other events of the PMU still work.
	FormatErrors map[string]error
}

// PMUEvent is one file of a PMU's events directory, with its companion
// .scale, .unit, .snapshot and .per-pkg files.
type PMUEvent struct {
	Name  string
	Path  string
	Text  string // the term list as read, e.g. "event=0x3c"
	Terms []Term
	// Err is set when the file or one of its companions could not be
	// read or parsed; resolving the event reports it.
	Err      error
	Scale    float64 // 1 when there is no .scale file
	Unit     string
	Snapshot bool // the value is a point-in-time reading, not a counter
	PerPkg   bool // one count per package, sum over CPUs is wrong
}

// Event returns the named event of the PMU.
func (p *PMU) Event(name string) (*PMUEvent, bool) {
	i, ok := slices.BinarySearchFunc(p.Events, name, func(e PMUEvent, n string) int {
		return strings.Compare(e.Name, n)
	})
	if !ok {
		return nil, false
	}
	return &p.Events[i], true
}

// PMUNames lists the PMU directories under <Sys>/bus/event_source/devices,
// sorted. Within a pass (see Pass) the list is read once and shared:
// callers must not change it.
func (fs *FS) PMUNames() ([]string, error) {
	return fs.cachedNames(fs.readPMUNames)
}

// readPMUNames lists the names alone: os.ReadDir would make an entry of
// each, in a directory buffer of its own, for the names to be copied out.
func (fs *FS) readPMUNames() ([]string, error) {
	names, err := hostfs.ReadDirNames(fs.devicesDir())
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, nil
	}
	slices.Sort(names)
	return names, nil
}

// PMUs reads every PMU. A PMU that cannot be read is left out and its
// error joined into the returned error, so one broken driver does not
// hide the others; callers should log the error and use the PMUs.
func (fs *FS) PMUs() ([]*PMU, error) {
	names, err := fs.PMUNames()
	if err != nil {
		return nil, err
	}
	var pmus []*PMU
	var errs []error
	for _, n := range names {
		p, err := fs.PMU(n)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		pmus = append(pmus, p)
	}
	return pmus, errors.Join(errs...)
}

// PMU reads one PMU by its sysfs name. Only a missing or unreadable type
// file makes this fail; problems with single events or formats are kept
// in the PMU and reported when those are used. During a pass (see Pass)
// the PMU is read once and shared: the caller must not change it.
func (fs *FS) PMU(name string) (*PMU, error) {
	if !isPathElem(name) {
		return nil, fmt.Errorf("bad PMU name %q", name)
	}
	return fs.cachedPMU(name, fs.readPMU)
}

func (fs *FS) readPMU(name string) (*PMU, error) {
	dir := filepath.Join(fs.devicesDir(), name)
	if fs.current() != nil && !fs.hasPMU(name) {
		// What the reads below would find, without them.
		return nil, fmt.Errorf("no PMU %q: %s does not exist", name, dir)
	}
	typePath := filepath.Join(dir, "type")
	s, err := fs.typeText(name)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			if _, derr := os.Stat(dir); derr != nil {
				return nil, fmt.Errorf("no PMU %q: %s does not exist", name, dir)
			}
		}
		return nil, fmt.Errorf("PMU %s: %w", name, err)
	}
	typ, err := strconv.ParseUint(s, 0, 32)
	if err != nil {
		return nil, fmt.Errorf("%s: type %q is not a number", typePath, s)
	}
	p := &PMU{
		Name:         name,
		Dir:          dir,
		Type:         uint32(typ),
		Caps:         map[string]string{},
		Formats:      map[string]Format{},
		FormatErrors: map[string]error{},
	}
	for _, f := range []string{"cpumask", "cpus"} {
		path := filepath.Join(dir, f)
		s, err := readTrimmed(path)
		if err != nil {
			continue
		}
		cpus, err := cpulist.Parse(s)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		p.CPUs = cpus
		break
	}
	if err := eachFile(filepath.Join(dir, "caps"), func(n, text string) {
		p.Caps[n] = strings.TrimSpace(text)
	}); err != nil {
		return nil, fmt.Errorf("PMU %s: %w", name, err)
	}
	if err := eachFile(filepath.Join(dir, "format"), func(n, text string) {
		f, err := ParseFormat(n, text)
		if err != nil {
			p.FormatErrors[n] = fmt.Errorf("%s: %w", filepath.Join(dir, "format", n), err)
			return
		}
		p.Formats[n] = f
	}); err != nil {
		return nil, fmt.Errorf("PMU %s: %w", name, err)
	}
	if err := p.readEvents(); err != nil {
		return nil, fmt.Errorf("PMU %s: %w", name, err)
	}
	return p, nil
}

// eventSuffixes are the companion files of an event. They describe the
// event named before the dot and are not events themselves (the C agent
// turns .snapshot and .per-pkg into bogus events; we do not).
var eventSuffixes = []string{".scale", ".unit", ".snapshot", ".per-pkg"}

func (p *PMU) readEvents() error {
	dir := filepath.Join(p.Dir, "events")
	files := map[string]string{}
	if err := eachFile(dir, func(n, text string) { files[n] = text }); err != nil {
		return err
	}
	for n, text := range files {
		if hasEventSuffix(n) {
			continue
		}
		ev := PMUEvent{Name: n, Path: filepath.Join(dir, n), Text: strings.TrimSpace(text), Scale: 1}
		terms, err := ParseTerms(text)
		if err != nil {
			ev.Err = fmt.Errorf("%s: %w", ev.Path, err)
		}
		ev.Terms = terms
		if s, ok := files[n+".scale"]; ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
			if err != nil || v <= 0 {
				ev.Err = errors.Join(ev.Err, fmt.Errorf("%s.scale: %q is not a positive number", ev.Path, strings.TrimSpace(s)))
			} else {
				ev.Scale = v
			}
		}
		if u, ok := files[n+".unit"]; ok {
			ev.Unit = strings.TrimSpace(u)
		}
		ev.Snapshot = isTrue(files[n+".snapshot"])
		ev.PerPkg = isTrue(files[n+".per-pkg"])
		p.Events = append(p.Events, ev)
	}
	slices.SortFunc(p.Events, func(a, b PMUEvent) int { return strings.Compare(a.Name, b.Name) })
	return nil
}

func hasEventSuffix(name string) bool {
	for _, s := range eventSuffixes {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}

func isTrue(s string) bool {
	s = strings.TrimSpace(s)
	return s != "" && s != "0"
}

// eachFile calls f for every file in dir but its directories, in the
// order of their names. A missing dir is an empty one: caps, format and
// events are all optional. The listing is of names alone (a directory
// fails to read with EISDIR and is passed over), not os.ReadDir's
// entries in a buffer of their own.
func eachFile(dir string, f func(name, text string)) error {
	names, err := hostfs.ReadDirNames(dir)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	slices.Sort(names)
	// One buffer for every file, rather than one each: f gets a string
	// the size of the text, not of the buffer.
	var buf []byte
	for _, n := range names {
		if buf == nil {
			buf = make([]byte, 0, 512)
		}
		b, err := hostfs.AppendFile(buf[:0], filepath.Join(dir, n))
		if pe, ok := err.(*iofs.PathError); ok && pe.Op == "read" && pe.Err == unix.EISDIR {
			continue
		}
		if err != nil {
			return err
		}
		buf = b
		f(n, string(b))
	}
	return nil
}

// Encoding is the three configuration words of a perf event.
type Encoding struct{ Config, Config1, Config2 uint64 }

// Encode turns the event's terms into attr config words. params supplies
// values for "name=?" terms. Errors name the event file and the term; the
// caller adds the event name as configured.
func (p *PMU) Encode(ev *PMUEvent, params map[string]uint64) (Encoding, error) {
	if ev.Err != nil {
		return Encoding{}, ev.Err
	}
	var enc Encoding
	domain := uint64(0)
	for _, t := range ev.Terms {
		if t.Name == "domain" {
			domain = t.Value
			if t.Param {
				domain = params["domain"]
			}
		}
	}
	for _, t := range ev.Terms {
		v := t.Value
		if t.Param {
			pv, ok := params[t.Name]
			if !ok {
				return Encoding{}, fmt.Errorf("%s says %s=?: give its value with the %s:N option", ev.Path, t.Name, t.Name)
			}
			v = pv
		}
		// hv_24x7 events fix lpar=0x0, but for the per-partition domains
		// (above 2) the C agent substitutes a configured lpar:N.
		if pv, ok := params["lpar"]; ok && t.Name == "lpar" && domain > 2 && pv != 0 {
			v = pv
		}
		if err := p.setTerm(&enc, t.Name, v); err != nil {
			return Encoding{}, fmt.Errorf("%s: %w", ev.Path, err)
		}
	}
	return enc, nil
}

// setTerm ORs one term into enc. Besides the PMU's formats, perf lets the
// raw words be named directly ("config=0x1234").
func (p *PMU) setTerm(enc *Encoding, name string, v uint64) error {
	switch name {
	case "config":
		enc.Config |= v
		return nil
	case "config1":
		enc.Config1 |= v
		return nil
	case "config2":
		enc.Config2 |= v
		return nil
	}
	f, ok := p.Formats[name]
	if !ok {
		if err, bad := p.FormatErrors[name]; bad {
			return fmt.Errorf("term %s: %w", name, err)
		}
		return fmt.Errorf("unknown term %q: PMU %s has no format/%s", name, p.Name, name)
	}
	w, err := f.Place(v)
	if err != nil {
		return fmt.Errorf("term %s: %w", name, err)
	}
	switch f.Field {
	case Config:
		enc.Config |= w
	case Config1:
		enc.Config1 |= w
	case Config2:
		enc.Config2 |= w
	default:
		return fmt.Errorf("term %s: %s is not supported (no config3 in this perf_event_attr)", name, f)
	}
	return nil
}
