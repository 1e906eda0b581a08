package qa

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"perfevent/internal/names"
)

// An arm64 machine with a hardware PMU, emulated: QEMU's Neoverse N1 has
// an ARMv8 PMU (armv8_pmuv3, 6 general counters and the cycle counter),
// which Debian's arm64 kernel drives. The tests boot that kernel with an
// initramfs built here, holding busybox and static arm64 binaries, and
// read what the machine prints on its console.
//
// scripts/setup installs qemu-system-arm and fetches the kernel and
// busybox (Debian's linux-image-arm64 and busybox-static) into
// $PERFEVENT_ARMVM_DIR (default /var/cache/perfevent-armvm).
type armVM struct{ qemu, kernel, busybox string }

// needARMVM finds QEMU, the kernel and busybox, or skips naming what is
// missing.
func needARMVM(t *testing.T) armVM {
	t.Helper()
	if testing.Short() {
		t.Skip("boots an emulated arm64 machine; skipped with -short")
	}
	qemu, err := exec.LookPath("qemu-system-aarch64")
	if err != nil {
		unmet(t, "needs qemu-system-aarch64 (Debian package qemu-system-arm)")
	}
	dir := os.Getenv("PERFEVENT_ARMVM_DIR")
	if dir == "" {
		dir = "/var/cache/perfevent-armvm"
	}
	vm := armVM{qemu: qemu, kernel: filepath.Join(dir, "vmlinuz"), busybox: filepath.Join(dir, "busybox")}
	for _, f := range []string{vm.kernel, vm.busybox} {
		if _, err := os.Stat(f); err != nil {
			unmet(t, "needs Debian's arm64 kernel and busybox in %s (scripts/setup fetches them): %v", dir, err)
		}
	}
	return vm
}

// buildARM64 runs go build (or go test -c) for a static linux/arm64 binary.
func buildARM64(t *testing.T, args ...string) {
	t.Helper()
	build := exec.Command("go", args...)
	build.Dir = repoRoot()
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=arm64")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go %s for arm64: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// vmSMP is how many CPUs the emulated machine has.
const vmSMP = 2

// boot runs the machine on initrd until its init powers it off, with
// QEMU's -icount shift=shift: instructions count only with a fixed
// icount, and each then takes 2^shift ns of emulated time. It returns the
// console, and fails the test unless the init printed "=== exit 0".
func (vm armVM) boot(t *testing.T, initrd string, shift int) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	cmd := exec.CommandContext(ctx, vm.qemu, "-M", "virt", "-cpu", "neoverse-n1", "-smp", strconv.Itoa(vmSMP), "-m", "256",
		"-nographic", "-no-reboot", "-nic", "none", "-icount", fmt.Sprintf("shift=%d", shift),
		"-kernel", vm.kernel, "-initrd", initrd, "-append", "console=ttyAMA0 panic=-1 quiet")
	out, err := cmd.CombinedOutput()
	t.Logf("the VM ran %.1f s", time.Since(start).Seconds())
	console := string(out)
	if err != nil || !strings.Contains(console, "=== exit 0") {
		t.Fatalf("qemu: %v; the console:\n%s", err, console)
	}
	return console
}

// The kernel accepts the catalog: package pfm's test binary runs
// TestKernelAcceptsARMCatalog inside, so every arm_n1 event of the
// catalog, as Encode encodes it, is opened by a real kernel, and
// CPU_CYCLES and INST_RETIRED count.
func TestARMVMKernelAcceptsCatalog(t *testing.T) {
	vm := needARMVM(t)
	work := t.TempDir()
	test := filepath.Join(work, "pfm.test")
	buildARM64(t, "test", "-c", "-o", test, "./internal/pfm")
	initrd := filepath.Join(work, "initrd.cpio")
	if err := writeInitramfs(initrd, catalogInit, map[string]string{"bin/busybox": vm.busybox, "bin/pfm.test": test}, nil); err != nil {
		t.Fatal(err)
	}
	console := vm.boot(t, initrd, 0)
	for _, l := range strings.Split(console, "\n") {
		if strings.Contains(l, "armkernel_test.go") || strings.HasPrefix(l, "CPU ") {
			t.Log(strings.TrimSpace(l))
		}
	}
	if !strings.Contains(console, "--- PASS: TestKernelAcceptsARMCatalog") {
		t.Fatalf("the console:\n%s", console)
	}
}

