package ratio

import (
	"errors"
	"fmt"
	"io/fs"
	"regexp"
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
var units = map[string]Unit{"per-second": PerSecond, "bytes-per-second": BytesPerSecond}

const syntax = `want "name = numerator [+ numerator ...] / denominator [* scale] [per-second|bytes-per-second]"`

// ParseFile reads a ratios file (conffile.Read). A missing file is no
// ratios and no error. Each bad line is one error naming file and line;
// the good lines are returned all the same.
func ParseFile(path string) ([]Def, error) {
	src, err := conffile.Read(path)
	return parseRead(path, src, err)
}

// ParseHeld is ParseFile through a file the agent holds from start-up
// (conffile.File.Read).
func ParseHeld(f *conffile.File) ([]Def, error) {
	src, err := f.Read()
	return parseRead(f.Path(), src, err)
}

func parseRead(name string, src []byte, err error) ([]Def, error) {
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return Parse(name, src)
}

// Parse reads a ratios file's text; name is used in errors.
func Parse(name string, src []byte) ([]Def, error) {
	var defs []Def
	errs := conffile.Lines(name, src, func(n int, line string) error {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		line = strings.TrimSpace(line)
		if line == "" {
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
	return defs, errors.Join(errs...)
}

// parseLine reads "name = a + b / den * scale unit". Event names may hold
// neither "+" nor "/", which the syntax keeps for itself.
func parseLine(line string) (Def, error) {
	name, rhs, ok := strings.Cut(line, "=")
	name = strings.TrimSpace(name)
	if !ok || !nameRE.MatchString(name) {
		return Def{}, errors.New(syntax)
	}
	d := Def{Name: name, Scale: 1}
	if f := strings.Fields(rhs); len(f) > 0 {
		if u, ok := units[f[len(f)-1]]; ok {
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

var nameRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]*$`)

// Defs are the user's ratios of the file at path, then the built-in ones:
// a user's ratio named like a built-in one comes first, and so wins when
// it can be served. errs has one error per bad line, or why the file
// could not be read.
func Defs(path string) (defs []Def, user int, errs []error) {
	return DefsOf(ParseFile(path))
}

// DefsOf is Defs of what ParseFile or ParseHeld returned.
func DefsOf(mine []Def, err error) (defs []Def, user int, errs []error) {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else if err != nil {
		errs = []error{err}
	}
	return append(mine, Builtin...), len(mine), errs
}

// Choose is Defs and Select in one, for the agent and --check: the ratios
// served, the file's problems, and informational lines (each user's ratio
// not served and why, then each ratio served). A built-in ratio that this
// machine cannot count is normal (a VM has no ipc) and gets no line.
func Choose(path string, set *counter.Set, scales Scales) (chosen []Chosen, problems []error, info []string) {
	defs, user, problems := Defs(path)
	chosen, info = ChooseFrom(defs, user, set, scales)
	return chosen, problems, info
}

// ChooseFrom is Choose of what Defs or DefsOf returned.
func ChooseFrom(defs []Def, user int, set *counter.Set, scales Scales) (chosen []Chosen, info []string) {
	chosen, why := Select(defs, set, scales)
	for _, w := range why[:user] {
		if w != "" {
			info = append(info, w)
		}
	}
	for _, c := range chosen {
		info = append(info, fmt.Sprintf("perfevent.ratio.%s = %s, on %d CPUs", c.Name, c.Formula(set), len(c.CPUs)))
	}
	return chosen, info
}
