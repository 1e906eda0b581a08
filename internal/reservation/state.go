package reservation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"perfevent/internal/reservation/inotify"
)

// Values of State.Counters.
const (
	CountersOpen     = "open"     // the agent is counting
	CountersReleased = "released" // the agent closed its counters for the holders
)

// Values of EventState.State.
const (
	EventCounting = "counting"
	EventReleased = "released"
	EventFailed   = "failed"
)

// DefaultRefresh is how often a StateFile is rewritten when nothing changes,
// so that readers can tell a live agent from a stale file. Whether the
// writer runs at all is State.Alive's to say, from /proc; the rewrite only
// shows that the process is not frozen (stopped, or wedged in a write),
// which can wait a minute, like the agent's other idle timers. Every 10 s
// it was two thirds of an idle agent's context switches (BENCHMARKS.md).
const DefaultRefresh = time.Minute

// maxStateSize bounds what ReadState will read: the file is world-readable
// input to every perfalloc, and a real one is a few kilobytes.
const maxStateSize = 1 << 20

// State is what the agent reports in the state file beside the lock file
// (see StatePath). All times are wall-clock times.
type State struct {
	Generation     uint64       `json:"generation"`      // +1 on every write
	Written        time.Time    `json:"written"`         // time of this write
	RefreshSeconds float64      `json:"refresh_seconds"` // the writer rewrites at least this often
	Program        string       `json:"program"`         // e.g. "pmdaperfevent"
	PID            int          `json:"pid"`
	StartTicks     uint64       `json:"pid_start_ticks,omitempty"` // /proc/PID/stat field 22, to detect pid reuse
	Started        time.Time    `json:"started"`
	Config         string       `json:"config"`
	LockFile       string       `json:"lock_file"`
	Counters       string       `json:"counters"` // CountersOpen or CountersReleased
	Since          time.Time    `json:"since"`    // when Counters last changed
	Holders        []int        `json:"holders"`  // pids holding the reservation
	Events         []EventState `json:"events"`
}

// EventState is one configured event as the agent last left it.
type EventState struct {
	Name  string `json:"name"`
	State string `json:"state"` // EventCounting, EventReleased or EventFailed
	CPUs  int    `json:"cpus"`  // CPUs with an open counter
	Error string `json:"error,omitempty"`
}

// StatePath returns the state file's path for a lock file: the file "state"
// in the directory StateDir, beside the lock file.
//
// The state lives in a directory of its own because the agent gives up root
// after start-up but must still replace the file atomically, by rename, which
// needs write access to the directory that holds it. The lock file's
// directory belongs to root (and to the distribution's package); this one is
// made at start-up for the user the agent runs as (see PrepareStateDir).
func StatePath(lockPath string) string { return filepath.Join(StateDir(lockPath), "state") }

// StateDir returns the directory that holds the state file of a lock file.
func StateDir(lockPath string) string { return lockPath + ".d" }

// HeldBy reports whether pid is among the holders.
func (s *State) HeldBy(pid int) bool { return slices.Contains(s.Holders, pid) }

// Alive returns nil if the process that wrote the state still runs, and
// otherwise an error saying why not. A recorded start time guards against
// a recycled pid.
func (s *State) Alive() error {
	name := s.Program
	if name == "" {
		name = "the agent"
	}
	if s.PID <= 0 {
		return fmt.Errorf("%s recorded no pid", name)
	}
	if err := unix.Kill(s.PID, 0); err != nil && !errors.Is(err, unix.EPERM) {
		return fmt.Errorf("%s (pid %d) is not running", name, s.PID)
	}
	st, err := processStat(s.PID)
	if err != nil {
		return nil // kill said it runs; a /proc hidden from us (hidepid) cannot say more
	}
	if s.StartTicks != 0 && st.startTicks != s.StartTicks {
		return fmt.Errorf("%s (pid %d) is not running (the pid now belongs to another process)", name, s.PID)
	}
	if why := st.leaving(); why != "" {
		return fmt.Errorf("%s (pid %d) is not running (%s)", name, s.PID, why)
	}
	return nil
}

// Fresh returns nil if the state was written recently enough for a writer
// that promised to rewrite it every RefreshSeconds: within three periods,
// plus a second of slack for a busy machine.
func (s *State) Fresh(now time.Time) error {
	refresh := time.Duration(s.RefreshSeconds * float64(time.Second))
	if refresh <= 0 {
		refresh = DefaultRefresh
	}
	limit := 3*refresh + time.Second
	if age := now.Sub(s.Written); age > limit {
		return fmt.Errorf("state generation %d was written %v ago, but the writer promised to refresh it every %v", s.Generation, age.Round(time.Millisecond), refresh)
	}
	return nil
}

