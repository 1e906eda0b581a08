package pmda

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"perfevent/internal/testlog"
)

// A message kind past RepeatBurst in a window is held back and told once,
// with its count, when the window is over; another kind is not affected.
func TestLoggerRepeats(t *testing.T) {
	var buf testlog.Buffer
	l := NewLogger(&buf, "pmdaperfevent")
	now := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	l.now = func() time.Time { return now }
	for i := range 62 {
		l.Infof("cgroups: /c%d cannot be counted: %v", i, "EMFILE")
		now = now.Add(500 * time.Millisecond)
	}
	l.Warningf("%v", "once")
	l.Warningf("%v", "once") // a kind of its own: its text
	now = now.Add(RepeatWindow)
	l.Infof("cpu %d", 1) // ends the cgroup kind's window
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != RepeatBurst+2+2 {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), RepeatBurst+4, buf.String())
	}
	for i := range RepeatBurst {
		if want := "Info: cgroups: /c" + strconv.Itoa(i) + " cannot be counted: EMFILE"; !strings.HasSuffix(lines[i], want) {
			t.Errorf("line %d: %q, want ...%q", i, lines[i], want)
		}
	}
	if b := RepeatBurst; !strings.HasSuffix(lines[b], "Warning: once") || !strings.HasSuffix(lines[b+1], "Warning: once") {
		t.Errorf("the two identical warnings: %q %q", lines[b], lines[b+1])
	}
	want := "Info: cgroups: /c61 cannot be counted: EMFILE (repeated 52 times in 60 s)"
	if !strings.HasSuffix(lines[RepeatBurst+2], want) {
		t.Errorf("summary %q, want ...%q", lines[RepeatBurst+2], want)
	}
	if !strings.HasSuffix(lines[RepeatBurst+3], "Info: cpu 1") {
		t.Errorf("last line %q", lines[RepeatBurst+3])
	}
}

// Debugf writes nothing until SetDebug(true), then a whole line at Info,
// as -D's lines always were.
func TestLoggerDebug(t *testing.T) {
	var buf testlog.Buffer
	l := NewLogger(&buf, "pmdaperfevent")
	l.now = func() time.Time { return time.Date(2026, 12, 2, 9, 0, 5, 0, time.UTC) }
	l.pid = 1234
	l.Debugf("hidden %d", 1)
	l.SetDebug(true)
	l.Debugf("cgroups: counting %s on %d descriptors", "/a", 2)
	l.SetDebug(false)
	l.Debugf("hidden %d", 2)
	want := "[Wed Dec  2 09:00:05] pmdaperfevent(1234) Info: cgroups: counting /a on 2 descriptors\n"
	if got := buf.String(); got != want {
		t.Errorf("log %q, want %q", got, want)
	}
}

// Finish tells what is held back before the closing line.
func TestLoggerRepeatsFinish(t *testing.T) {
	var buf testlog.Buffer
	l := NewLogger(&buf, "p")
	for range RepeatBurst + 3 {
		l.Infof("reopen %s", "x")
	}
	l.Finish()
	s := buf.String()
	if n := strings.Count(s, "Info: reopen x\n"); n != RepeatBurst {
		t.Errorf("%d lines written in full, want %d:\n%s", n, RepeatBurst, s)
	}
	if !strings.Contains(s, "Info: reopen x (repeated 3 times in 0 s)\n\nLog finished") {
		t.Errorf("no count before the closing line:\n%s", s)
	}
}

