package cgroup

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"perfevent/internal/bpfcount"
	"perfevent/internal/counter"
	"perfevent/internal/counter/countertest"
	"perfevent/internal/emulator"
	"perfevent/internal/hostfs"
	"perfevent/internal/perf"
)

// benchEvents are four software events, as a per-cgroup configuration
// of cpu-clock, task-clock, context-switches and cpu-migrations.
var benchEvents = []Event{
	{Name: "cpu-clock", Attr: unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_CPU_CLOCK}},
	{Name: "task-clock", Attr: unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_TASK_CLOCK}},
	{Name: "context-switches", Attr: unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_CONTEXT_SWITCHES}},
	{Name: "cpu-migrations", Attr: unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_CPU_MIGRATIONS}},
}

func cpuIDs(n int) []int {
	cpus := make([]int, n)
	for i := range cpus {
		cpus[i] = i
	}
	return cpus
}

// fakeTracker is a Tracker over n fake cgroups in a temporary tree, with
// a descriptor budget that counts them all.
func fakeTracker(tb testing.TB, n, cpus int) (*Tracker, string) {
	root := fakeTree(tb, n)
	tr := startFake(root, n+1, n*len(benchEvents)*cpus, cpus)
	tb.Cleanup(tr.Stop)
	if got, _ := tr.Stats(); got != n {
		tb.Fatalf("%d cgroups counted, want %d", got, n)
	}
	return tr, root
}

