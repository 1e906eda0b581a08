// Command gengolden writes the golden encodings of internal/pfm/testdata:
// what a libpfm4 gives for a deterministic list of names per PMU of the
// catalog. golden/ holds Debian's libpfm4 4.13.0 (the library PCP's C
// pmdaperfevent links), golden-upstream/ libpfm4 built from the source tree
// the catalog was generated from. See the README there for what the lists
// hold and how libpfm4 is run.
//
//	go run ./internal/pfm/gengolden -arch amd64                            # Debian's libpfm4-dev, gcc
//	go run ./internal/pfm/gengolden -arch arm64 -debroot DIR               # dpkg -x of libpfm4{,-dev}:arm64
//	go run ./internal/pfm/gengolden -arch ppc64le -debroot DIR             # likewise for ppc64el
//	go run ./internal/pfm/gengolden -arch amd64 -libpfm4 SRC               # upstream, built from SRC, into golden-upstream/
//
// It needs root: libpfm4 reads kernel PMU types from sysfs, and gengolden
// gives it made-up ones in a private mount namespace (unshare -m).
package main

import (
	"bytes"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"

	"perfevent/internal/gzipfile"
	"perfevent/internal/pfm"
)

// Kernel PMU types: the i-th perf_name in sorted order gets perfTypeBase+i.
// The types are made up and differ from the kernel's fixed ones (0-5), so a
// golden line shows which sysfs type an encoding took.
const perfTypeBase = 64

type crossTarget struct {
	cc, triplet, qemu string
}

var cross = map[string]crossTarget{
	"arm64":   {"aarch64-linux-gnu-gcc", "aarch64-linux-gnu", "qemu-aarch64-static"},
	"ppc64le": {"powerpc64le-linux-gnu-gcc", "powerpc64le-linux-gnu", "qemu-ppc64le-static"},
}

func main() {
	arch := flag.String("arch", "amd64", "the libpfm4 build: amd64, arm64, ppc64le")
	debroot := flag.String("debroot", "", "for arm64 and ppc64le: a directory with Debian's libpfm4 and libpfm4-dev packages extracted (dpkg -x)")
	src := flag.String("libpfm4", "", "a libpfm4 source tree to build and link statically instead of Debian's (the one the catalog was generated from)")
	out := flag.String("out", "", "output directory (default internal/pfm/testdata/golden/ARCH, or golden-upstream/ARCH with -libpfm4)")
	inner := flag.String("inner", "", "internal: run the oracle in this namespace with this binary")
	flag.Parse()

	pmus := pfm.ArchPMUs(*arch)
	if len(pmus) == 0 {
		log.Fatalf("gengolden: no PMUs for %q in the catalog", *arch)
	}
	if *out == "" {
		_, self, _, _ := runtime.Caller(0)
		set := "golden"
		if *src != "" {
			set = "golden-upstream"
		}
		*out = filepath.Join(filepath.Dir(self), "..", "testdata", set, *arch)
	}
	if *inner != "" {
		if err := runInner(*arch, *inner, *out, pmus); err != nil {
			log.Fatalf("gengolden: %v", err)
		}
		return
	}
	build := buildOracle
	if *src != "" {
		build = func(arch, _ string) (string, func(), error) { return buildUpstreamOracle(arch, *src) }
	}
	oracle, cleanup, err := build(*arch, *debroot)
	if err != nil {
		log.Fatalf("gengolden: %v", err)
	}
	defer cleanup()
	self, err := os.Executable()
	if err != nil {
		log.Fatal(err)
	}
	args := []string{"-m", "--propagation", "private", self, "-arch", *arch, "-out", *out, "-inner", oracle}
	cmd := exec.Command("unshare", args...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		log.Fatalf("gengolden: unshare: %v", err)
	}
}

func buildOracle(arch, debroot string) (string, func(), error) {
	dir, err := os.MkdirTemp("", "gengolden-")
	if err != nil {
		return "", nil, err
	}
	cleanup := func() { os.RemoveAll(dir) }
	_, self, _, _ := runtime.Caller(0)
	src := filepath.Join(filepath.Dir(self), "..", "..", "..", "qa", "pfmoracle", "pfmoracle.c")
	bin := filepath.Join(dir, "pfmoracle")
	var cmd *exec.Cmd
	if arch == "amd64" {
		cmd = exec.Command("gcc", "-O2", "-Wall", "-o", bin, src, "-lpfm")
	} else {
		t, ok := cross[arch]
		if !ok || debroot == "" {
			cleanup()
			return "", nil, fmt.Errorf("%s needs -debroot and a cross compiler", arch)
		}
		cmd = exec.Command(t.cc, "-O2", "-Wall", "-static", "-I", filepath.Join(debroot, "usr", "include"),
			"-o", bin, src, filepath.Join(debroot, "usr", "lib", t.triplet, "libpfm.a"))
	}
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		cleanup()
		return "", nil, fmt.Errorf("building the oracle: %v", err)
	}
	return bin, cleanup, nil
}