// Past its cap the log is closed with libpcp's footer, kept as .prev, and
// a new one starts with libpcp's header.
func TestLoggerRotates(t *testing.T) {
	path := logPath(t)
	w, f, closeLog, err := OpenLog(path, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer closeLog()
	l := NewLogger(w, "pmdaperfevent")
	l.RotateAt(f, path, 1000)
	l.Start("vm")
	for i := range 30 {
		l.Infof("%s", fmt.Sprintf("line %c of a log that grows past its cap", 'A'+i)) // distinct kinds: none held back
	}
	if l.Rotations() < 2 {
		b, _ := os.ReadFile(path)
		t.Fatalf("%d rotations, want at least 2:\n%s", l.Rotations(), b)
	}
	prev, err := os.ReadFile(path + ".prev")
	if err != nil {
		t.Fatal(err)
	}
	cur, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(prev), "Log for pmdaperfevent on vm rotated ") || !strings.Contains(string(prev), "\nLog rotated ") {
		t.Errorf(".prev has no header and footer of a rotation:\n%s", prev)
	}
	if len(prev) > 1000+200 {
		t.Errorf(".prev is %d bytes, cap 1000", len(prev))
	}
	if !strings.HasPrefix(string(cur), "Log for pmdaperfevent on vm rotated ") || !strings.HasSuffix(string(cur), "line ^ of a log that grows past its cap\n") {
		t.Errorf("the current log:\n%s", cur)
	}
}

