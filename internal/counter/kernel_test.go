package counter_test

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"perfevent/internal/counter"
	"perfevent/internal/perf"
	"perfevent/internal/pmu"
	"perfevent/internal/testneed"
)

// needKernelPerf skips unless perf_event_open works here for system-wide
// software events.
func needKernelPerf(t *testing.T) {
	t.Helper()
	testneed.SystemWide(t)
}

func onlineCPUs(t *testing.T) []int {
	t.Helper()
	cpus, err := pmu.Default().OnlineCPUs()
	if err != nil {
		t.Skipf("needs the list of online CPUs: %v", err)
	}
	return cpus
}

func sysfsInt(t *testing.T, path string) uint64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Skipf("needs %s: %v", path, err)
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return n
}

// schedSwitchID finds the sched:sched_switch tracepoint id, mounting
// tracefs at /sys/kernel/tracing if nothing provides it yet.
func schedSwitchID(t *testing.T) (uint64, bool) {
	const rel = "events/sched/sched_switch/id"
	for _, dir := range []string{"/sys/kernel/tracing", "/sys/kernel/debug/tracing"} {
		if _, err := os.Stat(filepath.Join(dir, rel)); err == nil {
			return sysfsInt(t, filepath.Join(dir, rel)), true
		}
	}
	if err := unix.Mount("tracefs", "/sys/kernel/tracing", "tracefs", 0, ""); err != nil {
		t.Logf("no tracepoint test: mounting tracefs at /sys/kernel/tracing: %v", err)
		return 0, false
	}
	p := filepath.Join("/sys/kernel/tracing", rel)
	if _, err := os.Stat(p); err != nil {
		t.Logf("no tracepoint test: %v", err)
		return 0, false
	}
	return sysfsInt(t, p), true
}

// countingSpecs are events that count on any machine, a VM included, on
// every CPU in cpus: the kernel's software events, with cpu-clock first,
// and x86's msr/tsc where the msr PMU exists.
func countingSpecs(t *testing.T, cpus []int) []counter.Spec {
	soft := func(name string, config uint64) counter.Spec {
		return counter.Spec{Name: name, Attr: unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Config: config}, CPUs: cpus}
	}
	specs := []counter.Spec{
		soft("cpu-clock", unix.PERF_COUNT_SW_CPU_CLOCK),
		soft("task-clock", unix.PERF_COUNT_SW_TASK_CLOCK),
		soft("page-faults", unix.PERF_COUNT_SW_PAGE_FAULTS),
		soft("context-switches", unix.PERF_COUNT_SW_CONTEXT_SWITCHES),
		soft("cpu-migrations", unix.PERF_COUNT_SW_CPU_MIGRATIONS),
		soft("minor-faults", unix.PERF_COUNT_SW_PAGE_FAULTS_MIN),
		soft("major-faults", unix.PERF_COUNT_SW_PAGE_FAULTS_MAJ),
	}
	if typ, ok := hostMSRType(t); ok {
		specs = append(specs, counter.Spec{Name: "msr/tsc", Attr: unix.PerfEventAttr{Type: typ, Config: 0}, CPUs: cpus})
	}
	return specs
}

// hostMSRType is the msr PMU's type, where the msr PMU exists.
func hostMSRType(t *testing.T) (uint32, bool) {
	const msr = "/sys/bus/event_source/devices/msr/type"
	if _, err := os.Stat(msr); err != nil {
		return 0, false
	}
	return uint32(sysfsInt(t, msr)), true
}

// agentJoin is Config.JoinSoftware as the agent sets it on this host:
// tracepoints, and the msr PMU's type where the msr PMU exists.
func agentJoin(t *testing.T) []uint32 {
	join := []uint32{unix.PERF_TYPE_TRACEPOINT}
	if typ, ok := hostMSRType(t); ok {
		join = append(join, typ)
	}
	return join
}

