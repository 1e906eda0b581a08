package privilege

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"perfevent/internal/emulator"
	"perfevent/internal/testexec"
	"perfevent/internal/testneed"
)

func TestReadStatusSelf(t *testing.T) {
	st, err := ReadStatus(0)
	if err != nil {
		t.Fatal(err)
	}
	if st.UIDs[0] != os.Getuid() || st.UIDs[1] != os.Geteuid() {
		t.Errorf("uids %v, want real %d effective %d", st.UIDs, os.Getuid(), os.Geteuid())
	}
	if os.Geteuid() == 0 && st.CapEff&(1<<unix.CAP_SYS_ADMIN) == 0 {
		t.Errorf("root without CAP_SYS_ADMIN: CapEff %#x", st.CapEff)
	}
}

func TestOnly(t *testing.T) {
	s := Status{UIDs: [4]int{999, 999, 999, 999}, CapEff: 1 << unix.CAP_PERFMON, CapPrm: 1 << unix.CAP_PERFMON}
	if !s.Only(999, unix.CAP_PERFMON) {
		t.Error("Only(999, CAP_PERFMON) = false")
	}
	s.UIDs[2] = 0 // a saved uid of root could take root back
	if s.Only(999, unix.CAP_PERFMON) {
		t.Error("Only ignored a saved root uid")
	}
	s.UIDs[2] = 999
	s.CapPrm |= 1 << unix.CAP_SYS_ADMIN
	if s.Only(999, unix.CAP_PERFMON) {
		t.Error("Only ignored an extra permitted capability")
	}
}

// TestDrop drops to nobody in a child process: after it, the child runs as
// nobody everywhere with exactly the counter capability, and can still open
// a counter on a CPU, which an unprivileged process cannot.
func TestDrop(t *testing.T) {
	testneed.Root(t, "to drop privileges")
	nobody := testneed.User(t, "nobody")
	testneed.PerfEvents(t)
	emulator.SkipWithoutPerfEvents(t)
	bin := testexec.BuildTemp(t, "./internal/dropcheck", "dropcheck") // nobody runs it too

	c := CounterCapability()
	// Parked threads of their own stand for the runtime's and the
	// agent's: each must be changed, not only the one that calls Drop.
	out, err := exec.Command(bin, "-threads", "4", "nobody").CombinedOutput()
	if err != nil {
		t.Fatalf("dropcheck: %v\n%s", err, out)
	}
	bit := uint64(1) << c
	for _, want := range []string{
		fmt.Sprintf("dropped to nobody uid %s keeping %s\n", nobody.Uid, Name(c)),
		fmt.Sprintf("every thread back to nice %d on %d CPUs\n", ownNice(t), ownCPUs(t)),
		fmt.Sprintf("uids [%[1]s %[1]s %[1]s %[1]s] capeff %#[2]x capprm %#[2]x capinh 0x0 nonewprivs true\n", nobody.Uid, bit),
		"every thread dropped (",
		"self dropped\n",
		"perf_event_open on cpu0: ok\n",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("dropcheck output lacks %q:\n%s", want, out)
		}
	}

	// The same open without the capability: refused, which is what makes
	// the kept capability necessary (unless perf_event_paranoid allows
	// everyone, as on some developer machines).
	if data, _ := os.ReadFile("/proc/sys/kernel/perf_event_paranoid"); strings.TrimSpace(string(data)) >= "1" {
		plain := exec.Command(bin, "-")
		uid := mustAtoi(t, nobody.Uid)
		plain.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
		out, err := plain.CombinedOutput()
		if err != nil {
			t.Fatalf("dropcheck as plain nobody: %v\n%s", err, out)
		}
		if !strings.Contains(string(out), "perf_event_open on cpu0: permission denied") && !strings.Contains(string(out), "operation not permitted") {
			t.Errorf("an unprivileged nobody could open a CPU-wide counter:\n%s", out)
		}
	}
}

