package hostfs

import (
	"io"
	"io/fs"
	"sync"

	"golang.org/x/sys/unix"
)

// ReadDirNames lists dir in the kernel's order, without "." and "..", as
// (*os.File).Readdirnames(-1) does, and fails as it does with the names
// read so far. It opens dir as os.ReadDir does, away from the runtime's
// poller: os.Open tries to add every file to it, which costs a directory
// four fcntl and an epoll_ctl, and the first such open makes the runtime
// set its poller up (epoll_create1, eventfd2, epoll_ctl) and poll it
// ever after, for a process that otherwise never uses it.
func ReadDirNames(dir string) ([]string, error) {
	fd, err := open(dir, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_DIRECTORY)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	direntBuf.Lock()
	defer direntBuf.Unlock()
	buf := direntBuf.b[:]
	names := []string{}
	for {
		n, err := unix.Getdents(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return names, &fs.PathError{Op: "readdirent", Path: dir, Err: err}
		}
		if n <= 0 {
			return names, nil
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
	}
}

// direntBuf is ReadDirNames' buffer, enough for a sysfs directory of a
// hundred entries in one call: one for the process rather than one on
// the stack of each caller, whose goroutine's stack it could make the
// runtime grow (a copy of every frame on it), nor one made per call.
var direntBuf struct {
	sync.Mutex
	b [4096]byte
}

// File is a file read with plain system calls, away from the runtime's
// poller (see ReadDirNames): for a reader that wants small reads rather
// than the whole file, which ReadFile gives.
type File struct {
	fd   int
	path string
}

// Open opens path for reading; errors are *fs.PathError as os.Open's.
func Open(path string) (*File, error) {
	fd, err := open(path, unix.O_RDONLY|unix.O_CLOEXEC)
	if err != nil {
		return nil, err
	}
	return &File{fd: fd, path: path}, nil
}

// Read reads as io.Reader does: io.EOF at the end.
func (f *File) Read(b []byte) (int, error) {
	for {
		n, err := unix.Read(f.fd, b)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return 0, &fs.PathError{Op: "read", Path: f.path, Err: err}
		case n == 0 && len(b) > 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

// Close closes the file.
func (f *File) Close() error { return unix.Close(f.fd) }

func open(path string, flags int) (int, error) {
	for {
		fd, err := unix.Open(path, flags, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return -1, &fs.PathError{Op: "open", Path: path, Err: err}
		}
		return fd, nil
	}
}