// fakeTree is a temporary directory holding n empty cgroup directories.
func fakeTree(tb testing.TB, n int) string {
	root := tb.TempDir()
	for i := range n {
		if err := os.Mkdir(filepath.Join(root, fmt.Sprintf("cg%04d", i)), 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	return root
}

// startFake starts a Tracker of every child of root, over the fake
// opener; max and descriptors are cgroups.conf's (0: its defaults).
func startFake(root string, max, descriptors, cpus int) *Tracker {
	tr := New(Options{
		Hierarchy:   Hierarchy{Mount: root, Version: 2},
		Patterns:    []string{"/*"},
		Max:         max,
		Descriptors: descriptors,
		Events:      benchEvents,
		CPUs:        cpuIDs(cpus),
		Opener: func(*os.File) counter.Opener {
			o := countertest.New()
			o.Step(perf.Count{Value: 1, Enabled: 1, Running: 1})
			return o
		},
		Rescan:   time.Hour,
		NoNotify: true,
	})
	tr.Start()
	return tr
}

var all4 = []bool{true, true, true, true}

// BenchmarkReadFake is one fetch of 64 cgroups × 4 events, on this
// machine's CPU count and on 256 CPUs, with the fake opener: the agent's
// own cost, without the kernel's.
func BenchmarkReadFake(b *testing.B) {
	for _, cpus := range []int{runtime.NumCPU(), 256} {
		b.Run(fmt.Sprintf("cgroups=64/events=4/cpus=%d", cpus), func(b *testing.B) {
			tr, _ := fakeTracker(b, 64, cpus)
			b.ReportAllocs()
			for b.Loop() {
				tr.Read(all4)
			}
		})
	}
}

// cgroupScale are the sizes BenchmarkScaleFake measures: 1,000 cgroups on
// this VM's CPU count and on two-socket hosts of 2024-2026, where every
// event is one descriptor per CPU in each cgroup. At 768 CPUs × 1,000
// cgroups the fake's record of 3 million counters keeps 2 GiB of heap and
// its starts take minutes, too much for every run of the benchmarks on a
// shared machine: CGROUP_BENCH_FULL=1 adds it.
func cgroupScale() []struct{ cpus, cgroups int } {
	sizes := []struct{ cpus, cgroups int }{{2, 1000}, {256, 1000}, {768, 100}}
	if os.Getenv("CGROUP_BENCH_FULL") != "" {
		sizes = append(sizes, struct{ cpus, cgroups int }{768, 1000})
	}
	return sizes
}

// BenchmarkScaleFake is per-cgroup counting at machine sizes this VM does
// not have, with the fake opener: 4 events in each of N cgroups on C CPUs,
// the agent's own cost without the kernel's. budget=all is given a
// descriptor budget that counts every cgroup (cgroups × events × CPUs);
// budget=default has cgroups.conf's defaults, which count fewer cgroups as
// CPUs grow (the cgroups metric says how many). start is the Tracker's
// start, the scan and the open of every counter, and reports the heap the
// started Tracker keeps, the fake's record of each counter included, where
// the real agent has a kernel descriptor instead; fake-alone is that record
// alone, for the difference. fetch-one is one per-cgroup metric of every
// counted cgroup, fetch-all all four.
func BenchmarkScaleFake(b *testing.B) {
	trees := map[int]string{}
	tree := func(n int) string {
		if trees[n] == "" {
			trees[n] = fakeTree(b, n)
		}
		return trees[n]
	}
	for _, s := range cgroupScale() {
		for _, budget := range []string{"all", "default"} {
			max, descriptors := s.cgroups, s.cgroups*len(benchEvents)*s.cpus
			if budget == "default" {
				max, descriptors = 0, 0
			}
			name := fmt.Sprintf("cpus=%d/cgroups=%d/events=%d/budget=%s", s.cpus, s.cgroups, len(benchEvents), budget)
			b.Run(name+"/start", func(b *testing.B) {
				root := tree(s.cgroups)
				b.ReportAllocs()
				var heap uint64
				var n, fds int
				b.StopTimer()
				for range b.N {
					base := liveHeap()
					b.StartTimer()
					tr := startFake(root, max, descriptors, s.cpus)
					b.StopTimer()
					n, fds = tr.Stats()
					heap = liveHeap() - base
					tr.Stop()
				}
				if budget == "all" && n != s.cgroups {
					b.Fatalf("%d cgroups counted, want %d", n, s.cgroups)
				}
				if want := n * len(benchEvents) * s.cpus; n == 0 || fds != want {
					b.Fatalf("%d cgroups on %d descriptors, want %d descriptors", n, fds, want)
				}
				b.ReportMetric(float64(heap)/(1<<20), "heap-MiB")
				b.ReportMetric(float64(n), "cgroups")
				b.ReportMetric(float64(fds), "fds")
			})
			if budget == "all" {
				b.Run(name+"/fake-alone", func(b *testing.B) { fakeAlone(b, s.cgroups, s.cpus) })
			}
			var tr *Tracker
			for _, f := range []struct {
				name string
				need []bool
			}{{"fetch-one", []bool{true, false, false, false}}, {"fetch-all", all4}} {
				b.Run(name+"/"+f.name, func(b *testing.B) {
					if tr == nil {
						tr = startFake(tree(s.cgroups), max, descriptors, s.cpus)
					}
					runtime.GC() // the start's garbage is not the fetch's
					n := tr.Counted()
					b.ReportAllocs()
					for b.Loop() {
						tr.Read(f.need)
					}
					if tr.Len() != n {
						b.Fatalf("a fetch served %d cgroups of %d counted", tr.Len(), n)
					}
					// Each read of the fake counts one more on every CPU.
					if _, v, duty := tr.At(0, 0); v < uint64(s.cpus) || duty != 1 {
						b.Fatalf("the first cgroup's %s is %d (dutycycle %v), want at least 1 on each of %d CPUs", benchEvents[0].Name, v, duty, s.cpus)
					}
					b.ReportMetric(float64(n), "cgroups")
				})
			}
			if tr != nil {
				tr.Stop()
				tr = nil
			}
		}
	}
}

// fakeAlone opens on the fake alone what a Tracker of n cgroups on cpus
// CPUs opens, each cgroup's events one group per CPU, and reports the heap
// that keeps: the part of start's heap that the real agent holds as kernel
// descriptors instead. Its time is the fake's part of start's.
func fakeAlone(b *testing.B, n, cpus int) {
	var heap uint64
	b.StopTimer()
	for range b.N {
		base := liveHeap()
		b.StartTimer()
		openers := make([]*countertest.Opener, n)
		for i := range openers {
			o := countertest.New()
			openers[i] = o
			for cpu := range cpus {
				var leader counter.Source
				for _, e := range benchEvents {
					a := e.Attr
					a.Read_format = unix.PERF_FORMAT_GROUP
					a.Bits |= unix.PerfBitDisabled
					c, err := o.Open(e.Name, &a, cpu, leader)
					if err != nil {
						b.Fatal(err)
					}
					if leader == nil {
						leader = c
					}
				}
			}
		}
		b.StopTimer()
		heap = liveHeap() - base
		if got, want := openers[n-1].OpenNow(), len(benchEvents)*cpus; got != want {
			b.Fatalf("the fake holds %d counters of a cgroup, want %d", got, want)
		}
	}
	b.ReportMetric(float64(heap)/(1<<20), "heap-MiB")
}

// liveHeap is the heap in use after a collection.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkChurnFake is the cost of one cgroup appearing and then
// disappearing among 64 others: two rescans, one open of 4 events × CPUs
// and its close.
func BenchmarkChurnFake(b *testing.B) {
	for _, cpus := range []int{runtime.NumCPU(), 256} {
		b.Run(fmt.Sprintf("cgroups=64/events=4/cpus=%d", cpus), func(b *testing.B) {
			tr, root := fakeTracker(b, 64, cpus)
			churn(b, tr, root)
		})
	}
}

// BenchmarkReadKernel is one fetch of 64 real cgroups × 4 software events
// on every online CPU of this machine, counted with perf cgroup counters
// and with BPF (where it loads), and a cgroup coming and going. It needs
// root and a cgroup v2 hierarchy; the cgroups are made under it and
// removed afterwards.
func BenchmarkReadKernel(b *testing.B) {
	h := kernelHierarchy(b)
	base := filepath.Join(h.Mount, fmt.Sprintf("perfevent-bench-%d", os.Getpid()))
	if err := os.Mkdir(base, 0o755); err != nil {
		b.Skipf("needs root to make cgroups under %s: %v", h.Mount, err)
	}
	b.Cleanup(func() { removeTree(b, base) })
	for i := range 64 {
		if err := os.Mkdir(filepath.Join(base, fmt.Sprintf("cg%03d", i)), 0o755); err != nil {
			b.Fatal(err)
		}
	}
	for _, mode := range []string{CountingPerf, CountingBPF} {
		b.Run(mode, func(b *testing.B) {
			var bpf *bpfcount.Counter
			if mode == CountingBPF {
				bpf = loadBPFOf(b, 128, benchEvents)
			}
			tr := New(Options{
				Hierarchy: h,
				Patterns:  []string{"/" + filepath.Base(base) + "/*"},
				Events:    benchEvents,
				CPUs:      onlineCPUs(b),
				BPF:       bpf,
				Rescan:    time.Hour,
				NoNotify:  true,
			})
			tr.Start()
			defer tr.Stop()
			n, fds := tr.Stats()
			if n != 64 {
				b.Skipf("%d of 64 cgroups opened (needs CAP_PERFMON or root)", n)
			}
			b.Run("cgroups=64/events=4", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					tr.Read(all4)
				}
				b.ReportMetric(float64(fds), "fds")
			})
			b.Run("churn", func(b *testing.B) { churn(b, tr, base) })
		})
	}
}

