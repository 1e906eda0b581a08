// Package cpuhotplug tells the agent when CPUs go offline or come back, so
// that it can close their counters and open them again. Without it a
// counter of an offlined CPU stays frozen after the CPU returns (the
// kernel does not revive it), and an agent started while a CPU was
// offline never counts on it.
//
// Three sources lead to one check of the online list
// (/sys/devices/system/cpu/online), which alone decides:
//
//   - the kernel's uevents (NETLINK_KOBJECT_UEVENT, multicast group 1,
//     which any user may receive: the agent no longer runs as root), with
//     SUBSYSTEM=cpu and ACTION=online or offline. They arrive within a
//     millisecond of the change;
//   - Check, which the agent calls when reading a counter fails;
//   - a slow poll, in case uevents are unavailable (some containers) or
//     the socket fails: every 15 s (Options.Poll) without them, and only
//     once a minute while they work, since a lost uevent (the socket's
//     buffer overflowed) is itself reported and checked. Each timer of an
//     idle Go program wakes several of its threads.
//
// A check costs one read of a small sysfs file; the callback runs only
// when the list differs from the last one reported.
package cpuhotplug

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"perfevent/internal/hostfs"
	"perfevent/internal/logging"
)

// DefaultPoll is how often the online list is read without uevents.
const DefaultPoll = 15 * time.Second

// UeventPoll is how often it is read anyway while uevents work.
const UeventPoll = time.Minute

// settle is how long a check waits after a hint: offlining several CPUs
// sends a uevent each, and one rebuild for all of them is enough.
const settle = 50 * time.Millisecond

// Options configure a Watcher; the zero value watches the real system.
type Options struct {
	FS       hostfs.FS     // whose OnlineFile is watched
	Poll     time.Duration // DefaultPoll if zero, and then UeventPoll while uevents work
	NoUevent bool          // poll and Check only
	// Log is told at Warning, once each, why uevents cannot be used and
	// when the online list cannot be read; nil discards.
	Log logging.Logger
}

// Watcher calls its callback, from a goroutine of its own and one call at
// a time, with the new online list each time it changes.
type Watcher struct {
	opts    Options
	changed func(online []int)
	hint    chan struct{}
	done    chan struct{}
	wg      sync.WaitGroup
	sock    *os.File      // the uevent socket, nil without one
	lost    chan struct{} // closed when the socket fails
	quiet   time.Duration // the poll while uevents work

	last    []int
	readErr string // the last read error logged
}

// Watch starts watching. initial is the online list the caller's counters
// were planned from: a change that happened before Watch is reported at
// the first check, which Watch makes at once.
func Watch(initial []int, opts Options, changed func(online []int)) *Watcher {
	quiet := opts.Poll
	if opts.Poll <= 0 {
		opts.Poll, quiet = DefaultPoll, UeventPoll
	}
	opts.Log = logging.Or(opts.Log)
	w := &Watcher{
		opts:    opts,
		changed: changed,
		hint:    make(chan struct{}, 1),
		done:    make(chan struct{}),
		lost:    make(chan struct{}),
		quiet:   quiet,
		last:    slices.Clone(initial),
	}
	if !opts.NoUevent {
		sock, err := openUevents()
		if err != nil {
			opts.Log.Warningf("CPU hotplug: no kernel uevents (%v); checking %s every %v", err, opts.FS.OnlineFile(), opts.Poll)
		} else {
			w.sock = sock
			w.wg.Add(1)
			go w.listen()
		}
	}
	w.wg.Add(1)
	go w.loop()
	w.Check()
	return w
}

// Check asks for a look at the online list soon. It never blocks.
func (w *Watcher) Check() {
	select {
	case w.hint <- struct{}{}:
	default:
	}
}

// Close stops the watcher; the callback is not called once Close returns.
func (w *Watcher) Close() {
	close(w.done)
	if w.sock != nil {
		w.sock.Close() // wakes listen
	}
	w.wg.Wait()
}

func (w *Watcher) loop() {
	defer w.wg.Done()
	every, lost := w.opts.Poll, w.lost
	if w.sock != nil {
		every = w.quiet
	} else {
		lost = nil
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-w.done:
			return
		case <-lost:
			lost = nil
			tick.Reset(w.opts.Poll)
			continue
		case <-tick.C:
		case <-w.hint:
			select {
			case <-w.done:
				return
			case <-time.After(settle):
			}
		}
		w.look()
	}
}

func (w *Watcher) look() {
	cpus, err := w.opts.FS.OnlineCPUs()
	if err != nil {
		if msg := err.Error(); msg != w.readErr {
			w.readErr = msg
			w.opts.Log.Warningf("CPU hotplug: %v; keeping the CPUs as they were", err)
		}
		return
	}
	w.readErr = ""
	if slices.Equal(cpus, w.last) {
		return
	}
	w.last = cpus
	select {
	case <-w.done:
	default:
		w.changed(slices.Clone(cpus))
	}
}

// openUevents joins the kernel's uevent multicast group. The socket is
// non-blocking, so that reading it is the runtime poller's business and
// Close wakes the reader.
func openUevents() (*os.File, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_KOBJECT_UEVENT)
	if err != nil {
		return nil, fmt.Errorf("netlink socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: 1}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("joining the uevent group: %w", err)
	}
	return os.NewFile(uintptr(fd), "uevent"), nil
}

func (w *Watcher) listen() {
	defer w.wg.Done()
	buf := make([]byte, 8192)
	for {
		n, err := w.sock.Read(buf)
		select {
		case <-w.done:
			return
		default:
		}
		switch {
		case err == nil:
			if IsCPUEvent(buf[:n]) {
				w.Check()
			}
		case errors.Is(err, unix.ENOBUFS):
			// Uevents were lost: one of them may have been ours.
			w.Check()
		default:
			w.opts.Log.Warningf("CPU hotplug: reading uevents: %v; checking %s every %v", err, w.opts.FS.OnlineFile(), w.opts.Poll)
			close(w.lost)
			return
		}
	}
}

// IsCPUEvent says whether a uevent message (NUL-separated "KEY=value"
// fields after an "action@devpath" header) reports a CPU going online or
// offline.
func IsCPUEvent(msg []byte) bool {
	cpu, action := false, false
	for _, f := range bytes.Split(msg, []byte{0}) {
		switch string(f) {
		case "SUBSYSTEM=cpu":
			cpu = true
		case "ACTION=online", "ACTION=offline":
			action = true
		}
	}
	return cpu && action
}