// absentSpecs are two events that no CPU of this host can count: cycles and
// instructions on a machine without a hardware PMU (a VM, where the test
// also checks the advice the agent gives there), or else two software
// events beyond the last one the kernel defines.
func absentSpecs(t *testing.T, cpus []int) []counter.Spec {
	hw := func(name string, config uint64) counter.Spec {
		return counter.Spec{Name: name, Attr: unix.PerfEventAttr{Type: unix.PERF_TYPE_HARDWARE, Config: config}, CPUs: cpus}
	}
	specs := []counter.Spec{hw("cycles", unix.PERF_COUNT_HW_CPU_CYCLES), hw("instructions", unix.PERF_COUNT_HW_INSTRUCTIONS)}
	attr := specs[0].Attr
	attr.Size, attr.Read_format = perf.AttrSize, perf.ReadFormat
	fd, err := perf.OpenCPU(&attr, cpus[0])
	if err != nil {
		return specs
	}
	fd.Close()
	t.Logf("cycles counts on cpu%d (a hardware PMU): made-up software events stand for the absent ones", cpus[0])
	for i := range specs {
		specs[i].Name = "software-" + strconv.Itoa(unix.PERF_COUNT_SW_MAX+1000+i)
		specs[i].Attr = unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Config: uint64(unix.PERF_COUNT_SW_MAX + 1000 + i)}
	}
	return specs
}

// mayStandStill are the events that need something to happen in a 50 ms
// window; the others must strictly increase whatever the machine does.
var mayStandStill = map[string]bool{"cpu-migrations": true, "major-faults": true}

// window is when a reading was taken: each CPU's cpu-clock was read at
// some moment between start and end.
type window struct{ start, end time.Time }

// readTimed is readAll with the window it read in.
func readTimed(t *testing.T, s *counter.Set, specs []counter.Spec) ([][]uint64, window) {
	t.Helper()
	start := time.Now()
	v := readAll(t, s, specs)
	return v, window{start, time.Now()}
}

// checkClock checks per-CPU cpu-clock (event 0) between two readings
// taken in windows w1 and w2. The kernel's per-CPU clock, which cpu-clock
// counts, is not the test's wall clock: on a loaded VM it fell several
// percent behind it ("advanced 52ms between readings 57ms apart"), so the
// wall clock gives a firm ceiling (the most time between the readings, a
// busy machine only shortens what a clock may count) and a loose floor
// (half the least time: a counter that stood still or read another
// event's value). The tight measure is task-clock, which a CPU-wide event
// counts from the same per-CPU clock and which the same group read
// returns: the two must advance alike, to within clockAgree, however long
// the test's thread waited for a CPU.
func checkClock(t *testing.T, s *counter.Set, v1, v2 [][]uint64, w1, w2 window) {
	t.Helper()
	least, most := w2.start.Sub(w1.end), w2.end.Sub(w1.start)
	low, high := least/2-time.Millisecond, time.Duration(float64(most)*(1+clockSlack))+time.Millisecond
	tc, haveTC := s.Lookup("task-clock")
	for i, cpu := range s.CPUs(0) {
		d := time.Duration(v2[0][i] - v1[0][i])
		if v2[0][i] < v1[0][i] || d < low || d > high {
			t.Errorf("cpu-clock on cpu%d advanced %v between readings %v to %v apart", cpu, d, least, most)
		}
		if !haveTC {
			continue
		}
		j := slices.Index(s.CPUs(tc), cpu)
		if j < 0 {
			t.Errorf("task-clock is not open on cpu%d, where cpu-clock is", cpu)
			continue
		}
		dt := time.Duration(v2[tc][j] - v1[tc][j])
		if diff := (d - dt).Abs(); v2[tc][j] < v1[tc][j] || diff > clockAgree+time.Duration(float64(d)*clockSlack) {
			t.Errorf("cpu-clock on cpu%d advanced %v and task-clock %v between the same readings: they count the same per-CPU clock", cpu, d, dt)
		}
	}
}

