package agent

import (
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"perfevent/internal/cgroup"
	"perfevent/internal/emulator"
	"perfevent/internal/hostfs"
	"perfevent/internal/setup"
	"perfevent/internal/testexec"
)

// fetchString fetches a string metric without instances.
func (h *tester) fetchString(t *testing.T, name string) string {
	t.Helper()
	id, err := h.c.PMID(name)
	if err != nil {
		t.Fatal(err)
	}
	r, err := h.c.Fetch(id)
	if err != nil || r.Sets[0].Err() != nil || len(r.Sets[0].Values) != 1 {
		t.Fatalf("fetching %s: %v, %+v", name, err, r)
	}
	return r.Sets[0].Values[0].String()
}

// startCounting starts the agent with cgroups.conf counting cpu-clock in
// every cgroup of hierarchy h, with the line counting.
func startCounting(t *testing.T, h cgroup.Hierarchy, counting string) *tester {
	t.Helper()
	return startAgentWith(t, "0-1", "[perf]\ncpu-clock\n", func(a *Agent) {
		conf := "cgroup /\nevent cpu-clock\n" + counting
		if err := os.WriteFile(filepath.Join(filepath.Dir(a.o.Config), "cgroups.conf"), []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		a.locate = func() (cgroup.Hierarchy, error) { return h, nil }
	})
}

// Where BPF cannot count (here a cgroup v1 hierarchy, whose ancestors the
// program cannot look up), perf does: at Warning when cgroups.conf asks
// for bpf, and perfevent.cgroup.counting says why.
func TestCountingFallsBackToPerf(t *testing.T) {
	v1 := cgroup.Hierarchy{Mount: t.TempDir(), Version: 1}
	const why = "perf: the cgroup v1 perf_event hierarchy at "
	for _, c := range []struct{ line, want, warning string }{
		{"counting bpf\n", why, "asks for counting bpf, but the cgroup v1 perf_event hierarchy at "},
		{"", why, ""},
		{"counting auto\n", why, ""},
		{"counting perf\n", "perf", ""},
	} {
		h := startCounting(t, v1, c.line)
		if got := h.fetchString(t, "perfevent.cgroup.counting"); !strings.HasPrefix(got, c.want) {
			t.Errorf("%q: perfevent.cgroup.counting = %q, want %q...", c.line, got, c.want)
		}
		log := h.log.String()
		if c.warning != "" {
			h.waitLog(t, c.warning)
		} else if strings.Contains(log, "asks for counting") {
			t.Errorf("%q: a warning about the counting asked for:\n%s", c.line, log)
		}
		if !strings.Contains(log, "with perf cgroup counters, one per cgroup, event and CPU") {
			t.Errorf("%q: the log does not say how the cgroups are counted:\n%s", c.line, log)
		}
	}
}

// On cgroup v2, as root, the agent counts with BPF by default.
func TestCountingBPFByDefault(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to load BPF programs (CAP_BPF)")
	}
	h, err := cgroup.LocateOn(hostfs.FS{})
	if err != nil || h.Version != 2 {
		t.Skipf("needs perf_event on a cgroup v2 hierarchy: %v %v", h, err)
	}
	a := startCounting(t, h, "")
	got := a.fetchString(t, "perfevent.cgroup.counting")
	if strings.HasPrefix(got, "perf: ") {
		t.Skipf("needs BPF counting on this kernel: %s", got)
	}
	if got != "bpf" {
		t.Fatalf("perfevent.cgroup.counting = %q, want bpf", got)
	}
	a.waitLog(t, "with a BPF program at each cgroup switch")

	// A reload keeps the program loaded at start-up, as an agent that
	// dropped root must: the same Counter, still counting.
	loaded := a.a.bpf
	a.a.RequestReload()
	a.waitLog(t, "reload done")
	if a.a.bpf != loaded || a.a.gen.Load().bpf != loaded {
		t.Errorf("a reload loaded another BPF program")
	}
	if got := a.fetchString(t, "perfevent.cgroup.counting"); got != "bpf" {
		t.Errorf("perfevent.cgroup.counting = %q after a reload, want bpf", got)
	}
}

