package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"perfevent/internal/cpulist"
	"perfevent/internal/emulator"
	"perfevent/internal/pcpconf"
	"perfevent/internal/pmu"
	"perfevent/internal/release"
	"perfevent/internal/testexec"
	"perfevent/internal/testneed"
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
		built.err = testexec.Build(".", built.bin)
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
	testneed.SystemWide(t)
	emulator.SkipWithoutPerfEvents(t)
}

// hasLines checks that the output of what contains each of lines.
func hasLines(t *testing.T, what, out string, lines ...string) {
	t.Helper()
	for _, line := range lines {
		if !strings.Contains(out, line) {
			t.Errorf("%s output lacks %q:\n%s", what, line, out)
		}
	}
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
		{[]string{"-poll", "1ns"}, "pmdaperfevent: -poll 1ns: choose an interval from 10ms to 10s"},
		{[]string{"-poll", "1m"}, "pmdaperfevent: -poll 1m0s: choose an interval from 10ms to 10s"},
		{[]string{"-lockmode", "0664"}, "pmdaperfevent: -lockmode 0664: lock file mode 0664: the owner must read and write it, nobody else write or execute it"},
		{[]string{"-lockmode", "rw"}, `pmdaperfevent: -lockmode "rw": an octal mode, such as 0644 or 0640`},
		{[]string{"-lockgroup", "no-such-group-here"}, "pmdaperfevent: -lockgroup no-such-group-here: group: unknown group no-such-group-here (create it with groupadd, or give a number)"},
		{[]string{"-lockgroup", "0", "-lockmode", "0600"}, "gives its group no read access"},
		{[]string{"-max-hold", "10ms"}, "pmdaperfevent: -max-hold 10ms: choose 0 (never) or at least 1s"},
		{[]string{"-log-size", "1K"}, "pmdaperfevent: -log-size 1024: choose 0 (never rotate) or at least 16384 bytes"},
		{[]string{"-log-size", "lots"}, `invalid value "lots" for flag -log-size: "lots" is not a size`},
	} {
		_, stderr, code := runAgent(t, bin, tc.args...)
		if code != 1 || strings.Count(stderr, tc.want) != 1 {
			t.Errorf("%v: exit %d, stderr %q; want 1 and %q once", tc.args, code, stderr, tc.want)
		}
	}
	out, stderr, code := runAgent(t, bin, "-h")
	if code != 0 || !strings.Contains(stderr, "Usage: pmdaperfevent [options]") || out != "" {
		t.Errorf("-h: exit %d, stderr %q", code, stderr)
	}
	// Long options as the man page writes them, letters as the C agent's.
	for _, opt := range []string{"--check", "--list-events", "--lockfile file", "--pmids file", "--poll duration", "--no-inotify", "--version", "-U user", "-D options", "-c file", "-l file", "--lockmode mode", "--lockgroup group", "--max-hold duration", "--log-size size"} {
		if !strings.Contains(stderr, "\n  "+opt+" ") {
			t.Errorf("-h lacks %q:\n%s", opt, stderr)
		}
	}
	if strings.Contains(stderr, "\n  -check") {
		t.Errorf("-h shows a long option with one dash:\n%s", stderr)
	}
	out, stderr, code = runAgent(t, bin, "--version")
	if code != 0 || out != "pmdaperfevent version "+release.Version+"\n" || stderr != "" {
		t.Errorf("--version: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
}

// TestCheckVM runs --check on the configuration a VM without a hardware
// PMU serves in full. On this host cycles either counts or is skipped as
// unsupported, and msr.tsc (x86's msr PMU) is served or, where there is no
// msr PMU, skipped without counting as a problem.
func TestCheckVM(t *testing.T) {
	needPerf(t)
	const msr = "/sys/bus/event_source/devices/msr"
	_, noMSR := os.Stat(msr)
	if _, err := os.Stat(msr + "/events/tsc"); noMSR == nil && err != nil {
		t.Skipf("needs %s/events/tsc, as this host has an msr PMU: %v", msr, err)
	}
	bin := agentBinary(t)
	out, stderr, code := runAgent(t, bin, "--check", "-c", "testdata/vm.conf")
	if code != 0 {
		t.Fatalf("--check exit %d\n%s%s", code, out, stderr)
	}
	hasLines(t, "--check", out,
		"  testdata/vm.conf:3: [perf] chosen: PMU perf is present\n",
		"  testdata/vm.conf:4: cpu-clock: libpfm4 perf::PERF_COUNT_SW_CPU_CLOCK:u=1:k=1:excl=0:mg=0:mh=1: type 1 config 0x0 exclude hv,guest -> perfevent.hwcounters.cpu_clock, on cpu", // cpus 0-1, or cpu0
		"  testdata/vm.conf:13: [sw_faults_cs:derived]: perfevent.derived.sw_faults_cs.value = page-faults × 1 + context-switches × 1 (group at line 14)\n",
	)
	if noMSR == nil {
		hasLines(t, "--check", out, "  testdata/vm.conf:22: msr.tsc: sysfs msr/events/tsc (event=0x00): type ")
	} else {
		hasLines(t, "--check", out, "  testdata/vm.conf:22: msr.tsc: this machine has no PMU msr; line skipped\n")
	}
	// The modifiers and exclude bits of a generic hardware event follow the
	// host's core PMU (libpfm4's default levels), so only libpfm4's event,
	// the encoding, the metric and the outcome are checked around them.
	var cycles string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "  testdata/vm.conf:11: cycles: libpfm4 perf::PERF_COUNT_HW_CPU_CYCLES:u=1:k=1:") &&
			strings.Contains(l, ": type 0 config 0x0 exclude ") {
			cycles = l
		}
	}
	counts := strings.Contains(cycles, " -> perfevent.hwcounters.cycles, on cpu")
	skipped := strings.Contains(cycles, " -> perfevent.hwcounters.cycles; cannot count on cpu") &&
		strings.HasSuffix(cycles, "not supported on this machine (e.g. a VM without a hardware PMU) (ENOENT); skipped")
	if !counts && !skipped {
		t.Errorf("cycles neither counts nor has the note of a machine without a hardware PMU:\n%s", out)
	}
	// Problems, skipped lines and warnings are counted apart: cycles,
	// where it cannot count, is skipped without being a problem.
	lines := 0
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "  testdata/vm.conf:") && strings.Contains(l, " -> perfevent.hwcounters.") ||
			strings.HasSuffix(l, "this machine has no PMU msr; line skipped") {
			lines++
		}
	}
	nskipped := 0
	if skipped {
		nskipped++
	}
	if noMSR != nil {
		nskipped++
	}
	if want := fmt.Sprintf("; 0 problems, %d of %d event lines skipped, 0 of 1 derived section, 0 warnings\n", nskipped, lines); !strings.Contains(out, want) {
		t.Errorf("summary line:\n%s\nwant %q", out, want)
	}
}

