package lockwatch

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"perfevent/internal/reservation"
	"perfevent/internal/reservation/inotify"
	"perfevent/internal/testwait"
)

// helperOpen opens the file without locking it and says "opened"; on a
// line "lock" from stdin it takes a read lock through that descriptor and
// says "locked"; it exits when stdin ends.
func helperOpen(path string) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	fmt.Println("opened")
	helperLockOnCommand(fd)
}

// helperFork opens the file, hands the descriptor to a child (the test
// binary again) that shares its stdin and stdout, closes its own copy, says
// "forked PID" and exits: the open file description lives on in the child
// alone, and the child locks it later without opening anything.
func helperFork(path string) {
	f, err := os.Open(path)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	cmd := helperCommand("inherited", path) // the lock file comes as fd 3
	cmd.Stdin, cmd.Stdout = os.Stdin, os.Stdout
	cmd.ExtraFiles = []*os.File{f}
	if err := cmd.Start(); err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	f.Close()
	fmt.Println("forked", cmd.Process.Pid)
	os.Exit(0)
}

// helperLockOnCommand takes a read lock on fd when stdin says "lock",
// answering "locked", and exits at the end of stdin.
func helperLockOnCommand(fd int) {
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if in.Text() != "lock" {
			continue
		}
		lk := unix.Flock_t{Type: unix.F_RDLCK, Start: 0, Len: 1}
		if err := unix.FcntlFlock(uintptr(fd), unix.F_SETLK, &lk); err != nil {
			fmt.Println("error:", err)
			os.Exit(2)
		}
		fmt.Println("locked")
	}
	os.Exit(0)
}

// opener is a helper process started in mode "open" or "fork".
type opener struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
	pid   int // the process that holds the descriptor
}

func startOpener(t *testing.T, path, mode string) *opener {
	t.Helper()
	cmd := helperCommand(mode, path)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	// Our own pipe rather than StdoutPipe: Wait on a forking helper must
	// not close it while the child still writes.
	r, wr, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = wr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	wr.Close()
	o := &opener{cmd: cmd, stdin: stdin, out: bufio.NewReader(r), pid: cmd.Process.Pid}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Wait()
		r.Close()
	})
	line := o.line(t)
	switch {
	case mode == "open" && line == "opened":
	case mode == "fork" && strings.HasPrefix(line, "forked "):
		o.pid, err = strconv.Atoi(strings.TrimPrefix(line, "forked "))
		if err != nil {
			t.Fatalf("helper said %q", line)
		}
		// Reap the parent; cmd.Wait would also close the child's stdin.
		cmd.Process.Wait()
	default:
		t.Fatalf("helper %s did not open %s: %q", mode, path, line)
	}
	return o
}

func (o *opener) line(t *testing.T) string {
	t.Helper()
	line, err := o.out.ReadString('\n')
	if err != nil {
		t.Fatalf("helper: %q %v", line, err)
	}
	return strings.TrimSpace(line)
}

func (o *opener) lock(t *testing.T) {
	t.Helper()
	fmt.Fprintln(o.stdin, "lock")
	if line := o.line(t); line != "locked" {
		t.Fatalf("helper did not lock: %q", line)
	}
}

// exit ends the helper (and, for "fork", its child) and waits until the
// descriptor is gone: the end of its stdout.
func (o *opener) exit(t *testing.T) {
	t.Helper()
	o.stdin.Close()
	if rest, _ := io.ReadAll(o.out); len(rest) > 0 {
		t.Fatalf("helper said %q", rest)
	}
	if o.cmd.ProcessState == nil && o.pid == o.cmd.Process.Pid {
		o.cmd.Wait() // all its descriptors closed
	}
}

// reserve has the helper lock through the descriptor it holds, and checks
// that the watcher reports the reservation by that process.
func (o *opener) reserve(t *testing.T, ch <-chan Status) {
	t.Helper()
	o.lock(t)
	if st := nextStatus(t, ch); !st.Reserved || !slices.Equal(st.Holders, []int{o.pid}) {
		t.Fatalf("after the helper's lock: %+v, want reserved by %d", st, o.pid)
	}
}

// release ends the helper and checks that the watcher reports the end of
// the reservation.
func (o *opener) release(t *testing.T, ch <-chan Status) {
	t.Helper()
	o.exit(t)
	if st := nextStatus(t, ch); st.Reserved {
		t.Fatalf("after exit: %+v", st)
	}
}

// waitInterval waits until the watcher's poll interval is want.
func waitInterval(t *testing.T, w *Watcher, want time.Duration, why string) {
	t.Helper()
	if !testwait.Until(patience, func() bool { return w.poll() == want }) {
		t.Fatalf("%s: poll interval %v, want %v", why, w.poll(), want)
	}
}

// poll is the interval the watcher chose after its last check.
func (w *Watcher) poll() time.Duration { return time.Duration(w.pace.Load()) }

