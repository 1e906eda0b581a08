package hostfs

import (
	"errors"
	"io/fs"
	"slices"

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
	return AppendFrom(b, fd, path, 0)
}

// ErrTooLarge is AppendFrom's error for a file longer than its limit.
var ErrTooLarge = errors.New("larger than the limit")

// AppendFrom appends what fd reads, from its offset to the end, to b, as
// AppendFile does for the file it opens; path names the file in errors.
// With a limit above 0 it reads at most limit+1 bytes, and a file longer
// than limit is ErrTooLarge. A failed read returns what came before it,
// as os.ReadFile does, with the error.
func AppendFrom(b []byte, fd int, path string, limit int) ([]byte, error) {
	start := len(b)
	for {
		got := len(b) - start
		if limit > 0 && got > limit {
			return b, &fs.PathError{Op: "read", Path: path, Err: ErrTooLarge}
		}
		if len(b) == cap(b) {
			// By doubling, as append grows, but not past the limit's byte.
			more := max(got, 1)
			if limit > 0 {
				more = min(more, limit+1-got)
			}
			b = slices.Grow(b, more)
		}
		room := b[len(b):cap(b)]
		if limit > 0 {
			room = room[:min(len(room), limit+1-got)]
		}
		n, err := unix.Read(fd, room)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return b, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			return b, nil
		}
		b = b[:len(b)+n]
	}
}
