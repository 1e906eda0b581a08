package lockwatch

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"perfevent/internal/testwait"
)

// A failure deadline, not a timing assertion: reaction times are measured
// by BenchmarkReactionFsnotify and BenchmarkReactionPoll.
const patience = 5 * time.Second

func nextStatus(t *testing.T, ch <-chan Status) Status {
	t.Helper()
	select {
	case st := <-ch:
		return st
	case <-time.After(patience):
		t.Fatal("no callback")
	}
	panic("unreachable")
}

func testWatcher(t *testing.T, opts Options) {
	path, lf := tempLockFile(t)
	ch := make(chan Status, 8)
	w, err := Watch(lf, opts, func(st Status) { ch <- st })
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	first := nextStatus(t, ch)
	if first.Reserved || first.Since.IsZero() {
		t.Fatalf("initial status %+v", first)
	}

	h := startHolder(t, path, false)
	st := nextStatus(t, ch)
	if !st.Reserved || !slices.Equal(st.Holders, []int{h.pid()}) || !st.Since.After(first.Since) {
		t.Fatalf("after lock: %+v, want reserved by %d", st, h.pid())
	}
	if cur := w.Current(); !sameStatus(cur, st) || cur.Since != st.Since {
		t.Errorf("Current() = %+v, last callback %+v", cur, st)
	}

	// A second holder changes the holders, not Since.
	h2 := startHolder(t, path, false)
	st2 := nextStatus(t, ch)
	want := []int{h.pid(), h2.pid()}
	slices.Sort(want)
	if !st2.Reserved || !slices.Equal(st2.Holders, want) || st2.Since != st.Since {
		t.Fatalf("second holder: %+v, want holders %v since %v", st2, want, st.Since)
	}

	h.release(t)
	if st := nextStatus(t, ch); !st.Reserved || !slices.Equal(st.Holders, []int{h2.pid()}) {
		t.Fatalf("one left: %+v", st)
	}
	h2.cmd.Process.Kill()
	h2.cmd.Wait()
	if st := nextStatus(t, ch); st.Reserved || st.Holders != nil {
		t.Fatalf("after release: %+v", st)
	}
	w.Close()
	select {
	case st := <-ch:
		t.Errorf("callback after Close: %+v", st)
	default:
	}
}

func TestWatcherHints(t *testing.T) {
	// A poll far longer than the test proves that the hints did the work.
	testWatcher(t, Options{Poll: time.Hour})
}

func TestWatcherPoll(t *testing.T) {
	testWatcher(t, Options{Poll: 10 * time.Millisecond, NoNotify: true})
}

func TestWatcherRecreatesDeletedFile(t *testing.T) {
	for _, opts := range []Options{{Poll: time.Hour}, {Poll: 10 * time.Millisecond, NoNotify: true}} {
		path, lf := tempLockFile(t)
		logs := make(chan string, 8)
		opts.Log = chanLog(logs)
		ch := make(chan Status, 8)
		w, err := Watch(lf, opts, func(st Status) { ch <- st })
		if err != nil {
			t.Fatal(err)
		}
		nextStatus(t, ch)
		os.Remove(path)
		select {
		case msg := <-logs:
			if msg != "lock file "+path+" was deleted: created it again" {
				t.Errorf("log %q", msg)
			}
		case <-time.After(patience):
			t.Fatalf("NoNotify=%v: deleted lock file not recreated", opts.NoNotify)
		}
		if fi, err := os.Lstat(path); err != nil || fi.Mode() != 0o644 {
			t.Errorf("recreated: %v, %v; want mode 0644", fi, err)
		}
		// The watch follows the new file.
		h := startHolder(t, path, false)
		if st := nextStatus(t, ch); !st.Reserved || !slices.Equal(st.Holders, []int{h.pid()}) {
			t.Fatalf("NoNotify=%v: lock on the recreated file: %+v", opts.NoNotify, st)
		}
		h.release(t)
		w.Close()
		lf.Close()
	}
}

// The watcher's thread is real-time when the process may make it one
// (root), and asks for a short slice otherwise.
func TestWatcherThreadScheduling(t *testing.T) {
	for _, rt := range []bool{true, false} {
		func() {
			defer func(old bool) { realtime = old }(realtime)
			realtime = rt
			_, w, _ := newTestWatcher(t, Options{})
			if !testwait.Until(patience, func() bool { return w.tid.Load() != 0 }) {
				t.Fatal("the watcher's thread never started")
			}
			attr, err := unix.SchedGetAttr(int(w.tid.Load()), 0)
			if err != nil {
				t.Fatal(err)
			}
			w.Close()
			wantFIFO := rt && mayBeRealtime()
			if got := attr.Policy == unix.SCHED_FIFO; got != wantFIFO {
				t.Errorf("real-time asked %v, euid %d: policy %d, want SCHED_FIFO %v", rt, unix.Geteuid(), attr.Policy, wantFIFO)
			}
			if attr.Flags&unix.SCHED_FLAG_RESET_ON_FORK == 0 {
				t.Errorf("real-time asked %v: children would inherit the policy (flags %#x)", rt, attr.Flags)
			}
			if !wantFIFO && attr.Runtime != uint64(watcherSlice) {
				t.Errorf("real-time asked %v: slice %v, want %v", rt, time.Duration(attr.Runtime), watcherSlice)
			}
		}()
	}
}

