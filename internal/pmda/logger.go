package pmda

import (
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Log is what the framework needs from a logger. *Logger implements it;
// tests may substitute their own.
type Log interface {
	Infof(format string, args ...any)
	Warningf(format string, args ...any)
	Errorf(format string, args ...any)
}

// Logger writes lines in libpcp's format,
//
//	[Wed Dec  2 12:34:56] pmdaperfevent(1234) Info: message
//
// to one writer, usually the agent's log file (PCP agents log to stderr,
// which pmcd points at pmcd.log unless the agent reopens it). It is safe
// for concurrent use.
type Logger struct {
	mu   sync.Mutex
	w    io.Writer
	prog string
	pid  int
	now  func() time.Time
	buf  []byte
}

// NewLogger returns a Logger that tags lines with prog (e.g.
// "pmdaperfevent") and this process's id.
func NewLogger(w io.Writer, prog string) *Logger {
	return &Logger{w: w, prog: prog, pid: os.Getpid(), now: time.Now}
}

// Start writes the header libpcp's pmOpenLog writes when a log is opened:
//
//	Log for pmdaperfevent on HOST started Wed Dec  2 12:34:56 2026
//
// followed by a blank line.
func (l *Logger) Start(host string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, "Log for %s on %s started %s\n\n", l.prog, host, l.now().Format("Mon Jan _2 15:04:05 2006"))
}

// Finish writes libpcp's closing line, "Log finished <date>".
func (l *Logger) Finish() {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, "\nLog finished %s\n", l.now().Format("Mon Jan _2 15:04:05 2006"))
}

// Infof, Warningf and Errorf write one line at their level; a trailing
// newline in the message is dropped.
func (l *Logger) Infof(format string, args ...any)    { l.logf("Info", format, args...) }
func (l *Logger) Warningf(format string, args ...any) { l.logf("Warning", format, args...) }
func (l *Logger) Errorf(format string, args ...any)   { l.logf("Error", format, args...) }

// logf writes the whole line in one Write so that concurrent writers to a
// shared file (pmcd.log) do not interleave within a line.
func (l *Logger) logf(level, format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buf[:0]
	b = append(b, '[')
	b = l.now().AppendFormat(b, "Mon Jan _2 15:04:05")
	b = fmt.Appendf(b, "] %s(%d) %s: ", l.prog, l.pid, level)
	b = fmt.Appendf(b, format, args...)
	for len(b) > 0 && b[len(b)-1] == '\n' {
		b = b[:len(b)-1]
	}
	b = append(b, '\n')
	l.buf = b
	l.w.Write(b)
}

type discard struct{}

func (discard) Infof(string, ...any)    {}
func (discard) Warningf(string, ...any) {}
func (discard) Errorf(string, ...any)   {}

// OpenLog opens the agent's log as libpcp does for an agent pmcd starts:
// the previous log is kept as .prev. If the file cannot be opened the log
// goes to stderr, which pmcd points at its own log.
//
// The log directory belongs to the pcp user while the agent is still root
// here, so nothing at the path is followed or reused: whatever is there (a
// symlink included) is renamed out of the way, and the new file must be
// created by this open.
func OpenLog(path string, stderr io.Writer) (io.Writer, func(), error) {
	if path == "-" {
		return stderr, func() {}, nil
	}
	if _, err := os.Lstat(path); err == nil {
		if err := os.Rename(path, path+".prev"); err != nil {
			return stderr, func() {}, err
		}
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return stderr, func() {}, err
	}
	// Later panics and runtime errors land in the log too. Dup3, because
	// dup2 has no system call on arm64, riscv64 and loong64; it refuses
	// equal descriptors, which happen when the agent was started without
	// a stderr, and then the log is fd 2 already.
	if fd := int(f.Fd()); fd != 2 {
		unix.Dup3(fd, 2, 0)
	}
	return f, func() { f.Close() }, nil
}
