package qa

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"perfevent/internal/config"
	"perfevent/internal/hostfs"
	"perfevent/internal/pfm/pfmgolden"
	"perfevent/internal/pmu"
	"perfevent/internal/setup"

	"golang.org/x/sys/unix"
)

// TestOracleFixtures asks the machine's libpfm4 itself, on each x86
// fixture of internal/pmu/testdata, which PMUs it finds and how it encodes
// the lines of the stock perfevent.conf section the C agent would use
// there, and compares with the agent. libpfm4 runs under qemu-user with
// the fixture's CPUID (vendor, family, model, stepping from its
// /proc/cpuinfo) and the fixture's sysfs bind-mounted over /sys in a
// private mount namespace; this is how internal/pmu's libpfm4-pmus and
// internal/setup's stock goldens were made, so it also checks them.
// qemu-user answers CPUID leaf 0xa with zeros: ix86arch is left out of the
// comparison.
//
// The agent's catalog is libpfm4 upstream's. With LIBPFM4_SRC naming its
// source tree, libpfm4 upstream is built and asked; else Debian's 4.13,
// and then what 4.13 does not know (newer PMUs, newer detection rules,
// names on them, entries upstream changed) is left out.
func TestOracleFixtures(t *testing.T) {
	if os.Geteuid() != 0 {
		unmet(t, "needs root, for a private mount namespace")
	}
	qemu, err := exec.LookPath("qemu-x86_64-static")
	if err != nil {
		unmet(t, "needs qemu-x86_64-static (package qemu-user-static; scripts/setup installs it)")
	}
	o := BuildFixtureOracle(t)
	src, err := os.ReadFile(filepath.Join(repoRoot(), "internal", "setup", "testdata", "perfevent.conf.stock"))
	if err != nil {
		t.Fatal(err)
	}
	conf, parseErr := config.Parse("perfevent.conf", src)
	for _, fx := range []string{"snbep", "haswell", "skylake", "icelake-sp", "zen2", "zen3", "zen4", "alderlake", "zen5", "sapphirerapids", "graniterapids"} {
		t.Run(fx, func(t *testing.T) {
			root := filepath.Join(repoRoot(), "internal", "pmu", "testdata", fx)
			fs := &pmu.FS{FS: hostfs.FS{Sys: filepath.Join(root, "sys"), Proc: filepath.Join(root, "proc")}, Tracing: []string{filepath.Join(root, "tracing")}}
			cpu, err := fs.CPUInfo()
			if err != nil {
				t.Fatal(err)
			}
			run := oracleOn(t, qemu, o.bin, fs.Sys, cpu)

			out := run("", "-l")
			var want []string
			for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
				f := strings.Split(l, "\t")
				if len(f) == 4 && f[3] == "1" {
					want = append(want, f[0])
				}
			}
			got := slices.DeleteFunc(fs.PresentNames(), func(n string) bool {
				return n == "ix86arch" || !o.Upstream && (!in413("amd64", n) || slices.Contains(detectedSince413[fx], n))
			})
			if !slices.Equal(got, want) {
				t.Errorf("PMUs: ours %v, libpfm4 %v", got, want)
			}

			m, err := setup.ReadMachine(fs)
			if err != nil {
				t.Fatal(err)
			}
			p := setup.Make(conf, parseErr, m, false)
			if p.Section == nil {
				t.Fatal("no section chosen")
			}
			var names []string
			for _, ev := range p.Section.Events {
				if !strings.HasPrefix(ev.Name, "RAPL:") {
					names = append(names, ev.Name)
				}
			}
			lines := strings.Split(strings.TrimSpace(run(strings.Join(names, "\n")+"\n")), "\n")
			same, unseen, newer := 0, 0, 0
			for i, name := range names {
				if i >= len(lines) {
					t.Fatalf("libpfm4 answered %d of %d names", len(lines), len(names))
				}
				f := strings.Split(lines[i], "\t")
				ev, err := fs.Resolve(name)
				if !o.Upstream && err == nil && (!in413("amd64", ev.PMU) || slices.Contains(detectedSince413[fx], ev.PMU) ||
					pfmgolden.UpstreamChanged("amd64", ev.PMU, name) != "") {
					newer++
					continue
				}
				switch {
				case f[1] != "OK" && err == nil:
					// An ix86arch name that qemu's libpfm4 cannot see.
					if !strings.HasPrefix(ev.Source, "libpfm4 ix86arch::") {
						t.Errorf("%s: libpfm4 refuses it (%s), we give %s", name, f[2], ev.Source)
					}
					unseen++
				case f[1] != "OK":
				case err != nil:
					t.Errorf("%s: libpfm4 gives %s, we fail: %v", name, f[8], err)
				default:
					a := ev.Attr
					ours := fmt.Sprintf("%d %s %s %s %s", a.Type, cHex(a.Config), cHex(a.Ext1), cHex(a.Ext2), excludeLetters(a.Bits))
					if ours != strings.Join(f[2:7], " ") || !strings.HasSuffix(ev.Source, " "+f[8]) && strings.HasPrefix(ev.Source, "libpfm4 ") {
						t.Errorf("%s: ours %s (%s), libpfm4 %s (%s)", name, ours, ev.Source, strings.Join(f[2:7], " "), f[8])
						continue
					}
					same++
				}
			}
			t.Logf("%s: section %s, %d of %d lines encoded as libpfm4 does, %d ix86arch ones it cannot show under qemu, %d newer than 4.13",
				fx, p.Section.Header(), same, len(names), unseen, newer)
		})
	}
}

