package pmda

import (
	"fmt"
	"hash/maphash"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"perfevent/internal/logging"
)

var _ logging.Logger = (*Logger)(nil)

// Logger writes lines in libpcp's format,
//
//	[Wed Dec  2 12:34:56] pmdaperfevent(1234) Info: message
//
// to one writer, usually the agent's log file (PCP agents log to stderr,
// which pmcd points at pmcd.log unless the agent reopens it). It is safe
// for concurrent use.
//
// A message that keeps coming back is held back: each kind (its format,
// or its text but for numbers when the format is only verbs) is written at most
// RepeatBurst times per RepeatWindow, and the rest are counted and told
// in one line when the window ends. A log file it opened itself
// (RotateAt) is rotated at a size. Debugf writes only after SetDebug(true).
type Logger struct {
	mu   sync.Mutex
	w    io.Writer
	prog string
	host string
	pid  int
	now  func() time.Time
	buf  []byte

	// repeats are the kinds' windows, by a hash of the kind: the kind of
	// a report line is as long as the line, and every line of the
	// start-up report is a kind of its own, so a string key kept a copy
	// of the whole report. kind is where a kind is written to be hashed.
	repeats map[uint64]*repeat
	seed    maphash.Seed
	kind    []byte
	held    int         // repeats with messages held back
	timer   *time.Timer // tells the held-back counts when their window ends

	// Rotation, when RotateAt enabled it: the file, its path, its size
	// so far and the size that starts a new one.
	file      *os.File
	path      string
	size, max int64
	rotateErr error
	rotations int

	debug bool // Debugf writes

	// batch holds the lines written while Batch runs, up to batchSize
	// bytes a write.
	batch    []byte
	batching int
}

// A message kind's RepeatBurst lines in a RepeatWindow are written; the
// rest of that window's are counted. Ten a minute lets a perfalloc user's
// few reservations each be told, and keeps a loop of them to one line.
const (
	RepeatBurst  = 10
	RepeatWindow = time.Minute
)

// maxKinds bounds the kinds remembered: past it, those with nothing held
// back are forgotten.
const maxKinds = 1024

// repeat is one message kind's window.
type repeat struct {
	start time.Time
	n     int    // messages in the window, written or not
	held  int    // of those, not written
	level string // the last one held back
	last  string
}

// NewLogger returns a Logger that tags lines with prog (e.g.
// "pmdaperfevent") and this process's id.
func NewLogger(w io.Writer, prog string) *Logger {
	return &Logger{w: w, prog: prog, pid: os.Getpid(), now: time.Now, repeats: map[uint64]*repeat{}, seed: maphash.MakeSeed()}
}

// Start writes the header libpcp's pmOpenLog writes when a log is opened:
//
//	Log for pmdaperfevent on HOST started Wed Dec  2 12:34:56 2026
//
// followed by a blank line.
func (l *Logger) Start(host string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.host = host
	b := append(l.buf[:0], "Log for "...)
	b = append(b, l.prog...)
	b = append(b, " on "...)
	b = append(b, host...)
	b = append(b, " started "...)
	b = l.now().AppendFormat(b, dateFormat)
	b = append(b, "\n\n"...)
	l.buf = b
	l.write(b)
}

const dateFormat = "Mon Jan _2 15:04:05 2006"

// Finish tells what is held back and writes libpcp's closing line, "Log
// finished <date>".
func (l *Logger) Finish() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
	l.tellHeld(true)
	l.write(fmt.Appendf(nil, "\nLog finished %s\n", l.now().Format(dateFormat)))
}

// Infof, Warningf and Errorf write one line at their level; a trailing
// newline in the message is dropped.
func (l *Logger) Infof(format string, args ...any)    { l.logf("Info", format, args...) }
func (l *Logger) Warningf(format string, args ...any) { l.logf("Warning", format, args...) }
func (l *Logger) Errorf(format string, args ...any)   { l.logf("Error", format, args...) }

// Debugf writes, once SetDebug(true) asked for it, one line at Info: the
// agent's -D adds lines to its log, as it always has, without a level of
// their own.
func (l *Logger) Debugf(format string, args ...any) {
	l.mu.Lock()
	on := l.debug
	l.mu.Unlock()
	if on {
		l.logf("Info", format, args...)
	}
}

// SetDebug says whether Debugf writes.
func (l *Logger) SetDebug(on bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.debug = on
}

// Batch runs fn and writes the lines it logs (from any goroutine) a page
// at a time, the rest when it returns: the agent's start-up report is
// tens of lines, each a system call of its own otherwise. fn must not
// wait for another goroutine that logs; lines are written as they come
// again after it.
func (l *Logger) Batch(fn func()) {
	if l == nil {
		fn()
		return
	}
	l.mu.Lock()
	l.batching++
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.batching--; l.batching == 0 {
			l.flushBatch()
		}
	}()
	fn()
}