// clockSlack is how far a kernel clock may drift from the measure a test
// compares it with, as a fraction.
const clockSlack = 0.05

// clockAgree is how far cpu-clock and task-clock of one CPU may differ:
// the group read takes both within microseconds of each other.
const clockAgree = time.Millisecond

// readAll reads every event of s once, with a fetch of everything, and
// returns the values per event and CPU. Nothing multiplexes software, msr or
// tracepoint events, so every dutycycle must be 1.
func readAll(t *testing.T, s *counter.Set, specs []counter.Spec) [][]uint64 {
	t.Helper()
	f := s.Begin()
	defer f.End()
	f.NeedAll()
	f.Read()
	vals := make([][]uint64, len(specs))
	for ev := range specs {
		for i, cpu := range s.CPUs(ev) {
			vals[ev] = append(vals[ev], f.Value(ev, i))
			if d := f.Dutycycle(ev, i); d < 0.99 || d > 1.0 {
				t.Errorf("%s cpu%d dutycycle %v, want 1 (nothing multiplexes these events)", specs[ev].Name, cpu, d)
			}
		}
	}
	return vals
}

// checkCounting judges two readings taken in windows w1 and w2 with busy
// work on every CPU in between: every event went up (but those in
// mayStandStill); per-CPU system-wide cpu-clock (event 0), which counts
// wall-clock nanoseconds, advanced by the time between the readings (see
// checkClock); and the fetch read all fds.
func checkCounting(t *testing.T, s *counter.Set, specs []counter.Spec, v1, v2 [][]uint64, w1, w2 window, fds int) {
	t.Helper()
	for ev, sp := range specs {
		for i, cpu := range s.CPUs(ev) {
			a, b := v1[ev][i], v2[ev][i]
			if b < a || (b == a && !mayStandStill[sp.Name]) {
				t.Errorf("%s cpu%d went from %d to %d in %v", sp.Name, cpu, a, b, w2.end.Sub(w1.start))
			}
		}
	}
	checkClock(t, s, v1, v2, w1, w2)
	f := s.Begin()
	active := f.Active()
	f.End()
	if active != fds {
		t.Errorf("active %d, want %d", active, fds)
	}
}

