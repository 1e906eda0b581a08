package ratio

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strconv"
	"strings"

	"perfevent/internal/conffile"
	"perfevent/internal/counter"
)

// The ratios file holds a user's own ratios, one a line:
//
//	# name = numerator [+ numerator ...] / denominator [* scale] [unit]
//	l1d_miss_ratio = L1-dcache-load-misses / L1-dcache-loads
//	faults_per_cpu_second = page-faults / cpu-clock * 1e9 per-second
//	imc_reads = uncore_imc_*.cas_count_read / duration_time * 64e9 bytes-per-second
//
// The operands are event names exactly as perfevent.conf configures them;
// a numerator term may be a glob over them, which adds up every event it
// matches, and duration_time is the wall-clock time between fetches. The
// unit is per-second or bytes-per-second. It is a file of its own, so that
// the C agent, which reads the same perfevent.conf, never sees a syntax it
// does not know.

// unitNamed is the Unit a ratios file spells name.
func unitNamed(name string) (Unit, bool) {
	switch name {
	case "per-second":
		return PerSecond, true
	case "bytes-per-second":
		return BytesPerSecond, true
	}
	return 0, false
}

const syntax = `want "name = numerator [+ numerator ...] / denominator [* scale] [per-second|bytes-per-second]"`

// The file also turns the catalog's groups of ratios off and on, in
// order, one a line: "disable GROUP" or "enable GROUP", where GROUP is a
// group's name (topdown, bandwidth, …) or "catalog" for all of them:
//
//	disable catalog
//	enable topdown

// Switch is one "enable" or "disable" line of a ratios file.
type Switch struct {
	Group string
	On    bool
}

// ParseFile reads a ratios file (conffile.Read). A missing file is no
// ratios and no error. Each bad line is one error naming file and line;
// the good lines are returned all the same.
func ParseFile(path string) ([]Def, error) {
	defs, _, err := ReadFile(path)
	return defs, err
}

// ReadFile is ParseFile with the file's group switches too.
func ReadFile(path string) ([]Def, []Switch, error) {
	src, err := conffile.Read(path)
	return parseRead(path, src, err)
}

// ReadHeld is ReadFile through a file the agent holds from start-up
// (conffile.File.Read).
func ReadHeld(f *conffile.File) ([]Def, []Switch, error) {
	src, err := f.Read()
	return parseRead(f.Path(), src, err)
}

// ParseHeld is ParseFile through a file the agent holds from start-up.
func ParseHeld(f *conffile.File) ([]Def, error) {
	defs, _, err := ReadHeld(f)
	return defs, err
}

func parseRead(name string, src []byte, err error) ([]Def, []Switch, error) {
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	return parse(name, src)
}

// Parse reads a ratios file's text; name is used in errors.
func Parse(name string, src []byte) ([]Def, error) {
	defs, _, err := parse(name, src)
	return defs, err
}

func parse(name string, src []byte) ([]Def, []Switch, error) {
	var defs []Def
	var sws []Switch
	errs := conffile.Lines(name, src, func(n int, line string) error {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		line = strings.TrimSpace(line)
		if line == "" {
			return nil
		}
		if f := strings.Fields(line); len(f) > 0 && (f[0] == "enable" || f[0] == "disable") {
			if len(f) != 2 || !validName(f[1]) {
				return fmt.Errorf("want \"%s GROUP\", GROUP a group of the catalog or \"catalog\"", f[0])
			}
			sws = append(sws, Switch{Group: f[1], On: f[0] == "enable"})
			return nil
		}
		d, err := parseLine(line)
		if err != nil {
			return err
		}
		d.About = fmt.Sprintf("%s, defined at %s:%d.", d.Formula(), name, n)
		d.Source = "the user's definition"
		if err := d.Check(); err != nil {
			return err
		}
		defs = append(defs, d)
		return nil
	})
	return defs, sws, errors.Join(errs...)
}

// parseLine reads "name = a + b / den * scale unit". Event names may hold
// neither "+" nor "/", which the syntax keeps for itself.
func parseLine(line string) (Def, error) {
	name, rhs, ok := strings.Cut(line, "=")
	name = strings.TrimSpace(name)
	if !ok || !validName(name) {
		return Def{}, errors.New(syntax)
	}
	d := Def{Name: name, Scale: 1}
	if f := strings.Fields(rhs); len(f) > 0 {
		if u, ok := unitNamed(f[len(f)-1]); ok {
			d.Unit = u
			rhs = strings.Join(f[:len(f)-1], " ")
		}
	}
	num, den, ok := strings.Cut(rhs, "/")
	if !ok {
		return Def{}, errors.New(syntax)
	}
	if den, s, ok := strings.Cut(den, "*"); ok {
		s = strings.TrimSpace(s)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return Def{}, fmt.Errorf("scale %q is not a number", s)
		}
		d.Scale = v
		d.Den = strings.TrimSpace(den)
	} else {
		d.Den = strings.TrimSpace(den)
	}
	for _, t := range strings.Split(num, "+") {
		d.Num = append(d.Num, strings.TrimSpace(t))
	}
	if strings.ContainsAny(d.Den, " \t") || slices.ContainsFunc(d.Num, func(t string) bool { return t == "" || strings.ContainsAny(t, " \t") }) {
		return Def{}, errors.New(syntax)
	}
	return d, d.Check()
}

