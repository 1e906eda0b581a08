package qa

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// The packages as fleets deploy them: scripts/package builds
// pcp-pmda-perfevent-go from this checkout, and the .deb goes through a
// whole life on this machine's PCP (install, upgrade, remove, purge) while
// pmcd, the C agent and a pmlogger look on.

const pkgName = "pcp-pmda-perfevent-go"

// buildPackage runs scripts/package and returns the package's path.
func buildPackage(t *testing.T, e *Env, format, release string) string {
	t.Helper()
	out := t.TempDir()
	r := e.Exec(Cmd{Dir: e.Repo, Args: []string{"scripts/package", format},
		Env: []string{"GO=" + goTool(t), "PKG_RELEASE=" + release, "PKG_OUT=" + out}})
	if r.Err != nil {
		t.Fatalf("scripts/package %s:\n%s", format, r)
	}
	files, _ := filepath.Glob(filepath.Join(out, pkgName+"*."+format))
	if len(files) != 1 {
		t.Fatalf("scripts/package %s left %v in %s, want one package:\n%s", format, files, out, r)
	}
	return files[0]
}

func goTool(t *testing.T) string {
	t.Helper()
	if g := os.Getenv("GO"); g != "" {
		return g
	}
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); fileExists(p) {
		return p
	}
	p, err := exec.LookPath("go")
	if err != nil {
		unmet(t, "needs the Go toolchain to build the package (scripts/setup finds it)")
	}
	return p
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// TestPackageRPM checks the .rpm as rpm sees it: files, configuration
// files, scriptlets and dependencies. Installing it needs an rpm-based
// machine; the scriptlets are the .deb's, which TestPackageDebLife runs.
func TestPackageRPM(t *testing.T) {
	e := Direct(t)
	if _, err := exec.LookPath("rpm"); err != nil {
		unmet(t, "needs rpm (scripts/setup installs Debian's rpm package)")
	}
	pkg := buildPackage(t, e, "rpm", "7")
	version := strings.TrimSpace(e.Run(t, "sed", "-n", `s/^const Version = "\(.*\)"$/\1/p`, filepath.Join(e.Repo, "internal", "release", "release.go")))
	rpmArch := map[string]string{"amd64": "x86_64", "arm64": "aarch64", "ppc64le": "ppc64le", "s390x": "s390x"}[runtime.GOARCH]
	if got, want := e.Run(t, "rpm", "-qp", "--qf", "%{NAME} %{VERSION}-%{RELEASE} %{ARCH}", pkg), pkgName+" "+version+"-7 "+rpmArch; got != want {
		t.Errorf("rpm -qp --qf NAME VERSION-RELEASE ARCH: got %q, want %q", got, want)
	}
	files := strings.Fields(e.Run(t, "rpm", "-qpl", pkg))
	for _, want := range wantPackageFiles {
		if !slices.Contains(files, want) {
			t.Errorf("rpm -qpl: no %s in\n%s", want, strings.Join(files, "\n"))
		}
	}
	conf := strings.Fields(e.Run(t, "rpm", "-qp", "--configfiles", pkg))
	if !slices.Equal(conf, wantConffiles) {
		t.Errorf("rpm -qp --configfiles:\n got %q\nwant %q", conf, wantConffiles)
	}
	scripts := e.Run(t, "rpm", "-qp", "--scripts", pkg)
	for _, want := range []string{"postinstall scriptlet", "preuninstall scriptlet", "postuninstall scriptlet",
		"PERFEVENT_GO_REGISTER", "./Remove", "pmsignal\" -a -s HUP pmcd"} {
		if !strings.Contains(scripts, want) {
			t.Errorf("rpm -qp --scripts lacks %q:\n%s", want, scripts)
		}
	}
	reqs := e.Run(t, "rpm", "-qpR", pkg)
	if !regexp.MustCompile(`(?m)^pcp\s*$`).MatchString(reqs) {
		t.Errorf("rpm -qpR: want a dependency on pcp:\n%s", reqs)
	}
	// Static binaries: nothing but PCP is needed on the target.
	if strings.Contains(reqs, "libc.so") || strings.Contains(reqs, "libpfm") {
		t.Errorf("rpm -qpR: the agent must need no shared library:\n%s", reqs)
	}
}