// waitChecks waits until the watcher has made n more checks. At a 10 ms
// poll that takes n polls; at the slow interval (an hour) or the unsure
// one (a second) it does not happen within patience. How many checks a
// window of time holds is not asked: on a busy machine, or when the test
// process stalls, the watcher's thread can miss hundreds of milliseconds
// (CI saw 2 checks where 50 were due), and its pace is a matter for the
// benchmarks, the choice of interval for the schedule tests.
func waitChecks(t *testing.T, w *Watcher, n int64, why string) {
	t.Helper()
	before := w.checks.Load()
	if !testwait.Until(patience, func() bool { return w.checks.Load()-before >= n }) {
		t.Fatalf("%s: %d checks in %v, want %d", why, w.checks.Load()-before, patience, n)
	}
}

// tempLockFile opens a fresh lock file, closed when the test ends.
func tempLockFile(t testing.TB) (string, *reservation.LockFile) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "perflock")
	lf, err := reservation.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lf.Close() })
	return path, lf
}

func newTestWatcher(t *testing.T, opts Options) (string, *Watcher, chan Status) {
	t.Helper()
	path, lf := tempLockFile(t)
	ch := make(chan Status, 8)
	w, err := Watch(lf, opts, func(st Status) { ch <- st })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	if st := nextStatus(t, ch); st.Reserved {
		t.Fatalf("initial status %+v", st)
	}
	return path, w, ch
}

// A descriptor handed on at fork and exec keeps its open file description,
// so the count stays up and the child's lock is seen at the fast pace.
func TestWatcherForkedChildLocksLater(t *testing.T) {
	fast, slow := 10*time.Millisecond, 300*time.Millisecond
	path, w, ch := newTestWatcher(t, Options{Poll: fast, OpenPoll: fast, IdlePoll: slow})
	waitInterval(t, w, slow, "nobody else has the file open")

	o := startOpener(t, path, "fork")
	waitInterval(t, w, fast, "the forked child has the file open")
	o.reserve(t, ch)
	o.release(t, ch)
	waitInterval(t, w, slow, "the child exited")
}

func TestWatcherNoNotifyPollsFast(t *testing.T) {
	fast := 10 * time.Millisecond
	_, w, _ := newTestWatcher(t, Options{Poll: fast, IdlePoll: time.Hour, NoNotify: true})
	if got := w.poll(); got != fast {
		t.Errorf("poll interval %v, want %v", got, fast)
	}
	waitChecks(t, w, 10, "no inotify")
}

func TestWatcherRecreatedFileCountsAfresh(t *testing.T) {
	fast, slow := 10*time.Millisecond, time.Hour
	path, w, ch := newTestWatcher(t, Options{Poll: fast, OpenPoll: fast, IdlePoll: slow})
	o := startOpener(t, path, "open") // of the file about to be deleted
	waitInterval(t, w, fast, "a helper has the file open")
	dev, ino := w.lf.Identity()
	os.Remove(path)
	testwait.Eventually(t, patience, "the deleted lock file to be recreated", func() bool {
		d, i := w.lf.Identity()
		return d != dev || i != ino
	})
	// The helper keeps the old file open, which no longer matters.
	waitInterval(t, w, slow, "nobody has the new file open")
	o.exit(t)

	o = startOpener(t, path, "open")
	waitInterval(t, w, fast, "a helper has the new file open")
	o.reserve(t, ch) // on the recreated file
}

func TestUsersEvents(t *testing.T) {
	u := users{gen: 1, known: true}
	u.event(inotify.Event{Mask: unix.IN_OPEN, Gen: 1})
	u.event(inotify.Event{Mask: unix.IN_CLOSE_NOWRITE, Gen: 1})
	if !u.idle() {
		t.Fatal("open and close: not idle")
	}
	u.event(inotify.Event{Mask: unix.IN_OPEN, Gen: 2}) // another file's watch
	if !u.idle() {
		t.Fatal("an open of another generation counted")
	}
	u.event(inotify.Event{Mask: unix.IN_Q_OVERFLOW})
	if u.idle() {
		t.Fatal("overflow: still idle")
	}
	u = users{gen: 1, known: true}
	u.event(inotify.Event{Mask: unix.IN_CLOSE_WRITE, Gen: 1})
	if u.idle() {
		t.Fatal("a close never opened: still idle")
	}
	u = users{gen: 1, known: true}
	u.event(inotify.Event{Mask: unix.IN_OPEN, Gen: 1})
	if u.idle() || u.verify {
		t.Fatal("after an open: idle, or a probe asked for")
	}
	u.event(inotify.Event{Mask: unix.IN_CLOSE_NOWRITE, Gen: 1})
	if !u.idle() || !u.verify {
		t.Fatal("back to 0: not idle, or no probe asked for")
	}
}