// vmPrelude starts every init: busybox's tools and the kernel's
// filesystems.
const vmPrelude = `#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
`

// catalogInit is TestARMVMKernelAcceptsCatalog's /init.
const catalogInit = vmPrelude + `grep -m2 -E "CPU implementer|CPU part" /proc/cpuinfo
cd /tmp && /bin/pfm.test -test.run '^TestKernelAcceptsARMCatalog$' -test.v -test.count=1
echo "=== exit $?"
poweroff -f
`

// armShift is the -icount shift of TestARMVMAgent: each instruction takes
// 2^3 ns of emulated time, and QEMU's cycle counter counts emulated ns at
// 1 GHz, so cycles = 8 × instructions whenever some CPU is busy. The guest
// then runs at 125 M instructions per emulated second, roughly what QEMU
// manages here per real second, so emulated and real time keep pace. A
// larger shift slows the agent's start-up in emulated time: at 7 it
// outlasts the 5 s that qa/armvm, like pmcd, waits for the handshake.
const armShift = 3

// instCopies spell INST_RETIRED (event 0x08) in seven ways the agent
// takes as seven events: the generic event, libpfm4's names, a raw code
// and the kernel's sysfs name. They all count the same instructions, and
// each needs a general counter of its own; the PMU has six.
var instCopies = []string{
	"PERF_COUNT_HW_INSTRUCTIONS", "perf::PERF_COUNT_HW_INSTRUCTIONS", "INST_RETIRED",
	"arm_n1::INST_RETIRED", "instructions:uk", "RAW:inst", "armv8_pmuv3.inst_retired",
}

// instConf is a perfevent.conf of the events given, instCopies among
// them, and cpu-clock: a software event, never multiplexed, that counts
// emulated ns on each CPU, the yardstick of the counts.
func instConf(events ...string) string {
	var b strings.Builder
	b.WriteString("[arm_n1]\n")
	for _, e := range events {
		switch {
		case e == "RAW:inst":
			b.WriteString(e + " rawcode=0x08\n")
		case !strings.HasPrefix(e, "armv8_pmuv3."):
			b.WriteString(e + "\n")
		}
	}
	b.WriteString("cpu-clock\n[dynamic]\n")
	for _, e := range events {
		if strings.HasPrefix(e, "armv8_pmuv3.") {
			b.WriteString(e + "\n")
		}
	}
	return b.String()
}

// chained are eight copies of INST_RETIRED and a ratios.conf that chains
// them (i1 = first / second, i2 = second / third, ...), which the agent
// opens as one perf group per CPU, in that order.
var chained = append([]string{"instructions"}, instCopies...)

func chainRatios() string {
	var b strings.Builder
	for i := 1; i < len(chained); i++ {
		fmt.Fprintf(&b, "i%d = %s / %s\n", i, chained[i-1], chained[i])
	}
	return b.String()
}

// armScenario is one run of the agent in the VM: its configuration, and
// the times of the driver's fetches (qa/armvm's -at).
type armScenario struct {
	name   string
	conf   string
	ratios string
	at     string
	kernel bool // qa/armvm -kernel: no agent, the kernel's own counts
	// catalog lets the agent serve Neoverse N1's metric catalog; the
	// other scenarios count their configuration alone (--no-catalog).
	catalog bool
}

var armScenarios = []armScenario{
	// cycles and instructions, the operands of ipc and cpi: one group per
	// CPU, which fits (a general counter and the cycle counter).
	{name: "fits", conf: instConf("instructions", "cycles"), at: "100ms,1100ms"},
	// Eight copies of INST_RETIRED in one group: the kernel takes seven
	// (a leader opened disabled is not counted against the PMU's six
	// counters) and refuses the eighth with EINVAL; the seven never run.
	// The agent counts the eighth on its own at once, and the seven once
	// a fetch has seen them starve for a second (the first fetch); the
	// second fetch, well after that split, starts the interval measured.
	{name: "group", conf: instConf(chained...), ratios: chainRatios(), at: "1200ms,1500ms,3500ms"},
	// Eight independent events for the six general counters and the
	// cycle counter: they take turns, each scaled by its own times.
	{name: "mux", conf: instConf(muxed()...), at: "100ms,2100ms"},
	// The same events opened by qa/armvm itself, as perf stat -a would:
	// what the kernel counts and for how long, to scale by hand.
	{name: "kernel", conf: instConf(muxed()...), at: "100ms,2100ms", kernel: true},
	// The metric catalog from a configuration of cpu-clock alone: the
	// agent opens Neoverse N1's operands itself. With mpki turned off its
	// two groups, {cycles, instructions, cpu-clock, STALL_FRONTEND,
	// STALL_BACKEND} and {INST_SPEC, INST_RETIRED}, take 3 + 2 of the six
	// general counters and the cycle counter: all fit at once.
	{name: "catalogfits", conf: "[arm_n1]\ncpu-clock\n", ratios: "disable mpki\n", at: "100ms,1100ms", catalog: true},
	// All of it: the second group grows to five events, 3 + 5 > 6, so the
	// two groups take turns, each whole, each scaled by its own times.
	{name: "catalogmux", conf: "[arm_n1]\ncpu-clock\n", at: "100ms,2100ms", catalog: true},
}

