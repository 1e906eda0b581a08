package reservation

import (
	"bytes"
	"fmt"
	"os"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// notifyEvent is one inotify event that concerns the watched name or file.
type notifyEvent struct {
	mask uint32 // IN_* bits as the kernel reported them
	// gen says which watchFile call the event belongs to, so that events of
	// a file that has since been replaced can be told apart; 0 for events
	// of the directory watch and for IN_Q_OVERFLOW.
	gen uint64
}

// notifier turns inotify events about one name in one directory, and
// optionally about one file, into calls of hint, one per event, in the
// kernel's order. Callers re-read the truth (F_GETLK, the state file) after
// a hint; the masks only tell the Watcher how often it needs to look.
type notifier struct {
	f     *os.File // the inotify fd, non-blocking so that Close interrupts Read
	fd    int
	dirWD int
	name  string
	hint  func(notifyEvent)
	flush func() time.Duration // after each read's events; returns the time to wait before the next read
	done  chan struct{}

	mu      sync.Mutex
	fileWD  int // -1 when no file is watched
	fileGen uint64
}

// watchDir watches dir for events (mask) about entries called name.
func watchDir(dir, name string, mask uint32, hint func(notifyEvent)) (*notifier, error) {
	return watchDirPaced(dir, name, mask, hint, nil)
}

// watchDirPaced is watchDir with flush, if not nil, called after the events
// of each read. The next read waits until the time it returns has passed
// since this one, so that events arriving in a flood are taken in batches
// (the kernel queues up to fs.inotify.max_queued_events, 16384 by default,
// and reports an overflow beyond).
func watchDirPaced(dir, name string, mask uint32, hint func(notifyEvent), flush func() time.Duration) (*notifier, error) {
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
		flush:  flush,
		done:   make(chan struct{}),
		fileWD: -1,
	}
	go n.read()
	return n, nil
}

// watchFile replaces any previous file watch with one on path and returns
// the generation that the new watch's events carry. Symbolic links are not
// followed: a link planted at the path is the lock file's problem, to be
// reported by Ensure, not something to watch.
func (n *notifier) watchFile(path string, mask uint32) (uint64, error) {
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

func (n *notifier) read() {
	defer close(n.done)
	// Room for a few thousand events of the file (they carry no name).
	buf := make([]byte, 64<<10)
	for {
		k, err := n.f.Read(buf)
		if err != nil {
			return // closed
		}
		readAt := time.Now()
		for off := 0; off+unix.SizeofInotifyEvent <= k; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			nameBytes := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
			off += unix.SizeofInotifyEvent + int(ev.Len)
			switch {
			case ev.Mask&unix.IN_Q_OVERFLOW != 0:
				n.hint(notifyEvent{mask: ev.Mask}) // events were lost: look anyway
			case int(ev.Wd) == n.dirWD:
				if string(bytes.TrimRight(nameBytes, "\x00")) == n.name {
					n.hint(notifyEvent{mask: ev.Mask})
				}
			default:
				// Checked under the lock so that an event of a replaced
				// watch is never reported with the new watch's generation;
				// hint runs outside it, so that it may wait for watchFile.
				n.mu.Lock()
				gen, ok := n.fileGen, int(ev.Wd) == n.fileWD
				n.mu.Unlock()
				if ok {
					n.hint(notifyEvent{mask: ev.Mask, gen: gen})
				}
			}
		}
		if n.flush != nil {
			if d := n.flush() - time.Since(readAt); d > 0 {
				time.Sleep(d)
			}
		}
	}
}

func (n *notifier) close() {
	n.f.Close()
	<-n.done
}
