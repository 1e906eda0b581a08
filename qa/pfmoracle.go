package qa

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Oracle is qa/pfmoracle built against the machine's libpfm4: it says what
// the C pmdaperfevent gets from libpfm4 for an event name.
type Oracle struct {
	bin string
	// Upstream is set when the oracle links libpfm4 upstream, built from
	// the source tree in $LIBPFM4_SRC, rather than Debian's 4.13.
	Upstream bool
}

// BuildFixtureOracle is the oracle the fixture tests ask: libpfm4
// upstream built from $LIBPFM4_SRC (the catalog's commit; see
// internal/pfm/tables/README.md) when that is set, else the machine's.
func BuildFixtureOracle(t testing.TB) *Oracle {
	t.Helper()
	src := os.Getenv("LIBPFM4_SRC")
	if src == "" {
		return BuildOracle(t)
	}
	dir := t.TempDir()
	tree := filepath.Join(dir, "libpfm4")
	if out, err := exec.Command("cp", "-a", filepath.Clean(src)+"/.", tree+"/").CombinedOutput(); err != nil {
		t.Fatalf("copying LIBPFM4_SRC=%s: %v\n%s", src, err, out)
	}
	if out, err := exec.Command("make", "-s", "-C", filepath.Join(tree, "lib"), "CONFIG_PFMLIB_SHARED=n").CombinedOutput(); err != nil {
		t.Fatalf("building libpfm4 from LIBPFM4_SRC=%s: %v\n%s", src, err, out)
	}
	bin := filepath.Join(dir, "pfmoracle")
	out, err := exec.Command("gcc", "-O2", "-Wall", "-static", "-I", filepath.Join(tree, "include"), "-o", bin,
		filepath.Join(repoRoot(), "qa", "pfmoracle", "pfmoracle.c"), filepath.Join(tree, "lib", "libpfm.a")).CombinedOutput()
	if err != nil {
		t.Fatalf("building pfmoracle against LIBPFM4_SRC=%s: %v\n%s", src, err, out)
	}
	return &Oracle{bin: bin, Upstream: true}
}

// BuildOracle compiles qa/pfmoracle/pfmoracle.c with gcc and libpfm4-dev
// (scripts/setup installs both) into the test's temporary directory. The
// test skips, or fails under PERFEVENT_QA=1, without them.
func BuildOracle(t testing.TB) *Oracle {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		unmet(t, "gcc is not installed (scripts/setup installs it)")
	}
	src := filepath.Join(repoRoot(), "qa", "pfmoracle", "pfmoracle.c")
	bin := filepath.Join(t.TempDir(), "pfmoracle")
	out, err := exec.Command("gcc", "-O2", "-Wall", "-o", bin, src, "-lpfm").CombinedOutput()
	if err != nil {
		unmet(t, "building pfmoracle with gcc and libpfm4-dev (scripts/setup installs them): %v\n%s", err, out)
	}
	return &Oracle{bin: bin}
}

// Events gives what libpfm4's public API lists for a PMU: each event's
// name and code, followed by its unit masks' ("U") lines, as pfmoracle -e
// prints them.
func (o *Oracle) Events(env []string, pmu string) ([]string, error) {
	cmd := exec.Command(o.bin, "-e", pmu)
	cmd.Env = append(cmd.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("pfmoracle -e %s: %v: %s", pmu, err, stderr.String())
	}
	return strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n"), nil
}

// Encode gives the oracle's line for each name (see pfmoracle.c for the
// format), run with env added to the environment, such as
// "LIBPFM_FORCE_PMU=skx" and "LIBPFM_ENCODE_INACTIVE=1".
func (o *Oracle) Encode(env []string, names ...string) ([]string, error) {
	return encodeWith(exec.Command(o.bin), env, names)
}

// encodeWith runs the oracle as cmd, with env added to its environment
// and names on its standard input, and gives its line for each name.
func encodeWith(cmd *exec.Cmd, env, names []string) ([]string, error) {
	cmd.Env = append(cmd.Environ(), env...)
	cmd.Stdin = strings.NewReader(strings.Join(names, "\n") + "\n")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("pfmoracle: %v: %s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n")
	if len(lines) != len(names) {
		return nil, fmt.Errorf("pfmoracle: %d lines for %d names", len(lines), len(names))
	}
	return lines, nil
}
