package reservation

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"perfevent/internal/hostfs"
)

// LockMode is the mode of a lock file the agent creates. World-readable so
// that any user may reserve the counters (a read lock needs only read
// access); the C agent used 0744, whose execute bit meant nothing.
const LockMode = 0o644

// Access is who may reserve the counters: the lock file's mode and group.
// A read lock needs read access, so the read bits decide; Mode 0640 and a
// group let only root and that group's members reserve. The zero value is
// LockMode and the group the file was created with, as with the C agent.
type Access struct {
	Mode uint32 // permission bits; 0 is LockMode
	GID  int    // group; -1 (or 0 in the zero value: see Group) leaves it
	// Group says that GID is to be set; without it the group is left
	// as created.
	Group bool
}

func (a Access) mode() uint32 {
	if a.Mode == 0 {
		return LockMode
	}
	return a.Mode
}

// Check says whether the access can be a lock file's: the owner (the
// agent) reads and writes, nobody else writes (a write lock, which needs
// write access, would keep perfalloc out) and nothing is executable.
func (a Access) Check() error {
	m := a.mode()
	if m&^0o7777 != 0 || m&0o600 != 0o600 || m&0o7133 != 0 {
		return fmt.Errorf("lock file mode %04o: the owner must read and write it, nobody else write or execute it (0644: anyone may reserve; 0640 with a group: its members)", m)
	}
	if a.Group && m&0o040 == 0 {
		return fmt.Errorf("lock file mode %04o gives its group no read access: members of the group could not reserve the counters (0640 lets them)", m)
	}
	return nil
}

func (a Access) String() string {
	if a.Group {
		return fmt.Sprintf("mode %04o, gid %d", a.mode(), a.GID)
	}
	return fmt.Sprintf("mode %04o", a.mode())
}

// LockFile is the agent's handle on the lock file. It holds one descriptor
// for the life of the process (see the package comment for why there must
// never be a second one) and checks for reservations with F_GETLK.
//
// A LockFile is safe for concurrent use.
type LockFile struct {
	path   string
	access Access
	locks  string // /proc/locks, which names the holders

	mu  sync.Mutex
	fd  int // -1 once closed
	dev uint64
	ino uint64
}

// Open opens the lock file for the agent, creating it if it is missing.
// It refuses a symbolic link or anything but a regular file, and a file
// owned by another user, and it resets the mode to [LockMode].
func Open(path string) (*LockFile, error) { return OpenAccess(path, Access{}) }

// OpenAccess is Open with the mode and group of a, which decide who may
// reserve the counters; they are set through the descriptor, never by path.
func OpenAccess(path string, a Access) (*LockFile, error) { return OpenIn(hostfs.FS{}, path, a) }

// LocksFile is the file that names the holders of lock files: procfs's
// locks file of the FS the lock file was opened in.
func (l *LockFile) LocksFile() string { return l.locks }

// OpenIn is OpenAccess naming holders from the locks file of fs's procfs.
func OpenIn(fs hostfs.FS, path string, a Access) (*LockFile, error) {
	if err := a.Check(); err != nil {
		return nil, err
	}
	fd, st, err := openLockFile(path, a)
	if err != nil {
		return nil, err
	}
	return &LockFile{path: path, access: a, locks: fs.LocksFile(), fd: fd, dev: st.Dev, ino: st.Ino}, nil
}