// --check says how the cgroups would be counted: as cgroups.conf forces
// it, or with BPF where it loads (it loads the program, and lets go).
func TestCheckSaysHowCgroupsCount(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to open system-wide counters and load BPF programs")
	}
	emulator.SkipWithoutPerfEvents(t)
	if h, err := cgroup.LocateOn(hostfs.FS{}); err != nil || h.Version != 2 {
		t.Skipf("needs perf_event on a cgroup v2 hierarchy: %v %v", h, err)
	}
	for _, c := range []struct{ line, want string }{
		{"counting perf\n", `cgroups: counted with perf cgroup counters, as cgroups.conf asks (perfevent.cgroup.counting "perf")`},
		{"", `cgroups: counted with BPF, on a constant number of descriptors (perfevent.cgroup.counting "bpf")`},
	} {
		dir := t.TempDir()
		conf := filepath.Join(dir, "perfevent.conf")
		if err := os.WriteFile(conf, []byte("[perf]\ncpu-clock\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "cgroups.conf"), []byte("cgroup /\nevent cpu-clock\n"+c.line), 0o644); err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		if _, err := Check(Options{Config: conf, NoCatalog: true}, &out); err != nil {
			t.Fatal(err)
		}
		if c.line == "" && strings.Contains(out.String(), `(perfevent.cgroup.counting "perf: ...")`) {
			t.Skipf("needs BPF counting on this kernel:\n%s", out.String())
		}
		if !strings.Contains(out.String(), c.want) {
			t.Errorf("%q: --check lacks %q:\n%s", c.line, c.want, out.String())
		}
	}
}

// Without CAP_BPF (here an ordinary user: root runs the test as nobody)
// the agent counts with perf on cgroup v2 too, and says why: at Warning
// when cgroups.conf asks for bpf.
func TestCountingWithoutCapBPF(t *testing.T) {
	emulator.Skip(t, "bpf(2) is not emulated: it fails with ENOSYS, not EPERM")
	if !testexec.Rerunning(t) && os.Geteuid() == 0 {
		testexec.RerunAs(t, 65534, 65534)
		return
	}
	v2 := cgroup.Hierarchy{Mount: t.TempDir(), Version: 2}
	h := startCounting(t, v2, "counting bpf\n")
	const why = "perf: loading a BPF program needs CAP_BPF"
	if got := h.fetchString(t, "perfevent.cgroup.counting"); !strings.HasPrefix(got, why) {
		t.Errorf("perfevent.cgroup.counting = %q, want %q...", got, why)
	}
	h.waitLog(t, "Warning: cgroups: ")
	h.waitLog(t, "asks for counting bpf, but loading a BPF program needs CAP_BPF")
}

// Where the perf_event controller does not reach the cgroups below the
// root (cgroup.Reach), neither mode can count them apart: whatever
// cgroups.conf asks, nothing is counted per cgroup, and a Warning and
// perfevent.cgroup.counting say why and what to do.
func TestCountingOffWhereControllerDoesNotReach(t *testing.T) {
	v2 := cgroup.Hierarchy{Mount: t.TempDir(), Version: 2}
	const reason = "the cgroups below the root have no perf_event controller: write +pids to cgroup.subtree_control"
	for _, c := range []struct{ line, warning string }{
		{"", "cgroups: nothing is counted per cgroup: " + reason},
		{"counting bpf\n", "cgroups: cgroups.conf asks for counting bpf, but nothing is counted per cgroup: " + reason},
		{"counting perf\n", "cgroups: cgroups.conf asks for counting perf, but nothing is counted per cgroup: " + reason},
	} {
		var probed []int
		h := startAgentWith(t, "0-1", "[perf]\ncpu-clock\n", func(a *Agent) {
			conf := "cgroup /*\nevent cpu-clock\n" + c.line
			if err := os.WriteFile(filepath.Join(filepath.Dir(a.o.Config), "cgroups.conf"), []byte(conf), 0o644); err != nil {
				t.Fatal(err)
			}
			a.locate = func() (cgroup.Hierarchy, error) { return v2, nil }
			a.reach = func(h cgroup.Hierarchy, cpu int) error {
				if h != v2 {
					t.Errorf("probed %v, want %v", h, v2)
				}
				probed = append(probed, cpu)
				return &cgroup.Unreached{Reason: reason}
			}
		})
		if got := h.fetchString(t, "perfevent.cgroup.counting"); got != "off: "+reason {
			t.Errorf("%q: perfevent.cgroup.counting = %q, want off: and the reason", c.line, got)
		}
		if got := h.fetchString(t, "perfevent.cgroup.mode"); got != "v2 "+v2.Mount {
			t.Errorf("%q: perfevent.cgroup.mode = %q, want the hierarchy", c.line, got)
		}
		h.waitLog(t, c.warning)
		if log := h.log.String(); strings.Contains(log, "cgroups: counting per cgroup in the") || len(probed) == 0 || probed[0] != 0 {
			t.Errorf("%q: probed CPUs %v (want 0 first); log:\n%s", c.line, probed, log)
		}
	}
}