// ProcessStartTicks returns field 22 of /proc/PID/stat: the process's start
// time in clock ticks since boot, which together with the pid names one
// process for the life of the system.
func ProcessStartTicks(pid int) (uint64, error) {
	st, err := processStat(pid)
	return st.startTicks, err
}

// procStat is what Alive reads of /proc/PID/stat.
type procStat struct {
	state      byte   // field 3: R, S, D, Z...
	flags      uint64 // field 9: the kernel's PF_* flags
	startTicks uint64 // field 22
}

// pfExiting is the kernel's PF_EXITING (include/linux/sched.h), set when a
// process starts to exit, before it has closed its descriptors.
const pfExiting = 0x4

// leaving says why a process that still answers kill(pid, 0) is no longer
// a live agent, or "" if it is one. A writer that has exited but that its
// parent (pmcd) has not yet reaped is a zombie; one still on its way out
// (after a SIGKILL, say) holds its descriptors, its claim on the state
// directory among them, while it closes its counters, which takes tens of
// milliseconds on a busy machine. Its /proc/PID/exe is gone meanwhile, so
// whoever restarts the agent may already take it for gone, rightly.
func (p procStat) leaving() string {
	switch {
	case p.state == 'Z' || p.state == 'X':
		return "it has exited, and its parent has not reaped it yet"
	case p.flags&pfExiting != 0:
		return "it is exiting"
	}
	return ""
}