// validName reports whether name can name a ratio: a letter, then letters,
// digits and underscores. It is written out rather than a regular
// expression so that the agent does not link package regexp, whose tables
// every start would build.
func validName(name string) bool {
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || i > 0 && ('0' <= c && c <= '9' || c == '_')) {
			return false
		}
	}
	return name != ""
}

// DefsWith are the user's ratios of the file at path, then the catalog's
// ratios for this machine less those of the groups the file turns off,
// then the built-in ones: a user's ratio named like another comes first,
// and so wins when it can be served. off names each ratio of catalog
// turned off; errs has one error per bad line, or why the file could not
// be read.
func DefsWith(path string, catalog []Def) (defs []Def, user int, off []string, errs []error) {
	mine, sws, err := ReadFile(path)
	return defsWith(path, mine, sws, err, catalog)
}

// DefsHeldWith is DefsWith through a file the agent holds from start-up.
func DefsHeldWith(f *conffile.File, catalog []Def) (defs []Def, user int, off []string, errs []error) {
	mine, sws, err := ReadHeld(f)
	return defsWith(f.Path(), mine, sws, err, catalog)
}

func defsWith(path string, mine []Def, sws []Switch, err error, catalog []Def) (defs []Def, user int, off []string, errs []error) {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else if err != nil {
		errs = []error{err}
	}
	known := map[string]bool{"catalog": true}
	for _, d := range catalog {
		known[d.Group] = true
	}
	for _, sw := range sws {
		if !known[sw.Group] {
			errs = append(errs, fmt.Errorf("%s: no group %q in this machine's catalog (it has %s)", path, sw.Group, strings.Join(slices.Sorted(maps.Keys(known)), ", ")))
		}
	}
	defs = make([]Def, 0, len(mine)+len(catalog)+len(Builtin)) // each a few hundred bytes: sized once
	defs = append(defs, mine...)
	for _, d := range catalog {
		on := true
		for _, sw := range sws {
			if sw.Group == "catalog" || sw.Group == d.Group {
				on = sw.On
			}
		}
		if on {
			defs = append(defs, d)
		} else {
			off = append(off, d.Name)
		}
	}
	return append(defs, Builtin...), len(mine), off, errs
}

// Choose is DefsWith and ChooseFrom in one, with no catalog: the ratios
// served, the file's problems, and informational lines (each user's ratio
// not served and why, then each ratio served). A built-in ratio that this
// machine cannot count is normal (a VM has no ipc) and gets no line.
func Choose(path string, set *counter.Set, scales Scales) (chosen []Chosen, problems []error, info []string) {
	defs, user, off, problems := DefsWith(path, nil)
	chosen, info = ChooseFrom(path, defs, user, 0, off, nil, set, scales)
	return chosen, problems, info
}

// ChooseFrom selects among what DefsWith or DefsHeldWith returned: the
// definitions, how many are the user's and the catalog's, and the
// catalog's turned off in the file at path. Each of the catalog's ratios
// gets a line too, served or not, with its formula and source, but those
// quiet names: the caller has said why already.
func ChooseFrom(path string, defs []Def, user, catalog int, off []string, quiet func(name string) bool, set *counter.Set, scales Scales) (chosen []Chosen, info []string) {
	// Only the user's and the catalog's lines not quiet are logged.
	chosen, why := selectSaying(defs, set, scales, func(i int) bool {
		return i < user || i < user+catalog-len(off) && (quiet == nil || !quiet(defs[i].Name))
	})
	for _, w := range why[:user] {
		if w != "" {
			info = append(info, w)
		}
	}
	for _, name := range off {
		info = append(info, fmt.Sprintf("catalog: perfevent.ratio.%s turned off in %s", name, path))
	}
	served := map[string]bool{}
	for _, c := range chosen {
		served[c.Name] = true
		line := fmt.Sprintf("perfevent.ratio.%s = %s, on %d CPUs", c.Name, c.Formula(set), len(c.CPUs))
		if c.Group != "" {
			line = fmt.Sprintf("catalog %s: %s; source: %s", c.Group, line, c.Source)
		}
		info = append(info, line)
	}
	for i, d := range defs[user : user+catalog-len(off)] {
		if w := why[user+i]; w != "" && !served[d.Name] && (quiet == nil || !quiet(d.Name)) {
			info = append(info, fmt.Sprintf("catalog %s: perfevent.ratio.%s = %s: %s; source: %s", d.Group, d.Name, d.Brief(), strings.TrimPrefix(w, fmt.Sprintf("ratio %q ", d.Name)), d.Source))
		}
	}
	return chosen, info
}