// --check says the same, as a problem, naming the mode asked for.
func TestCheckSaysControllerDoesNotReach(t *testing.T) {
	v2 := cgroup.Hierarchy{Mount: t.TempDir(), Version: 2}
	const reason = "the cgroups below the root have no perf_event controller"
	unreached := func(cgroup.Hierarchy, int) error { return &cgroup.Unreached{Reason: reason} }
	for _, c := range []struct{ counting, want string }{
		{cgroup.CountingAuto, `cgroups: nothing would be counted per cgroup: ` + reason + ` (perfevent.cgroup.counting "off: ...")`},
		{cgroup.CountingBPF, `cgroups: cgroups.conf asks for counting bpf, but nothing would be counted per cgroup: ` + reason},
		{cgroup.CountingPerf, `cgroups: cgroups.conf asks for counting perf, but nothing would be counted per cgroup: ` + reason},
	} {
		p := cgroupPlan{cfg: cgroup.Config{Counting: c.counting}, cpus: []int{0, 1}}
		n := countingNote(p, v2, unreached)
		if n.Severity != setup.Problem || !strings.HasPrefix(n.Text, c.want) {
			t.Errorf("counting %s: %+v, want a Problem %q", c.counting, n, c.want)
		}
	}
}

// Once the cgroups have the controller (the root's subtree_control
// written), the hierarchy watch's next look rebuilds the counters, which
// count then; while they lack it, each look rebuilds nothing.
func TestCountingStartsWhenControllerReaches(t *testing.T) {
	v2 := cgroup.Hierarchy{Mount: t.TempDir(), Version: 2}
	const reason = "the cgroups below the root have no perf_event controller"
	var reached atomic.Bool
	h := startAgentWith(t, "0-1", "[perf]\ncpu-clock\n", func(a *Agent) {
		if err := os.WriteFile(filepath.Join(filepath.Dir(a.o.Config), "cgroups.conf"), []byte("cgroup /*\nevent cpu-clock\ncounting perf\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		a.locate = func() (cgroup.Hierarchy, error) { return v2, nil }
		a.reach = func(cgroup.Hierarchy, int) error {
			if reached.Load() {
				return nil
			}
			return &cgroup.Unreached{Reason: reason}
		}
	})
	if got := h.fetchString(t, "perfevent.cgroup.counting"); got != "off: "+reason {
		t.Fatalf("perfevent.cgroup.counting = %q, want off: and the reason", got)
	}
	reloads := strings.Count(h.log.String(), "reload done")
	h.a.checkHierarchy()
	if n := strings.Count(h.log.String(), "reload done"); n != reloads {
		t.Errorf("%d rebuilds while the controller does not reach the cgroups", n-reloads)
	}
	reached.Store(true)
	h.a.checkHierarchy()
	h.waitLog(t, "cgroups: the cgroups below the root of the cgroup v2 hierarchy at "+v2.Mount+" have the perf_event controller now; rebuilding the counters")
	if got := h.fetchString(t, "perfevent.cgroup.counting"); got != "perf" {
		t.Errorf("perfevent.cgroup.counting = %q after the controller reached the cgroups, want perf", got)
	}
	reloads = strings.Count(h.log.String(), "reload done")
	h.a.checkHierarchy()
	if n := strings.Count(h.log.String(), "reload done"); n != reloads {
		t.Errorf("%d rebuilds once counting", n-reloads)
	}
}
