// Command gen regenerates package tables from a libpfm4 source tree: it
// builds the library and the table dumper in cdump/ for each architecture
// (natively for amd64, with a cross compiler and qemu-user for the others),
// runs the dumper, and writes one gzip file per distinct event table and an
// index of every PMU, per architecture.
//
//	go run ./internal/pfm/tables/gen -libpfm4 /path/to/libpfm-4.13.0 [-arch amd64,arm64,ppc64le]
//
// The source tree is copied before building; it is never modified.
package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"perfevent/internal/gzipfile"
)

// target is how one architecture's libpfm4 is built and its dumper run.
type target struct {
	arch     string   // GOARCH spelling, the name of the output directory
	makeArch string   // libpfm4's ARCH (config.mk)
	cc       string   // C compiler
	run      []string // prefix that runs a binary of this architecture
}

var targets = map[string]target{
	"amd64":   {arch: "amd64", makeArch: "x86_64", cc: "gcc"},
	"arm64":   {arch: "arm64", makeArch: "aarch64", cc: "aarch64-linux-gnu-gcc", run: []string{"qemu-aarch64-static"}},
	"ppc64le": {arch: "ppc64le", makeArch: "powerpc", cc: "powerpc64le-linux-gnu-gcc", run: []string{"qemu-ppc64le-static"}},
}

// tabledumpMk links the dumper from the library's objects, in place of the
// two library files whose private tables the dumper includes.
const tabledumpMk = `include Makefile
DUMPSRCS=dump_main.c dump_x86.c dump_amd64.c dump_netburst.c dump_arm.c dump_power.c dump_perf.c
DUMPLIBOBJS=$(filter-out pfmlib_common.o pfmlib_perf_event_pmu.o,$(OBJS))
tabledump: $(DUMPSRCS:.c=.o) $(DUMPLIBOBJS)
	$(CC) $(CFLAGS) -static -o $@ $^
`

func main() {
	src := flag.String("libpfm4", "", "libpfm4 4.13.0 source tree (required)")
	archs := flag.String("arch", "amd64,arm64,ppc64le", "architectures to generate")
	out := flag.String("out", ".", "package tables' directory")
	flag.Parse()
	if *src == "" {
		log.Fatal("gen: -libpfm4 is required (the path of a libpfm4 4.13.0 source tree)")
	}
	if err := checkVersion(*src); err != nil {
		log.Fatalf("gen: %v", err)
	}
	_, self, _, _ := runtime.Caller(0)
	cdump := filepath.Join(filepath.Dir(self), "cdump")
	for _, a := range strings.Split(*archs, ",") {
		t, ok := targets[a]
		if !ok {
			log.Fatalf("gen: unknown architecture %q", a)
		}
		dump, err := build(*src, cdump, t)
		if err != nil {
			log.Fatalf("gen: %s: %v", a, err)
		}
		if err := write(filepath.Join(*out, a), dump); err != nil {
			log.Fatalf("gen: %s: %v", a, err)
		}
	}
}

// checkVersion makes sure src is libpfm4 4.13.0, the version Debian 12
// builds: config.mk says VERSION=4, REVISION=13, AGE=0.
func checkVersion(src string) error {
	path := filepath.Join(src, "config.mk")
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%v (want a libpfm4 4.13.0 source tree)", err)
	}
	v := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, val, ok := strings.Cut(line, "="); ok {
			v[strings.TrimSpace(k)] = strings.TrimSpace(val)
		}
	}
	if got := v["VERSION"] + "." + v["REVISION"] + "." + v["AGE"]; got != "4.13.0" {
		return fmt.Errorf("%s: libpfm4 %s, want 4.13.0", path, got)
	}
	return nil
}

