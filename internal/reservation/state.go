package reservation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
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
// so that readers can tell a live agent from a stale file.
const DefaultRefresh = 10 * time.Second

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

// PrepareStateDir makes StateDir(lockPath) ready for an agent that will run
// as uid:gid: it creates the directory (mode 0755) if missing and gives it
// to that user. An existing directory is used only if it is a real directory
// (not a symlink) owned by root or by uid, and writable by nobody else, so
// that no other user can plant files where the agent writes. It must run
// while the agent is still root if uid is not root.
func PrepareStateDir(lockPath string, uid, gid int) error {
	dir := StateDir(lockPath)
	if err := unix.Mkdir(dir, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("state directory %s: %w", dir, err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return fmt.Errorf("state directory %s: %w", dir, err)
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return fmt.Errorf("state directory %s is not a directory (a symlink or file is in the way); remove it and restart the agent", dir)
	case st.Uid != 0 && int(st.Uid) != uid:
		return fmt.Errorf("state directory %s belongs to uid %d, not root or uid %d; remove it and restart the agent", dir, st.Uid, uid)
	case st.Mode&0o022 != 0:
		return fmt.Errorf("state directory %s is writable by group or others (mode %#o); remove it and restart the agent", dir, st.Mode&0o7777)
	}
	if int(st.Uid) != uid || int(st.Gid) != gid {
		if err := unix.Lchown(dir, uid, gid); err != nil {
			return fmt.Errorf("state directory %s: giving it to uid %d: %w", dir, uid, err)
		}
	}
	return nil
}

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
	if s.StartTicks != 0 {
		ticks, err := ProcessStartTicks(s.PID)
		if err == nil && ticks != s.StartTicks {
			return fmt.Errorf("%s (pid %d) is not running (the pid now belongs to another process)", name, s.PID)
		}
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
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces and parentheses; fields
	// after it start at the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no ')' after the command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	const field = 22 - 3 // f[0] is field 3
	if len(f) <= field {
		return 0, fmt.Errorf("/proc/%d/stat: only %d fields", pid, len(f)+2)
	}
	ticks, err := strconv.ParseUint(f[field], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: field 22 %q: %v", pid, f[field], err)
	}
	return ticks, nil
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
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("state file %s: %w", path, err)
	}
	data = append(data, '\n')
	dir, base := filepath.Dir(path), filepath.Base(path)
	// The agent prepares the directory with PrepareStateDir; this covers a
	// writer that has no other user to hand it to.
	if err := unix.Mkdir(dir, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("state file %s: %w", path, err)
	}
	var tmp string
	var fd int
	for i := 0; ; i++ {
		tmp = filepath.Join(dir, fmt.Sprintf(".%s.%d.%d", base, os.Getpid(), time.Now().UnixNano()+int64(i)))
		fd, err = unix.Open(tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
		if !errors.Is(err, unix.EEXIST) || i == 9 {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("state file %s: create temporary file %s: %w", path, tmp, err)
	}
	f := os.NewFile(uintptr(fd), tmp)
	fail := func(what string, err error) error {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("state file %s: %s %s: %w", path, what, tmp, err)
	}
	if _, err := f.Write(data); err != nil {
		return fail("write", err)
	}
	// Against the umask: the file must be readable by every perfalloc user.
	if err := f.Chmod(0o644); err != nil {
		return fail("chmod", err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("state file %s: close %s: %w", path, tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("state file %s: rename %s: %w", path, tmp, err)
	}
	return nil
}

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
	path    string
	dir     *os.File // its directory, flocked while this StateFile owns the file
	refresh time.Duration
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once

	mu    sync.Mutex
	state State
}

// NewStateFile writes the initial state to path and starts the periodic
// rewrite. Zero PID, StartTicks and Started are filled in for this process;
// refresh <= 0 means DefaultRefresh.
func NewStateFile(path string, initial State, refresh time.Duration) (*StateFile, error) {
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
	dir, err := ownStateDir(path)
	if err != nil {
		return nil, err
	}
	f := &StateFile{
		path:    path,
		dir:     dir,
		refresh: refresh,
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
		state:   initial,
	}
	if err := f.Update(func(*State) {}); err != nil {
		dir.Close()
		return nil, err
	}
	go f.refresher()
	return f, nil
}

// ownStateDir takes an exclusive flock on the state file's directory, held
// until the returned file is closed (or the process ends). A second agent
// started by hand beside the one pmcd runs must neither overwrite the live
// agent's state nor remove it when it exits, or perfalloc --ping would say
// that the live agent is not running.
func ownStateDir(path string) (*os.File, error) {
	name := filepath.Dir(path)
	if err := unix.Mkdir(name, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
		return nil, fmt.Errorf("state file %s: %w", path, err)
	}
	fd, err := unix.Open(name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("state file %s: %w", path, err)
	}
	dir := os.NewFile(uintptr(fd), name)
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		dir.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			owner := "another process"
			if s, rerr := ReadState(path); rerr == nil && s.Alive() == nil {
				owner = fmt.Sprintf("%s (pid %d)", s.Program, s.PID)
			}
			return nil, fmt.Errorf("state file %s belongs to %s, which runs: %w", path, owner, ErrStateOwned)
		}
		return nil, fmt.Errorf("state file %s: flock %s: %w", path, name, err)
	}
	return dir, nil
}

// ErrStateOwned is the error of NewStateFile when a running agent owns the
// state file already.
var ErrStateOwned = errors.New("another agent reports there")

// Path returns the state file's path.
func (f *StateFile) Path() string { return f.path }

// Update changes the state under a lock and writes it out. fn must not keep
// the pointer.
func (f *StateFile) Update(fn func(*State)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(&f.state)
	f.state.Generation++
	f.state.Written = time.Now()
	return WriteState(f.path, &f.state)
}

func (f *StateFile) refresher() {
	defer close(f.done)
	t := time.NewTicker(f.refresh)
	defer t.Stop()
	for {
		select {
		case <-f.stop:
			return
		case <-t.C:
			// An error here repeats on the next Update, where the caller
			// sees it; a heartbeat has nobody to tell.
			f.Update(func(*State) {})
		}
	}
}

// Close stops the periodic rewrite and removes the file: an agent that has
// stopped has no state to report.
func (f *StateFile) Close() error {
	f.once.Do(func() { close(f.stop) })
	<-f.done
	f.mu.Lock()
	defer f.mu.Unlock()
	// Removed while the directory is still ours: the next owner's
	// first write cannot come before this.
	err := os.Remove(f.path)
	f.dir.Close()
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("state file %s: %w", f.path, err)
	}
	return nil
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
	note, err := watchDir(filepath.Dir(path), filepath.Base(path),
		unix.IN_CREATE|unix.IN_MOVED_TO|unix.IN_CLOSE_WRITE, func(notifyEvent) {
			select {
			case hints <- struct{}{}:
			default:
			}
		})
	if err == nil {
		defer note.close()
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