func TestCheckBrokenConfig(t *testing.T) {
	needPerf(t)
	bin := agentBinary(t)
	out, _, code := runAgent(t, bin, "--check", "-c", "testdata/broken.conf")
	if code != 1 {
		t.Errorf("--check on a broken config exits %d, want 1", code)
	}
	hasLines(t, "--check", out,
		"! testdata/broken.conf:3: unknown option \"cpux\" for event \"cpu-clock\"",
		"! testdata/broken.conf:4: event \"no-such-event\": not an event of the libpfm4 PMUs found here",
		"! testdata/broken.conf:5: page-faults: CPU index 99 is out of range",
		"  testdata/broken.conf:2: cpu-clock: libpfm4 perf::PERF_COUNT_SW_CPU_CLOCK:u=1:k=1:excl=0:mg=0:mh=1: type 1 config 0x0 exclude hv,guest -> perfevent.hwcounters.cpu_clock",
		"! testdata/broken.conf:7: derived metric ipc is unavailable: the group at line 8 lacks cycles, instructions; section skipped\n",
		"  testdata/broken.conf:12: msr.tsc: ",
		"; 4 problems, ",
	)
}

// --check lists its notes in file order, names the metric each served line
// becomes, reports every line under a broken header, and counts in English.
func TestCheckOrderAndNames(t *testing.T) {
	needPerf(t)
	bin := agentBinary(t)
	online := onlineCPUs(t)
	cpus := "cpus " + cpulist.Format(online)
	if len(online) == 1 {
		cpus = "cpu" + cpulist.Format(online)
	}
	// --no-catalog: this is about the configuration's own lines.
	out, _, code := runAgent(t, bin, "--check", "--no-catalog", "-c", "testdata/order.conf")
	want := "  testdata/order.conf:3: software.cpu-clock: software PERF_COUNT_SW_CPU_CLOCK: type 1 config 0x0 exclude none -> perfevent.hwcounters.software.cpu_clock, on " + cpus + "\n" +
		"  testdata/order.conf:4: [perf] chosen: PMU perf is present\n" +
		"  testdata/order.conf:5: cpu-clock: libpfm4 perf::PERF_COUNT_SW_CPU_CLOCK:u=1:k=1:excl=0:mg=0:mh=1: type 1 config 0x0 exclude hv,guest -> perfevent.hwcounters.cpu_clock, on " + cpus + "\n" +
		"! testdata/order.conf:6: section header has no closing ]; the section is ignored; line skipped\n" +
		"! testdata/order.conf:7: \"task-clock\" is under the broken section header at line 6, so it is ignored too; line skipped\n" +
		"\ntestdata/order.conf: 2 events served on " + fmt.Sprint(2*len(online)) + " counters, 0 derived metrics; 2 problems, 0 of 2 event lines skipped, 0 warnings\n"
	if code != 1 || out != want {
		t.Errorf("exit %d, output:\n%s\nwant exit 1 and:\n%s", code, out, want)
	}

	one := filepath.Join(t.TempDir(), "one.conf")
	os.WriteFile(one, []byte("[perf]\ncpu-clock\ncpu-clock cpux\n"), 0o644)
	if out, _, _ := runAgent(t, bin, "--check", "-c", one); !strings.Contains(out, "; 1 problem, ") {
		t.Errorf("one problem:\n%s", out)
	}
}