// build copies the source tree, builds the dumper for t and returns its output.
func build(src, cdump string, t target) ([]byte, error) {
	tmp, err := os.MkdirTemp("", "pfmgen-"+t.arch+"-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	tree := filepath.Join(tmp, "libpfm4")
	if err := os.MkdirAll(tree, 0o755); err != nil {
		return nil, err
	}
	if err := command("", "cp", "-a", filepath.Clean(src)+"/.", tree+"/").Run(); err != nil {
		return nil, fmt.Errorf("copying %s: %v", src, err)
	}
	lib := filepath.Join(tree, "lib")
	files, err := filepath.Glob(filepath.Join(cdump, "*.[ch]"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no dumper sources in %s", cdump)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(lib, filepath.Base(f)), b, 0o644); err != nil {
			return nil, err
		}
	}
	if err := os.WriteFile(filepath.Join(lib, "tabledump.mk"), []byte(tabledumpMk), 0o644); err != nil {
		return nil, err
	}
	mk := command(lib, "make", "-s", "-j", fmt.Sprint(runtime.NumCPU()), "-f", "tabledump.mk", "tabledump",
		"ARCH="+t.makeArch, "CC="+t.cc, "CONFIG_PFMLIB_SHARED=n", "DBG=-g -Wall")
	mk.Stdout = os.Stderr
	if err := mk.Run(); err != nil {
		return nil, fmt.Errorf("building the dumper: %v", err)
	}
	argv := append(append([]string{}, t.run...), filepath.Join(lib, "tabledump"))
	run := command(lib, argv[0], argv[1:]...)
	var stdout bytes.Buffer
	run.Stdout = &stdout
	if err := run.Run(); err != nil {
		return nil, fmt.Errorf("running the dumper: %v", err)
	}
	return stdout.Bytes(), nil
}

func command(dir, name string, args ...string) *exec.Cmd {
	c := exec.Command(name, args...)
	c.Dir = dir
	c.Stderr = os.Stderr
	return c
}

// pmu is one P or V record of the dump with the records of its table.
type pmu struct {
	header []string // the record's fields, kind first
	lines  []string // M, E and U records
	events int
	umasks int
}

// Index columns, after the record kind. The decoder in package pfm reads them by name.
var indexColumns = []string{"order", "id", "name", "family", "type", "perf_name", "flags", "rev",
	"num_cntrs", "num_fixed", "supported_plm", "max_encoding", "cpu_family", "cpu_models",
	"table", "nevents", "numasks", "desc"}

func write(dir string, dump []byte) error {
	var pmus []*pmu
	var comments []string
	sc := bufio.NewScanner(bytes.NewReader(dump))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		kind, _, _ := strings.Cut(line, "\t")
		switch kind {
		case "#P", "#V":
		case "#M", "#E", "#U":
			comments = append(comments, line)
		case "P", "V":
			f := strings.Split(line, "\t")
			if len(f) != 17 {
				return fmt.Errorf("dump line %d: %d fields in a %s record, want 17", n, len(f), kind)
			}
			pmus = append(pmus, &pmu{header: f})
		case "M", "E", "U":
			if len(pmus) == 0 {
				return fmt.Errorf("dump line %d: %s record before any PMU", n, kind)
			}
			p := pmus[len(pmus)-1]
			p.lines = append(p.lines, line)
			switch kind {
			case "E":
				p.events++
			case "U":
				p.umasks++
			}
		default:
			return fmt.Errorf("dump line %d: unknown record %q", n, kind)
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}

	// PMUs that share a table (cbo0 to cbo27, and so on) share its file,
	// named after the first of them.
	files := map[[32]byte]string{}
	taken := map[string]bool{}
	var index strings.Builder
	index.WriteString("#kind\t" + strings.Join(indexColumns, "\t") + "\n")
	for _, p := range pmus {
		body := strings.Join(comments, "\n") + "\n" + strings.Join(p.lines, "\n") + "\n"
		sum := sha256.Sum256([]byte(body))
		name, ok := files[sum]
		if !ok {
			name = p.header[3]
			if p.header[0] == "V" {
				name += ".model" + strings.Split(p.header[14], ",")[0]
			}
			for i := 2; taken[name]; i++ {
				name = fmt.Sprintf("%s.%d", p.header[3], i)
			}
			taken[name] = true
			files[sum] = name
			if err := gzipfile.Write(filepath.Join(dir, name+".tsv.gz"), []byte(body)); err != nil {
				return err
			}
		}
		h := p.header
		row := append(append([]string{}, h[:15]...), name, fmt.Sprint(p.events), fmt.Sprint(p.umasks), h[16])
		index.WriteString(strings.Join(row, "\t") + "\n")
	}
	return os.WriteFile(filepath.Join(dir, "index.tsv"), []byte(index.String()), 0o644)
}