// openLockFile opens or creates path for the agent and vets what it got.
func openLockFile(path string, a Access) (int, *unix.Stat_t, error) {
	mode := a.mode()
	// O_NONBLOCK: a FIFO planted at the path must not hang the agent.
	// O_NOFOLLOW: a symbolic link planted at the path must not let anyone
	// point a root-owned create (and a chmod) at a file of their choice.
	// Created with no access for others: the mode and group are set
	// below, and a group-only file must not be readable by all meanwhile.
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0o600)
	if err != nil {
		switch {
		case errors.Is(err, unix.ELOOP):
			return -1, nil, fmt.Errorf("lock file %s is a symbolic link: refusing to follow it (remove it and the agent will create the file)", path)
		case errors.Is(err, unix.ENOENT):
			return -1, nil, fmt.Errorf("lock file %s: directory %s does not exist", path, filepath.Dir(path))
		}
		return -1, nil, fmt.Errorf("lock file %s: %w", path, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, nil, fmt.Errorf("lock file %s: fstat: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return -1, nil, fmt.Errorf("lock file %s is not a regular file (it is a %s): remove it and the agent will create the file", path, fileType(st.Mode))
	}
	if st.Nlink != 1 {
		// Another name for the same file would let its owner change what
		// the agent's chmod and perfalloc's lock apply to.
		unix.Close(fd)
		return -1, nil, fmt.Errorf("lock file %s has %d hard links: remove it and the agent will create the file", path, st.Nlink)
	}
	if euid := uint32(os.Geteuid()); st.Uid != euid {
		unix.Close(fd)
		return -1, nil, fmt.Errorf("lock file %s is owned by uid %d, not by the agent's uid %d: remove it and the agent will create the file", path, st.Uid, euid)
	}
	if a.Group && int(st.Gid) != a.GID {
		if err := unix.Fchown(fd, -1, a.GID); err != nil {
			unix.Close(fd)
			return -1, nil, fmt.Errorf("lock file %s: chgrp %d: %w", path, a.GID, err)
		}
	}
	// Our own umask, or an older agent, may have left another mode;
	// readers need exactly the read access chosen, and nobody else may
	// write.
	if st.Mode&0o7777 != mode {
		if err := unix.Fchmod(fd, mode); err != nil {
			unix.Close(fd)
			return -1, nil, fmt.Errorf("lock file %s: chmod %04o: %w", path, mode, err)
		}
	}
	return fd, &st, nil
}

func fileType(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return "directory"
	case unix.S_IFIFO:
		return "FIFO"
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFCHR:
		return "character device"
	case unix.S_IFBLK:
		return "block device"
	case unix.S_IFLNK:
		return "symbolic link"
	}
	return fmt.Sprintf("file of type %#o", mode&unix.S_IFMT)
}

// Path returns the lock file's path.
func (l *LockFile) Path() string { return l.path }

// Ensure makes sure that the descriptor still refers to the file at the
// path, and opens a new one when the file was deleted, renamed or replaced
// (compared by device and inode); it also puts back the file's mode when
// someone changed it, since perfalloc users need to read it. It returns
// what it repaired, as words for the log ("" when nothing was wrong). On
// error the old descriptor stays in use.
//
// An agent that no longer runs as root cannot create the file in a root
// directory; it still adopts a file that root put back, read-only (F_GETLK
// needs no write access), and otherwise says what to do.
func (l *LockFile) Ensure() (repaired string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fd < 0 {
		return "", fmt.Errorf("lock file %s: already closed", l.path)
	}
	var st unix.Stat_t
	lerr := unix.Lstat(l.path, &st)
	if lerr == nil && st.Dev == l.dev && st.Ino == l.ino {
		want := l.access.mode()
		if l.access.Group && int(st.Gid) != l.access.GID {
			if err := unix.Fchown(l.fd, -1, l.access.GID); err != nil {
				return "", fmt.Errorf("lock file %s has gid %d, not %d, and the agent (uid %d) cannot change it: run chgrp %d %s",
					l.path, st.Gid, l.access.GID, os.Geteuid(), l.access.GID, l.path)
			}
			return fmt.Sprintf("had gid %d: put back %d", st.Gid, l.access.GID), nil
		}
		if m := st.Mode & 0o7777; m != want {
			if err := unix.Fchmod(l.fd, want); err != nil {
				return "", fmt.Errorf("lock file %s has mode %04o, not %04o, and the agent (uid %d) cannot change it: run chmod %04o %s",
					l.path, m, want, os.Geteuid(), want, l.path)
			}
			return fmt.Sprintf("had mode %04o: put back %04o", m, want), nil
		}
		return "", nil
	}
	what := "was replaced"
	if lerr != nil {
		what = "was deleted"
	}
	fd, nst, err := openLockFile(l.path, l.access)
	adopted := false
	if err != nil && os.Geteuid() != 0 && (errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM)) {
		fd, nst, err = adoptLockFile(l.path, what)
		adopted = true
	}
	if err != nil {
		return "", err
	}
	// Closing the old descriptor is safe only because the agent never holds
	// a lock itself: a close drops every lock this process has on that file.
	unix.Close(l.fd)
	l.fd, l.dev, l.ino = fd, nst.Dev, nst.Ino
	// A file that root put back between the Lstat and the open was found,
	// not created.
	if lerr != nil && !adopted {
		return what + ": created it again", nil
	}
	return what + ": watching the new file", nil
}