// processStat reads /proc/PID/stat through the system calls alone: the
// agent reads its own at every start, and os.ReadFile spends as many again
// (the poller's checks, a stat for the size) on a file whose size the
// kernel does not tell. The line ends with a newline, so a read that
// brings it needs no second read to see the end.
func processStat(pid int) (procStat, error) {
	path := "/proc/" + strconv.Itoa(pid) + "/stat"
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return procStat{}, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	// 52 fields of at most 20 digits, and a command name of at most 64
	// bytes, fit with room to spare.
	var buf [2048]byte
	n := 0
	for n < len(buf) {
		m, err := unix.Read(fd, buf[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return procStat{}, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		n += m
		if m == 0 || buf[n-1] == '\n' {
			break
		}
	}
	return parseStat(pid, buf[:n])
}

func parseStat(pid int, b []byte) (procStat, error) {
	// The command name (field 2) may hold spaces and parentheses; fields
	// after it start at the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: no ')' after the command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	const flags, start = 9 - 3, 22 - 3 // f[0] is field 3
	if len(f) <= start {
		return procStat{}, fmt.Errorf("/proc/%d/stat: only %d fields", pid, len(f)+2)
	}
	if len(f[0]) != 1 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: state %q is not one letter", pid, f[0])
	}
	p := procStat{state: f[0][0]}
	var err error
	if p.flags, err = strconv.ParseUint(f[flags], 10, 64); err != nil {
		return procStat{}, fmt.Errorf("/proc/%d/stat: field 9 %q: %v", pid, f[flags], err)
	}
	if p.startTicks, err = strconv.ParseUint(f[start], 10, 64); err != nil {
		return procStat{}, fmt.Errorf("/proc/%d/stat: field 22 %q: %v", pid, f[start], err)
	}
	return p, nil
}

// WriteState replaces the state file atomically: it writes a new file in the
// same directory (created exclusively, never through a symbolic link), makes
// it mode 0644 and renames it over path. Readers see the old or the new
// state, never a mixture.
//
// It does not fsync. Atomicity for readers comes from rename alone; an
// fsync only buys durability across a crash, after which the file describes
// a dead process that readers reject by its pid anyway. Measured on ext4 in
// a VM, the fsync cost 2-10 ms per write, all of it on the path from the
// agent releasing its counters to perfalloc confirming that it did.
func WriteState(path string, s *State) error {
	d, err := openDir(filepath.Dir(path))
	if err != nil {
		return fmt.Errorf("state file %s: %w", path, err)
	}
	defer d.Close()
	return writeState(d, filepath.Base(path), s)
}

func writeState(d *Directory, name string, s *State) error {
	data, err := encodeState(s)
	if err != nil {
		return fmt.Errorf("state file %s: %w", filepath.Join(d.path, name), err)
	}
	return d.replace(name, data)
}

// encodeState is the state file's content for s (see appendState).
func encodeState(s *State) ([]byte, error) { return appendState(nil, s) }

// ReadState reads and decodes the state file. A missing file gives an
// error satisfying errors.Is(err, fs.ErrNotExist).
func ReadState(path string) (*State, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("state file %s: %w", path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("state file %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("state file %s is not a regular file", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxStateSize+1))
	if err != nil {
		return nil, fmt.Errorf("state file %s: %w", path, err)
	}
	if len(data) > maxStateSize {
		return nil, fmt.Errorf("state file %s is larger than %d bytes", path, maxStateSize)
	}
	var s State
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("state file %s: %v", path, err)
	}
	return &s, nil
}

// StateFile is the agent's side of the state file: it keeps the current
// State, numbers and timestamps every write, and rewrites the file every
// refresh period even when nothing changes, so that readers can tell a live
// agent from a stale file (State.Fresh).
type StateFile struct {
	dir     *Directory // flocked while this StateFile owns the file
	name    string
	ownDir  bool // dir was opened for this StateFile, and closes with it
	refresh time.Duration

	// No goroutine waits for the writes to come: the heartbeat is a
	// timer's function, and a Post starts a goroutine that writes what is
	// posted until nothing more is, then ends. An agent started and
	// stopped with no reservation between starts none. writers counts
	// those running, for Close.
	writers sync.WaitGroup

	// writeMu orders the writes, so that the file's generation only goes
	// up; it is taken before mu, which guards the rest.
	writeMu sync.Mutex
	buf     []byte // the last write's content, its space reused; under writeMu
	mu      sync.Mutex
	state   State
	failed  func(error) // the last Post's, until a write carries its change
	beat    *time.Timer // the heartbeat, every refresh period
	posted  bool        // a Post's change awaits its write
	writing bool        // a goroutine writes the posted changes
	closed  bool        // Close has begun: nothing more is written
}

// NewStateFile writes the initial state to path and starts the periodic
// rewrite. Zero PID, StartTicks and Started are filled in for this process;
// refresh <= 0 means DefaultRefresh. The directory is made if missing but
// not vetted: the agent uses NewStateFileIn with a prepared directory.
func NewStateFile(path string, initial State, refresh time.Duration) (*StateFile, error) {
	d, err := openDir(filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("state file %s: %w", path, err)
	}
	f, err := newStateFile(d, filepath.Base(path), initial, refresh)
	if err != nil {
		d.Close()
		return nil, err
	}
	f.ownDir = true
	return f, nil
}

// NewStateFileIn is NewStateFile for the file "state" in a directory from
// PrepareStateDir, which the StateFile writes through and leaves open.
func NewStateFileIn(d *Directory, initial State, refresh time.Duration) (*StateFile, error) {
	return newStateFile(d, "state", initial, refresh)
}

func newStateFile(d *Directory, name string, initial State, refresh time.Duration) (*StateFile, error) {
	if refresh <= 0 {
		refresh = DefaultRefresh
	}
	if initial.PID == 0 {
		initial.PID = os.Getpid()
		initial.StartTicks, _ = ProcessStartTicks(initial.PID)
	}
	if initial.Started.IsZero() {
		initial.Started = time.Now()
	}
	initial.RefreshSeconds = refresh.Seconds()
	if err := d.claim(name); err != nil {
		return nil, err
	}
	f := &StateFile{
		dir:     d,
		name:    name,
		refresh: refresh,
		state:   initial,
	}
	if err := f.Update(func(*State) {}); err != nil {
		d.unclaim()
		return nil, err
	}
	f.mu.Lock()
	f.beat = time.AfterFunc(refresh, f.heartbeat)
	f.mu.Unlock()
	return f, nil
}

// ErrStateOwned is the error of NewStateFile when a running agent owns the
// state file already.
var ErrStateOwned = errors.New("another agent reports there")

// Path returns the state file's path.
func (f *StateFile) Path() string { return filepath.Join(f.dir.path, f.name) }

// Update changes the state under a lock and writes it out. fn must not keep
// the pointer.
func (f *StateFile) Update(fn func(*State)) error {
	f.mu.Lock()
	fn(&f.state)
	f.mu.Unlock()
	return f.flush()
}

// Post changes the state as Update does and leaves the write to a
// goroutine of the StateFile's, which writes the newest state once for any
// number of Posts made meanwhile. It is for callers that must not wait for
// the file system: the lock watcher reports a reservation through it, and
// on a busy ext4 the rename over the old file took 20-740 ms, during which
// the watcher would look at the lock no more. If the write that carries
// the change fails, failed (if not nil) is called with the error, on the
// StateFile's goroutine.
func (f *StateFile) Post(fn func(*State), failed func(error)) {
	f.PostChange(func(s *State) bool { fn(s); return true }, failed)
}

// PostChange is Post for a change that may turn out to be none: when fn
// reports that it left the state as it was, nothing is written for it (the
// periodic rewrite goes on). The lock watcher's first report at start-up
// is such a one, the state NewStateFileIn wrote already.
func (f *StateFile) PostChange(fn func(*State) (changed bool), failed func(error)) {
	f.mu.Lock()
	start := false
	if fn(&f.state) {
		f.failed = failed
		f.posted = true
		// A writer under way takes this change too.
		if !f.writing && !f.closed {
			f.writing, start = true, true
			f.writers.Add(1)
		}
	}
	f.mu.Unlock()
	if start {
		go f.writePosted()
	}
}

// writePosted writes the posted changes until there are none left.
func (f *StateFile) writePosted() {
	defer f.writers.Done()
	for {
		f.mu.Lock()
		if !f.posted || f.closed {
			f.writing = false
			f.mu.Unlock()
			return
		}
		f.posted = false
		f.mu.Unlock()
		f.flush()
	}
}

// heartbeat rewrites the state, changed or not, and sets the timer for
// the next. Its error has nobody to tell but a Post whose change the
// write carries; otherwise it repeats on the next write.
func (f *StateFile) heartbeat() {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return
	}
	f.writers.Add(1)
	f.mu.Unlock()
	defer f.writers.Done()
	f.flush()
	f.mu.Lock()
	if !f.closed {
		f.beat.Reset(f.refresh)
	}
	f.mu.Unlock()
}

// flush writes the current state, and tells the last Post whose change
// it carries if the write failed.
func (f *StateFile) flush() error {
	failed, err := f.write()
	if err != nil && failed != nil {
		failed(err)
	}
	return err
}

// write numbers, stamps and writes the current state, and returns the
// failed of the last Post it carries. The state is encoded under mu and
// written outside it, so that a Post waits for no write.
func (f *StateFile) write() (failed func(error), err error) {
	f.writeMu.Lock()
	defer f.writeMu.Unlock()
	f.mu.Lock()
	if f.closed {
		// The file is removed, or about to be: a write now would
		// report an agent that has stopped.
		f.mu.Unlock()
		return nil, nil
	}
	f.state.Generation++
	f.state.Written = time.Now()
	data, err := appendState(f.buf[:0], &f.state)
	f.buf = data
	failed = f.failed
	f.failed = nil
	f.mu.Unlock()
	if err != nil {
		return failed, fmt.Errorf("state file %s: %w", f.Path(), err)
	}
	return failed, f.dir.replace(f.name, data)
}

// Close stops the periodic rewrite and removes the file: an agent that has
// stopped has no state to report.
func (f *StateFile) Close() error {
	f.mu.Lock()
	f.closed = true
	if f.beat != nil {
		f.beat.Stop()
	}
	f.mu.Unlock()
	f.writers.Wait()
	f.writeMu.Lock()
	defer f.writeMu.Unlock()
	// Removed while the directory is still ours: the next owner's
	// first write cannot come before this.
	err := f.dir.remove(f.name)
	f.dir.unclaim()
	if f.ownDir {
		f.dir.Close()
	}
	return err
}

// WaitState re-reads the state file until done returns true for it, and
// returns that state. It looks after every inotify hint about the file and
// every poll interval (<= 0 means 25 ms). When ctx ends first it returns
// the last state it could read (nil if none) and ctx.Err(). A missing or
// unreadable file is waited for, not reported.
func WaitState(ctx context.Context, path string, poll time.Duration, done func(*State) bool) (*State, error) {
	if poll <= 0 {
		poll = 25 * time.Millisecond
	}
	hints := make(chan struct{}, 1)
	note, err := inotify.WatchDir(filepath.Dir(path), filepath.Base(path),
		unix.IN_CREATE|unix.IN_MOVED_TO|unix.IN_CLOSE_WRITE, func(inotify.Event) {
			select {
			case hints <- struct{}{}:
			default:
			}
		})
	if err == nil {
		defer note.Close()
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	var last *State
	for {
		if s, err := ReadState(path); err == nil {
			last = s
			if done(s) {
				return s, nil
			}
		}
		select {
		case <-ctx.Done():
			return last, ctx.Err()
		case <-hints:
		case <-t.C:
		}
	}
}
