package reservation

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"perfevent/internal/atomicfile"
)

// A Directory is the state file's directory, held open. Everything the
// agent writes there goes through the descriptor (openat, renameat,
// unlinkat), so that nothing at the path, a symbolic link or another
// user's directory put there later, is ever written through: a directory
// the agent refused is never written.
//
// A Directory made by PrepareStateDir also repairs itself: before each
// write it checks that the path still names the directory it holds, and if
// the directory was deleted or replaced (the lock file's directory removed
// and made again, say), it prepares it again under the same checks.
//
// A Directory is safe for concurrent use.
type Directory struct {
	path string

	// What PrepareStateDir was given, to prepare the directory again;
	// prepared is false for a directory opened with openDir.
	prepared bool
	lockPath string
	uid, gid int
	trusted  []int

	mu      sync.Mutex
	fd      int    // -1 once closed
	claimed string // the state file's name while an exclusive flock on fd owns it
	dev     uint64
	ino     uint64
}

// PrepareStateDir makes StateDir(lockPath) ready for an agent that will run
// as uid:gid and returns it open. It creates the directory (mode 0755) if it
// is missing, opens it without following a symbolic link, and checks the
// open directory itself (fstat), so that what is checked is what is
// written to: it must belong to root, to uid, or to a trusted uid (one an
// earlier agent ran as, whose directory this agent may adopt), and neither
// group nor others may write it. Then it gives the directory to uid:gid. It
// must run while the agent is still root if uid is not root.
func PrepareStateDir(lockPath string, uid, gid int, trusted ...int) (*Directory, error) {
	d := &Directory{path: StateDir(lockPath), prepared: true, lockPath: lockPath, uid: uid, gid: gid, trusted: slices.Clone(trusted), fd: -1}
	fd, st, err := d.prepare()
	if err != nil {
		return nil, err
	}
	d.fd, d.dev, d.ino = fd, st.Dev, st.Ino
	return d, nil
}

// prepare creates, opens and vets the directory; see PrepareStateDir.
func (d *Directory) prepare() (int, *unix.Stat_t, error) {
	parent, base := filepath.Dir(d.path), filepath.Base(d.path)
	pfd, err := unix.Open(parent, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, nil, fmt.Errorf("state directory %s: %w", d.path, err)
	}
	defer unix.Close(pfd)
	// The directory is usually there from an earlier run: it is opened
	// first, and made only when it is missing.
	const flags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := unix.Openat(pfd, base, flags, 0)
	if errors.Is(err, unix.ENOENT) {
		if err := unix.Mkdirat(pfd, base, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
			if errors.Is(err, unix.EACCES) && os.Geteuid() != 0 {
				return -1, nil, fmt.Errorf("state directory %s is missing, and the agent (uid %d) cannot make it in %s: perfalloc cannot confirm releases until the agent restarts, or root makes it: install -d -o %d -g %d -m 0755 %s",
					d.path, os.Geteuid(), parent, d.uid, d.gid, d.path)
			}
			return -1, nil, fmt.Errorf("state directory %s: %w", d.path, err)
		}
		fd, err = unix.Openat(pfd, base, flags, 0)
	}
	if err != nil {
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			return -1, nil, fmt.Errorf("state directory %s is not a directory (a symlink or file is in the way); remove it and restart the agent", d.path)
		}
		return -1, nil, fmt.Errorf("state directory %s: %w", d.path, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, nil, fmt.Errorf("state directory %s: fstat: %w", d.path, err)
	}
	owner := int(st.Uid)
	switch {
	case owner != 0 && owner != d.uid && !slices.Contains(d.trusted, owner):
		unix.Close(fd)
		return -1, nil, fmt.Errorf("state directory %s belongs to uid %d, not root or uid %d; remove it and restart the agent", d.path, st.Uid, d.uid)
	case st.Mode&0o022 != 0:
		unix.Close(fd)
		return -1, nil, fmt.Errorf("state directory %s is writable by group or others (mode %#o); remove it and restart the agent", d.path, st.Mode&0o7777)
	}
	if owner != d.uid || int(st.Gid) != d.gid {
		if err := unix.Fchown(fd, d.uid, d.gid); err != nil {
			unix.Close(fd)
			return -1, nil, fmt.Errorf("state directory %s: giving it to uid %d: %w", d.path, d.uid, err)
		}
	}
	return fd, &st, nil
}

// openDir opens an existing or new directory for a writer that has nobody
// to give it to (tests, tools), without following a link at its path.
func openDir(path string) (*Directory, error) {
	if err := unix.Mkdir(path, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
		return nil, fmt.Errorf("state directory %s: %w", path, err)
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("state directory %s: %w", path, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("state directory %s: %w", path, err)
	}
	return &Directory{path: path, fd: fd, dev: st.Dev, ino: st.Ino}, nil
}

// Path returns the directory's path.
func (d *Directory) Path() string { return d.path }

// Close closes the descriptor; the directory stays.
func (d *Directory) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fd < 0 {
		return nil
	}
	err := unix.Close(d.fd)
	d.fd = -1
	return err
}

