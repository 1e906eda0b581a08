package reservation

import (
	"bytes"
	"fmt"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// notifier turns inotify events about one name in one directory, and
// optionally about one file, into calls of hint. It does not say what
// happened: every caller re-reads the truth (F_GETLK, the state file) anyway.
type notifier struct {
	f     *os.File // the inotify fd, non-blocking so that Close interrupts Read
	fd    int
	dirWD int
	name  string
	hint  func()
	done  chan struct{}

	mu     sync.Mutex
	fileWD int // -1 when no file is watched
}

// watchDir watches dir for events (mask) about entries called name.
func watchDir(dir, name string, mask uint32, hint func()) (*notifier, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("inotify_init1: %w", err)
	}
	wd, err := unix.InotifyAddWatch(fd, dir, mask|unix.IN_ONLYDIR)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("inotify watch on directory %s: %w", dir, err)
	}
	n := &notifier{
		// A non-blocking fd handed to os.NewFile joins the runtime poller,
		// so Read parks the goroutine and Close wakes it.
		f:      os.NewFile(uintptr(fd), "inotify"),
		fd:     fd,
		dirWD:  wd,
		name:   name,
		hint:   hint,
		done:   make(chan struct{}),
		fileWD: -1,
	}
	go n.read()
	return n, nil
}

// watchFile replaces any previous file watch with one on path. Symbolic links
// are not followed: a link planted at the path is the lock file's problem, to
// be reported by Ensure, not something to watch.
func (n *notifier) watchFile(path string, mask uint32) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.fileWD >= 0 {
		// Fails harmlessly when the kernel already dropped the watch
		// (IN_IGNORED after the inode went away).
		unix.InotifyRmWatch(n.fd, uint32(n.fileWD))
		n.fileWD = -1
	}
	wd, err := unix.InotifyAddWatch(n.fd, path, mask|unix.IN_DONT_FOLLOW)
	if err != nil {
		return fmt.Errorf("inotify watch on %s: %w", path, err)
	}
	n.fileWD = wd
	return nil
}

func (n *notifier) read() {
	defer close(n.done)
	var buf [64 * (unix.SizeofInotifyEvent + unix.NAME_MAX + 1)]byte
	for {
		k, err := n.f.Read(buf[:])
		if err != nil {
			return // closed
		}
		relevant := false
		for off := 0; off+unix.SizeofInotifyEvent <= k; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			nameBytes := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
			off += unix.SizeofInotifyEvent + int(ev.Len)
			switch {
			case ev.Mask&unix.IN_Q_OVERFLOW != 0:
				relevant = true // events were lost: look anyway
			case int(ev.Wd) == n.dirWD:
				if string(bytes.TrimRight(nameBytes, "\x00")) == n.name {
					relevant = true
				}
			default:
				n.mu.Lock()
				relevant = relevant || int(ev.Wd) == n.fileWD
				n.mu.Unlock()
			}
		}
		if relevant {
			n.hint()
		}
	}
}

func (n *notifier) close() {
	n.f.Close()
	<-n.done
}