// muxed are the events of the mux scenario: INST_RETIRED seven times and
// CPU_CYCLES, which the cycle counter can take.
func muxed() []string { return append(slices.Clone(instCopies), "CPU_CYCLES") }

// muxInterval sets how often the kernel rotates the events that take
// turns on the PMU: every 40 ms rather than the default 4. The PMU is
// stopped while the kernel rotates, and that time is counted as running;
// emulated, a rotation takes about 90 µs, so at 4 ms every multiplexed
// count, scaled, came out 2.2 % short (the kernel's own counts scaled by
// hand as much as the agent's), at 40 ms 0.2 % and at 1 ms 8.7 %. On
// hardware a rotation takes a few µs.
const muxInterval = "echo 40 > /sys/bus/event_source/devices/armv8_pmuv3/perf_event_mux_interval_ms\n"

// vmReport is what qa/armvm prints for one scenario (its Report).
type vmReport struct {
	Dir     string
	Fetches []struct {
		At     time.Duration
		Values map[string]map[int32]float64
		Errors map[string]string
		Counts map[string]map[int32]struct{ Value, Enabled, Running float64 }
	}
	Log   string
	Error string
}

// TestARMVMAgent runs pmdaperfevent on the emulated Neoverse N1, driven by
// qa/armvm over pipes as pmcd would, and checks on a real PMU what the
// fake one of internal/counter's tests only pretends:
//
//   - a group that fits counts all the time (dutycycle 1), and ipc and cpi
//     are the emulator's exact 1/8 and 8;
//   - a group that cannot fit is reported in the log, member by member
//     and as a group that never runs, and its members then count on their
//     own;
//   - events that take turns on the counters are scaled by their own
//     enabled and running times to the counts of the whole interval.
func TestARMVMAgent(t *testing.T) {
	vm := needARMVM(t)
	work := t.TempDir()
	agent, driver := filepath.Join(work, "pmdaperfevent"), filepath.Join(work, "armvm")
	buildARM64(t, "build", "-o", agent, "./pmda")
	buildARM64(t, "build", "-o", driver, "./qa/armvm")

	init := vmPrelude + muxInterval
	texts := map[string]string{}
	for _, s := range armScenarios {
		dir := "/s/" + s.name
		texts[dir[1:]+"/perfevent.conf"] = s.conf
		if s.ratios != "" {
			texts[dir[1:]+"/ratios.conf"] = s.ratios
		}
		mode := "perfevent.hwcounters perfevent.ratio"
		switch {
		case s.kernel:
			mode = "-kernel"
		case s.catalog:
			mode = "-catalog " + mode
		}
		init += fmt.Sprintf("/bin/armvm -dir %s -at %s %s\n", dir, s.at, mode)
	}
	init += "echo \"=== exit 0\"\npoweroff -f\n" // the reports say what failed
	initrd := filepath.Join(work, "initrd.cpio")
	bins := map[string]string{"bin/busybox": vm.busybox, "bin/pmdaperfevent": agent, "bin/armvm": driver}
	if err := writeInitramfs(initrd, init, bins, texts); err != nil {
		t.Fatal(err)
	}
	console := vm.boot(t, initrd, armShift)

	reports := map[string]*vmReport{}
	for _, l := range strings.Split(console, "\n") {
		js, ok := strings.CutPrefix(strings.TrimSpace(l), "armvm: ")
		if !ok {
			continue
		}
		r := &vmReport{}
		if err := json.Unmarshal([]byte(js), r); err != nil {
			t.Fatalf("the driver's report: %v\n%s", err, js)
		}
		reports[path.Base(r.Dir)] = r
	}
	for _, s := range armScenarios {
		r := reports[s.name]
		switch {
		case r == nil:
			t.Fatalf("no report for %s; the console:\n%s", s.name, console)
		case r.Error != "" || len(r.Fetches) != strings.Count(s.at, ",")+1:
			t.Fatalf("%s: %s after %d fetches; the agent's log:\n%s", s.name, r.Error, len(r.Fetches), r.Log)
		}
	}
	t.Run("fits", func(t *testing.T) { checkFits(t, reports["fits"]) })
	t.Run("group", func(t *testing.T) { checkGroup(t, reports["group"]) })
	t.Run("mux", func(t *testing.T) { checkMux(t, reports["mux"], reports["kernel"]) })
	t.Run("catalogfits", func(t *testing.T) { checkCatalogFits(t, reports["catalogfits"]) })
	t.Run("catalogmux", func(t *testing.T) { checkCatalogMux(t, reports["catalogmux"]) })
}

