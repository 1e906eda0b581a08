package main

import (
	"errors"
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
//
// poll(2) with no requested events returns only on a hangup or an error,
// so the goroutine sleeps in the kernel until then and costs no wake-ups.
func exitOnHangup(log func(string), cleanup func()) {
	go func() {
		fds := []unix.PollFd{{Fd: 0}}
		for {
			_, err := unix.Poll(fds, -1)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil || fds[0].Revents&unix.POLLNVAL != 0 {
				return // no pipe to watch
			}
			if fds[0].Revents&(unix.POLLHUP|unix.POLLERR) != 0 {
				break
			}
		}
		time.Sleep(hangupGrace)
		log(fmt.Sprintf("pmcd closed the pipe %v ago and the agent is still running; exiting now", hangupGrace))
		cleanup()
		os.Exit(0)
	}()
}