// logf writes the whole line in one Write so that concurrent writers to a
// shared file (pmcd.log) do not interleave within a line.
func (l *Logger) logf(level, format string, args ...any) {
	var msg string
	if s, ok := onlyString(format, args); ok {
		msg = s // what Sprintf would make of it, without the copy
	} else {
		msg = fmt.Sprintf(format, args...)
	}
	for len(msg) > 0 && msg[len(msg)-1] == '\n' {
		msg = msg[:len(msg)-1]
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if onlyVerbs(format) {
		l.kind = appendKind(l.kind[:0], level, msg)
	} else {
		l.kind = append(append(append(l.kind[:0], level...), 0), format...)
	}
	key := maphash.Bytes(l.seed, l.kind)
	now := l.now()
	l.tellHeld(false)
	r := l.repeats[key]
	if r == nil || now.Sub(r.start) >= RepeatWindow {
		if r == nil {
			if len(l.repeats) >= maxKinds {
				l.forget()
			}
			r = &repeat{}
			l.repeats[key] = r
		}
		r.start, r.n = now, 0
	}
	r.n++
	if r.n > RepeatBurst {
		if r.held == 0 {
			l.held++
			l.armTimer(r.start.Add(RepeatWindow).Sub(now))
		}
		r.held++
		r.level, r.last = level, msg
		return
	}
	l.line(level, msg)
}

// onlyString returns the one argument of format "%s" when it is a string:
// the agent's report lines are logged so.
func onlyString(format string, args []any) (string, bool) {
	if format != "%s" || len(args) != 1 {
		return "", false
	}
	s, ok := args[0].(string)
	return s, ok
}

// kindOf is the repeat kind of a message whose format is only verbs: its
// level and its text with each run of digits made one '#' (messages built
// before they are logged differ only there when they are the same
// message: durations, counts, pids).
func kindOf(level, msg string) string { return string(appendKind(nil, level, msg)) }

// appendKind appends the kind of msg at level (kindOf) to b.
func appendKind(b []byte, level, msg string) []byte {
	b = append(append(b, level...), 0, 0)
	last := byte(0)
	for i := 0; i < len(msg); i++ {
		c := msg[i]
		if c >= '0' && c <= '9' {
			c = '#'
			if last == '#' {
				continue
			}
		}
		b = append(b, c)
		last = c
	}
	return b
}

// line writes one log line; the caller holds l.mu.
func (l *Logger) line(level, msg string) {
	b := l.buf[:0]
	b = append(b, '[')
	b = l.now().AppendFormat(b, "Mon Jan _2 15:04:05")
	b = append(b, "] "...)
	b = append(b, l.prog...)
	b = append(b, '(')
	b = strconv.AppendInt(b, int64(l.pid), 10)
	b = append(b, ") "...)
	b = append(b, level...)
	b = append(b, ": "...)
	b = append(b, msg...)
	b = append(b, '\n')
	l.buf = b
	l.write(b)
}

// tellHeld writes, for each kind whose window is over (all of them if
// all), the last message held back with how many were; the caller holds
// l.mu.
func (l *Logger) tellHeld(all bool) {
	if l.held == 0 {
		return
	}
	now := l.now()
	for key, r := range l.repeats {
		if r.held == 0 || (!all && now.Sub(r.start) < RepeatWindow) {
			continue
		}
		secs := int(now.Sub(r.start).Round(time.Second) / time.Second)
		if secs > int(RepeatWindow/time.Second) {
			secs = int(RepeatWindow / time.Second)
		}
		l.line(r.level, fmt.Sprintf("%s (repeated %d times in %d s)", r.last, r.held, secs))
		r.held = 0
		l.held--
		if !all {
			delete(l.repeats, key)
		}
	}
}

// forget drops the kinds with nothing held back; the caller holds l.mu.
func (l *Logger) forget() {
	for key, r := range l.repeats {
		if r.held == 0 {
			delete(l.repeats, key)
		}
	}
}

// armTimer has the held-back counts told after d even if nothing else is
// logged by then; the caller holds l.mu.
func (l *Logger) armTimer(d time.Duration) {
	if l.timer != nil {
		return
	}
	l.timer = time.AfterFunc(d, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.timer = nil
		l.tellHeld(false)
		if l.held > 0 {
			l.armTimer(RepeatWindow / 4)
		}
	})
}

// onlyVerbs says that format has nothing but verbs, spaces and
// punctuation ("%v", "%s: %v"), so that its kind is its text.
func onlyVerbs(format string) bool {
	for i := 0; i < len(format); i++ {
		c := format[i]
		switch {
		case c == '%':
			i++
			for i < len(format) && strings.IndexByte("+-# 0123456789.", format[i]) >= 0 {
				i++
			}
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
			return false
		}
	}
	return true
}

// write writes b and rotates the file when it has grown past its cap, or
// keeps it for the end of a Batch; the caller holds l.mu.
func (l *Logger) write(b []byte) {
	if l.batching > 0 && len(b) <= batchSize {
		if len(l.batch)+len(b) > batchSize {
			l.flushBatch()
		}
		if l.batch == nil {
			l.batch = make([]byte, 0, batchSize)
		}
		l.batch = append(l.batch, b...)
		return
	}
	l.flushBatch()
	l.writeOut(b)
}