// TestKernelCounters opens events that count on any machine, and two that
// this host cannot count, on every online CPU, and checks that the first
// count and the second fail with the right advice while the rest is served.
func TestKernelCounters(t *testing.T) {
	needKernelPerf(t)
	cpus := onlineCPUs(t)
	absent := absentSpecs(t, cpus)
	specs := append(countingSpecs(t, cpus), absent...)
	if id, ok := schedSwitchID(t); ok {
		specs = append(specs, counter.Spec{Name: "sched:sched_switch", Attr: unix.PerfEventAttr{Type: unix.PERF_TYPE_TRACEPOINT, Config: id}, CPUs: cpus})
	}

	s, err := counter.New(specs, counter.Config{JoinSoftware: agentJoin(t)})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := s.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	t.Log(sum)
	for _, l := range sum.FailureLines() {
		t.Log(l)
	}
	for _, f := range sum.Failures {
		if f.Event != absent[0].Name && f.Event != absent[1].Name {
			t.Errorf("unexpected failure: %v", f)
		}
	}
	for _, sp := range absent {
		ev, _ := s.Lookup(sp.Name)
		if len(s.CPUs(ev)) != 0 {
			t.Errorf("%s opened on cpus %v; this host was expected not to have it", sp.Name, s.CPUs(ev))
		}
		for _, st := range s.Status(ev) {
			if st.OpenErr == nil || st.OpenErr.Kind != counter.Unsupported ||
				!(errors.Is(st.OpenErr, unix.ENOENT) || errors.Is(st.OpenErr, unix.EOPNOTSUPP)) {
				t.Errorf("%s on cpu%d: %v, want ENOENT or EOPNOTSUPP classified as unsupported", sp.Name, st.CPU, st.OpenErr)
			}
		}
	}
	wantServed := len(specs) - len(absent)
	if sum.Served != wantServed || sum.FDs != wantServed*len(cpus) {
		t.Fatalf("summary %+v, want %d events on %d descriptors", sum, wantServed, wantServed*len(cpus))
	}

	v1, w1 := readTimed(t, s, specs)
	busyEveryCPU(t, cpus)
	time.Sleep(50 * time.Millisecond)
	v2, w2 := readTimed(t, s, specs)
	checkCounting(t, s, specs, v1, v2, w1, w2, sum.FDs)

	// A reservation frees the descriptors; the values continue afterwards.
	before := perfFDs(t)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if after := perfFDs(t); before-after != sum.FDs {
		t.Errorf("Close released %d descriptors (%d → %d), want %d", before-after, before, after, sum.FDs)
	}
	frozen := readAll(t, s, specs)
	if frozen[0][0] != v2[0][0] {
		t.Errorf("cpu-clock moved while closed: %d → %d", v2[0][0], frozen[0][0])
	}
	reopened := time.Now()
	if sum, err = s.Reopen(); err != nil || sum.FDs != wantServed*len(cpus) {
		t.Fatalf("Reopen: %v %v", sum, err)
	}
	time.Sleep(5 * time.Millisecond)
	v3 := readAll(t, s, specs)
	// It may gain only the time since the reopen, however long that
	// was on a busy machine; a value that jumped gains far more.
	since := time.Since(reopened)
	if d := time.Duration(v3[0][0] - frozen[0][0]); v3[0][0] <= frozen[0][0] || d > time.Duration(float64(since)*(1+clockSlack))+time.Millisecond {
		t.Errorf("cpu-clock after reopen went %d → %d (%v) in %v: it must continue, not jump", frozen[0][0], v3[0][0], d, since)
	}
}

// busyEveryCPU makes each CPU switch context and take page faults, so that
// those counters move on an otherwise idle CPU too. Each worker pins its own
// thread, which the runtime then discards (it exits locked).
func busyEveryCPU(t *testing.T, cpus []int) {
	var wg sync.WaitGroup
	for _, cpu := range cpus {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			var set unix.CPUSet
			set.Set(cpu)
			if err := unix.SchedSetaffinity(0, &set); err != nil {
				t.Errorf("pinning a thread to cpu%d: %v", cpu, err)
				return
			}
			mem, err := unix.Mmap(-1, 0, 64<<10, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
			if err != nil {
				t.Errorf("mmap: %v", err)
				return
			}
			for i := 0; i < len(mem); i += 4096 {
				mem[i] = 1
			}
			unix.Munmap(mem)
			for range 3 {
				time.Sleep(time.Millisecond)
			}
		}()
	}
	wg.Wait()
}

// BenchmarkKernelRead is a full fetch of the seven software events on every
// online CPU of this machine, through real read() calls. The C agent spends
// about 170 µs of CPU per fetch of 24 descriptors on this VM.
func BenchmarkKernelRead(b *testing.B) {
	testneed.SystemWide(b)
	t := &testing.T{}
	cpus := onlineCPUs(t)
	var specs []counter.Spec
	for cfg := uint64(0); cfg <= unix.PERF_COUNT_SW_PAGE_FAULTS_MAJ; cfg++ {
		specs = append(specs, counter.Spec{Name: strconv.FormatUint(cfg, 10),
			Attr: unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Config: cfg}, CPUs: cpus})
	}
	s, err := counter.New(specs, counter.Config{})
	if err != nil {
		b.Fatal(err)
	}
	sum, err := s.Open()
	if err != nil || len(sum.Failures) > 0 {
		b.Skipf("needs perf_event_open: %v %v", err, sum.FailureLines())
	}
	defer s.Close()
	b.ReportAllocs()
	for b.Loop() {
		f := s.Begin()
		f.NeedAll()
		f.Read()
		f.End()
	}
	b.ReportMetric(float64(sum.FDs), "fds")
}
