// Command gen regenerates package tables from the vendors' own event lists:
// Intel's perfmon repository (mapfile.csv and the per-model JSON) and Arm's
// data repository (cpus.json and pmu/*.json), keeping only the CPU models
// that libpfm4's upstream source tree, given with -libpfm4, does not know.
//
//	go run ./internal/vendorevents/tables/gen -perfmon DIR -perfmon-commit SHA \
//	    -armdata DIR -armdata-commit SHA -libpfm4 DIR/lib -libpfm4-commit SHA -out DIR
//
// Each event becomes one line of a gzip-compressed table, its name, its
// encoding as sysfs format terms (event=0x3c,umask=0x1,...) and the
// vendor's brief description; an index says which CPUs each table is
// for and which kernel PMU counts it.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"perfevent/internal/gzipfile"
)

func main() {
	perfmon := flag.String("perfmon", "", "a checkout of github.com/intel/perfmon")
	perfmonCommit := flag.String("perfmon-commit", "", "its commit")
	armdata := flag.String("armdata", "", "a checkout of github.com/ARM-software/data")
	armCommit := flag.String("armdata-commit", "", "its commit")
	libpfm := flag.String("libpfm4", "", "libpfm4 upstream's lib/ directory")
	libpfmCommit := flag.String("libpfm4-commit", "", "its commit")
	out := flag.String("out", ".", "package tables' directory")
	flag.Parse()
	if *perfmon == "" || *armdata == "" || *libpfm == "" || *perfmonCommit == "" || *armCommit == "" || *libpfmCommit == "" {
		log.Fatal("gen: -perfmon, -armdata, -libpfm4 and their -*-commit flags are all required")
	}
	known, err := libpfmKnows(*libpfm)
	if err != nil {
		log.Fatalf("gen: %v", err)
	}
	note := fmt.Sprintf("# models libpfm4 %s lacks", *libpfmCommit)
	if err := genIntel(*perfmon, *perfmonCommit, note, known, filepath.Join(*out, "intel")); err != nil {
		log.Fatalf("gen: intel: %v", err)
	}
	if err := genArm(*armdata, *armCommit, note, known, filepath.Join(*out, "arm")); err != nil {
		log.Fatalf("gen: arm: %v", err)
	}
}

// known is what libpfm4 upstream can already encode.
type known struct {
	intelCore map[int]bool     // family 6 models with a core PMU
	intelUnc  map[int][]string // models with uncore PMUs: the units libpfm4 has
	armParts  map[[2]int]bool  // implementer, part
}

var (
	modelsArray = regexp.MustCompile(`(?s)static const int (\w+)_models\[\]\s*=\s*\{(.*?)\};`)
	number      = regexp.MustCompile(`\b(0x[0-9a-fA-F]+|[0-9]+)\b`)
	armAttr     = regexp.MustCompile(`\.impl\s*=\s*(0x[0-9a-fA-F]+)\s*,\s*\.arch\s*=\s*\w+\s*,\s*\.part\s*=\s*(0x[0-9a-fA-F]+)`)
	armImplSet  = regexp.MustCompile(`attr\.impl\s*=\s*(0x[0-9a-fA-F]+)`)
	uncoreFile  = regexp.MustCompile(`^pfmlib_intel_(spr|gnr)_unc_(\w+)\.c$`)
	caseModel   = regexp.MustCompile(`case\s+([0-9]+)\s*:`)
	detectFunc  = regexp.MustCompile(`(?s)pfm_intel_(spr|gnr)_unc_detect\(void \*this\)\s*\{(.*?)\n\}`)
)