// churn makes a cgroup appear in dir and go again, a rescan each time.
func churn(b *testing.B, tr *Tracker, dir string) {
	p := filepath.Join(dir, "new")
	for b.Loop() {
		os.Mkdir(p, 0o755)
		tr.rescan()
		os.Remove(p)
		tr.rescan()
	}
}

func kernelHierarchy(tb testing.TB) Hierarchy {
	emulator.SkipWithoutPerfEvents(tb)
	info, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		tb.Skipf("needs /proc/self/mountinfo: %v", err)
	}
	h, err := FindHierarchy(info)
	if err != nil || h.Version != 2 {
		tb.Skipf("needs a cgroup v2 hierarchy: %v", err)
	}
	return h
}

// onlineCPUs are the CPUs a system-wide counter can be opened on: all the
// online ones, whatever CPUs this test may run on (taskset) and however
// many there are.
func onlineCPUs(tb testing.TB) []int {
	cpus, err := (hostfs.FS{}).OnlineCPUs()
	if err != nil {
		tb.Fatal(err)
	}
	return cpus
}

func removeTree(tb testing.TB, dir string) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.IsDir() {
			removeTree(tb, filepath.Join(dir, e.Name()))
		}
	}
	if err := os.Remove(dir); err != nil {
		tb.Errorf("removing %s: %v", dir, err)
	}
}

