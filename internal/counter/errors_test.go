package counter

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"perfevent/internal/hostfs"
)

func TestOpenErrorClassification(t *testing.T) {
	fs := hostfs.FS{Proc: t.TempDir()}
	p := fs.ParanoidFile()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	oldLimit := getFileLimit
	getFileLimit = func() (uint64, uint64, error) { return 1024, 524288, nil }
	t.Cleanup(func() { getFileLimit = oldLimit })

	wrapped := fmt.Errorf("opening: %w", unix.EBUSY)
	for _, tc := range []struct {
		err    error
		kind   Kind
		errno  unix.Errno
		advice string
	}{
		{unix.EACCES, Permission, unix.EACCES, "permission denied: kernel.perf_event_paranoid is 3 (see " + p + "); run as root or grant CAP_PERFMON"},
		{unix.EPERM, Permission, unix.EPERM, "permission denied: kernel.perf_event_paranoid is 3 (see " + p + "); run as root or grant CAP_PERFMON"},
		{unix.EOPNOTSUPP, Unsupported, unix.EOPNOTSUPP, "not supported on this machine (e.g. a VM without a hardware PMU)"},
		{unix.ENOENT, Unsupported, unix.ENOENT, "not supported on this machine (e.g. a VM without a hardware PMU)"},
		{unix.ENODEV, CPUOffline, unix.ENODEV, "CPU 7 is offline"},
		{unix.EMFILE, DescriptorLimit, unix.EMFILE, "descriptor limit reached (RLIMIT_NOFILE soft=1024, hard=524288)"},
		{unix.ENFILE, DescriptorLimit, unix.ENFILE, "descriptor limit reached (RLIMIT_NOFILE soft=1024, hard=524288)"},
		{unix.EINVAL, InvalidEncoding, unix.EINVAL, "invalid event encoding for this kernel/PMU"},
		{wrapped, Busy, unix.EBUSY, "the PMU is busy (another user holds exclusive counters)"},
		{unix.E2BIG, Other, unix.E2BIG, "argument list too long"},
		{errors.New("fake trouble"), Other, 0, "fake trouble"},
	} {
		e := NewOpenError(fs, "ev", 7, tc.err)
		if e.Kind != tc.kind || e.Errno != tc.errno || e.Advice != tc.advice || e.Event != "ev" || e.CPU != 7 {
			t.Errorf("NewOpenError(%v) = kind %v errno %v advice %q, want %v %v %q", tc.err, e.Kind, e.Errno, e.Advice, tc.kind, tc.errno, tc.advice)
		}
		if !errors.Is(e, tc.err) {
			t.Errorf("NewOpenError(%v) does not unwrap to its cause", tc.err)
		}
	}

	e := NewOpenError(fs, "cycles", 1, unix.ENOENT)
	if got, want := e.Error(), `perf_event_open failed on cpu1 for "cycles": not supported on this machine (e.g. a VM without a hardware PMU) (ENOENT)`; got != want {
		t.Errorf("Error() = %q\nwant      %q", got, want)
	}

	os.Remove(p)
	if got := NewOpenError(fs, "ev", 0, unix.EACCES).Advice; got != "permission denied: kernel.perf_event_paranoid is unreadable (see "+p+"); run as root or grant CAP_PERFMON" {
		t.Errorf("advice without the sysctl: %q", got)
	}
	getFileLimit = func() (uint64, uint64, error) { return 0, 0, errors.New("no limits here") }
	if got := NewOpenError(fs, "ev", 0, unix.EMFILE).Advice; got != "descriptor limit reached (RLIMIT_NOFILE unknown: no limits here)" {
		t.Errorf("advice without getrlimit: %q", got)
	}
}

func TestKindString(t *testing.T) {
	if Unsupported.String() != "unsupported" || Kind(99).String() != "Kind(99)" {
		t.Errorf("Kind names: %q %q", Unsupported, Kind(99))
	}
}

func TestRaiseFileLimit(t *testing.T) {
	var before unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &before); err != nil {
		t.Fatal(err)
	}
	// Lower the soft limit so that there is something to raise; the test
	// binary's own limits are restored afterwards.
	if before.Max > 64 {
		low := unix.Rlimit{Cur: 64, Max: before.Max}
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &low); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Setrlimit(unix.RLIMIT_NOFILE, &before) })
	}
	soft, hard, err := RaiseFileLimit()
	if err != nil {
		t.Fatal(err)
	}
	var now unix.Rlimit
	unix.Getrlimit(unix.RLIMIT_NOFILE, &now)
	if soft != hard || hard != before.Max || now.Cur != soft {
		t.Errorf("RaiseFileLimit = %d/%d, now %d/%d; want soft = hard = %d", soft, hard, now.Cur, now.Max, before.Max)
	}
}

// Classifying the kernel's bare errno allocates nothing: a refused event
// is classified on every CPU, thousands of times at a start.
func TestClassifyErrnoAllocatesNothing(t *testing.T) {
	var err error = unix.ENOENT
	if n := testing.AllocsPerRun(10, func() { Classify(err) }); n != 0 {
		t.Errorf("Classify(ENOENT) makes %v objects, want 0", n)
	}
}

// FailureLines groups by event and cause whatever the order of the
// failures: a cause that comes back after another keeps its first line,
// with every CPU it failed on, in the order they came.
func TestFailureLinesInterleaved(t *testing.T) {
	fs := hostfs.Default()
	enoent, ebusy := NewOpenError(fs, "a", 0, unix.ENOENT), NewOpenError(fs, "a", 1, unix.EBUSY)
	sum := Summary{Failures: []Failure{
		{enoent, []int{0}},
		{ebusy, []int{1}},
		{enoent, []int{2, 3}},
		{NewOpenError(fs, "b", 0, unix.ENOENT), []int{0}},
		{NewOpenError(fs, "a", 5, unix.ENOENT), []int{5}},
		{ebusy, []int{4}},
	}}
	want := []string{
		`perf_event_open failed for "a" on cpus 0,2-3,5: not supported on this machine (e.g. a VM without a hardware PMU) (ENOENT)`,
		`perf_event_open failed for "a" on cpus 1,4: the PMU is busy (another user holds exclusive counters) (EBUSY)`,
		`perf_event_open failed for "b" on cpu0: not supported on this machine (e.g. a VM without a hardware PMU) (ENOENT)`,
	}
	if got := sum.FailureLines(); !slices.Equal(got, want) {
		t.Errorf("FailureLines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