var (
	wantConffiles = []string{
		"/etc/pcp/pmrep/perfevent-go.conf",
		"/var/lib/pcp/pmdas/perfevent-go/cgroups.conf",
		"/var/lib/pcp/pmdas/perfevent-go/perfevent.conf",
	}
	wantPackageFiles = append([]string{
		"/var/lib/pcp/pmdas/perfevent-go/pmdaperfevent",
		"/var/lib/pcp/pmdas/perfevent-go/perfalloc",
		"/var/lib/pcp/pmdas/perfevent-go/Install",
		"/var/lib/pcp/pmdas/perfevent-go/Remove",
		"/var/lib/pcp/pmdas/perfevent-go/Upgrade",
		"/var/lib/pcp/pmdas/perfevent-go/pmns",
		"/var/lib/pcp/pmdas/perfevent-go/help",
		"/var/lib/pcp/pmdas/perfevent-go/grafana/perfevent.json",
		"/usr/share/man/man1/pmdaperfevent-go.1",
		"/usr/share/man/man1/perfalloc-go.1",
		"/usr/share/man/man5/perfevent-go.conf.5",
		"/usr/share/doc/pcp-pmda-perfevent-go/README.md",
		"/usr/share/doc/pcp-pmda-perfevent-go/LICENSE.libpfm4",
	}, wantConffiles...)
)