// TestDropCalls: the calls Drop makes on every thread, in the order the
// kernel needs (see Drop), and no more of them: each one stops the world
// and waits for every thread.
func TestDropCalls(t *testing.T) {
	testneed.Root(t, "as Drop refuses to start otherwise")
	type call struct{ trap, a1, a2, a3 uintptr }
	var calls []call
	real := allThreadsSyscall
	t.Cleanup(func() { allThreadsSyscall = real })
	nice, masks := ownNice(t), threadMasks(t)
	allThreadsSyscall = func(trap, a1, a2, a3 uintptr) (uintptr, uintptr, syscall.Errno) {
		calls = append(calls, call{trap, a1, a2, a3})
		// Every call runs with every thread lifted above the load, all
		// on one CPU (the first of the two that put them back, too).
		lifted := len(calls) <= dropCallCount+1
		if got := threadNices(t); lifted && !slices.Equal(slices.Compact(got), []int{boostNice}) {
			t.Errorf("call %d: thread nice values %v, want all %d", len(calls), got, boostNice)
		}
		cpus := map[string]bool{}
		for _, m := range threadMasks(t) {
			cpus[m] = true
		}
		if lifted && (len(cpus) != 1 || strings.Contains(slices.Collect(maps.Keys(cpus))[0], " ")) {
			t.Errorf("call %d: thread CPU masks %v, want one CPU for all", len(calls), slices.Collect(maps.Keys(cpus)))
		}
		// Nothing changes, so the test stays root; but the calls that put
		// each thread back are made on each, as the runtime would.
		putBack(trap, a1, a2, a3)
		return 0, 0, 0
	}
	a := Account{Name: "someone", UID: 1234, GID: 567, Groups: []int{567, 89}}
	id, err := a.Drop(unix.CAP_PERFMON)
	if err != nil {
		t.Fatal(err)
	}
	if id != (Identity{User: "someone", UID: 1234, GID: 567, Capability: unix.CAP_PERFMON}) {
		t.Errorf("identity %+v", id)
	}
	// The pointer arguments are checked below, on the arrays themselves.
	const ptr = ^uintptr(0)
	want := []call{
		{unix.SYS_PRCTL, unix.PR_SET_KEEPCAPS, 1, 0},
		{unix.SYS_SETGROUPS, 2, ptr, 0},
		{unix.SYS_SETRESGID, 567, 567, 567},
		{unix.SYS_SETRESUID, 1234, 1234, 1234},
		{unix.SYS_CAPSET, ptr, ptr, 0},
		{unix.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1, 0},
	}
	// Then each thread puts back its own nice value and CPU mask, all
	// the caller's.
	var mask unix.CPUSet
	if err := unix.SchedGetaffinity(0, &mask); err != nil {
		t.Fatal(err)
	}
	want = append(want,
		call{unix.SYS_SETPRIORITY, unix.PRIO_PROCESS, 0, uintptr(nice)},
		call{unix.SYS_SCHED_SETAFFINITY, 0, unsafe.Sizeof(mask), ptr})
	if len(calls) == len(want) {
		calls[1].a2, calls[4].a1, calls[4].a2, calls[7].a3 = ptr, ptr, ptr, ptr
	}
	if got := threadNices(t); !slices.Equal(slices.Compact(got), []int{nice}) {
		t.Errorf("after Drop: thread nice values %v, want all %d as before", got, nice)
	}
	for tid, m := range threadMasks(t) {
		if was, ok := masks[tid]; ok && m != was {
			t.Errorf("after Drop: thread %d runs on CPUs %s, before on %s", tid, m, was)
		}
	}
	if !slices.Equal(calls, want) || len(want) != dropCallCount+restoreCallCount {
		t.Errorf("all-thread calls\n%v\nwant\n%v", calls, want)
	}
	p := newDropCalls(a, unix.CAP_PERFMON)
	if !slices.Equal(p.gids, []uint32{567, 89}) || p.steps[1].a2 != uintptr(unsafe.Pointer(&p.gids[0])) {
		t.Errorf("setgroups gets %v", p.gids)
	}
	bit := uint32(1) << (unix.CAP_PERFMON - 32)
	if p.data != [2]unix.CapUserData{{}, {Effective: bit, Permitted: bit}} ||
		p.steps[4].a1 != uintptr(unsafe.Pointer(&p.hdr)) || p.steps[4].a2 != uintptr(unsafe.Pointer(&p.data[0])) ||
		p.hdr.Version != unix.LINUX_CAPABILITY_VERSION_3 {
		t.Errorf("capset gets %+v %+v, want CAP_PERFMON alone, effective and permitted", p.hdr, p.data)
	}
	if p := newDropCalls(Account{UID: 1, GID: 1}, unix.CAP_SYS_ADMIN); p.steps[1].a1 != 0 || p.steps[1].a2 != 0 ||
		p.data != [2]unix.CapUserData{{Effective: 1 << unix.CAP_SYS_ADMIN, Permitted: 1 << unix.CAP_SYS_ADMIN}, {}} {
		t.Errorf("no groups, CAP_SYS_ADMIN: setgroups(%d, %#x), capset %+v", p.steps[1].a1, p.steps[1].a2, p.data)
	}

	// A failure stops the sequence and says where the process is left.
	calls = nil
	allThreadsSyscall = func(trap, a1, a2, a3 uintptr) (uintptr, uintptr, syscall.Errno) {
		calls = append(calls, call{trap, a1, a2, a3})
		if trap == unix.SYS_CAPSET {
			return 0, 0, syscall.EPERM
		}
		return 0, 0, 0
	}
	if _, err := a.Drop(unix.CAP_PERFMON); err == nil || err.Error() != "capset(CAP_PERFMON): operation not permitted (now uid 1234, without capabilities)" {
		t.Errorf("capset failing: %v", err)
	}
	if len(calls) != 5+restoreCallCount || calls[4].trap != unix.SYS_CAPSET {
		t.Errorf("calls after a failed capset %v, want it the last but the restoring ones", calls)
	}
	// Each step's error names its call and what the process is left as.
	for trap, want := range map[uintptr]string{
		unix.SYS_SETGROUPS: fmt.Sprintf("setgroups(%v): operation not permitted (still root)", a.Groups),
		unix.SYS_SETRESGID: fmt.Sprintf("setresgid(%d): operation not permitted (still root)", a.GID),
		unix.SYS_SETRESUID: "setresuid(1234): operation not permitted (still root)",
		unix.SYS_PRCTL:     "prctl(PR_SET_KEEPCAPS): operation not permitted (unchanged)",
	} {
		allThreadsSyscall = func(tr, a1, a2, a3 uintptr) (uintptr, uintptr, syscall.Errno) {
			if tr == trap {
				return 0, 0, syscall.EPERM
			}
			return 0, 0, 0
		}
		if _, err := a.Drop(unix.CAP_PERFMON); err == nil || err.Error() != want {
			t.Errorf("%d failing: %v, want %s", trap, err, want)
		}
	}
	allThreadsSyscall = func(tr, a1, a2, a3 uintptr) (uintptr, uintptr, syscall.Errno) {
		if tr == unix.SYS_PRCTL && a1 == unix.PR_SET_NO_NEW_PRIVS {
			return 0, 0, syscall.EPERM
		}
		return 0, 0, 0
	}
	if _, err := a.Drop(unix.CAP_PERFMON); err == nil || err.Error() != "prctl(PR_SET_NO_NEW_PRIVS): operation not permitted" {
		t.Errorf("no_new_privs failing: %v", err)
	}
	allThreadsSyscall = func(uintptr, uintptr, uintptr, uintptr) (uintptr, uintptr, syscall.Errno) {
		return ^uintptr(0), ^uintptr(0), syscall.ENOTSUP
	}
	if _, err := a.Drop(unix.CAP_PERFMON); err == nil || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
		t.Errorf("a cgo build: %v", err)
	}
}

