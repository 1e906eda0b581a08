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
	"io"
	"io/fs"
	"os"
	"strings"
	"syscall"
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
type File struct {
	path string
	f    *os.File // nil if start-up could not open it
}

// Hold opens path for later Read calls. A failure is not fatal: Read then
// opens the path each time.
func Hold(path string) *File {
	h := &File{path: path}
	if f, err := open(path); err == nil {
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
			h.f = f
		} else {
			f.Close()
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
	f, err := open(h.path)
	if err == nil {
		defer f.Close()
		return read(f, h.path)
	}
	if !errors.Is(err, fs.ErrPermission) || h.f == nil {
		return nil, err
	}
	held, serr := h.f.Stat()
	if serr != nil {
		return nil, serr
	}
	now, serr := os.Stat(h.path)
	if serr != nil {
		return nil, fmt.Errorf("%w; and %v", err, serr)
	}
	if !os.SameFile(held, now) {
		return nil, fmt.Errorf("%w (uid %d), and it is no longer the file opened at start-up (it was replaced, e.g. by an editor that saves by renaming): make it readable by uid %d, or restart the agent", err, os.Geteuid(), os.Geteuid())
	}
	return read(h.f, h.path)
}

// Close releases the descriptor.
func (h *File) Close() error {
	if h == nil || h.f == nil {
		return nil
	}
	return h.f.Close()
}

// Read reads the file at path once, under the same rules as File.Read.
func Read(path string) ([]byte, error) {
	f, err := open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return read(f, path)
}

// open follows symbolic links (a packaged configuration may be one) but
// never blocks.
func open(path string) (*os.File, error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}

// read reads all of f, a file opened from path, from its start.
func read(f *os.File, path string) ([]byte, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is %s, not a regular file", path, kindOf(fi.Mode()))
	}
	if fi.Size() > MaxSize {
		return nil, fmt.Errorf("%s is %d bytes long, more than the %d a configuration may have", path, fi.Size(), MaxSize)
	}
	src, err := io.ReadAll(io.NewSectionReader(f, 0, MaxSize+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(src) > MaxSize {
		return nil, fmt.Errorf("%s grew beyond the %d bytes a configuration may have while it was read", path, MaxSize)
	}
	return src, nil
}

func kindOf(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeDevice != 0:
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
