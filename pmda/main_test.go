package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"perfevent/internal/emulator"
)

var built struct {
	once sync.Once
	bin  string
	err  error
}

// agentBinary builds pmdaperfevent once per test run.
func agentBinary(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		dir, err := os.MkdirTemp("", "pmdaperfevent-test")
		if err != nil {
			built.err = err
			return
		}
		os.Chmod(dir, 0o755)
		built.bin = filepath.Join(dir, "pmdaperfevent")
		// As the Makefile builds it: without cgo, so that dropping
		// privileges reaches every thread.
		cmd := exec.Command("go", "build", "-o", built.bin, ".")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build: %v\n%s", err, out)
		} else {
			built.err = emulator.Wrap(built.bin)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.bin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.bin != "" {
		os.RemoveAll(filepath.Dir(built.bin))
	}
	os.Exit(code)
}

func runAgent(t *testing.T, bin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var o, e bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), code
}

func needPerf(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to open system-wide perf counters")
	}
	if _, err := os.Stat("/sys/bus/event_source/devices/software"); err != nil {
		t.Skip("needs perf_event support (/sys/bus/event_source/devices/software)")
	}
	emulator.SkipWithoutPerfEvents(t)
}

func TestFlagErrors(t *testing.T) {
	bin := agentBinary(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-d", "12"}, "pmdaperfevent: -d 12: perfevent's domain is 127"},
		{[]string{"-u", "/tmp/x.sock", "-i", "2078"}, "pmdaperfevent: choose one of -p, -u, -i and -6"},
		{[]string{"-x"}, "flag provided but not defined: -x"},
		{[]string{"extra"}, `pmdaperfevent: unexpected argument "extra"`},
	} {
		_, stderr, code := runAgent(t, bin, tc.args...)
		if code != 1 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 1 and %q", tc.args, code, stderr, tc.want)
		}
	}
	out, stderr, code := runAgent(t, bin, "-h")
	if code != 0 || !strings.Contains(stderr, "Usage: pmdaperfevent [options]") || out != "" {
		t.Errorf("-h: exit %d, stderr %q", code, stderr)
	}
}

// TestCheckVM runs --check on this machine, a VM without a hardware PMU
// (on real hardware cycles would count and the cycles line would differ).
func TestCheckVM(t *testing.T) {
	needPerf(t)
	bin := agentBinary(t)
	out, stderr, code := runAgent(t, bin, "--check", "-c", "testdata/vm.conf")
	if code != 0 {
		t.Fatalf("--check exit %d\n%s%s", code, out, stderr)
	}
	for _, line := range []string{
		"  testdata/vm.conf:3: [perf] chosen: PMU perf is present\n",
		"  testdata/vm.conf:4: cpu-clock: software PERF_COUNT_SW_CPU_CLOCK: type 1 config 0x0 exclude hv,guest -> perfevent.hwcounters.cpu_clock, on cpus ",
		"  testdata/vm.conf:13: [sw_faults_cs:derived]: perfevent.derived.sw_faults_cs.value = page-faults × 1 + context-switches × 1 (group at line 14)\n",
		"  testdata/vm.conf:22: msr.tsc: sysfs msr/events/tsc (event=0x00): type ",
	} {
		if !strings.Contains(out, line) {
			t.Errorf("--check output lacks %q:\n%s", line, out)
		}
	}
	if hw, err := os.ReadFile("/sys/bus/event_source/devices/cpu/type"); err != nil || len(hw) == 0 {
		if !strings.Contains(out, "  testdata/vm.conf:11: cycles: generic hardware PERF_COUNT_HW_CPU_CYCLES: type 0 config 0x0 exclude hv,guest -> perfevent.hwcounters.cycles; cannot count on cpus ") ||
			!strings.Contains(out, "not supported on this machine (e.g. a VM without a hardware PMU) (ENOENT); skipped\n") {
			t.Errorf("no VM note for cycles:\n%s", out)
		}
	}
	if !strings.Contains(out, "; 0 problems\n") {
		t.Errorf("summary line:\n%s", out)
	}
}