// The catalog's two perf groups on Neoverse N1, by event.
var (
	catalogCore  = []string{"cycles", "instructions", "cpu-clock", "STALL_FRONTEND", "STALL_BACKEND"}
	catalogInsts = []string{"INST_SPEC", "INST_RETIRED"}
)

// checkCatalogFits: every group of the catalog fits, so every operand
// counts all the time (time running = time enabled), and ipc is the
// emulator's exact 1/8.
func checkCatalogFits(t *testing.T, r *vmReport) {
	if strings.Contains(r.Log, "does not fit") || strings.Contains(r.Log, "has not run") || strings.Contains(r.Log, "counted apart") {
		t.Errorf("the agent split a catalog group that fits; its log:\n%s", r.Log)
	}
	if !strings.Contains(r.Log, "perfevent.ratio.l1d_mpki turned off") {
		t.Errorf("the log does not say ratios.conf turned mpki off:\n%s", r.Log)
	}
	for _, cpu := range vmCPUs {
		for _, ev := range append(slices.Clone(catalogCore), catalogInsts...) {
			if d := r.duty(t, ev, cpu); d != 1 {
				t.Errorf("%s dutycycle on cpu%d = %v, want 1: its group was on the PMU all the time", ev, cpu, d)
			}
		}
		near(t, fmt.Sprintf("ratio.ipc[cpu%d]", cpu), r.inst(t, 1, "perfevent.ratio.ipc", cpu), perCycle, 1e-4)
		// Kept busy by the driver, a CPU runs 8 cycles a ns under
		// -icount shift=3: 1 GHz.
		near(t, fmt.Sprintf("ratio.frequency_average_hz[cpu%d]", cpu), r.inst(t, 1, "perfevent.ratio.frequency_average_hz", cpu), 1e9*perCycle*(1<<armShift), scaledTolerance)
		for _, m := range []string{"topdown_frontend_bound", "topdown_backend_bound", "topdown_not_stalled"} {
			if v := r.inst(t, 1, "perfevent.ratio."+m, cpu); v < 0 || v > 1 {
				t.Errorf("ratio.%s[cpu%d] = %v, not a share", m, cpu, v)
			}
		}
	}
	if _, ok := r.Fetches[1].Values["perfevent.ratio.l1d_mpki"]; ok {
		t.Errorf("l1d_mpki is served though ratios.conf turned mpki off")
	}
}

// checkCatalogMux: the two groups do not fit together; each runs part of
// the time, all its members alike, and each scales its counts to the
// whole interval, so instructions from one group and INST_RETIRED from
// the other agree, and ipc stays exact.
func checkCatalogMux(t *testing.T, r *vmReport) {
	if strings.Contains(r.Log, "has not run") {
		t.Errorf("a catalog group never ran; the log:\n%s", r.Log)
	}
	groups := [][]string{catalogCore, append(slices.Clone(catalogInsts), "L1D_CACHE_REFILL", "LL_CACHE_MISS_RD", "BR_MIS_PRED_RETIRED")}
	for _, cpu := range vmCPUs {
		for _, g := range groups {
			d0 := r.duty(t, g[0], cpu)
			t.Logf("the group of %s on cpu%d: dutycycle %.3f", g[0], cpu, d0)
			if d0 <= 0 || d0 > 0.92 {
				t.Errorf("%s dutycycle on cpu%d = %v; want its group multiplexed", g[0], cpu, d0)
			}
			for _, ev := range g[1:] {
				if d := r.duty(t, ev, cpu); d != d0 {
					t.Errorf("%s dutycycle on cpu%d = %v, %s's %v: one group is scheduled whole", ev, cpu, d, g[0], d0)
				}
			}
		}
		near(t, fmt.Sprintf("Δinstructions / ΔINST_RETIRED on cpu%d, each scaled in its own group", cpu),
			r.counted(t, "instructions", cpu)/r.counted(t, "INST_RETIRED", cpu), 1, scaledTolerance)
		near(t, fmt.Sprintf("ratio.ipc[cpu%d], multiplexed", cpu), r.inst(t, 1, "perfevent.ratio.ipc", cpu), perCycle, 1e-4)
	}
}

