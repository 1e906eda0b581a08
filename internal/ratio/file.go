package ratio

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"

	"perfevent/internal/counter"
)

// The ratios file holds a user's own ratios, one a line:
//
//	# name = numerator / denominator [* scale] [per-second]
//	l1d_miss_ratio = L1-dcache-load-misses / L1-dcache-loads
//	faults_per_cpu_second = page-faults / cpu-clock * 1e9 per-second
//
// The operands are event names exactly as perfevent.conf configures them.
// It is a file of its own, so that the C agent, which reads the same
// perfevent.conf, never sees a syntax it does not know.
var (
	lineRE = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9_]*)\s*=\s*(\S+)\s*/\s*(\S+)((?:\s*\*\s*\S+)?)((?:\s+per-second)?)$`)
)

// ParseFile reads a ratios file. A missing file is no ratios and no error.
// Each bad line is one error naming file and line; the good lines are
// returned all the same.
func ParseFile(path string) ([]Def, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Parse(path, f)
}

// Parse reads a ratios file's text; name is used in errors.
func Parse(name string, r io.Reader) ([]Def, error) {
	var defs []Def
	var errs []error
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		m := lineRE.FindStringSubmatch(line)
		if m == nil {
			errs = append(errs, fmt.Errorf("%s:%d: want \"name = numerator / denominator [* scale] [per-second]\"", name, n))
			continue
		}
		d := Def{Name: m[1], Num: m[2], Den: m[3], Scale: 1, About: fmt.Sprintf("%s / %s, defined at %s:%d.", m[2], m[3], name, n), Source: "the user's definition"}
		if s := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(m[4]), "*")); s != "" {
			v, err := strconv.ParseFloat(s, 64)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s:%d: scale %q is not a number", name, n, s))
				continue
			}
			d.Scale = v
		}
		if m[5] != "" {
			d.Unit = PerSecond
		}
		if err := d.Check(); err != nil {
			errs = append(errs, fmt.Errorf("%s:%d: %v", name, n, err))
			continue
		}
		defs = append(defs, d)
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", name, err))
	}
	return defs, errors.Join(errs...)
}

// Defs are the user's ratios of the file at path, then the built-in ones:
// a user's ratio named like a built-in one comes first, and so wins when
// it can be served. errs has one error per bad line, or why the file
// could not be read.
func Defs(path string) (defs []Def, user int, errs []error) {
	mine, err := ParseFile(path)
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
func Choose(path string, set *counter.Set) (chosen []Chosen, problems []error, info []string) {
	defs, user, problems := Defs(path)
	chosen, why := Select(defs, set)
	for _, w := range why[:user] {
		if w != "" {
			info = append(info, w)
		}
	}
	for _, c := range chosen {
		info = append(info, fmt.Sprintf("perfevent.ratio.%s = %s / %s × %g, on %d CPUs", c.Name, c.Num, c.Den, c.Scale, len(c.CPUs)))
	}
	return chosen, problems, info
}