// adoptLockFile opens, read-only, a lock file that the agent could not open
// for writing because it no longer runs as root: one that root put back.
func adoptLockFile(path, what string) (int, *unix.Stat_t, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if errors.Is(err, unix.ENOENT) {
		return -1, nil, fmt.Errorf("lock file %s %s, and the agent (uid %d) cannot create it in %s: perfalloc cannot reserve the counters until the agent restarts, or root puts the file back: install -m %04o /dev/null %s",
			path, what, os.Geteuid(), filepath.Dir(path), LockMode, path)
	}
	if err != nil {
		return -1, nil, fmt.Errorf("lock file %s %s, and the agent (uid %d) cannot open the new one: %w", path, what, os.Geteuid(), err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || (st.Uid != 0 && st.Uid != uint32(os.Geteuid())) {
		unix.Close(fd)
		return -1, nil, fmt.Errorf("lock file %s %s, and the new one is not a regular file of root's or the agent's: remove it and restart the agent", path, what)
	}
	return fd, &st, nil
}

// Status is the reservation as the agent sees it.
type Status struct {
	Reserved bool      // some other process holds a lock on byte 0
	Holders  []int     // their pids, sorted; may be empty if unknown
	Since    time.Time // when Reserved last changed, or when watching began
}

// Check asks the kernel whether any other process holds a lock that
// conflicts with a write lock on byte 0, that is, whether the counters are
// reserved, and names the holders from /proc/locks. Since is left zero; the
// watcher (package lockwatch) fills it in.
func (l *LockFile) Check() (Status, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fd < 0 {
		return Status{}, fmt.Errorf("lock file %s: already closed", l.path)
	}
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart, Start: 0, Len: 1}
	if err := unix.FcntlFlock(uintptr(l.fd), unix.F_GETLK, &lk); err != nil {
		return Status{}, fmt.Errorf("lock file %s: F_GETLK: %w", l.path, err)
	}
	if lk.Type == unix.F_UNLCK {
		return Status{}, nil
	}
	holders, err := lockHolders(l.locks, l.dev, l.ino)
	if err != nil || len(holders) == 0 {
		// /proc/locks unreadable, or device numbers that do not match (btrfs
		// subvolumes report another st_dev): F_GETLK names one holder, which
		// is better than none. OFD locks have no owning pid (-1).
		holders = nil
		if lk.Pid > 0 {
			holders = []int{int(lk.Pid)}
		}
	}
	return Status{Reserved: true, Holders: holders}, nil
}

// Conflict asks the kernel, with one F_GETLK and no /proc/locks, whether
// another process holds a lock that conflicts with a write lock on byte 0,
// and which: pid is -1 for an OFD lock, which has no owner.
func (l *LockFile) Conflict() (locked bool, pid int, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fd < 0 {
		return false, 0, fmt.Errorf("lock file %s: already closed", l.path)
	}
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart, Start: 0, Len: 1}
	if err := unix.FcntlFlock(uintptr(l.fd), unix.F_GETLK, &lk); err != nil {
		return false, 0, fmt.Errorf("lock file %s: F_GETLK: %w", l.path, err)
	}
	if lk.Type == unix.F_UNLCK {
		return false, 0, nil
	}
	return true, int(lk.Pid), nil
}

// ErrLeaseDenied marks a lease probe that we may not make: leases are for
// the file's owner or CAP_LEASE, and an agent that dropped root after
// creating the file is neither.
var ErrLeaseDenied = errors.New("lease denied")

// Alone reports whether no other open file description of the lock file
// exists, in any process. The kernel grants a write lease only then
// (F_SETLEASE checks the file's reader and writer counts against the
// caller's own descriptor); the lease is given back at once. An opener that
// comes in the microseconds between waits for the lease to be given back,
// or fails with EWOULDBLOCK if it opens with O_NONBLOCK ([Reserve] retries).
func (l *LockFile) Alone() (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fd < 0 {
		return false, fmt.Errorf("lock file %s: already closed", l.path)
	}
	_, err := unix.FcntlInt(uintptr(l.fd), unix.F_SETLEASE, unix.F_WRLCK)
	switch {
	case err == nil:
		if _, err := unix.FcntlInt(uintptr(l.fd), unix.F_SETLEASE, unix.F_UNLCK); err != nil {
			return false, fmt.Errorf("lock file %s: giving back the lease: %w", l.path, err)
		}
		return true, nil
	case errors.Is(err, unix.EAGAIN):
		return false, nil
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		return false, fmt.Errorf("lock file %s: F_SETLEASE: %w", l.path, ErrLeaseDenied)
	}
	return false, fmt.Errorf("lock file %s: F_SETLEASE: %w", l.path, err)
}

// Identity returns the device and inode of the file the descriptor refers
// to.
func (l *LockFile) Identity() (dev, ino uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.dev, l.ino
}

// Close closes the descriptor. The file itself stays: "no such file" tells a
// perfalloc user that the agent never ran, which is a different story from
// an agent that stopped.
func (l *LockFile) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fd < 0 {
		return nil
	}
	err := unix.Close(l.fd)
	l.fd = -1
	if err != nil {
		return fmt.Errorf("lock file %s: close: %w", l.path, err)
	}
	return nil
}