func TestReadThreads(t *testing.T) {
	threads, err := ReadThreads(0)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := threads[syscall.Gettid()]; !ok || len(threads) < 2 {
		t.Errorf("threads %v lack this one (%d), or the runtime's others", slices.Sorted(maps.Keys(threads)), syscall.Gettid())
	}
	for tid, st := range threads {
		if st.UIDs[1] != os.Geteuid() {
			t.Errorf("thread %d: uids %v, want effective %d", tid, st.UIDs, os.Geteuid())
		}
	}
}

func TestDropped(t *testing.T) {
	a := Account{UID: 999, GID: 995, Groups: []int{995, 44}}
	ok := Status{UIDs: [4]int{999, 999, 999, 999}, GIDs: [4]int{995, 995, 995, 995}, Groups: []int{44, 995},
		CapEff: 1 << unix.CAP_PERFMON, CapPrm: 1 << unix.CAP_PERFMON, NoNewPrivs: true}
	if !ok.Dropped(a, unix.CAP_PERFMON) {
		t.Error("Dropped = false for the expected credentials")
	}
	for what, change := range map[string]func(*Status){
		"root's saved gid":      func(s *Status) { s.GIDs[2] = 0 },
		"root's group":          func(s *Status) { s.Groups = append(s.Groups, 0) },
		"an ambient CAP_SETUID": func(s *Status) { s.CapAmb = 1 << unix.CAP_SETUID },
		"no no_new_privs":       func(s *Status) { s.NoNewPrivs = false },
	} {
		s := ok
		s.Groups = slices.Clone(ok.Groups)
		change(&s)
		if s.Dropped(a, unix.CAP_PERFMON) {
			t.Errorf("Dropped ignored %s", what)
		}
	}
}

