package pfm

import (
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
)

// The golden files hold what Debian's libpfm4 4.13 answered for every
// name the generator tried on one PMU (testdata/golden/<pmu>.tsv.gz; the
// generator's README says how they were made). One line per name:
//
//	name OK type config config1 config2 exclude-bits pmu canonical-name
//	name ERR reason
//
// TestGolden encodes every name of every PMU whose family has an encoder
// with that PMU as the only active one (libpfm4 ran with
// LIBPFM_FORCE_PMU), and reports per PMU how many names it compared and
// how many came out different. Families add their PMUs by registering
// an encoder; nothing here is per family but goldenEnv.

// goldenAllow lists the names allowed to differ, "pmu\tname" to the reason.
var goldenAllow = map[string]string{}

// goldenEnv gives the machine a family's goldens were made on, where it
// matters (kernel PMU types of uncore PMUs). EncodeInactive is always
// set, as LIBPFM_ENCODE_INACTIVE was.
var goldenEnv = map[Family]Env{}

// goldenInactive says which PMUs libpfm4 did not activate though forced,
// because it also wants their kernel PMU (os_detect) and the machine the
// goldens were made on has none: those find only prefixed names.
var goldenInactive = map[Family]func(*PMU) bool{
	// pfm_intel_x86_perf_detect wants /sys/devices/uncore_cbox_N.
	FamilyIntelNHMUncore: func(p *PMU) bool {
		return strings.HasPrefix(p.Name, "snb_unc_") || strings.HasPrefix(p.Name, "ivb_unc_")
	},
}

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
	files, err := filepath.Glob(filepath.Join("testdata", "golden", runtime.GOARCH, "*.tsv.gz"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Skip("needs the golden encodings in testdata/golden (made by the table generator)")
	}
	var results []goldenResult
	for _, f := range files {
		pmuName := strings.TrimSuffix(filepath.Base(f), ".tsv.gz")
		p, err := loadPMU(pmuName)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if familyEncoders[p.Family] == nil {
			continue
		}
		res, err := runGolden(f, p)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		results = append(results, res)
	}
	sort.Slice(results, func(i, j int) bool { return results[i].pmu < results[j].pmu })
	total, bad := 0, 0
	for _, r := range results {
		t.Logf("%-16s compared %6d  differ %5d  allowed %d", r.pmu, r.compared, r.differs, r.allowed)
		total += r.compared
		bad += r.differs
		if r.differs > 0 {
			t.Errorf("%s: %d of %d names differ from libpfm4, e.g.\n%s", r.pmu, r.differs, r.compared,
				strings.Join(r.examples, "\n"))
		}
	}
	t.Logf("%d PMUs, %d names compared, %d differ", len(results), total, bad)
}

func runGolden(file string, p *PMU) (goldenResult, error) {
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
	env := goldenEnv[p.Family]
	env.EncodeInactive = true
	active := []string{p.Name}
	if inactive := goldenInactive[p.Family]; inactive != nil && inactive(p) {
		active = nil
	}
	for line := 1; sc.Scan(); line++ {
		fields := strings.Split(sc.Text(), "\t")
		if len(fields) < 3 || (fields[1] == "OK" && len(fields) != 9) {
			return res, fmt.Errorf("line %d: want 3 or 9 tab-separated fields, got %q", line, sc.Text())
		}
		name := fields[0]
		res.compared++
		diff := goldenDiff(name, fields, env, active)
		if diff == "" {
			continue
		}
		if _, ok := goldenAllow[p.Name+"\t"+name]; ok {
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