// mayBeRealtime says whether a thread of this process may make itself
// SCHED_FIFO, trying on a thread that ends with its goroutine.
func mayBeRealtime() bool {
	ok := make(chan bool)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread goes
		attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: 1}
		ok <- unix.SchedSetAttr(0, &attr, 0) == nil
	}()
	return <-ok
}

// chanLog sends each message it is given, at any level, to a channel.
type chanLog chan string

func (c chanLog) Debugf(format string, args ...any)   { c <- fmt.Sprintf(format, args...) }
func (c chanLog) Infof(format string, args ...any)    { c <- fmt.Sprintf(format, args...) }
func (c chanLog) Warningf(format string, args ...any) { c <- fmt.Sprintf(format, args...) }
func (c chanLog) Errorf(format string, args ...any)   { c <- fmt.Sprintf(format, args...) }

// readyThread waits for w's thread (Ready) and checks that it exists and
// has the policy this process may give it; what names the watcher in an
// error.
func readyThread(t *testing.T, w *Watcher, what string) {
	t.Helper()
	w.Ready()
	tid := w.tid.Load()
	if tid == 0 {
		t.Fatalf("%s: Ready returned before the watcher's thread started", what)
	}
	attr, err := unix.SchedGetAttr(int(tid), 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := mayBeRealtime(); (attr.Policy == unix.SCHED_FIFO) != want {
		t.Errorf("%s thread's policy %d, want SCHED_FIFO %v", what, attr.Policy, want)
	}
}

// A paused watcher has its thread, with the policy asked for, once Ready
// returns, and checks nothing more until Begin; a lock taken meanwhile is
// reported once it begins. Closing one that never began returns.
func TestWatcherPaused(t *testing.T) {
	for _, opts := range []Options{{Poll: time.Hour}, {Poll: 10 * time.Millisecond, NoNotify: true}} {
		path, lf := tempLockFile(t)
		ch := make(chan Status, 8)
		opts.Paused = true
		w, err := Watch(lf, opts, func(st Status) { ch <- st })
		if err != nil {
			t.Fatal(err)
		}
		if first := nextStatus(t, ch); first.Reserved {
			t.Fatalf("initial status %+v", first)
		}
		readyThread(t, w, fmt.Sprintf("NoNotify=%v: paused", opts.NoNotify))
		h := startHolder(t, path, false)
		if opts.NoNotify {
			// Three polls pass without a check: a paused watcher does not
			// look, whatever its schedule says (the lock's open is an
			// inotify event, acted on at Begin, when hints are on).
			checks := w.checks.Load()
			time.Sleep(3 * opts.Poll)
			if n := w.checks.Load(); n != checks {
				t.Errorf("NoNotify=%v: %d checks while paused", opts.NoNotify, n-checks)
			}
			select {
			case st := <-ch:
				t.Errorf("NoNotify=%v: callback while paused: %+v", opts.NoNotify, st)
			default:
			}
		}
		w.Begin()
		if st := nextStatus(t, ch); !st.Reserved || !slices.Equal(st.Holders, []int{h.pid()}) {
			t.Fatalf("NoNotify=%v: after Begin: %+v, want reserved by %d", opts.NoNotify, st, h.pid())
		}
		h.release(t)
		w.Close()

		// Never begun.
		w, err = Watch(lf, opts, func(Status) {})
		if err != nil {
			t.Fatal(err)
		}
		w.Close()
	}
}

// Prepare starts a paused watcher's thread, policy and all, before
// anything is watched: no check is made until Start, which reports a lock
// taken meanwhile as the initial Status. A watcher that is never started
// closes, paused or not.
func TestWatcherPrepared(t *testing.T) {
	path, lf := tempLockFile(t)
	w, err := Prepare(lf, Options{Poll: time.Hour, Paused: true})
	if err != nil {
		t.Fatal(err)
	}
	readyThread(t, w, "prepared")
	h := startHolder(t, path, false)
	if n := w.checks.Load(); n != 0 {
		t.Errorf("%d checks before Start", n)
	}
	ch := make(chan Status, 8)
	if err := w.Start(func(st Status) { ch <- st }); err != nil {
		t.Fatal(err)
	}
	if st := nextStatus(t, ch); !st.Reserved || !slices.Equal(st.Holders, []int{h.pid()}) {
		t.Fatalf("initial status %+v, want reserved by %d", st, h.pid())
	}
	w.Begin()
	h.release(t)
	if st := nextStatus(t, ch); st.Reserved {
		t.Fatalf("after the release: %+v", st)
	}
	closeWithin(t, w)

	for _, paused := range []bool{true, false} {
		w, err := Prepare(lf, Options{Paused: paused})
		if err != nil {
			t.Fatal(err)
		}
		if paused {
			w.Ready()
		}
		closeWithin(t, w)
	}
}

// closeWithin fails the test if w's Close does not return.
func closeWithin(t *testing.T, w *Watcher) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		w.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(patience):
		t.Fatal("Close did not return")
	}
}