// vmCPUs are the emulated machine's CPUs (vmSMP of them), the instances
// of every counter.
var vmCPUs = func() []int32 {
	var cpus []int32
	for c := range int32(vmSMP) {
		cpus = append(cpus, c)
	}
	return cpus
}()

// inst is the value of a metric's instance in fetch i of r.
func (r *vmReport) inst(t *testing.T, i int, metric string, cpu int32) float64 {
	t.Helper()
	v, ok := r.Fetches[i].Values[metric][cpu]
	if !ok {
		t.Fatalf("fetch %d has no %s[%d] (error %q)", i+1, metric, cpu, r.Fetches[i].Errors[metric])
	}
	return v
}

// counted is how much event counted on cpu between the last two fetches.
func (r *vmReport) counted(t *testing.T, event string, cpu int32) float64 {
	t.Helper()
	m := "perfevent.hwcounters." + names.Metric(event, false) + ".value"
	n := len(r.Fetches)
	return r.inst(t, n-1, m, cpu) - r.inst(t, n-2, m, cpu)
}

// duty is event's dutycycle on cpu at the last fetch.
func (r *vmReport) duty(t *testing.T, event string, cpu int32) float64 {
	t.Helper()
	return r.inst(t, len(r.Fetches)-1, "perfevent.hwcounters."+names.Metric(event, false)+".dutycycle", cpu)
}

// near fails unless got is within tol (a fraction) of want.
func near(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if !(math.Abs(got/want-1) <= tol) { // NaN, from 0/0, fails too
		t.Errorf("%s = %.6g, want %.6g within %g %%", what, got, want, 100*tol)
	} else {
		t.Logf("%s = %.6g (%.6g expected)", what, got, want)
	}
}

// perCycle is instructions per cycle under -icount shift=armShift.
const perCycle = 1.0 / (1 << armShift)

// scaledTolerance bounds the error of the agent's count of a multiplexed
// event over an interval, scaled, against the instructions or cycles of
// that interval by cpu-clock: 0.2 % for the rotation (see muxInterval),
// the rest for the time between the reads of one fetch. A read on another
// CPU waits for QEMU to run that CPU, so cpu-clock may be read up to about
// 50 emulated ms after a counter, or before it, by a different amount in
// each fetch. A count left unscaled, on the PMU at most 92 % of the time,
// would be at least 8 % short.
const scaledTolerance = 0.05

// kernelTolerance bounds the error of the kernel's own counts: each read
// gives the count with its times, so only the rotation's 0.2 % remains.
const kernelTolerance = 0.005

func checkFits(t *testing.T, r *vmReport) {
	if strings.Contains(r.Log, "does not fit") || strings.Contains(r.Log, "has not run") {
		t.Errorf("the agent split a group that fits; its log:\n%s", r.Log)
	}
	for _, cpu := range vmCPUs {
		for _, ev := range []string{"instructions", "cycles"} {
			if d := r.duty(t, ev, cpu); d != 1 {
				t.Errorf("%s dutycycle on cpu%d = %v, want 1: its group was on the PMU all the time", ev, cpu, d)
			}
		}
		ins, cyc := r.counted(t, "instructions", cpu), r.counted(t, "cycles", cpu)
		if ins <= 0 {
			t.Fatalf("instructions on cpu%d counted %v", cpu, ins)
		}
		// The group is read in one go, so the quotient is the emulator's
		// exactly, but for the few instructions between two counter reads.
		near(t, fmt.Sprintf("ratio.ipc[cpu%d]", cpu), r.inst(t, 1, "perfevent.ratio.ipc", cpu), perCycle, 1e-4)
		near(t, fmt.Sprintf("ratio.cpi[cpu%d]", cpu), r.inst(t, 1, "perfevent.ratio.cpi", cpu), 1/perCycle, 1e-4)
		near(t, fmt.Sprintf("Δinstructions/Δcycles on cpu%d", cpu), ins/cyc, perCycle, 1e-4)
	}
	near(t, "ratio.all.ipc", r.inst(t, 1, "perfevent.ratio.all.ipc", -1), perCycle, 1e-4)
	// The first fetch has the agent's interval, since the counters were
	// opened.
	if v, ok := r.Fetches[0].Values["perfevent.ratio.ipc"][0]; !ok || !(v > 0) {
		t.Errorf("the first fetch of ratio.ipc: %v, %v; want the agent's interval's value", v, ok)
	}
}