// buildUpstreamOracle builds libpfm4 from a copy of src, statically, with
// its own makefiles, and links the oracle against it.
func buildUpstreamOracle(arch, src string) (string, func(), error) {
	dir, err := os.MkdirTemp("", "gengolden-")
	if err != nil {
		return "", nil, err
	}
	cleanup := func() { os.RemoveAll(dir) }
	fail := func(err error) (string, func(), error) { cleanup(); return "", nil, err }
	tree := filepath.Join(dir, "libpfm4")
	if err := exec.Command("cp", "-a", filepath.Clean(src)+"/.", tree+"/").Run(); err != nil {
		return fail(fmt.Errorf("copying %s: %v", src, err))
	}
	makeArch := map[string]string{"amd64": "x86_64", "arm64": "aarch64", "ppc64le": "powerpc"}[arch]
	cc := "gcc"
	if t, ok := cross[arch]; ok {
		cc = t.cc
	}
	if makeArch == "" {
		return fail(fmt.Errorf("no libpfm4 build for %s", arch))
	}
	mk := exec.Command("make", "-s", "-C", filepath.Join(tree, "lib"), "-j", fmt.Sprint(runtime.NumCPU()),
		"ARCH="+makeArch, "CC="+cc, "CONFIG_PFMLIB_SHARED=n")
	mk.Stdout, mk.Stderr = os.Stderr, os.Stderr
	if err := mk.Run(); err != nil {
		return fail(fmt.Errorf("building libpfm4: %v", err))
	}
	_, self, _, _ := runtime.Caller(0)
	oracleSrc := filepath.Join(filepath.Dir(self), "..", "..", "..", "qa", "pfmoracle", "pfmoracle.c")
	bin := filepath.Join(dir, "pfmoracle")
	cmd := exec.Command(cc, "-O2", "-Wall", "-static", "-I", filepath.Join(tree, "include"),
		"-o", bin, oracleSrc, filepath.Join(tree, "lib", "libpfm.a"))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fail(fmt.Errorf("building the oracle: %v", err))
	}
	return bin, cleanup, nil
}

// perfTypes gives every kernel PMU name of the catalog its made-up type.
func perfTypes(pmus []*pfm.PMU) (names []string, types map[string]int) {
	types = map[string]int{}
	for _, p := range pmus {
		// After 4.13 a perf_name may list several kernel PMUs, the first
		// the kernel has winning ("armv8_cortex_a57,armv8_pmuv3_0").
		for _, n := range strings.Split(p.PerfName, ",") {
			if n != "" && types[n] == 0 {
				types[n] = -1
				names = append(names, n)
			}
		}
	}
	sort.Strings(names)
	for i, n := range names {
		types[n] = perfTypeBase + i
	}
	return names, types
}