// batchSize is what a Batch writes at a time: a page, about 15 lines
// of the agent's start-up report, the buffer made once and reused. A
// buffer grown to hold a whole report cost more in fresh memory than the
// writes it saved.
const batchSize = 4096

// flushBatch writes what a Batch holds; the caller holds l.mu.
func (l *Logger) flushBatch() {
	if len(l.batch) == 0 {
		return
	}
	b := l.batch
	l.batch = l.batch[:0]
	l.writeOut(b)
}

// writeOut is write's, now; the caller holds l.mu.
func (l *Logger) writeOut(b []byte) {
	n, _ := l.w.Write(b)
	if l.file == nil {
		return
	}
	l.size += int64(n)
	if l.size < l.max || l.rotateErr != nil {
		return
	}
	// libpcp's __pmRotateLog: a footer in the old file, a header in the
	// new one. The old one is kept as .prev, as at start-up.
	date := l.now().Format(dateFormat)
	fmt.Fprintf(l.w, "\nLog rotated %s\n", date)
	f, err := createLog(l.path)
	if err != nil {
		// Keep writing to the old file, and try no more: a log that
		// cannot be rotated is better than none.
		l.rotateErr = err
		l.line("Warning", fmt.Sprintf("cannot rotate the log %s: %v; it grows past %d bytes", l.path, err, l.max))
		return
	}
	if old := l.file; old.Fd() != 2 { // fd 2 is the new file now
		old.Close()
	}
	hdr := fmt.Appendf(nil, "Log for %s on %s rotated %s\n\n", l.prog, l.host, date)
	n, _ = f.Write(hdr)
	l.file, l.w, l.size = f, f, int64(n)
	l.rotations++
}

// RotateAt has the log file f, opened at path by OpenLog, replaced by a
// new one whenever it grows past max bytes, the old one kept as
// path.prev; max 0 never rotates. It must be called before the first line
// is written through f.
func (l *Logger) RotateAt(f *os.File, path string, max int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if max <= 0 || f == nil {
		return
	}
	l.file, l.w, l.path, l.max = f, f, path, max
	if st, err := f.Stat(); err == nil {
		l.size = st.Size()
	}
}

// Rotations says how often the log was rotated.
func (l *Logger) Rotations() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rotations
}

// OpenLog opens the agent's log as libpcp does for an agent pmcd starts:
// the previous log is kept as .prev. If the file cannot be opened the log
// goes to stderr, which pmcd points at its own log. The file is returned
// too (nil for stderr), for Logger.RotateAt.
//
// The log directory belongs to the pcp user while the agent is still root
// here, so nothing at the path is followed or reused: whatever is there (a
// symlink included) is renamed out of the way, and the new file must be
// created by this open.
func OpenLog(path string, stderr io.Writer) (io.Writer, *os.File, func(), error) {
	if path == "-" {
		return stderr, nil, func() {}, nil
	}
	f, err := createLog(path)
	if err != nil {
		return stderr, nil, func() {}, err
	}
	return f, f, func() { f.Close() }, nil
}

// releasePrevAfter is how long createLog keeps the replaced .prev file
// alive: long enough for the start to be over.
const releasePrevAfter = time.Second

// createLog moves whatever is at path to path.prev and creates the log
// anew there, then points fd 2 at it.
//
// It makes the system calls alone: rename(2) says whether there was
// anything to move, where os.Rename would look first (lstat) and os.OpenFile
// asks the poller to take a regular file (four fcntl and an epoll_ctl).
//
// The old .prev goes first, and not inside the rename: the kernel frees
// a file's blocks as its last name goes, which on a filesystem mounted
// with discard means waiting for the disk, and ext4 starts writing out a
// file renamed over an existing one. A descriptor held across the unlink
// (O_PATH: nothing is opened for reading, and a link is not followed)
// keeps the file alive until it is closed a moment later, off the start.
func createLog(path string) (*os.File, error) {
	prev := path + ".prev"
	if old, err := unix.Open(prev, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); err == nil {
		unix.Unlink(prev)
		time.AfterFunc(releasePrevAfter, func() { unix.Close(old) })
	}
	if err := unix.Rename(path, prev); err != nil && err != unix.ENOENT {
		return nil, &os.LinkError{Op: "rename", Old: path, New: prev, Err: err}
	}
	fd, err := unix.Open(path, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_APPEND|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	// Later panics and runtime errors land in the log too. Dup3, because
	// dup2 has no system call on arm64, riscv64 and loong64; it refuses
	// equal descriptors, which happen when the agent was started without
	// a stderr, and then the log is fd 2 already.
	if fd := int(f.Fd()); fd != 2 {
		unix.Dup3(fd, 2, 0)
	}
	return f, nil
}
