package pfm

import (
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The golden files hold what Debian's libpfm4 4.13 answered for a list of
// names on each PMU of the catalog (testdata/golden/<arch>/<pmu>.tsv.gz;
// testdata/golden/README.md says how they were made and what the lines
// hold). TestGolden encodes every name of every PMU whose family has an
// encoder, as libpfm4 did: that PMU alone active, inactive PMUs allowed
// by prefix, and the kernel PMU types of the directory's perf_types.tsv.
// It reports per PMU how many names it compared and how many came out
// different. A family joins by registering its encoder; nothing here is
// per family.

// goldenAllow lists the names allowed to differ, "arch/pmu\tname" to the
// reason.
var goldenAllow = map[string]string{}

// goldenErrs maps libpfm4's reasons back to our errors.
var goldenErrs = func() map[string]error {
	m := map[string]error{}
	for _, e := range []error{ErrNotSupported, ErrInvalid, ErrNotFound, ErrFeatComb, ErrUmask,
		ErrAttr, ErrAttrVal, ErrAttrSet, ErrTooMany} {
		m[e.Error()] = e
	}
	return m
}()

type goldenResult struct {
	pmu               string
	compared, differs int
	allowed           int
	examples          []string
}

func TestGolden(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join("testdata", "golden", "*"))
	if err != nil {
		t.Fatal(err)
	}
	total, bad, npmu := 0, 0, 0
	for _, dir := range dirs {
		files, _ := filepath.Glob(filepath.Join(dir, "*.tsv.gz"))
		if len(files) == 0 {
			continue
		}
		arch := filepath.Base(dir)
		env, err := goldenMachine(dir)
		if err != nil {
			t.Fatal(err)
		}
		env.Arch = arch
		for _, f := range files {
			name := strings.TrimSuffix(filepath.Base(f), ".tsv.gz")
			p, err := loadPMU(arch, name)
			if err != nil {
				t.Errorf("%s: %v", f, err)
				continue
			}
			if familyEncoders[p.Family] == nil {
				continue
			}
			r, err := runGolden(f, p, env)
			if err != nil {
				t.Errorf("%s: %v", f, err)
				continue
			}
			npmu++
			total += r.compared
			bad += r.differs
			t.Logf("%s/%-16s compared %6d  differ %5d  allowed %d", arch, r.pmu, r.compared, r.differs, r.allowed)
			if r.differs > 0 {
				t.Errorf("%s/%s: %d of %d names differ from libpfm4, e.g.\n%s", arch, r.pmu, r.differs, r.compared,
					strings.Join(r.examples, "\n"))
			}
		}
	}
	if npmu == 0 {
		t.Skip("needs the golden encodings in testdata/golden (made by gengolden)")
	}
	t.Logf("%d PMUs, %d names compared, %d differ", npmu, total, bad)
}

// goldenMachine is the machine the goldens of one directory were made
// on: the kernel PMU types of its perf_types.tsv ("perf_name\ttype"
// lines), and prefixed names allowed on inactive PMUs.
func goldenMachine(dir string) (Env, error) {
	env := Env{EncodeInactive: true}
	file := filepath.Join(dir, "perf_types.tsv")
	data, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return env, nil
	}
	if err != nil {
		return env, err
	}
	types := map[string]uint32{}
	for i, line := range strings.Split(string(data), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, num, ok := strings.Cut(line, "\t")
		n, err := strconv.ParseUint(num, 10, 32)
		if !ok || err != nil {
			return env, fmt.Errorf("%s:%d: want perf_name<TAB>type, got %q", file, i+1, line)
		}
		types[name] = uint32(n)
	}
	env.PerfType = func(name string) (uint32, error) {
		if t, ok := types[name]; ok {
			return t, nil
		}
		return 0, fmt.Errorf("no kernel PMU %s", name)
	}
	return env, nil
}

func runGolden(file string, p *PMU, env Env) (goldenResult, error) {
	res := goldenResult{pmu: p.Name}
	f, err := os.Open(file)
	if err != nil {
		return res, err
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		return res, err
	}
	sc := bufio.NewScanner(z)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	allowPrefix := env.Arch + "/" + p.Name + "\t"
	for line := 1; sc.Scan(); line++ {
		fields := strings.Split(sc.Text(), "\t")
		if len(fields) < 3 || (fields[1] == "OK" && len(fields) != 9) {
			return res, fmt.Errorf("line %d: want 3 or 9 tab-separated fields, got %q", line, sc.Text())
		}
		name := fields[0]
		res.compared++
		diff := goldenDiff(name, fields, env, []string{p.Name})
		if diff == "" {
			continue
		}
		if _, ok := goldenAllow[allowPrefix+name]; ok {
			res.allowed++
			continue
		}
		res.differs++
		if len(res.examples) < 10 {
			res.examples = append(res.examples, fmt.Sprintf("  line %d %s: %s", line, name, diff))
		}
	}
	return res, sc.Err()
}

// goldenDiff says how our encoding of name differs from libpfm4's
// answer, "" if it does not.
func goldenDiff(name string, want []string, env Env, active []string) string {
	enc, err := Encode(name, env, active)
	if want[1] == "ERR" {
		if err == nil {
			return fmt.Sprintf("libpfm4 refuses it (%s), we encode it as %s", want[2], enc.FullName)
		}
		if w := goldenErrs[want[2]]; w == nil || !errors.Is(err, w) {
			return fmt.Sprintf("libpfm4 refuses it with %q, we with %v", want[2], err)
		}
		return ""
	}
	if err != nil {
		return fmt.Sprintf("libpfm4 encodes it as %s, we refuse it: %v", want[8], err)
	}
	a := &enc.Attr
	got := []string{name, "OK", fmt.Sprint(a.Type), hex(a.Config), hex(a.Ext1), hex(a.Ext2),
		exclude(a), enc.PMU.Name, enc.FullName}
	var d []string
	for i, what := range []string{"", "", "type", "config", "config1", "config2", "exclude", "pmu", "name"} {
		if what != "" && got[i] != want[i] {
			d = append(d, fmt.Sprintf("%s %s, want %s", what, got[i], want[i]))
		}
	}
	return strings.Join(d, "; ")
}

// hex is C's %#llx.
func hex(v uint64) string {
	if v == 0 {
		return "0"
	}
	return fmt.Sprintf("%#x", v)
}