// runInner runs in the private mount namespace: it hides the machine's
// kernel PMUs behind tmpfs, with one directory and type file per perf_name,
// then asks the oracle about every PMU's names.
func runInner(arch, oracle, out string, pmus []*pfm.PMU) error {
	names, types := perfTypes(pmus)
	for _, mnt := range []string{"/sys/devices", "/sys/bus/event_source/devices"} {
		if err := exec.Command("mount", "-t", "tmpfs", "gengolden", mnt).Run(); err != nil {
			return fmt.Errorf("mount tmpfs on %s: %v", mnt, err)
		}
		for _, n := range names {
			d := filepath.Join(mnt, n)
			if err := os.MkdirAll(d, 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(d, "type"), []byte(fmt.Sprintf("%d\n", types[n])), 0o644); err != nil {
				return err
			}
			// libpfm4 after 4.13 caches the kernel PMUs at initialization,
			// and takes a directory for one only if it has this file.
			if err := os.WriteFile(filepath.Join(d, "perf_event_mux_interval_ms"), []byte("4\n"), 0o644); err != nil {
				return err
			}
		}
	}
	if err := os.RemoveAll(out); err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	var tsv strings.Builder
	tsv.WriteString("#perf_name\ttype\n")
	for _, n := range names {
		fmt.Fprintf(&tsv, "%s\t%d\n", n, types[n])
	}
	if err := os.WriteFile(filepath.Join(out, "perf_types.tsv"), []byte(tsv.String()), 0o644); err != nil {
		return err
	}
	var runPrefix []string
	if t, ok := cross[arch]; ok {
		runPrefix = []string{t.qemu}
	}
	hostile, err := hostilePMUs(arch, pmus)
	if err != nil {
		return err
	}
	seenTable := map[string]bool{}
	total := 0
	for _, h := range pmus {
		p, err := pfm.LoadArch(arch, h.Name)
		if err != nil {
			return err
		}
		// PMUs after the first with a table (cbo1..cbo27) get the events and
		// unit masks, and a smaller sample of modifiers.
		key := tableKey(p)
		full := !seenTable[key]
		seenTable[key] = true
		list := namesFor(p, full, hostile[p.Name])
		argv := append(append([]string{}, runPrefix...), oracle)
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), "LIBPFM_ENCODE_INACTIVE=1", "LIBPFM_FORCE_PMU="+p.Name)
		cmd.Stdin = strings.NewReader(strings.Join(list, "\n") + "\n")
		var stdout bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("oracle for %s: %v", p.Name, err)
		}
		if n := strings.Count(stdout.String(), "\n"); n != len(list) {
			return fmt.Errorf("oracle for %s: %d lines for %d names", p.Name, n, len(list))
		}
		total += len(list)
		if err := gzipfile.Write(filepath.Join(out, p.Name+".tsv.gz"), stdout.Bytes()); err != nil {
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "gengolden: %s: %d PMUs, %d names\n", arch, len(pmus), total)
	if arch == "amd64" {
		return modelTables(oracle, out, pmus)
	}
	return nil
}

// modelTables writes, for each table that detection swaps in by CPU model
// (Intel RAPL's), what libpfm4 says for every event name of the PMU on the
// first model that picks it: <pmu>.model<N>.tsv.gz. qemu-user emulates the
// CPU (QEMU_CPU=Haswell,model=N, a GenuineIntel family 6), and nothing is
// forced, so libpfm4 detects the PMU as on such a machine.
func modelTables(oracle, out string, pmus []*pfm.PMU) error {
	for _, h := range pmus {
		if len(h.ModelTables) == 0 {
			continue
		}
		p, err := pfm.LoadArch("amd64", h.Name)
		if err != nil {
			return err
		}
		var list []string
		seen := map[string]bool{}
		for _, t := range append([]pfm.ModelTable{{Events: p.Events}}, p.ModelTables...) {
			for _, e := range t.Events {
				if n := p.Name + "::" + e.Name; !seen[n] {
					seen[n] = true
					list = append(list, n)
				}
			}
		}
		for _, t := range p.ModelTables {
			model := t.CPUModels[0]
			cmd := exec.Command("qemu-x86_64-static", oracle)
			cmd.Env = append(os.Environ(), "LIBPFM_ENCODE_INACTIVE=1", fmt.Sprintf("QEMU_CPU=Haswell,model=%d", model))
			cmd.Stdin = strings.NewReader(strings.Join(list, "\n") + "\n")
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr // qemu warns of every CPUID feature it lacks
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("oracle for %s on model %d: %v\n%s", p.Name, model, err, stderr.String())
			}
			path := filepath.Join(out, fmt.Sprintf("%s.model%d.tsv.gz", p.Name, model))
			if err := gzipfile.Write(path, stdout.Bytes()); err != nil {
				return err
			}
		}
	}
	return nil
}

func tableKey(p *pfm.PMU) string {
	if len(p.Events) == 0 {
		return p.Name
	}
	return fmt.Sprintf("%p", &p.Events[0])
}

// intValue is what an integer modifier is set to in the sample: a value
// each accepts, mostly, so that the encoding shows where it goes.
func intValue(name string) string {
	switch name {
	case "c", "t":
		return "2"
	case "ldlat":
		return "3"
	case "fe_thres":
		return "16"
	case "addr":
		return "0x1000"
	case "period":
		return "1000"
	case "freq":
		return "100"
	}
	return "1"
}