func checkGroup(t *testing.T, r *vmReport) {
	group := make([]string, len(chained)-1)
	for i := range group {
		group[i] = fmt.Sprintf("i%d", i+1)
	}
	name := strings.Join(group, "+")
	last := chained[len(chained)-1]
	var seven []string
	for _, ev := range chained[:len(chained)-1] {
		seven = append(seven, fmt.Sprintf("%q", ev))
	}
	for _, cpu := range vmCPUs {
		for _, line := range []string{
			fmt.Sprintf("%q does not fit in the group %s on cpu%d (invalid argument); it is counted on its own", last, name, cpu),
			fmt.Sprintf("the group %s of %s on cpu%d has not run in ", name, strings.Join(seven, ", "), cpu),
		} {
			if !strings.Contains(r.Log, line) {
				t.Errorf("the agent's log does not say %q:\n%s", line, r.Log)
			}
		}
		// The first fetch, a second after the open: the seven never ran.
		for _, ev := range chained[:len(chained)-1] {
			m := "perfevent.hwcounters." + names.Metric(ev, false)
			if v, d := r.inst(t, 0, m+".value", cpu), r.inst(t, 0, m+".dutycycle", cpu); v != 0 || d != 0 {
				t.Errorf("%s on cpu%d in the starved group: value %v, dutycycle %v; want 0 and 0", ev, cpu, v, d)
			}
		}
		// The eighth, on its own meanwhile, ran only part of the time:
		// the kernel stops filling the PMU at the first group that does
		// not fit, and the starved group came before it in every other
		// rotation.
		m := "perfevent.hwcounters." + names.Metric(last, false) + ".dutycycle"
		t.Logf("%s on cpu%d, beside the starved group: dutycycle %.3f", last, cpu, r.inst(t, 0, m, cpu))
		// Then all eight count on their own: six counters for eight
		// events, each scaled to the instructions of the whole interval.
		truth := r.counted(t, "cpu-clock", cpu) * perCycle
		split := 0.0 // the dutycycles of the seven, since the split
		for i, ev := range chained {
			d := r.duty(t, ev, cpu)
			if i < len(chained)-1 {
				split += d / float64(len(chained)-1)
			}
			if d <= 0 || d > 0.92 {
				t.Errorf("%s dutycycle on cpu%d = %v; want it counting, multiplexed", ev, cpu, d)
			}
			near(t, fmt.Sprintf("Δ%s on cpu%d (dutycycle %.3f)", ev, cpu, d), r.counted(t, ev, cpu), truth, scaledTolerance)
		}
		// Eight events take turns on six general counters, 6/8 of the
		// time each. A descriptor that the split left behind, still
		// taking its turn, would make it 6/9.
		if math.Abs(split-6.0/8) > 0.02 {
			t.Errorf("the seven split on cpu%d ran %.3f of the time on average, want 6/8: eight events on six counters", cpu, split)
		}
		for _, g := range group {
			near(t, fmt.Sprintf("ratio.%s[cpu%d]", g, cpu), r.inst(t, 2, "perfevent.ratio."+g, cpu), 1, scaledTolerance)
		}
	}
}