func TestReadAllocatesNothing(t *testing.T) {
	tr, _ := fakeTracker(t, 8, 4)
	tr.Read(all4)
	if n := testing.AllocsPerRun(100, func() { tr.Read(all4) }); n != 0 {
		t.Errorf("Read allocates %v times per call, want 0", n)
	}
}

// BenchmarkReleaseKernel is perfalloc's cycle of the per-cgroup counters
// in perf mode: Close, which disables each cgroup's group on each CPU
// (what the agent does before it confirms the release), then Resume,
// which enables them again, for 307 real cgroups × 4 software events on
// every online CPU (614 groups on 2 CPUs). release-ms and resume-ms are
// the two halves. It needs root and a cgroup v2 hierarchy.
func BenchmarkReleaseKernel(b *testing.B) {
	const n = 307
	h := kernelHierarchy(b)
	base := filepath.Join(h.Mount, fmt.Sprintf("perfevent-bench-%d", os.Getpid()))
	if err := os.Mkdir(base, 0o755); err != nil {
		b.Skipf("needs root to make cgroups under %s: %v", h.Mount, err)
	}
	b.Cleanup(func() { removeTree(b, base) })
	for i := range n {
		if err := os.Mkdir(filepath.Join(base, fmt.Sprintf("cg%03d", i)), 0o755); err != nil {
			b.Fatal(err)
		}
	}
	cpus := onlineCPUs(b)
	tr := New(Options{
		Hierarchy:   h,
		Patterns:    []string{"/" + filepath.Base(base) + "/*"},
		Events:      benchEvents,
		CPUs:        cpus,
		Max:         n,
		Descriptors: n * len(benchEvents) * len(cpus),
		Rescan:      time.Hour,
		NoNotify:    true,
	})
	tr.Start()
	defer tr.Stop()
	if got, _ := tr.Stats(); got != n {
		b.Skipf("%d of %d cgroups opened (needs CAP_PERFMON or root)", got, n)
	}
	var release, resume time.Duration
	calls := functionCalls(b)
	for b.Loop() {
		t0 := time.Now()
		tr.Close()
		t1 := time.Now()
		if tr.Resume() {
			b.Fatal("Resume left counters for Reopen: software events must be disabled, not closed")
		}
		release += t1.Sub(t0)
		resume += time.Since(t1)
	}
	b.ReportMetric(float64(release.Microseconds())/1e3/float64(b.N), "release-ms")
	b.ReportMetric(float64(resume.Microseconds())/1e3/float64(b.N), "resume-ms")
	b.ReportMetric(float64(functionCalls(b)-calls)/float64(b.N), "ipis/op")
	b.ReportMetric(float64(n*len(cpus)), "groups")
}

// functionCalls is the machine's count of function-call interprocessor
// interrupts so far (CAL in /proc/interrupts), which a remote disable or
// enable of a perf counter costs one of: a measure that the load moves
// far less than time.
func functionCalls(tb testing.TB) int64 {
	b, err := os.ReadFile("/proc/interrupts")
	if err != nil {
		tb.Skipf("needs /proc/interrupts: %v", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) == 0 || f[0] != "CAL:" {
			continue
		}
		var sum int64
		for _, x := range f[1:] {
			v, err := strconv.ParseInt(x, 10, 64)
			if err != nil {
				break
			}
			sum += v
		}
		return sum
	}
	tb.Skip("needs CAL (function call interrupts) in /proc/interrupts")
	return 0
}