func TestDropRefusals(t *testing.T) {
	if _, err := Drop("no-such-user-here", unix.CAP_PERFMON); err == nil || !strings.Contains(err.Error(), "no-such-user-here") {
		t.Errorf("unknown user: %v", err)
	}
	if os.Geteuid() == 0 {
		if _, err := Drop("root", unix.CAP_PERFMON); err == nil || err.Error() != "user root is root" {
			t.Errorf("root: %v", err)
		}
	}
}

// ownNice is the calling thread's nice value.
func ownNice(t testing.TB) int {
	t.Helper()
	prio, err := unix.Getpriority(unix.PRIO_PROCESS, 0)
	if err != nil {
		t.Fatal(err)
	}
	return 20 - prio // the system call returns 20 - nice
}

// ownCPUs is how many CPUs the calling thread may run on.
func ownCPUs(t testing.TB) int {
	t.Helper()
	var m unix.CPUSet
	if err := unix.SchedGetaffinity(0, &m); err != nil {
		t.Fatal(err)
	}
	return m.Count()
}

// threadNices are the nice values of the process's threads, sorted.
func threadNices(t testing.TB) []int {
	t.Helper()
	var nices []int
	for _, tid := range threadIDs() {
		if prio, err := unix.Getpriority(unix.PRIO_PROCESS, tid); err == nil {
			nices = append(nices, 20-prio)
		}
	}
	slices.Sort(nices)
	return nices
}

