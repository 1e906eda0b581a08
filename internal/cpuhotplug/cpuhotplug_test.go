package cpuhotplug

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"perfevent/internal/hostfs"
	"perfevent/internal/testlog"
	"perfevent/internal/testwait"
)

// fakeOnline is a sysfs with only the list of online CPUs, and its path.
func fakeOnline(t *testing.T, list string) (hostfs.FS, string) {
	t.Helper()
	fs := hostfs.FS{Sys: t.TempDir()}
	path := fs.OnlineFile()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(list+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return fs, path
}

type recorder struct {
	mu    sync.Mutex
	calls [][]int
	log   testlog.Recorder
	c     chan struct{}
}

func newRecorder() *recorder { return &recorder{c: make(chan struct{}, 10)} }

func (r *recorder) changed(cpus []int) {
	r.mu.Lock()
	r.calls = append(r.calls, cpus)
	r.mu.Unlock()
	r.c <- struct{}{}
}

func (r *recorder) wait(t *testing.T, want []int) {
	t.Helper()
	select {
	case <-r.c:
	case <-time.After(testwait.Settle):
		t.Fatalf("no callback within %v; want %v", testwait.Settle, want)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if got := r.calls[len(r.calls)-1]; !slices.Equal(got, want) {
		t.Fatalf("callback with %v, want %v", got, want)
	}
}

func (r *recorder) quiet(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case <-r.c:
		t.Fatalf("an unexpected callback: %v", r.calls)
	case <-time.After(d):
	}
}

func TestCheckReportsChangesOnly(t *testing.T) {
	fs, path := fakeOnline(t, "0-3")
	r := newRecorder()
	w := Watch([]int{0, 1, 2, 3}, Options{FS: fs, Poll: time.Hour, NoUevent: true, Log: &r.log}, r.changed)
	defer w.Close()
	r.quiet(t, 3*settle) // the first check finds what the caller planned from

	os.WriteFile(path, []byte("0,2-3\n"), 0o644)
	w.Check()
	r.wait(t, []int{0, 2, 3})
	w.Check()
	r.quiet(t, 3*settle)

	os.WriteFile(path, []byte("0-3\n"), 0o644)
	w.Check()
	r.wait(t, []int{0, 1, 2, 3})
}

// A change before Watch (between planning the counters and watching) is
// reported by the first check.
func TestChangeBeforeWatch(t *testing.T) {
	fs, _ := fakeOnline(t, "0-1")
	r := newRecorder()
	w := Watch([]int{0}, Options{FS: fs, Poll: time.Hour, NoUevent: true}, r.changed)
	defer w.Close()
	r.wait(t, []int{0, 1})
}

// Without uevents (or when one is lost) the poll finds the change.
func TestPollFindsTheChange(t *testing.T) {
	fs, path := fakeOnline(t, "0-1")
	r := newRecorder()
	w := Watch([]int{0, 1}, Options{FS: fs, Poll: 20 * time.Millisecond, NoUevent: true}, r.changed)
	defer w.Close()
	os.WriteFile(path, []byte("0\n"), 0o644)
	r.wait(t, []int{0})
}

// An unreadable or garbled list is logged once and changes nothing.
func TestBadListIsLoggedOnce(t *testing.T) {
	fs, path := fakeOnline(t, "0-1")
	r := newRecorder()
	w := Watch([]int{0, 1}, Options{FS: fs, Poll: 10 * time.Millisecond, NoUevent: true, Log: &r.log}, r.changed)
	os.WriteFile(path, []byte("0-x\n"), 0o644)
	r.quiet(t, 200*time.Millisecond)
	w.Close()
	r.mu.Lock()
	defer r.mu.Unlock()
	if logs := r.log.Lines(); len(logs) != 1 || !strings.HasPrefix(logs[0], "Warning: CPU hotplug: "+path+": ") || !strings.HasSuffix(logs[0], "; keeping the CPUs as they were") {
		t.Errorf("log %q; want one warning naming %s", logs, path)
	}
}

// Close stops the callbacks, and a real uevent socket (which any user may
// open) is closed with it.
func TestCloseWithUevents(t *testing.T) {
	fs, path := fakeOnline(t, "0")
	r := newRecorder()
	w := Watch([]int{0}, Options{FS: fs, Poll: time.Hour, Log: &r.log}, r.changed)
	if w.sock == nil {
		t.Logf("no uevent socket here: %v", r.log.Lines())
	}
	done := make(chan struct{})
	go func() { w.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(testwait.Settle):
		t.Fatalf("Close did not return within %v", testwait.Settle)
	}
	os.WriteFile(path, []byte("0-1\n"), 0o644)
	w.Check()
	r.quiet(t, 3*settle)
}

func TestIsCPUEvent(t *testing.T) {
	msg := func(fields ...string) []byte { return []byte(strings.Join(fields, "\x00") + "\x00") }
	for _, tc := range []struct {
		msg  []byte
		want bool
	}{
		{msg("offline@/devices/system/cpu/cpu1", "ACTION=offline", "DEVPATH=/devices/system/cpu/cpu1", "SUBSYSTEM=cpu", "SEQNUM=826"), true},
		{msg("online@/devices/system/cpu/cpu1", "ACTION=online", "DEVPATH=/devices/system/cpu/cpu1", "SUBSYSTEM=cpu"), true},
		// Sent around the same change, but not about the CPU itself.
		{msg("remove@/devices/virtual/cpuid/cpu1", "ACTION=remove", "SUBSYSTEM=cpuid"), false},
		{msg("add@/devices/system/cpu/cpu1", "ACTION=add", "SUBSYSTEM=cpu"), false},
		{msg("change@/devices/virtual/net/lo", "ACTION=change", "SUBSYSTEM=net"), false},
		{nil, false},
	} {
		if got := IsCPUEvent(tc.msg); got != tc.want {
			t.Errorf("IsCPUEvent(%q) = %v", tc.msg, got)
		}
	}
}

// While uevents work the poll is only a safety net; without them it is how
// a change is found.
func TestDefaultPoll(t *testing.T) {
	fs, _ := fakeOnline(t, "0")
	r := newRecorder()
	w := Watch([]int{0}, Options{FS: fs, Log: &r.log}, r.changed)
	defer w.Close()
	if w.sock == nil {
		t.Skipf("needs a uevent socket: %v", r.log.Lines())
	}
	if w.quiet != UeventPoll || w.opts.Poll != DefaultPoll {
		t.Errorf("poll %v with uevents, %v without; want %v and %v", w.quiet, w.opts.Poll, UeventPoll, DefaultPoll)
	}
}