// BenchmarkScaleBPF is a fetch with BPF counting of 1,000 cgroups × the 4
// events on a machine of 768 (or 256) possible CPUs: the maps are made
// for that many (bpfcount.Options.PossibleCPUs) while this machine's CPUs
// attach, and the Tracker reads every cgroup's sums, as the agent would
// there: the 4 events are software events, so one total per cgroup and
// event (bpfcount.Totalled); hardware events, which cannot attach on a
// machine without a PMU, would read a sum per CPU. The cgroups are empty directories, as BPF
// counting needs only their inodes. It reports the cgroups counted (the
// sums' room, within bpfcount.MaxSums), the Tracker's start (the scan,
// each cgroup added, its first readings), the kernel memory of the maps
// (memlock, /proc/self/fdinfo), and the growth of this process's RSS from
// before the load to after the first fetch (the sums are mapped in). It
// needs root.
func BenchmarkScaleBPF(b *testing.B) {
	const asked = 1000
	for _, cpus := range []int{256, 768} {
		b.Run(fmt.Sprintf("cpus=%d/cgroups=%d", cpus, asked), func(b *testing.B) {
			rss0 := rssKiB(b)
			lock0 := bpfMemlock(b)
			c := loadBPFOn(b, asked, cpus)
			root := fakeTree(b, asked)
			tr := New(Options{
				Hierarchy: Hierarchy{Mount: root, Version: 2},
				Patterns:  []string{"/*"},
				Max:       asked,
				Events:    benchEvents,
				CPUs:      cpuIDs(cpus),
				BPF:       c,
				Rescan:    time.Hour,
				NoNotify:  true,
			})
			t0 := time.Now()
			tr.Start()
			start := time.Since(t0)
			defer tr.Stop()
			n, _ := tr.Stats()
			if n != c.Room() {
				b.Fatalf("%d cgroups counted, want the room for %d", n, c.Room())
			}
			tr.Read(all4)
			rss := rssKiB(b) - rss0
			lock := bpfMemlock(b) - lock0
			for _, need := range []struct {
				name string
				need []bool
			}{{"one", []bool{true, false, false, false}}, {"all4", all4}} {
				b.Run(need.name, func(b *testing.B) {
					for b.Loop() {
						tr.Read(need.need)
					}
					b.ReportMetric(float64(n), "cgroups")
					b.ReportMetric(float64(lock)/(1<<20), "map-MiB")
					b.ReportMetric(float64(rss)/1024, "rss-MiB")
					b.ReportMetric(float64(start.Microseconds())/1e3, "start-ms")
				})
			}
		})
	}
}

// loadBPFOn loads a Counter of benchEvents with room for cgroups, its
// maps made for cpus possible CPUs, attached to this machine's CPUs.
func loadBPFOn(tb testing.TB, cgroups, cpus int) *bpfcount.Counter {
	tb.Helper()
	return loadBPFFor(tb, cgroups, benchEvents, cpus)
}

// rssKiB is this process's resident set, in KiB.
func rssKiB(tb testing.TB) int64 {
	return procField(tb, "/proc/self/status", "VmRSS:")
}

// bpfMemlock is the memlock of every BPF map this process holds, in
// bytes: their kernel memory as the kernel charges it.
func bpfMemlock(tb testing.TB) int64 {
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		tb.Skipf("needs /proc/self/fd: %v", err)
	}
	var sum int64
	for _, fd := range fds {
		if l, _ := os.Readlink("/proc/self/fd/" + fd.Name()); l != "anon_inode:bpf-map" {
			continue
		}
		sum += procField(tb, "/proc/self/fdinfo/"+fd.Name(), "memlock:")
	}
	return sum
}

// procField is the number after key in a /proc file of "key value" lines,
// or 0.
func procField(tb testing.TB, file, key string) int64 {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == key {
			v, _ := strconv.ParseInt(f[1], 10, 64)
			return v
		}
	}
	return 0
}