// current returns the descriptor, first preparing the directory again if
// its path no longer names it. The caller holds d.mu.
func (d *Directory) current() (int, error) {
	if d.fd < 0 {
		return -1, fmt.Errorf("state directory %s: already closed", d.path)
	}
	if !d.prepared {
		return d.fd, nil
	}
	var st unix.Stat_t
	if err := unix.Lstat(d.path, &st); err == nil && st.Dev == d.dev && st.Ino == d.ino {
		return d.fd, nil
	}
	fd, nst, err := d.prepare()
	if err != nil {
		return -1, err
	}
	if d.claimed != "" {
		// The new directory is someone else's if another agent got
		// there first; this one must not write beside it.
		if err := flockDir(fd, filepath.Join(d.path, d.claimed)); err != nil {
			unix.Close(fd)
			return -1, err
		}
	}
	unix.Close(d.fd)
	d.fd, d.dev, d.ino = fd, nst.Dev, nst.Ino
	return d.fd, nil
}

// claim takes an exclusive flock on the directory for the state file name,
// held until unclaim or Close (or the process's end). A second agent
// started by hand beside the one pmcd runs must neither overwrite the live
// agent's state nor remove it when it exits, or perfalloc --ping would say
// that the live agent is not running.
func (d *Directory) claim(name string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fd < 0 {
		return fmt.Errorf("state directory %s: already closed", d.path)
	}
	if err := flockDir(d.fd, filepath.Join(d.path, name)); err != nil {
		return err
	}
	d.claimed = name
	return nil
}

// unclaim lets the next agent have the directory.
func (d *Directory) unclaim() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fd >= 0 && d.claimed != "" {
		unix.Flock(d.fd, unix.LOCK_UN)
	}
	d.claimed = ""
}

func flockDir(fd int, statePath string) error {
	deadline := time.Now().Add(claimWait)
	for {
		err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		switch {
		case err == nil:
			return nil
		case !errors.Is(err, unix.EWOULDBLOCK):
			return fmt.Errorf("state file %s: flock %s: %w", statePath, filepath.Dir(statePath), err)
		}
		s, rerr := ReadState(statePath)
		if rerr == nil && s.Alive() == nil {
			return fmt.Errorf("state file %s belongs to %s (pid %d), which runs: %w", statePath, s.Program, s.PID, ErrStateOwned)
		}
		// The agent that wrote it has exited, but its descriptors, the
		// claim among them, go only when its last thread is done: a
		// restarted agent can start while the old one is still a zombie
		// whose other thread closes its counters.
		if time.Now().After(deadline) {
			return fmt.Errorf("state file %s belongs to another process, which runs (held for %v after its writer exited): %w", statePath, claimWait, ErrStateOwned)
		}
		time.Sleep(claimPoll)
	}
}

// How long a new agent waits for the claim of one that has exited, and
// how often it tries.
const (
	claimWait = 2 * time.Second
	claimPoll = 10 * time.Millisecond
)

// replace writes data to name in the directory atomically: a new file,
// created exclusively and never through a link, made mode 0644 and renamed
// over name. It does not fsync (see WriteState).
func (d *Directory) replace(name string, data []byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	dfd, err := d.current()
	if err != nil {
		return err
	}
	// 0644 against the umask: the file must be readable by every perfalloc user.
	if err := atomicfile.WriteAt(dfd, name, data, atomicfile.Options{Mode: 0o644}); err != nil {
		return fmt.Errorf("state file %s: %w", filepath.Join(d.path, name), err)
	}
	return nil
}

// remove unlinks name in the directory; a missing file is no error.
func (d *Directory) remove(name string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fd < 0 {
		return nil
	}
	if err := unix.Unlinkat(d.fd, name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("state file %s: %w", filepath.Join(d.path, name), err)
	}
	return nil
}

// CheckLockDir returns an error when the lock file's directory is writable
// by users other than its owner. Anyone who can write there can replace the
// state directory beside the lock file by their own (the agent keeps
// writing to the one it opened, but perfalloc reads by name) or make the
// agent refuse it: perfalloc's confirmation means nothing there.
func CheckLockDir(lockPath string) error {
	dir := filepath.Dir(lockPath)
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return fmt.Errorf("lock file directory %s: %w", dir, err)
	}
	if st.Mode&0o022 != 0 {
		return fmt.Errorf("lock file directory %s is writable by group or others (mode %#o): other users can plant or replace the state directory %s, so perfalloc's confirmation cannot be trusted; keep the lock file in a directory only root can write",
			dir, st.Mode&0o7777, StateDir(lockPath))
	}
	return nil
}