// threadMasks are the CPUs each thread of the process may run on, by
// thread id, as a list of CPU numbers.
func threadMasks(t testing.TB) map[int]string {
	t.Helper()
	masks := map[int]string{}
	for _, tid := range threadIDs() {
		var m unix.CPUSet
		if unix.SchedGetaffinity(tid, &m) != nil {
			continue
		}
		var cpus []string
		for c := range 1024 {
			if m.IsSet(c) {
				cpus = append(cpus, fmt.Sprint(c))
			}
		}
		masks[tid] = strings.Join(cpus, " ")
	}
	return masks
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	var n int
	if _, err := fmt.Sscan(s, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// BenchmarkDrop is Drop in a process with as many threads as the agent has
// when it drops (6 at start-up with the default configuration): each
// iteration starts dropcheck, which times Drop alone. On a busy machine
// most of the time is the wait for a CPU, once per all-thread call, and
// the mean hides the tail: the median, p90 and worst drop are reported
// too. Run it with -benchtime 100x or more, beside a competing load.
func BenchmarkDrop(b *testing.B) {
	testneed.Root(b, "to drop privileges")
	testneed.User(b, "nobody")
	bin := testexec.BuildTemp(b, "./internal/dropcheck", "dropcheck")
	var drops []time.Duration
	for b.Loop() {
		out, err := exec.Command(bin, "-threads", "3", "nobody").CombinedOutput()
		if err != nil {
			b.Fatalf("dropcheck: %v\n%s", err, out)
		}
		var ns int64
		var threads int
		i := strings.Index(string(out), "drop took ")
		if i < 0 {
			b.Fatalf("dropcheck output:\n%s", out)
		}
		if _, err := fmt.Sscanf(string(out[i:]), "drop took %d ns on %d threads", &ns, &threads); err != nil {
			b.Fatalf("dropcheck output: %v\n%s", err, out)
		}
		drops = append(drops, time.Duration(ns))
	}
	var total time.Duration
	for _, d := range drops {
		total += d
	}
	slices.Sort(drops)
	at := func(q float64) float64 { return float64(drops[int(q*float64(len(drops)-1))].Nanoseconds()) }
	b.ReportMetric(float64(total.Nanoseconds())/float64(len(drops)), "drop-ns/op")
	b.ReportMetric(at(0.5), "p50-drop-ns")
	b.ReportMetric(at(0.9), "p90-drop-ns")
	b.ReportMetric(at(1), "max-drop-ns")
	b.ReportMetric(float64(dropCallCount+restoreCallCount), "all-thread-calls")
}

// putBack makes the boost's restoring calls, setpriority and
// sched_setaffinity of the calling thread, on every thread by its id.
func putBack(trap, a1, a2, a3 uintptr) {
	for _, tid := range threadIDs() {
		switch trap {
		case unix.SYS_SETPRIORITY:
			unix.Syscall(trap, a1, uintptr(tid), a3)
		case unix.SYS_SCHED_SETAFFINITY:
			unix.RawSyscall(trap, uintptr(tid), a2, a3)
		}
	}
}

// threadIDs are the ids of the process's threads, read afresh.
func threadIDs() []int {
	tids, _ := taskIDs(procDir(0))
	return tids
}

// A thread whose nice value differs from the caller's before Drop has its
// own back afterwards; the others have the caller's.
func TestDropPutsBackOwnNice(t *testing.T) {
	testneed.Root(t, "as Drop refuses to start otherwise")
	real := allThreadsSyscall
	t.Cleanup(func() { allThreadsSyscall = real })
	allThreadsSyscall = func(trap, a1, a2, a3 uintptr) (uintptr, uintptr, syscall.Errno) {
		putBack(trap, a1, a2, a3)
		return 0, 0, 0
	}
	nice := ownNice(t)
	started, stop := make(chan int), make(chan struct{})
	go func() {
		runtime.LockOSThread() // a thread of its own, which ends with it
		unix.Setpriority(unix.PRIO_PROCESS, 0, nice+3)
		started <- unix.Gettid()
		<-stop
	}()
	tid := <-started
	defer close(stop)
	if _, err := (Account{Name: "someone", UID: 1234, GID: 567}).Drop(unix.CAP_PERFMON); err != nil {
		t.Fatal(err)
	}
	for _, id := range threadIDs() {
		want := nice
		if id == tid {
			want = nice + 3
		}
		if p, err := unix.Getpriority(unix.PRIO_PROCESS, id); err == nil && 20-p != want {
			t.Errorf("after Drop: thread %d has nice %d, want %d", id, 20-p, want)
		}
	}
}