// rate is what the kernel says of event on cpu between the last two
// reads of r (a -kernel report): its count per ns on the PMU, which is
// also its count scaled by enabled/running, as perf stat does, per ns
// enabled; and the share of the time it was on the PMU. Each read gives
// the times with the count, so there is no other clock to read apart.
func (r *vmReport) rate(t *testing.T, event string, cpu int32) (perNS, duty float64) {
	t.Helper()
	n := len(r.Fetches)
	a, aok := r.Fetches[n-2].Counts[event][cpu]
	b, bok := r.Fetches[n-1].Counts[event][cpu]
	if !aok || !bok || b.Running == a.Running {
		t.Fatalf("the kernel's readings of %s on cpu%d: %+v then %+v", event, cpu, a, b)
	}
	return (b.Value - a.Value) / (b.Running - a.Running), (b.Running - a.Running) / (b.Enabled - a.Enabled)
}

func checkMux(t *testing.T, r, k *vmReport) {
	for _, cpu := range vmCPUs {
		clock := r.counted(t, "cpu-clock", cpu)
		sum, kernelSum := 0.0, 0.0
		for _, ev := range muxed() {
			d := r.duty(t, ev, cpu)
			sum += d
			if d <= 0.5 || d > 0.92 {
				t.Errorf("%s dutycycle on cpu%d = %v; want it multiplexed, about 7/8", ev, cpu, d)
			}
			perNS := perCycle
			if ev == "CPU_CYCLES" {
				perNS = 1
			}
			got := r.counted(t, ev, cpu)
			near(t, fmt.Sprintf("Δ%s on cpu%d (dutycycle %.3f)", ev, cpu, d), got, clock*perNS, scaledTolerance)
			// What the kernel says of the same events without the agent:
			// counts per ns on the PMU, which is what scaling assumes, at
			// the emulator's rates; the agent's at the same rate, and the
			// same share of time on the PMU.
			kr, kd := k.rate(t, ev, cpu)
			near(t, fmt.Sprintf("the kernel's Δ%s per ns running on cpu%d", ev, cpu), kr, perNS, kernelTolerance)
			near(t, fmt.Sprintf("Δ%s per cpu-clock ns on cpu%d, the agent's against the kernel's alone", ev, cpu), got/clock, kr, scaledTolerance)
			kernelSum += kd
		}
		// Which event the rotation shortchanges differs from run to run
		// (one of the eight gets about 0.76 in some runs, none in others),
		// so the shares are compared in total, not event by event.
		if math.Abs(sum-kernelSum) > 0.3 {
			t.Errorf("the dutycycles on cpu%d add up to %.3f, but alone the kernel ran the same events %.3f of the time in all", cpu, sum, kernelSum)
		}
		// Seven counters for eight events: between six and seven of them
		// on the PMU at any time.
		if sum < 6 || sum > 7.01 {
			t.Errorf("the dutycycles on cpu%d add up to %.3f, want 6 to 7: the PMU has 6 general counters and the cycle counter", cpu, sum)
		}
	}
}

// writeInitramfs writes a newc cpio archive (the kernel's initramfs
// format) holding /init, the binaries given (archive path to host path),
// the text files given (archive path to contents), the directories they
// are in and those the init needs. It is not compressed: gunzip on the
// emulated CPU took longer than QEMU takes to load the larger file.
func writeInitramfs(path, init string, bins, texts map[string]string) error {
	var buf bytes.Buffer
	w := &buf
	ino := 0
	add := func(name string, mode uint32, data []byte) {
		ino++
		fmt.Fprintf(w, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
			ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name)+1, 0)
		io.WriteString(w, name+"\x00")
		w.Write(make([]byte, pad4(110+len(name)+1)))
		w.Write(data)
		w.Write(make([]byte, pad4(len(data))))
	}
	// The kernel makes no parent directories: they come first.
	dirs := map[string]bool{"bin": true, "proc": true, "sys": true, "dev": true, "tmp": true}
	for _, m := range []map[string]string{bins, texts} {
		for name := range m {
			for d := filepath.Dir(name); d != "."; d = filepath.Dir(d) {
				dirs[d] = true
			}
		}
	}
	for _, d := range slices.Sorted(maps.Keys(dirs)) {
		add(d, 0o040755, nil)
	}
	add("init", 0o100755, []byte(init))
	for _, name := range slices.Sorted(maps.Keys(bins)) {
		data, err := os.ReadFile(bins[name])
		if err != nil {
			return err
		}
		add(name, 0o100755, data)
	}
	for _, name := range slices.Sorted(maps.Keys(texts)) {
		add(name, 0o100644, []byte(texts[name]))
	}
	add("TRAILER!!!", 0, nil)
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

func pad4(n int) int { return (4 - n%4) % 4 }
