package hostfs

import (
	"io/fs"

	"golang.org/x/sys/unix"
)

// ReadFile reads a whole file, as os.ReadFile does and with the same
// errors, for the small sysfs and procfs files that start-up reads once
// each. os.Open gives every file to the runtime's poller: for a sysfs
// attribute that is four fcntl and two epoll_ctl calls besides the open,
// fstat, reads and close, and start-up reads such a file per CPU, per PMU
// and per event. A plain open, read and close is all these need.
func ReadFile(path string) ([]byte, error) {
	// Most are a line; a sysfs attribute is at most a page.
	return AppendFile(make([]byte, 0, 512), path)
}

// AppendFile is ReadFile into b's spare room: it appends the file to b,
// growing it only when the file does not fit. A caller that reads many
// small files one after another (a PMU's events) keeps one buffer for all.
func AppendFile(b []byte, path string) ([]byte, error) {
	fd, err := open(path, unix.O_RDONLY|unix.O_CLOEXEC)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := unix.Read(fd, b[len(b):cap(b)])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			return b, nil
		}
		b = b[:len(b)+n]
	}
}
