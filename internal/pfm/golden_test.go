package pfm

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"perfevent/internal/emulator"
	"perfevent/internal/pfm/pfmgolden"
)

// The golden files hold what a libpfm4 answered for a list of names on
// each PMU of the catalog (testdata/<set>/<arch>/<pmu>.tsv.gz;
// testdata/golden/README.md says how they were made and what the lines
// hold): Debian's 4.13.0, which the C agent links, and upstream at the
// commit the catalog comes from, built from source. TestGolden encodes
// every name of every PMU whose family has an encoder, as libpfm4 did:
// that PMU alone active, inactive PMUs allowed by prefix, and the kernel
// PMU types of the directory's perf_types.tsv. It reports per PMU how many
// names it compared and how many came out different. Every family of the
// catalog has an encoder, and nothing here is per family.

// goldenAllow lists the names allowed to differ from one set, "set/arch/pmu\tname"
// to the reason.
var goldenAllow = map[string]string{}

// goldenEnv lets a family override the machine of goldenMachine
// (a PerfType of its own); the fields it sets win.
var goldenEnv = map[Family]Env{}

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
	for _, set := range pfmgolden.Sets {
		t.Run(string(set), func(t *testing.T) { testGolden(t, set) })
	}
}

func testGolden(t *testing.T, set pfmgolden.Set) {
	// Under an emulator (make cross) the point is the byte order and the
	// architecture, not the whole comparison again: upstream's goldens
	// only, and of the PMUs sharing a table (cbo0..cbo27) the first.
	emulated := emulator.Name() != ""
	if emulated && set == pfmgolden.Debian {
		t.Skipf("under %s: upstream's goldens cover the encoders", emulator.Name())
	}
	total, bad, npmu := 0, 0, 0
	for _, arch := range Archs {
		seenTable := map[*Event]bool{}
		files, _ := filepath.Glob(filepath.Join(set.Dir(arch), "*.tsv.gz"))
		if len(files) == 0 {
			continue
		}
		env, err := goldenMachine(set, arch)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			name := strings.TrimSuffix(filepath.Base(f), ".tsv.gz")
			if strings.Contains(name, ".") {
				// "rapl.model63": a PMU detected on one CPU model rather
				// than forced, which its family's own test covers.
				continue
			}
			p, err := loadArchPMU(arch, name)
			if err != nil {
				t.Errorf("%s: %v", f, err)
				continue
			}
			if emulated && len(p.Events) > 0 {
				if seenTable[&p.Events[0]] {
					continue
				}
				seenTable[&p.Events[0]] = true
			}
			if familyEncoders[p.Family] == nil {
				// Every family has one: a PMU without is not encoded at all.
				t.Errorf("%s: PMU %s: no encoder for its family", f, p.Name)
				continue
			}
			env := env
			if fe, ok := goldenEnv[p.Family]; ok && fe.PerfType != nil {
				env.PerfType = fe.PerfType
			}
			r, err := runGolden(set, p, env)
			if err != nil {
				t.Error(err)
				continue
			}
			npmu++
			total += r.compared
			bad += r.differs
			if testing.Verbose() || r.allowed > 0 {
				t.Logf("%s/%-16s compared %6d  differ %5d  allowed %d", arch, r.pmu, r.compared, r.differs, r.allowed)
			}
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

// goldenMachine is the machine one architecture's goldens were made on:
// its made-up kernel PMU types, and prefixed names allowed on inactive
// PMUs.
func goldenMachine(set pfmgolden.Set, arch string) (Env, error) {
	env := Env{Arch: arch, EncodeInactive: true}
	types, err := set.PerfTypes(arch)
	if errors.Is(err, os.ErrNotExist) {
		return env, nil
	}
	if err != nil {
		return env, err
	}
	env.PerfType = func(name string) (uint32, error) {
		if t, ok := types[name]; ok {
			return t, nil
		}
		return 0, fmt.Errorf("no kernel PMU %s", name)
	}
	return env, nil
}

func runGolden(set pfmgolden.Set, p *PMU, env Env) (goldenResult, error) {
	res := goldenResult{pmu: p.Name}
	lines, err := set.Read(env.Arch, p.Name)
	if err != nil {
		return res, err
	}
	allowPrefix := string(set) + "/" + env.Arch + "/" + p.Name + "\t"
	for i, l := range lines {
		want := goldenWant(l)
		res.compared++
		diff := goldenDiff(l.Name, want, env, []string{p.Name})
		if diff == "" {
			continue
		}
		if _, ok := goldenAllow[allowPrefix+l.Name]; ok {
			res.allowed++
			continue
		}
		if set == pfmgolden.Debian && pfmgolden.UpstreamChanged(env.Arch, p.Name, l.Name) != "" {
			res.allowed++
			continue
		}
		res.differs++
		if len(res.examples) < 10 {
			res.examples = append(res.examples, fmt.Sprintf("  line %d %s: %s", i+1, l.Name, diff))
		}
	}
	return res, nil
}

// goldenWant is a golden line as goldenDiff takes it.
func goldenWant(l pfmgolden.Line) []string {
	if !l.OK {
		return []string{l.Name, "ERR", l.Err}
	}
	return []string{l.Name, "OK", fmt.Sprint(l.Type), hex(l.Config), hex(l.Config1), hex(l.Config2),
		l.Exclude, l.PMU, l.FullName}
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
