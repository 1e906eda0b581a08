// Package inotify turns inotify events about one name in a directory, and
// about one file, into calls of a function: the lock watcher's hints and
// perfalloc's wait for the state file. fsnotify would not do: it keeps
// IN_OPEN and IN_CLOSE_* private, and they are all that a reservation
// makes (package reservation's comment has the story).
package inotify

import (
	"bytes"
	"fmt"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Event is one inotify event that concerns the watched name or file.
type Event struct {
	Mask uint32 // IN_* bits as the kernel reported them
	// Gen says which WatchFile call the event belongs to, so that events of
	// a file that has since been replaced can be told apart; 0 for events
	// of the directory watch and for IN_Q_OVERFLOW.
	Gen uint64
}

// Notifier turns inotify events about one name in one directory, and
// optionally about one file, into calls of hint, one per event, in the
// kernel's order. Callers re-read the truth (F_GETLK, the state file) after
// a hint; the masks only tell the watcher how often it needs to look.
//
// Its events are read either by a goroutine of its own through the
// runtime's poller ([WatchDir]), or by its owner, who waits for the
// descriptor to become readable and then calls ReadNow ([New]).
type Notifier struct {
	fd    int      // inotify, non-blocking
	f     *os.File // fd in the runtime's poller, so that Close interrupts Read; nil when the owner reads
	dirWD int
	name  string
	hint  func(Event)
	done  chan struct{}

	mu      sync.Mutex
	fileWD  int // -1 when no file is watched
	fileGen uint64
}

// WatchDir watches dir for events (mask) about entries called name, and
// calls hint from a goroutine of its own.
func WatchDir(dir, name string, mask uint32, hint func(Event)) (*Notifier, error) {
	n, err := New(dir, name, mask, hint)
	if err != nil {
		return nil, err
	}
	// A non-blocking fd handed to os.NewFile joins the runtime poller, so
	// Read parks the goroutine and Close wakes it.
	n.f = os.NewFile(uintptr(n.fd), "inotify")
	n.done = make(chan struct{})
	go n.read()
	return n, nil
}

// New is WatchDir without the goroutine: the caller polls [Notifier.Fd]
// for input and calls ReadNow.
func New(dir, name string, mask uint32, hint func(Event)) (*Notifier, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("inotify_init1: %w", err)
	}
	wd, err := unix.InotifyAddWatch(fd, dir, mask|unix.IN_ONLYDIR)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("inotify watch on directory %s: %w", dir, err)
	}
	return &Notifier{fd: fd, dirWD: wd, name: name, hint: hint, fileWD: -1}, nil
}

// WatchFile replaces any previous file watch with one on path and returns
// the generation that the new watch's events carry. Symbolic links are not
// followed: a link planted at the path is the lock file's problem, to be
// reported by Ensure, not something to watch.
func (n *Notifier) WatchFile(path string, mask uint32) (uint64, error) {
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
		return 0, fmt.Errorf("inotify watch on %s: %w", path, err)
	}
	n.fileWD = wd
	n.fileGen++
	return n.fileGen, nil
}

func (n *Notifier) read() {
	defer close(n.done)
	buf := make([]byte, BufSize)
	for {
		k, err := n.f.Read(buf)
		if err != nil {
			return // closed
		}
		n.dispatch(buf[:k])
	}
}

// BufSize holds a few thousand events of the file (they carry no
// name).
const BufSize = 64 << 10

// ReadNow makes one read of the events queued, without waiting, calls hint
// for each and returns how many there were; buf should be BufSize.
func (n *Notifier) ReadNow(buf []byte) (int, error) {
	for {
		k, err := unix.Read(n.fd, buf)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return 0, nil
		case err != nil:
			return 0, fmt.Errorf("inotify read: %w", err)
		}
		return n.dispatch(buf[:k]), nil
	}
}

// dispatch calls hint for each event in buf, the result of one read, and
// returns how many events buf held.
func (n *Notifier) dispatch(buf []byte) int {
	count := 0
	for off := 0; off+unix.SizeofInotifyEvent <= len(buf); count++ {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
		nameBytes := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
		off += unix.SizeofInotifyEvent + int(ev.Len)
		switch {
		case ev.Mask&unix.IN_Q_OVERFLOW != 0:
			n.hint(Event{Mask: ev.Mask}) // events were lost: look anyway
		case int(ev.Wd) == n.dirWD:
			if string(bytes.TrimRight(nameBytes, "\x00")) == n.name {
				n.hint(Event{Mask: ev.Mask})
			}
		default:
			// Checked under the lock so that an event of a replaced
			// watch is never reported with the new watch's generation;
			// hint runs outside it, so that it may wait for WatchFile.
			n.mu.Lock()
			gen, ok := n.fileGen, int(ev.Wd) == n.fileWD
			n.mu.Unlock()
			if ok {
				n.hint(Event{Mask: ev.Mask, Gen: gen})
			}
		}
	}
	return count
}

// Fd is the inotify descriptor, non-blocking, for an owner that reads.
func (n *Notifier) Fd() int { return n.fd }

// Close ends the watches and the goroutine, if any.
func (n *Notifier) Close() {
	if n.f == nil {
		unix.Close(n.fd)
		return
	}
	n.f.Close()
	<-n.done
}