// TestPackageDebLife installs the .deb with dpkg on this machine's PCP and
// takes it through its life: a plain install registers nothing; the
// site's switch registers it; an upgrade keeps edited configuration, the
// PMIDs and a running pmlogger; remove unregisters it and leaves pmcd
// running; purge removes what the package made; the C agent installs
// after it. The checkout's own install is moved aside meanwhile and put
// back, with the PMID map, at the end.
func TestPackageDebLife(t *testing.T) {
	e := Setup(t)
	GoAgentOnly(t)
	if _, err := exec.LookPath("dpkg"); err != nil {
		unmet(t, "needs dpkg (a Debian machine)")
	}
	if r := e.Try("dpkg-query", "-W", pkgName); r.Err == nil {
		t.Fatalf("%s is installed already; this test installs and purges it:\n%s", pkgName, r)
	}
	e.Keep(t)
	old := buildPackage(t, e, "deb", "1")
	newer := buildPackage(t, e, "deb", "2")

	// The checkout's install and the PMID map step aside, and come back
	// before Keep puts the registration back (cleanups run last first).
	aside := t.TempDir()
	mapFile := filepath.Join(e.PCP.Get("PCP_VAR_DIR"), "config", "perfevent", "pmids")
	savedMap, mapErr := os.ReadFile(mapFile)
	var mapOwner syscall.Stat_t
	syscall.Stat(mapFile, &mapOwner)
	if err := os.Rename(e.Home, filepath.Join(aside, "home")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.Try("dpkg", "--purge", pkgName)
		os.RemoveAll(e.Home)
		if err := os.Rename(filepath.Join(aside, "home"), e.Home); err != nil {
			t.Errorf("putting %s back: %v", e.Home, err)
		}
		if mapErr == nil {
			os.MkdirAll(filepath.Dir(mapFile), 0o755)
			if err := os.WriteFile(mapFile, savedMap, 0o644); err != nil {
				t.Errorf("putting the PMID map back: %v", err)
			}
			os.Chown(mapFile, int(mapOwner.Uid), int(mapOwner.Gid))
		}
	})

	conf := e.PCP.Get("PCP_PMCDCONF_PATH")
	agentLine := func() string {
		data, _ := os.ReadFile(conf)
		for _, l := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(l, "perfevent") {
				return l
			}
		}
		return ""
	}
	dpkg := func(env []string, args ...string) string {
		t.Helper()
		r := e.Exec(Cmd{Args: append([]string{"dpkg"}, args...), Env: env})
		if r.Err != nil {
			t.Fatalf("dpkg %s:\n%s", strings.Join(args, " "), r)
		}
		return r.Stdout + r.Stderr
	}

	// 1. With the C agent registered, a plain install changes nothing.
	e.InstallC(t)
	out := dpkg(nil, "-i", old)
	if !strings.Contains(out, "not registered with pmcd") {
		t.Errorf("dpkg -i without the switch: want the note on how to register:\n%s", out)
	}
	if l := agentLine(); !strings.Contains(l, e.CHome+"/pmdaperfevent") {
		t.Fatalf("a plain install changed pmcd.conf's perfevent line to %q", l)
	}
	dpkg(nil, "-r", pkgName)

	// 2. The site's switch registers it, as Install does.
	out = dpkg([]string{"PERFEVENT_GO_REGISTER=yes"}, "-i", old)
	if !strings.Contains(out, "registered the perfevent agent with pmcd") {
		t.Errorf("dpkg -i with PERFEVENT_GO_REGISTER=yes:\n%s", out)
	}
	if l := agentLine(); !strings.Contains(l, e.Home+"/pmdaperfevent") {
		t.Fatalf("after the registering install, pmcd.conf's perfevent line is %q", l)
	}
	e.WaitForMetric(t, "perfevent.hwcounters.cpu_clock.value", Settle)
	pid1, _ := e.Agent(t)

	// 3. Edits, a pmlogger, then the upgrade.
	pconf := filepath.Join(e.Home, "perfevent.conf")
	cgconf := filepath.Join(e.Home, "cgroups.conf")
	// A derived section of our own, before [dynamic] as the file's notes ask.
	data, err := os.ReadFile(pconf)
	if err != nil || !strings.Contains(string(data), "\n[dynamic]\n") {
		t.Fatalf("the packaged %s has no [dynamic] section to edit before (%v)", pconf, err)
	}
	writeFile(t, pconf, strings.Replace(string(data), "\n[dynamic]\n", "\n# edited by qa\n[qa_edit:derived]\ncpu-clock\n\n[dynamic]\n", 1))
	appendFile(t, cgconf, "\n# edited by qa\n")
	if err := syscall.Kill(pid1, syscall.SIGHUP); err != nil {
		t.Fatalf("SIGHUP to the agent: %v", err)
	}
	e.WaitForMetric(t, "perfevent.derived.qa_edit.value", Settle)
	before := e.Run(t, "pminfo", "-m", "perfevent")

	logDir := t.TempDir()
	writeFile(t, filepath.Join(logDir, "config"), "log mandatory on 100 msec {\n\tperfevent.hwcounters.cpu_clock.value\n}\n")
	archive := filepath.Join(logDir, "archive")
	logger := exec.Command("pmlogger", "-c", filepath.Join(logDir, "config"), "-l", filepath.Join(logDir, "log"), archive)
	logger.Env = e.environ()
	if err := logger.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logger.Process.Kill(); logger.Wait() })
	records := func() int {
		r := e.Try("pmdumplog", "-z", archive, "perfevent.hwcounters.cpu_clock.value")
		return strings.Count(r.Stdout, "perfevent.hwcounters.cpu_clock.value")
	}
	waitFor(t, Settle, "pmlogger's first records", func() bool { return records() >= 3 })

	out = dpkg(nil, "-i", newer)
	if !strings.Contains(out, "restarted the perfevent agent") {
		t.Errorf("dpkg -i of the newer package: want the agent restarted:\n%s", out)
	}
	if v := e.Run(t, "dpkg-query", "-W", "-f=${Version}", pkgName); !strings.HasSuffix(v, "-2") {
		t.Errorf("after the upgrade dpkg has version %q, want release 2", v)
	}
	for _, f := range []string{pconf, cgconf} {
		if data, _ := os.ReadFile(f); !strings.Contains(string(data), "# edited by qa") {
			t.Errorf("the upgrade lost the edit to %s", f)
		}
	}
	var pid2 int
	waitFor(t, Settle, "the new agent to serve", func() bool {
		pids := AgentPIDs()
		if len(pids) != 1 || pids[0] == pid1 {
			return false
		}
		pid2 = pids[0]
		return e.Try("pminfo", "-f", "perfevent.derived.qa_edit.value").Err == nil
	})
	if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid2)); exe != e.GoBinary() {
		t.Errorf("after the upgrade the agent runs %q, want %s", exe, e.GoBinary())
	}
	if after := e.Run(t, "pminfo", "-m", "perfevent"); after != before {
		t.Errorf("the upgrade changed PMIDs:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	n := records()
	waitFor(t, Settle, "pmlogger's records after the upgrade", func() bool { return records() >= n+3 })
	if err := logger.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("pmlogger exited during the upgrade: %v\n%s", err, tail(filepath.Join(logDir, "log"), 20))
	}

	// 4. Remove: unregistered, pmcd and the configuration stay.
	dpkg(nil, "-r", pkgName)
	if l := agentLine(); l != "" {
		t.Errorf("after dpkg -r pmcd.conf still has %q", l)
	}
	if !e.PMCDUp() {
		t.Fatalf("pmcd stopped answering after dpkg -r")
	}
	if !fileExists(pconf) {
		t.Errorf("dpkg -r removed the configuration %s (only purge should)", pconf)
	}
	if fileExists(e.GoBinary()) {
		t.Errorf("dpkg -r left the agent %s", e.GoBinary())
	}

	// 5. Purge: nothing of ours is left; the C agent installs.
	dpkg(nil, "--purge", pkgName)
	for _, f := range []string{e.Home, mapFile} {
		if fileExists(f) {
			t.Errorf("dpkg --purge left %s", f)
		}
	}
	e.InstallC(t)
	e.WaitForMetric(t, "perfevent.version", Settle)
}

func appendFile(t *testing.T, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
}