// Each OpenLog keeps the log before it as .prev. The .prev it replaces is
// still open in the process for a moment, so that its blocks are freed
// after the start rather than during it, and then let go.
func TestOpenLogKeepsPrev(t *testing.T) {
	path := logPath(t)
	for _, line := range []string{"first start", "second start", "third start"} {
		w, _, closeLog, err := OpenLog(path, os.Stderr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintln(w, line)
		closeLog()
	}
	if b, err := os.ReadFile(path + ".prev"); err != nil || string(b) != "second start\n" {
		t.Errorf(".prev holds %q, %v; want the second start's log", b, err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "third start\n" {
		t.Errorf("the log holds %q, %v", b, err)
	}
	// The first start's log, replaced as .prev by the third, is held.
	if n := heldDeleted(t, path+".prev"); n != 1 {
		t.Fatalf("%d descriptors of a deleted %s.prev just after the start, want 1", n, path)
	}
	deadline := time.Now().Add(releasePrevAfter + 5*time.Second)
	for heldDeleted(t, path+".prev") != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the replaced .prev is still open %v after the start", releasePrevAfter+5*time.Second)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// heldDeleted counts this process's descriptors of a deleted file that was
// at path.
func heldDeleted(t *testing.T, path string) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, fd := range fds {
		if target, err := os.Readlink("/proc/self/fd/" + fd.Name()); err == nil && target == path+" (deleted)" {
			n++
		}
	}
	return n
}

// logPath is a log's path in a directory of the test's. It keeps fd 2 for
// the test's own output, which createLog points at the log, until the
// test ends.
func logPath(t *testing.T) string {
	t.Helper()
	saved, err := dupStderr()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(saved)
	return filepath.Join(t.TempDir(), "perfevent.log")
}

// dupStderr keeps a copy of fd 2 and returns what puts it back.
func dupStderr() (func(), error) {
	fd, err := unix.Dup(2)
	if err != nil {
		return nil, err
	}
	return func() { unix.Dup3(fd, 2, 0); unix.Close(fd) }, nil
}

// writes counts the Writes a Logger makes.
type writes struct {
	testlog.Buffer
	n int
}

func (w *writes) Write(b []byte) (int, error) { w.n++; return w.Buffer.Write(b) }

// The lines logged while Batch runs, nested Batches and messages held back
// included, reach the writer in one Write, the same bytes as without it.
func TestLoggerBatch(t *testing.T) {
	log := func(l *Logger, batch bool) {
		body := func() {
			l.Infof("%s", "perfevent.conf:2: cpu-clock on cpus 0-1")
			l.Batch(func() { l.Warningf("%s: %v", "nested", "x") })
			for i := range RepeatBurst + 2 {
				l.Infof("%s", "cannot open on cpu "+strconv.Itoa(i)) // one kind: the numbers do not count
			}
			l.Errorf("format %d", 7)
		}
		if batch {
			l.Batch(body)
		} else {
			body()
		}
		l.Infof("after")
	}
	var lines, batched writes
	for _, c := range []struct {
		w     *writes
		batch bool
	}{{&lines, false}, {&batched, true}} {
		l := NewLogger(c.w, "pmdaperfevent")
		l.now = func() time.Time { return time.Date(2026, 12, 2, 9, 0, 5, 0, time.UTC) }
		l.pid = 1234
		log(l, c.batch)
	}
	if lines.String() != batched.String() {
		t.Errorf("batched:\n%s\nline by line:\n%s", batched.String(), lines.String())
	}
	if want := 1 + 1 + RepeatBurst + 1 + 1; lines.n != want || batched.n != 2 {
		t.Errorf("%d writes line by line, %d batched; want %d and 2 (the batch, then \"after\")", lines.n, batched.n, want)
	}
	if !strings.Contains(lines.String(), "[Wed Dec  2 09:00:05] pmdaperfevent(1234) Warning: nested: x\n") ||
		!strings.Contains(lines.String(), "Info: cannot open on cpu 9\n[") || strings.Contains(lines.String(), "cpu 10") {
		t.Errorf("log:\n%s", lines.String())
	}
	(*Logger)(nil).Batch(func() {}) // a nil Logger runs fn
}

// kindOf makes each run of digits one '#', a '#' before it included.
func TestKindOf(t *testing.T) {
	for msg, want := range map[string]string{
		"":                "Info\x00\x00",
		"cpu 12 of 345":   "Info\x00\x00cpu # of #",
		"9x#1 #":          "Info\x00\x00#x# #",
		"a1b22c333":       "Info\x00\x00a#b#c#",
		"no digits here.": "Info\x00\x00no digits here.",
	} {
		if got := kindOf("Info", msg); got != want {
			t.Errorf("kindOf(%q) = %q, want %q", msg, got, want)
		}
	}
}

// A Batch longer than batchSize is written batchSize bytes at most at a
// time, a line longer than that by itself, in order.
func TestLoggerBatchPages(t *testing.T) {
	var lines, batched writes
	long := strings.Repeat("x", batchSize)
	for _, c := range []struct {
		w     *writes
		batch bool
	}{{&lines, false}, {&batched, true}} {
		l := NewLogger(c.w, "pmdaperfevent")
		l.now = func() time.Time { return time.Date(2026, 12, 2, 9, 0, 5, 0, time.UTC) }
		body := func() {
			for i := range 30 {
				l.Infof("%s", fmt.Sprintf("line %c %s", 'A'+i, strings.Repeat("y", 250)))
			}
			l.Infof("%s", long)
			l.Infof("last")
		}
		if c.batch {
			l.Batch(body)
		} else {
			body()
		}
	}
	if lines.String() != batched.String() {
		t.Fatalf("batched:\n%s\nline by line:\n%s", batched.String(), lines.String())
	}
	// 30 lines of 300 bytes: 13 fill a batch, then 13, then 4 are written
	// before the long line; "last" with the Batch's end.
	if lines.n != 32 || batched.n != 5 {
		t.Errorf("%d writes line by line, %d batched; want 32 and 5", lines.n, batched.n)
	}
}

// A kind is remembered by its hash: a line logged costs no copy of
// itself kept for its window, though the start-up report's lines are all
// kinds of their own, some hundreds of bytes long.
func TestLoggerKeepsNoCopyOfEachLine(t *testing.T) {
	l := NewLogger(io.Discard, "pmdaperfevent")
	msgs := make([]string, 200)
	for i := range msgs {
		// Letters only: a digit would make every line one kind.
		msgs[i] = strings.Repeat(string(rune('a'+i%26))+string(rune('a'+i/26)), 1000)
	}
	l.Infof("%s", "warm up")
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for _, m := range msgs {
		l.Infof("%s", m)
	}
	runtime.ReadMemStats(&after)
	if len(l.repeats) != len(msgs)+1 {
		t.Fatalf("%d kinds remembered, want %d", len(l.repeats), len(msgs)+1)
	}
	if per := (after.TotalAlloc - before.TotalAlloc) / uint64(len(msgs)); per > 500 {
		t.Errorf("a line of %d bytes allocated %d bytes, want at most 500: its kind is kept as a copy", len(msgs[0]), per)
	}
}