// libpfmKnows reads the CPU models out of libpfm4's detect code: the
// *_models[] arrays of the Intel core PMUs, the uncore units of the
// server generations this package extends (spr, gnr) and the Arm parts.
func libpfmKnows(lib string) (known, error) {
	k := known{intelCore: map[int]bool{}, intelUnc: map[int][]string{}, armParts: map[[2]int]bool{}}
	files, err := filepath.Glob(filepath.Join(lib, "pfmlib_*.c"))
	if err != nil || len(files) == 0 {
		return k, fmt.Errorf("no pfmlib_*.c in %s", lib)
	}
	uncModels := map[string][]int{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return k, err
		}
		base := filepath.Base(f)
		switch {
		case strings.HasPrefix(base, "pfmlib_intel_"):
			for _, m := range modelsArray.FindAllSubmatch(b, -1) {
				body := regexp.MustCompile(`/\*.*?\*/`).ReplaceAll(m[2], nil)
				for _, n := range number.FindAll(body, -1) {
					v, _ := strconv.ParseInt(string(n), 0, 32)
					if v != 0 {
						k.intelCore[int(v)] = true
					}
				}
			}
			for _, m := range detectFunc.FindAllSubmatch(b, -1) {
				for _, c := range caseModel.FindAllSubmatch(m[2], -1) {
					v, _ := strconv.Atoi(string(c[1]))
					uncModels[string(m[1])] = append(uncModels[string(m[1])], v)
				}
			}
		case strings.HasPrefix(base, "pfmlib_arm"):
			impl := ""
			for _, line := range strings.Split(string(b), "\n") {
				if m := armAttr.FindStringSubmatch(line); m != nil {
					i, _ := strconv.ParseInt(m[1], 0, 32)
					p, _ := strconv.ParseInt(m[2], 0, 32)
					k.armParts[[2]int{int(i), int(p)}] = true
					impl = m[2]
					continue
				}
				// ThunderX2 is also known under a second implementer.
				if m := armImplSet.FindStringSubmatch(line); m != nil && impl != "" {
					i, _ := strconv.ParseInt(m[1], 0, 32)
					p, _ := strconv.ParseInt(impl, 0, 32)
					k.armParts[[2]int{int(i), int(p)}] = true
				}
			}
		}
	}
	for _, f := range files {
		if m := uncoreFile.FindStringSubmatch(filepath.Base(f)); m != nil {
			for _, model := range uncModels[m[1]] {
				k.intelUnc[model] = append(k.intelUnc[model], m[2])
			}
		}
	}
	if len(k.intelCore) == 0 || len(k.armParts) == 0 {
		return k, fmt.Errorf("%s: found no Intel models or no Arm parts; is it libpfm4's lib/?", lib)
	}
	return k, nil
}

// table is one generated PMU: its index line and its events.
type table struct {
	pmu, match, kernel, version, desc string
	events                            [][3]string // name, terms, brief description
}

func (t *table) file() string { return t.pmu + ".tsv.gz" }

func writeTables(dir, header string, tables []*table) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	old, _ := filepath.Glob(filepath.Join(dir, "*.tsv.gz"))
	for _, o := range old {
		os.Remove(o)
	}
	var idx bytes.Buffer
	idx.WriteString(header)
	idx.WriteString("pmu\tmatch\tkernel\tfile\tversion\tdesc\n")
	sort.Slice(tables, func(i, j int) bool { return tables[i].pmu < tables[j].pmu })
	for _, t := range tables {
		fmt.Fprintf(&idx, "%s\t%s\t%s\t%s\t%s\t%s\n", t.pmu, t.match, t.kernel, t.file(), t.version, t.desc)
		var b bytes.Buffer
		for _, e := range t.events {
			fmt.Fprintf(&b, "%s\t%s\t%s\n", e[0], e[1], e[2])
		}
		if err := gzipfile.Write(filepath.Join(dir, t.file()), b.Bytes()); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(dir, "index.tsv"), idx.Bytes(), 0o644)
}

// clean makes a description fit one TSV field and stay short.
func clean(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 120 {
		cut := strings.LastIndex(s[:117], " ")
		if cut < 60 {
			cut = 117
		}
		s = s[:cut] + "..."
	}
	return s
}