// onlineCPUs returns the host's online CPUs, which the agent counts on
// unless told otherwise.
func onlineCPUs(t *testing.T) []int {
	t.Helper()
	cpus, err := pmu.Default().OnlineCPUs()
	if err != nil {
		t.Skipf("needs the list of online CPUs: %v", err)
	}
	return cpus
}

func TestCheckMissingConfig(t *testing.T) {
	bin := agentBinary(t)
	_, stderr, code := runAgent(t, bin, "--check", "-c", "testdata/no-such.conf")
	if code != 1 || !strings.Contains(stderr, "testdata/no-such.conf") || !strings.Contains(stderr, "no such file or directory") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}

func TestListEvents(t *testing.T) {
	testneed.PerfEvents(t)
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

// Without -c the agent reads what pmcd's agent reads: the installed
// perfevent-go configuration, even where Debian's C-agent file exists.
func TestDefaultConfigIsTheInstalledOne(t *testing.T) {
	dir := t.TempDir()
	pmdas, sysconf := filepath.Join(dir, "pmdas"), filepath.Join(dir, "etc")
	t.Setenv("PCP_PMDAS_DIR", pmdas)
	t.Setenv("PCP_SYSCONF_DIR", sysconf)
	c := filepath.Join(sysconf, "perfevent", "perfevent.conf")
	ours := filepath.Join(pmdas, "perfevent-go", "perfevent.conf")
	for _, f := range []string{c, ours} {
		os.MkdirAll(filepath.Dir(f), 0o755)
		os.WriteFile(f, []byte("[perf]\ncpu-clock\n"), 0o644)
	}
	if got := defaultConfig(pcpconf.Load()); got != ours {
		t.Errorf("default -c %s, want the installed %s", got, ours)
	}
	// parseFlags looks for it when -c is not given, and -h shows it.
	if o, err := parseFlags(nil, pcpconf.Load(), io.Discard); err != nil || o.Config != ours {
		t.Errorf("without -c: %+v, %v; want -c %s", o, err, ours)
	}
	if o, err := parseFlags([]string{"-c", c}, pcpconf.Load(), io.Discard); err != nil || o.Config != c {
		t.Errorf("-c %s: %+v, %v", c, o, err)
	}
	var help strings.Builder
	if _, err := parseFlags([]string{"-h"}, pcpconf.Load(), &help); !strings.Contains(help.String(), "(default "+ours+")") {
		t.Errorf("-h: %v, and no default -c in\n%s", err, help.String())
	}
	os.Remove(ours)
	if got := defaultConfig(pcpconf.Load()); got != c {
		t.Errorf("without an installed configuration: default -c %s, want %s", got, c)
	}
}

// --c-compatible adds what the C agent would make of the file; without it
// the same file is fine for this agent. An empty file is a warning.
func TestCheckCCompatible(t *testing.T) {
	needPerf(t)
	bin := agentBinary(t)
	if out, _, code := runAgent(t, bin, "--check", "-c", "testdata/ccompat.conf"); code != 0 || strings.Contains(out, "! ") {
		t.Errorf("without --c-compatible: exit %d\n%s", code, out)
	}
	out, _, code := runAgent(t, bin, "--check", "--c-compatible", "-c", "testdata/ccompat.conf")
	hasLines(t, "--c-compatible", out,
		"! testdata/ccompat.conf:4: the C agent 6.0.3 ignores derived sections that follow [dynamic] (line 2): move [ms:derived] above it\n",
		"! testdata/ccompat.conf:5: the C agent rejects the whole file here (\"Syntax error on line: 5\")",
		"! testdata/ccompat.conf:5: the C agent reads the scale 1e-3 as a CPU index",
		"; 3 problems, ",
	)
	if code != 1 {
		t.Errorf("--c-compatible: exit %d, want 1", code)
	}
	empty := filepath.Join(t.TempDir(), "empty.conf")
	os.WriteFile(empty, []byte("# nothing yet\n"), 0o644)
	out, _, code = runAgent(t, bin, "--check", "-c", empty)
	if code != 0 || !strings.Contains(out, "  warning: "+empty+" has no events: the C agent refuses to start") {
		t.Errorf("empty file: exit %d\n%s", code, out)
	}
}

// A ratio operand that names no event at all is a problem, with the
// nearest configured names; the check says so once.
func TestCheckRatioOperandTypo(t *testing.T) {
	needPerf(t)
	bin := agentBinary(t)
	dir := t.TempDir()
	conf := filepath.Join(dir, "perfevent.conf")
	os.WriteFile(conf, []byte("[perf]\npage-faults\ncontext-switches\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "ratios.conf"), []byte("faults_per_cs = page-faultz / context-switches\n"), 0o644)
	out, _, code := runAgent(t, bin, "--check", "-c", conf)
	want := "! " + filepath.Join(dir, "ratios.conf") + ": ratio \"faults_per_cs\": operand page-faultz is not an event here: neither configured nor known to this machine; did you mean page-faults?\n"
	if code != 1 || strings.Count(out, want) != 1 || strings.Contains(out, "faults_per_cs\" not served") || !strings.Contains(out, "; 1 problem, ") {
		t.Errorf("exit %d, output:\n%s\nwant exit 1, once %q, and no second line about the ratio", code, out, want)
	}
}

// pmdaperfevent(1) documents every option -h lists, with the same
// argument name, and -h every option the man page documents.
func TestManPageMatchesHelp(t *testing.T) {
	bin := agentBinary(t)
	_, help, _ := runAgent(t, bin, "-h")
	man, err := os.ReadFile("../man/pmdaperfevent.1")
	if err != nil {
		t.Fatal(err)
	}
	roff := func(s string) string { return strings.ReplaceAll(s, "-", `\-`) }
	opt := regexp.MustCompile(`^  (--?[a-z0-9-]+|-[A-Za-z0-9])(?: (\S+))?\s{2,}`)
	listed := map[string]bool{"-h": true}
	for _, line := range strings.Split(help, "\n") {
		m := opt.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		listed[m[1]] = true
		want := ".B " + roff(m[1]) + "\n"
		if m[2] != "" {
			want = ".BI " + roff(m[1]) + ` " ` + m[2] + "\"\n"
		}
		if !strings.Contains(string(man), want) {
			t.Errorf("pmdaperfevent(1) lacks %q (-h: %q)", want, strings.TrimSpace(line))
		}
	}
	item := regexp.MustCompile(`(?m)^\.TP\n\.BI? ((?:\\-)+[A-Za-z0-9\\-]+)`)
	for _, m := range item.FindAllStringSubmatch(string(man), -1) {
		if name := strings.ReplaceAll(m[1], `\-`, "-"); !listed[name] {
			t.Errorf("pmdaperfevent(1) documents %s, which -h does not list", name)
		}
	}
	if !strings.Contains(string(man), "Print the version, as \\fBpmdaperfevent version\\fR") {
		t.Error("pmdaperfevent(1) does not say what --version prints")
	}
}

// TestFlagsReadPCPConfOnce: the lock file's default comes from the pcp.conf
// that run loaded, not from a second read of the file.
func TestFlagsReadPCPConfOnce(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "pcp.conf")
	if err := os.WriteFile(conf, []byte("PCP_PMDAS_DIR=/opt/pmdas\nPCP_VAR_DIR=/opt/var\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PCP_CONF", conf)
	t.Setenv("PCP_PMDAS_DIR", "")
	t.Setenv("PCP_VAR_DIR", "")
	pcp := pcpconf.Load()
	// Gone: a second read would fall back to /var/lib/pcp/pmdas.
	if err := os.Remove(conf); err != nil {
		t.Fatal(err)
	}
	o, err := parseFlags(nil, pcp, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.LockFile != "/opt/pmdas/perfevent/perflock" || o.PMIDs != "/opt/var/config/perfevent/pmids" {
		t.Errorf("-lockfile %s, -pmids %s; want both from the pcp.conf loaded first", o.LockFile, o.PMIDs)
	}
}