// The perf_events layer's own modifiers, which every PMU's events take
// unless the PMU has one of the same name.
var perfMods = []string{"u", "k", "h", "u=0", "k=0", "precise=1", "precise=2", "mg", "mh", "period=1000", "freq=100", "excl", "cpu=1", "pinned", "hw_smpl"}

func namesFor(p *pfm.PMU, full, hostile bool) []string {
	var list []string
	seen := map[string]bool{}
	prefixed := func(s string) {
		n := p.Name + "::" + s
		if !seen[n] {
			seen[n] = true
			list = append(list, n)
		}
	}
	var sample []string // modifier sample, written with and without the prefix
	add := func(s string) { sample = append(sample, s) }

	for _, e := range p.Events {
		prefixed(e.Name)
		for _, u := range e.Umasks {
			prefixed(e.Name + ":" + u.Name)
		}
	}
	step, perfN, umaskN := 1, 3, 2
	if !full {
		step, perfN, umaskN = len(p.Events)+1, 1, 1
	}
	sampled := 0
	for i, e := range p.Events {
		if i%step != 0 {
			continue
		}
		var modsIn, modsOut []string
		for b, m := range p.Modifiers {
			if m.Name == "" || (m.Type != pfm.ModBool && m.Type != pfm.ModInteger) {
				continue
			}
			v := m.Name
			if m.Type == pfm.ModInteger {
				v += "=" + intValue(m.Name)
			}
			if e.ModMask&(1<<b) != 0 {
				modsIn = append(modsIn, v)
			} else {
				modsOut = append(modsOut, v)
			}
		}
		for _, m := range modsIn {
			add(e.Name + ":" + m)
		}
		if len(modsOut) > 0 {
			add(e.Name + ":" + modsOut[0]) // one the event does not take
		}
		if sampled < perfN {
			for _, m := range perfMods {
				add(e.Name + ":" + m)
			}
			add(e.Name + ":u=0:u=1") // the same modifier twice, differently
			add(e.Name + ":u:u")
			add(e.Name + ":k=0:u=0")
			add(e.Name + ":NO_SUCH_UMASK")
			add(strings.ToLower(e.Name))
		}
		if len(e.Umasks) > 0 && sampled < umaskN {
			u0 := e.Umasks[0]
			for _, m := range modsIn {
				add(e.Name + ":" + u0.Name + ":" + m)
			}
			add(e.Name + ":" + u0.Name + ":u:k")
			// two unit masks: of one group (exclusive or not) and of two groups
			var same, other string
			for _, u := range e.Umasks[1:] {
				if u.Group == u0.Group && same == "" {
					same = u.Name
				}
				if u.Group != u0.Group && other == "" {
					other = u.Name
				}
			}
			if same != "" {
				add(e.Name + ":" + u0.Name + ":" + same)
			}
			if other != "" {
				add(e.Name + ":" + u0.Name + ":" + other)
			}
			add(e.Name + ":" + u0.Name + ":" + u0.Name)
			if len(modsIn) >= 2 {
				add(e.Name + ":" + u0.Name + ":" + modsIn[0] + ":" + modsIn[len(modsIn)-1])
			}
		}
		if p.Flags&0x4 != 0 && sampled < umaskN { // PFMLIB_PMU_FL_RAW_UMASK
			add(e.Name + ":0x1")
		}
		sampled++
	}
	prefixed("NO_SUCH_EVENT")
	if p.Name == "perf_raw" {
		// its one event is a pattern: r and a hexadecimal config
		for _, r := range []string{"r1", "r00c0", "r4101c0", "rdeadbeef", "rffffffffffffffff", "r1:u", "r0x12", "rzz", "r"} {
			prefixed(r)
		}
	}
	for _, s := range sample {
		prefixed(s)
	}
	if hostile {
		for _, s := range hostilePrefixes(p) {
			if !seen[s] {
				seen[s] = true
				list = append(list, s)
			}
		}
		for _, s := range hostileNames(p) {
			prefixed(s)
		}

	}
	// Configurations name core events without the PMU, and libpfm4 finds
	// them in the PMU that is active (here, the forced one).
	if p.Type == pfm.PMUTypeCore {
		plain := func(s string) {
			if !seen[s] {
				seen[s] = true
				list = append(list, s)
			}
		}
		for _, e := range p.Events {
			plain(e.Name)
			for _, u := range e.Umasks {
				plain(e.Name + ":" + u.Name)
			}
		}
		for _, s := range sample {
			plain(s)
		}
	}
	return list
}
