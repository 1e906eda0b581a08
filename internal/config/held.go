package config

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// Held is a configuration file that is read again on every reload, by a
// process that may since have lost the right to open it. The agent opens
// its configuration as root at start-up and reloads it as $PCP_USER; a
// config of mode 0600 root would then be unreadable. Held keeps the
// descriptor start-up opened and reads through it (from offset 0) when the
// path cannot be opened. An editor that saves by rename leaves that
// descriptor on the old file; Parse notices (the path's device and inode
// differ) and says what to do, rather than serve the old text.
//
// This is the whole of the extra read access the agent keeps after the
// privilege drop: one file, the one it was started with.
type Held struct {
	path string
	f    *os.File // nil if start-up could not open it
}

// Hold opens path for later Parse calls. A failure is not fatal: Parse
// then opens the path each time, as ParseFile does.
func Hold(path string) *Held {
	h := &Held{path: path}
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err == nil {
		f := os.NewFile(uintptr(fd), path)
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
			h.f = f
		} else {
			f.Close()
		}
	}
	return h
}

// Path is the file's name.
func (h *Held) Path() string { return h.path }

// Parse reads and parses the file as ParseFile does. Only when the path
// cannot be opened for lack of permission does it read the held
// descriptor, and only if the path still names that file.
func (h *Held) Parse() (*File, error) {
	src, err := readFile(h.path)
	if err != nil && errors.Is(err, os.ErrPermission) && h.f != nil {
		src, err = h.readHeld(err)
	}
	if err != nil {
		return nil, err
	}
	return Parse(h.path, src)
}

func (h *Held) readHeld(openErr error) ([]byte, error) {
	held, err := h.f.Stat()
	if err != nil {
		return nil, err
	}
	now, err := os.Stat(h.path)
	if err != nil {
		return nil, fmt.Errorf("%w; and %v", openErr, err)
	}
	if !os.SameFile(held, now) {
		return nil, fmt.Errorf("%w (uid %d), and it is no longer the file opened at start-up (it was replaced, e.g. by an editor that saves by renaming): make it readable by uid %d, or restart the agent", openErr, os.Geteuid(), os.Geteuid())
	}
	return readOpen(h.f, h.path)
}

// Close releases the descriptor.
func (h *Held) Close() error {
	if h.f == nil {
		return nil
	}
	return h.f.Close()
}