// detectedSince413 are the PMUs of 4.13 that upstream detects on a
// fixture and 4.13 did not: AMD RAPL on Zen 4.
var detectedSince413 = map[string][]string{"zen4": {"amd64_rapl"}}

// cHex is C's %#llx: 0 without a 0x.
func cHex(v uint64) string {
	if v == 0 {
		return "0"
	}
	return fmt.Sprintf("%#x", v)
}

// excludeLetters writes exclude bits as pfmoracle does: u k h i H G, or -.
func excludeLetters(bits uint64) string {
	var b strings.Builder
	for _, x := range []struct {
		bit    uint64
		letter string
	}{
		{unix.PerfBitExcludeUser, "u"}, {unix.PerfBitExcludeKernel, "k"}, {unix.PerfBitExcludeHv, "h"},
		{unix.PerfBitExcludeIdle, "i"}, {unix.PerfBitExcludeHost, "H"}, {unix.PerfBitExcludeGuest, "G"},
	} {
		if bits&x.bit != 0 {
			b.WriteString(x.letter)
		}
	}
	if b.Len() == 0 {
		return "-"
	}
	return b.String()
}

// oracleOn returns a runner of pfmoracle with the fixture's CPU and sysfs:
// its arguments, stdin given as a string, stdout returned.
func oracleOn(t *testing.T, qemu, bin, sys string, cpu pmu.CPUInfo) func(stdin string, args ...string) string {
	t.Helper()
	// libpfm4 looks for /sys/devices/NAME, where the kernel links
	// /sys/bus/event_source/devices/NAME; the fixtures keep only the latter.
	tree := t.TempDir()
	devs := filepath.Join(sys, "bus", "event_source", "devices")
	for _, dst := range []string{filepath.Join(tree, "devices"), filepath.Join(tree, "bus", "event_source", "devices")} {
		if err := os.CopyFS(dst, os.DirFS(devs)); err != nil {
			t.Fatal(err)
		}
	}
	spec := fmt.Sprintf("max,vendor=%s,family=%d,model=%d,stepping=%d", cpu.Vendor, cpu.Family, cpu.Model, cpu.Stepping)
	return func(stdin string, args ...string) string {
		script := `mount --bind "$1" /sys && shift && exec "$@"`
		argv := append([]string{"-m", "--propagation", "private", "sh", "-c", script, "sh", tree, qemu, "-cpu", spec, bin}, args...)
		cmd := exec.Command("unshare", argv...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("libpfm4 under qemu -cpu %s: %v", spec, err)
		}
		return string(out)
	}
}
