package counter

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"perfevent/internal/hostfs"
)

// Kind says why perf_event_open refused an event on a CPU, in terms of what
// the administrator can do about it. The same classification feeds the log
// and `--check`.
type Kind int

const (
	Other           Kind = iota // anything not listed below; the advice is strerror
	Permission                  // EACCES, EPERM
	Unsupported                 // ENOENT, EOPNOTSUPP: no such PMU or event here
	CPUOffline                  // ENODEV
	DescriptorLimit             // EMFILE, ENFILE
	InvalidEncoding             // EINVAL
	Busy                        // EBUSY
)

var kindNames = [...]string{
	Other:           "other",
	Permission:      "permission",
	Unsupported:     "unsupported",
	CPUOffline:      "cpu-offline",
	DescriptorLimit: "descriptor-limit",
	InvalidEncoding: "invalid-encoding",
	Busy:            "busy",
}

func (k Kind) String() string {
	if k >= 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Classify maps an error from opening a counter to a Kind. Errors that are
// not errnos are Other.
func Classify(err error) Kind {
	// A bare errno, as the kernel's opener returns, needs no errors.As,
	// whose target would be one more allocation for each failed open.
	errno, ok := err.(unix.Errno)
	if !ok {
		var wrapped unix.Errno // apart from errno, so that only this path allocates it
		if !errors.As(err, &wrapped) {
			return Other
		}
		errno = wrapped
	}
	switch errno {
	case unix.EACCES, unix.EPERM:
		return Permission
	case unix.ENOENT, unix.EOPNOTSUPP:
		return Unsupported
	case unix.ENODEV:
		return CPUOffline
	case unix.EMFILE, unix.ENFILE:
		return DescriptorLimit
	case unix.EINVAL:
		return InvalidEncoding
	case unix.EBUSY:
		return Busy
	}
	return Other
}

// OpenError is one failed (event, CPU) open, with advice for a human.
type OpenError struct {
	Event  string
	CPU    int
	Kind   Kind
	Errno  unix.Errno // 0 when the cause was not an errno
	Advice string     // e.g. "CPU 3 is offline"
	Err    error      // the error as returned by the Opener
}

// NewOpenError classifies err and writes the advice. The advice reads the
// current perf_event_paranoid setting (in fs's procfs) or RLIMIT_NOFILE
// when they matter, so it says what is true at the time of the failure.
func NewOpenError(fs hostfs.FS, event string, cpu int, err error) *OpenError {
	e := new(OpenError)
	e.set(fs, event, cpu, err, nil)
	return e
}

// readAdvice is the advice that reads the system (perf_event_paranoid,
// RLIMIT_NOFILE), kept by one pass of opens: a refused event is refused on
// every CPU, and the pass reads the setting once rather than once each.
type readAdvice struct{ permission, limit string }

// set is NewOpenError into e; seen, if not nil, keeps the advice that
// reads the system for the next failures.
func (e *OpenError) set(fs hostfs.FS, event string, cpu int, err error, seen *readAdvice) {
	*e = OpenError{Event: event, CPU: cpu, Kind: Classify(err), Err: err}
	if errno, ok := err.(unix.Errno); ok {
		e.Errno = errno
	} else {
		errors.As(err, &e.Errno)
	}
	switch e.Kind {
	case Permission:
		if seen != nil && seen.permission != "" {
			e.Advice = seen.permission
			break
		}
		e.Advice = fmt.Sprintf("permission denied: kernel.perf_event_paranoid is %s (see %s); run as root or grant CAP_PERFMON",
			paranoidLevel(fs.ParanoidFile()), fs.ParanoidFile())
		if seen != nil {
			seen.permission = e.Advice
		}
	case Unsupported:
		e.Advice = "not supported on this machine (e.g. a VM without a hardware PMU)"
	case CPUOffline:
		e.Advice = fmt.Sprintf("CPU %d is offline", cpu)
	case DescriptorLimit:
		if seen != nil && seen.limit != "" {
			e.Advice = seen.limit
			break
		}
		if soft, hard, lerr := getFileLimit(); lerr == nil {
			e.Advice = fmt.Sprintf("descriptor limit reached (RLIMIT_NOFILE soft=%d, hard=%d)", soft, hard)
		} else {
			e.Advice = fmt.Sprintf("descriptor limit reached (RLIMIT_NOFILE unknown: %v)", lerr)
		}
		if seen != nil {
			seen.limit = e.Advice
		}
	case InvalidEncoding:
		e.Advice = "invalid event encoding for this kernel/PMU"
	case Busy:
		e.Advice = "the PMU is busy (another user holds exclusive counters)"
	default:
		e.Advice = err.Error()
	}
}

// Error reads like the C agent's log line, with the advice in place of the
// bare strerror and the errno name for people who search for it.
func (e *OpenError) Error() string {
	// Sized once: the state file asks every failed event for its text.
	b := make([]byte, 0, 64+len(e.Event)+len(e.Advice))
	b = strconv.AppendInt(append(b, "perf_event_open failed on cpu"...), int64(e.CPU), 10)
	b = strconv.AppendQuote(append(b, " for "...), e.Event)
	return string(AppendCause(append(b, ": "...), e.Advice, e.Errno))
}

// AppendCause appends a failed open's cause as the agent writes it: the
// advice, then the errno's name in parentheses when there is one, for
// people who search for it.
func AppendCause(b []byte, advice string, errno unix.Errno) []byte {
	b = append(b, advice...)
	if errno != 0 {
		b = append(append(append(b, " ("...), unix.ErrnoName(errno)...), ')')
	}
	return b
}

func (e *OpenError) Unwrap() error { return e.Err }

// getFileLimit is a variable so that the advice can be tested without
// changing the process's limits.
var getFileLimit = fileLimit

func paranoidLevel(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "unreadable"
	}
	return strings.TrimSpace(string(b))
}

func fileLimit() (soft, hard uint64, err error) {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return 0, 0, fmt.Errorf("getrlimit(RLIMIT_NOFILE): %w", err)
	}
	return rl.Cur, rl.Max, nil
}

// RaiseFileLimit lifts the RLIMIT_NOFILE soft limit to the hard limit, since
// the agent holds one descriptor per event per CPU (50 events on 256 CPUs is
// 12800). It returns the limits in force afterwards, for the `maxfiles=` log
// line. The Go runtime already does this at start-up since Go 1.19; calling
// it anyway makes the limit explicit and covers a parent that lowered the
// hard limit between exec and now.
func RaiseFileLimit() (soft, hard uint64, err error) {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return 0, 0, fmt.Errorf("getrlimit(RLIMIT_NOFILE): %w", err)
	}
	if rl.Cur < rl.Max {
		want := unix.Rlimit{Cur: rl.Max, Max: rl.Max}
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &want); err != nil {
			return rl.Cur, rl.Max, fmt.Errorf("setrlimit(RLIMIT_NOFILE, soft=%d): %w", rl.Max, err)
		}
		rl = want
	}
	return rl.Cur, rl.Max, nil
}
