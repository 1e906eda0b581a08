package main

import (
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// hangupGrace is how long the agent may take to notice for itself that
// pmcd closed its pipe (Serve sees the end of its input) before
// exitOnHangup ends it.
const hangupGrace = 250 * time.Millisecond

// exitOnHangup ends the process soon after pmcd closes the pipe to fd 0,
// whatever the agent is doing then: still starting (reading sysfs, opening
// counters) or rebuilding after SIGHUP. An agent that outlives its pmcd is
// a root process nobody talks to. Normally Serve sees the end of the input
// and the agent exits cleanly within the grace; cleanup runs otherwise,
// then the process exits.
func exitOnHangup(log func(string), cleanup func()) {
	h, err := watchHangup(0)
	if err != nil {
		return // no pipe to watch: a file, /dev/null, or no fd 0
	}
	go func() {
		if h.wait() != nil {
			return
		}
		time.Sleep(hangupGrace)
		log(fmt.Sprintf("pmcd closed the pipe %v ago and the agent is still running; exiting now", hangupGrace))
		cleanup()
		os.Exit(0)
	}()
}

// hangup is an epoll descriptor that becomes readable when the one
// descriptor it watches hangs up or fails: epoll reports both whatever
// events are asked for, and none are. Waiting for it parks the goroutine
// in the runtime's poller and costs no wake-ups until then; a goroutine in
// poll(2) instead held a thread of its own for the agent's life, which the
// runtime replaced with another, and which every all-thread call of the
// privilege drop had to signal.
type hangup struct{ ep *os.File }

// watchHangup watches fd; it fails for a descriptor that cannot be polled
// (EPERM: a regular file, /dev/null) or is not open (EBADF).
func watchHangup(fd int) (*hangup, error) {
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("epoll_create1", err)
	}
	if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Fd: int32(fd)}); err != nil {
		unix.Close(ep)
		return nil, os.NewSyscallError("epoll_ctl", err)
	}
	// Non-blocking, os.NewFile gives it to the runtime's poller.
	if err := unix.SetNonblock(ep, true); err != nil {
		unix.Close(ep)
		return nil, os.NewSyscallError("fcntl", err)
	}
	return &hangup{ep: os.NewFile(uintptr(ep), "hangup")}, nil
}

// wait returns nil once the descriptor has hung up, or the error that
// ends the watch.
func (h *hangup) wait() error {
	rc, err := h.ep.SyscallConn()
	if err != nil {
		return err
	}
	var evs [1]unix.EpollEvent
	var werr error
	err = rc.Read(func(ep uintptr) bool {
		n, err := unix.EpollWait(int(ep), evs[:], 0)
		switch {
		case err == unix.EINTR:
			return false
		case err != nil:
			werr = os.NewSyscallError("epoll_wait", err)
			return true
		}
		return n > 0
	})
	if err != nil {
		return err
	}
	return werr
}