func TestCheckBrokenConfig(t *testing.T) {
	needPerf(t)
	bin := agentBinary(t)
	out, _, code := runAgent(t, bin, "--check", "-c", "testdata/broken.conf")
	if code != 1 {
		t.Errorf("--check on a broken config exits %d, want 1", code)
	}
	for _, line := range []string{
		"! testdata/broken.conf:3: unknown option \"cpux\" for event \"cpu-clock\"",
		"! testdata/broken.conf:4: event \"no-such-event\": not an event of the libpfm4 PMUs found here",
		"! testdata/broken.conf:5: page-faults: CPU index 99 is out of range",
		"  testdata/broken.conf:2: cpu-clock: software PERF_COUNT_SW_CPU_CLOCK",
		"! testdata/broken.conf:7: derived metric ipc is unavailable: the group at line 8 lacks cycles, instructions; section skipped\n",
		"  testdata/broken.conf:12: msr.tsc: ",
		"; 4 problems\n",
	} {
		if !strings.Contains(out, line) {
			t.Errorf("--check output lacks %q:\n%s", line, out)
		}
	}
}

func TestCheckMissingConfig(t *testing.T) {
	bin := agentBinary(t)
	_, stderr, code := runAgent(t, bin, "--check", "-c", "testdata/no-such.conf")
	if code != 1 || !strings.Contains(stderr, "testdata/no-such.conf") || !strings.Contains(stderr, "no such file or directory") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}

func TestListEvents(t *testing.T) {
	if _, err := os.Stat("/sys/bus/event_source/devices/software"); err != nil {
		t.Skip("needs perf_event support (/sys/bus/event_source/devices/software)")
	}
	bin := agentBinary(t)
	out, _, code := runAgent(t, bin, "--list-events", "--no-probe") // probing every tracepoint takes a minute
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"cpu-clock", "page-faults", "cycles", "L1-dcache-load-misses", "# software"} {
		if !strings.Contains(out, want) {
			t.Errorf("--list-events lacks %q", want)
		}
	}
	if _, err := os.Stat("/sys/bus/event_source/devices/msr/events/tsc"); err == nil && !strings.Contains(out, "msr.tsc") {
		t.Error("--list-events lacks msr.tsc, which this machine's sysfs offers")
	}
}

// TestLogNeverFollowsALink: the log directory belongs to pcp, so a link
// planted there must not make the root agent create or truncate its target.
func TestLogNeverFollowsALink(t *testing.T) {
	needPerf(t)
	bin := agentBinary(t)
	dir := t.TempDir()
	target := filepath.Join(dir, "victim")
	os.WriteFile(target, []byte("precious\n"), 0o600)
	dangling := filepath.Join(dir, "created-by-root")
	for _, link := range []string{target, dangling} {
		logfile := filepath.Join(dir, "perfevent.log")
		os.Remove(logfile)
		if err := os.Symlink(link, logfile); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "-U", "root", "-l", logfile, "-c", "testdata/vm.conf",
			"--lockfile", filepath.Join(dir, "perflock"), "--pmids", filepath.Join(dir, "pmids"))
		cmd.Stdin = strings.NewReader("") // pmcd gone at once: the agent exits
		cmd.Run()
		if data, _ := os.ReadFile(target); string(data) != "precious\n" {
			t.Errorf("link to %s: the target now holds %q", link, data)
		}
		if _, err := os.Stat(dangling); err == nil {
			t.Errorf("link to %s: the agent created %s", link, dangling)
		}
		if fi, err := os.Lstat(logfile); err != nil || !fi.Mode().IsRegular() {
			t.Errorf("link to %s: the log is %v, %v; want a new regular file", link, fi, err)
		}
		if fi, err := os.Lstat(logfile + ".prev"); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("link to %s: want the link kept as .prev, got %v, %v", link, fi, err)
		}
	}
}
