// Package conffile is the one way the agent reads a configuration file
// (perfevent.conf, ratios.conf, cgroups.conf and any later one), whoever
// wrote it and whatever was put in its place:
//
//   - the open never blocks (O_NONBLOCK) and only a regular file is read,
//     so a FIFO or a device in a configuration's place is refused at once
//     rather than hanging a reload or growing the agent's memory;
//   - a file is at most MaxSize bytes and a line at most MaxLine, each
//     refused with the file's name (and the line's number);
//   - Hold keeps the descriptor start-up opened as root, so that a reload
//     after the privilege drop still reads a file only root may open, and
//     refuses, saying what to do, a file that was replaced since.
package conffile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// Limits on what Read and Lines accept. The agent's configuration files
// are a few kilobytes with lines of tens of bytes; the limits only keep a
// wrong file (a log, a huge generated file) from costing the root agent
// memory, and a huge line from being copied into the log.
const (
	MaxSize = 1 << 20 // bytes in a file
	MaxLine = 4 << 10 // bytes in a line, without its newline
)

// File is a configuration file that is read again on every reload, by a
// process that may since have lost the right to open it.
//
// Its descriptor is used through the system calls alone: an os.File of a
// descriptor opened non-blocking would first offer a regular file to the
// poller, in two calls more an open, and every start opens perfevent.conf
// twice (Hold, then Read).
type File struct {
	path     string
	fd       int  // what Hold opened, while held
	held     bool // false if start-up could not open it, or after Close
	dev, ino uint64
}

// Hold opens path for later Read calls. A failure is not fatal: Read then
// opens the path each time.
func Hold(path string) *File {
	h := &File{path: path, fd: -1}
	if fd, err := open(path); err == nil {
		var st unix.Stat_t
		if unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG {
			h.fd, h.held, h.dev, h.ino = fd, true, st.Dev, st.Ino
		} else {
			unix.Close(fd)
		}
	}
	return h
}

// Path is the file's name.
func (h *File) Path() string { return h.path }

// Read returns the file's contents. It opens the path; only when that is
// refused for lack of permission does it read the descriptor Hold opened,
// and only if the path still names that file. A missing file is an error
// that matches fs.ErrNotExist.
func (h *File) Read() ([]byte, error) {
	fd, err := open(h.path)
	if err == nil {
		defer unix.Close(fd)
		return read(fd, h.path)
	}
	if !errors.Is(err, fs.ErrPermission) || !h.held {
		return nil, err
	}
	var now unix.Stat_t
	if serr := unix.Stat(h.path, &now); serr != nil {
		return nil, fmt.Errorf("%w; and %v", err, &fs.PathError{Op: "stat", Path: h.path, Err: serr})
	}
	if now.Dev != h.dev || now.Ino != h.ino {
		return nil, fmt.Errorf("%w (uid %d), and it is no longer the file opened at start-up (it was replaced, e.g. by an editor that saves by renaming): make it readable by uid %d, or restart the agent", err, os.Geteuid(), os.Geteuid())
	}
	return read(h.fd, h.path)
}

// Close releases the descriptor.
func (h *File) Close() error {
	if h == nil || !h.held {
		return nil
	}
	h.held = false
	return unix.Close(h.fd)
}

// Read reads the file at path once, under the same rules as File.Read.
func Read(path string) ([]byte, error) {
	fd, err := open(path)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	return read(fd, path)
}

// open follows symbolic links (a packaged configuration may be one) but
// never blocks.
func open(path string) (int, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return fd, nil
}

// read reads all of fd, a file opened from path, from its start: as many
// bytes as fstat says and one more, to see the end or that it grew.
func read(fd int, path string) ([]byte, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("%s is %s, not a regular file", path, kindOf(st.Mode))
	}
	if st.Size > MaxSize {
		return nil, fmt.Errorf("%s is %d bytes long, more than the %d a configuration may have", path, st.Size, MaxSize)
	}
	src := make([]byte, 0, max(st.Size, 0)+1)
	for {
		if len(src) == cap(src) {
			if len(src) > MaxSize {
				return nil, fmt.Errorf("%s grew beyond the %d bytes a configuration may have while it was read", path, MaxSize)
			}
			src = slices.Grow(src, min(len(src), MaxSize+1-len(src)))
		}
		n, err := unix.Pread(fd, src[len(src):cap(src)], int64(len(src)))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, &fs.PathError{Op: "read", Path: path, Err: err})
		}
		if n == 0 {
			return src, nil
		}
		src = src[:len(src)+n]
	}
}

// kindOf names the type of a file that is not a regular one.
func kindOf(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return "a directory"
	case unix.S_IFIFO:
		return "a FIFO"
	case unix.S_IFSOCK:
		return "a socket"
	case unix.S_IFCHR, unix.S_IFBLK:
		return "a device"
	}
	return "something else"
}

// Lines calls fn with each line of src (numbered from 1, without its
// newline, a carriage return before it or a leading byte-order mark) that
// is at most MaxLine bytes long. It returns, in line order, one error
// "name:line: reason" per longer line, which fn never sees, and per line
// for which fn returned an error (the reason).
func Lines(name string, src []byte, fn func(n int, line string) error) []error {
	var errs []error
	text := strings.TrimPrefix(string(src), "\ufeff")
	for n := 1; len(text) > 0; n++ {
		var line string
		line, text, _ = strings.Cut(text, "\n")
		line = strings.TrimSuffix(line, "\r")
		if len(line) > MaxLine {
			errs = append(errs, fmt.Errorf("%s:%d: line is %d bytes long, more than the %d allowed; line skipped", name, n, len(line), MaxLine))
			continue
		}
		if err := fn(n, line); err != nil {
			errs = append(errs, fmt.Errorf("%s:%d: %w", name, n, err))
		}
	}
	return errs
}
