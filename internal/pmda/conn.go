package pmda

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Transport is how pmcd reaches the agent.
type Transport int

const (
	Pipe Transport = iota // stdin/stdout, pmcd.conf "pipe" (the default)
	Unix                  // unix socket at Endpoint.Path, pmcd.conf "socket unix"
	Inet                  // 127.0.0.1:Endpoint.Port, pmcd.conf "socket inet" (-i)
	IPv6                  // [::1]:Endpoint.Port, pmcd.conf "socket ipv6" (-6)
)

func (t Transport) String() string {
	switch t {
	case Pipe:
		return "pipe"
	case Unix:
		return "unix"
	case Inet:
		return "inet"
	case IPv6:
		return "ipv6"
	}
	return "transport(" + strconv.Itoa(int(t)) + ")"
}

// Endpoint says where to meet pmcd. The main package fills it from the
// conventional flags: -p (pipe), -u path, -i port, -6 port.
type Endpoint struct {
	Transport Transport
	Path      string // Unix
	Port      int    // Inet, IPv6
	// SocketOwner, if set, is the user (normally $PCP_USER) given the unix
	// socket, so that a pmcd running as that user can connect.
	SocketOwner string
}

// Listener is an endpoint that is ready for pmcd. For sockets the agent is
// already listening, so it can Listen first thing (pmcd connects only 2 s
// after starting it) and finish its set-up before Accept.
//
// The sockets are made with system calls and served through os.File, not
// package net: linking net costs every start its package initialisation
// (net/netip's among it), and pipe mode, the usual one, never listens.
type Listener struct {
	ep Endpoint
	ln *os.File // the listening socket, non-blocking, in the runtime's poller; nil for a pipe
}

// Listen prepares the endpoint. In socket modes it binds and listens now;
// a unix socket path is first removed, then bound mode 0660 (listenUnix). Pipe mode does
// nothing yet, and socket modes never touch os.Stdin (pmcd closes it).
func Listen(ep Endpoint) (*Listener, error) {
	l := &Listener{ep: ep}
	var err error
	switch ep.Transport {
	case Pipe:
		return l, nil
	case Unix:
		if ep.Path == "" {
			return nil, errors.New("unix socket: no path given")
		}
		ln, err := listenUnix(ep.Path, ep.SocketOwner)
		if err != nil {
			return nil, fmt.Errorf("unix socket %s: %w", ep.Path, err)
		}
		l.ln = ln
	case Inet, IPv6:
		if ep.Port <= 0 || ep.Port > 65535 {
			return nil, fmt.Errorf("%s socket: port %d is outside 1..65535", ep.Transport, ep.Port)
		}
		l.ln, err = listenLoopback(ep.Transport == IPv6, ep.Port)
		if err != nil {
			return nil, fmt.Errorf("%s socket: %w", ep.Transport, err)
		}
	default:
		return nil, fmt.Errorf("unknown transport %d", ep.Transport)
	}
	return l, nil
}

// listenUnix binds and listens on a unix socket at path, made mode 0660
// and owned as it should be by the bind itself. The socket's directory
// ($PCP_RUN_DIR) belongs to pcp, and the agent is still root here: a chmod
// or chown of the path after the bind would follow whatever pcp put there
// meanwhile (a symlink to /etc/shadow, say). So nothing is done to the path
// but unlink and bind, which never follow a final symlink, and both are
// done on a thread of their own with the rights of the directory's owner
// (fsuid), the group of owner (fsgid; the group pmcd runs as) and umask
// 0117, relative to a descriptor of the directory (the thread's own
// working directory): nothing happens there that its owner could not do.
// The thread is thrown away afterwards (it exits locked), so no other
// goroutine ever runs with those ids or that umask.
func listenUnix(path, owner string) (*os.File, error) {
	gid := -1
	if owner != "" {
		g, err := groupOf(owner)
		if err != nil {
			return nil, err
		}
		gid = g
	}
	dir, name := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	if name == "" {
		return nil, errors.New("the path names a directory")
	}
	dfd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(dfd)
	var st unix.Stat_t
	if err := unix.Fstat(dfd, &st); err != nil {
		return nil, &os.PathError{Op: "stat", Path: dir, Err: err}
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, os.NewSyscallError("socket", err)
	}
	done := make(chan error, 1)
	go func() {
		// Never unlocked: the thread ends with this goroutine.
		runtime.LockOSThread()
		done <- bindAs(dfd, fd, name, int(st.Uid), gid)
	}()
	if err := <-done; err != nil {
		unix.Close(fd)
		return nil, err
	}
	if err := unix.Listen(fd, unix.SOMAXCONN); err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("listen", err)
	}
	// pmcd removes the path when it drops the agent, as with libpcp_pmda;
	// the agent never unlinks it. NewFile puts the non-blocking socket in
	// the runtime's poller.
	return os.NewFile(uintptr(fd), path), nil
}

// listenLoopback listens on the loopback address's port, 127.0.0.1 or
// [::1], as net.Listen("tcp4" or "tcp6") does: the address reusable at
// once after a restart, the IPv6 socket for IPv6 only.
func listenLoopback(ipv6 bool, port int) (*os.File, error) {
	family := unix.AF_INET
	var sa unix.Sockaddr = &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}
	if ipv6 {
		family = unix.AF_INET6
		sa = &unix.SockaddrInet6{Port: port, Addr: [16]byte{15: 1}}
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
	if err != nil {
		return nil, os.NewSyscallError("socket", err)
	}
	if ipv6 {
		err = unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 1)
	}
	if err == nil {
		err = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
	}
	if err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("setsockopt", err)
	}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("bind", err)
	}
	if err := unix.Listen(fd, unix.SOMAXCONN); err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("listen", err)
	}
	return os.NewFile(uintptr(fd), "listener"), nil
}

// accept takes one connection from the listening socket ln, waiting in the
// runtime's poller, and gives it as a non-blocking os.File. A TCP
// connection gets what net gives one, as net does at best effort: no
// Nagle delay for pmcd's small PDUs, and keep-alive probes after 15 s
// idle, 15 s apart, 9 of them.
func accept(ln *os.File, tcp bool) (*os.File, error) {
	rc, err := ln.SyscallConn()
	if err != nil {
		return nil, err
	}
	nfd := -1
	var aerr error
	err = rc.Read(func(fd uintptr) bool {
		for {
			nfd, _, aerr = unix.Accept4(int(fd), unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
			// A connection reset before it was accepted, or a signal: the
			// next one may be queued already, which the poller, edge
			// triggered, would not announce again.
			if aerr != unix.EINTR && aerr != unix.ECONNABORTED {
				return aerr != unix.EAGAIN
			}
		}
	})
	if err == nil && aerr != nil {
		err = os.NewSyscallError("accept4", aerr)
	}
	if err != nil {
		return nil, err
	}
	if tcp {
		for _, o := range []struct{ level, opt, v int }{
			{unix.IPPROTO_TCP, unix.TCP_NODELAY, 1},
			{unix.SOL_SOCKET, unix.SO_KEEPALIVE, 1},
			{unix.IPPROTO_TCP, unix.TCP_KEEPIDLE, 15},
			{unix.IPPROTO_TCP, unix.TCP_KEEPINTVL, 15},
			{unix.IPPROTO_TCP, unix.TCP_KEEPCNT, 9},
		} {
			unix.SetsockoptInt(nfd, o.level, o.opt, o.v)
		}
	}
	return os.NewFile(uintptr(nfd), "pmcd"), nil
}

// bindAs removes the old socket and binds fd to name in the directory dfd,
// as described at listenUnix, on the calling thread, which the caller
// locked and will throw away.
func bindAs(dfd, fd int, name string, uid, gid int) error {
	if err := unix.Unshare(unix.CLONE_FS); err != nil {
		return os.NewSyscallError("unshare", err)
	}
	if err := unix.Fchdir(dfd); err != nil {
		return os.NewSyscallError("fchdir", err)
	}
	unix.Umask(0o117)
	if os.Geteuid() == 0 {
		if gid >= 0 {
			if err := setfs(unix.SetfsgidRetGid, gid); err != nil {
				return fmt.Errorf("setfsgid %d: %w", gid, err)
			}
		}
		if err := setfs(unix.SetfsuidRetUid, uid); err != nil {
			return fmt.Errorf("setfsuid %d: %w", uid, err)
		}
	}
	if err := unix.Unlink(name); err != nil && err != unix.ENOENT {
		return fmt.Errorf("removing the old file: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: name}); err != nil {
		return os.NewSyscallError("bind", err)
	}
	return nil
}

// setfs sets a file-system id and checks that it took: setfsuid and
// setfsgid report failure only by leaving the old value, which a second
// call with an impossible id reads back.
func setfs(set func(int) (int, error), id int) error {
	if _, err := set(id); err != nil {
		return err
	}
	if now, _ := set(-1); now != id {
		return fmt.Errorf("still %d", now)
	}
	return nil
}

// groupOf is owner's primary group.
func groupOf(owner string) (int, error) {
	u, err := user.Lookup(owner)
	if err != nil {
		return 0, err
	}
	gid, err := strconv.Atoi(u.Gid)
	if err != nil {
		return 0, fmt.Errorf("user %s has a non-numeric gid %q", owner, u.Gid)
	}
	return gid, nil
}

// Addr describes the endpoint for logs, e.g. "unix:/run/pcp/x.sock".
func (l *Listener) Addr() string {
	if l.ln == nil {
		return "pipe"
	}
	switch l.ep.Transport {
	case Unix:
		return "unix:" + l.ep.Path // the socket knows only its name within the directory
	case IPv6:
		return "ipv6:[::1]:" + strconv.Itoa(l.ep.Port)
	}
	return "inet:127.0.0.1:" + strconv.Itoa(l.ep.Port)
}

// Accept waits for pmcd and returns the connection. A socket listener
// accepts exactly one connection and then closes, as libpcp_pmda does.
func (l *Listener) Accept() (io.ReadWriteCloser, error) {
	if l.ln == nil {
		return newStdio()
	}
	c, err := accept(l.ln, l.ep.Transport != Unix)
	l.ln.Close()
	if err != nil {
		return nil, fmt.Errorf("%s: accepting pmcd's connection: %w", l.Addr(), err)
	}
	return wrapConn(c), nil
}

// Close abandons a listener that was never accepted on.
func (l *Listener) Close() error {
	if l.ln == nil {
		return nil
	}
	return l.ln.Close()
}

// stdio is pmcd's pipe pair: requests on fd 0, replies on fd 1.
//
// pmcd hands over blocking pipes. A blocking read(2) between two fetches
// leaves a thread in a system call, and the Go runtime's monitor thread
// (sysmon) wakes up again and again to see whether it should take that
// thread's processor away: about ten wake-ups per fetch at 10 Hz, more CPU
// than the fetch itself. Switched to non-blocking mode, the pipes go
// through the runtime's poller like a socket, and an agent waiting for pmcd
// is simply asleep. Only this process has these ends of the pipes, so the
// mode change is private to it.
func newStdio() (io.ReadWriteCloser, error) {
	for _, fd := range []int{0, 1} {
		if err := unix.SetNonblock(fd, true); err != nil {
			return nil, fmt.Errorf("pipe from pmcd: fd %d: %w", fd, err)
		}
	}
	// NewFile registers a non-blocking descriptor with the poller.
	in, out := os.NewFile(0, "pmcd-in"), os.NewFile(1, "pmcd-out")
	c, err := newQuietConn(in, out, func() error {
		err := in.Close()
		if e := out.Close(); err == nil {
			err = e
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("pipe from pmcd: %w", err)
	}
	return c, nil
}

// quietConn reads and writes pmcd's non-blocking descriptors with raw
// system calls, and waits in the runtime's poller only when a descriptor is
// not ready. A read or write through os.File or net.Conn tells the runtime
// it is entering a system call, and the first one after an idle spell
// wakes sysmon, which then looks around for a while before it sleeps again:
// two or three thread wake-ups per fetch at a low rate, each a VM exit
// here, for a call that cannot block (the descriptor is non-blocking).
// Left asleep, sysmon costs nothing; the fetch is then one wake-up, the
// poller's thread returning from epoll_pwait with pmcd's request.
type quietConn struct {
	r, w  quietHalf
	close func() error
}

// quietHalf is one direction: its RawConn and the raw call under way (set
// by Read or Write around RawConn.Read/Write, which call fn), so that a
// read and a write may run at once.
type quietHalf struct {
	rc    syscall.RawConn
	p     []byte
	n     int
	errno syscall.Errno
	fn    func(fd uintptr) bool // a method value made once: a request allocates nothing
}

func newQuietConn(in, out syscall.Conn, close func() error) (*quietConn, error) {
	ri, err := in.SyscallConn()
	if err != nil {
		return nil, err
	}
	ro, err := out.SyscallConn()
	if err != nil {
		return nil, err
	}
	q := &quietConn{r: quietHalf{rc: ri}, w: quietHalf{rc: ro}, close: close}
	q.r.fn, q.w.fn = q.r.rawRead, q.w.rawWrite
	return q, nil
}

// wrapConn serves a socket from pmcd the same quiet way, when it can.
func wrapConn(c *os.File) io.ReadWriteCloser {
	q, err := newQuietConn(c, c, c.Close)
	if err != nil {
		return c
	}
	return q
}

func (q *quietConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	n, err := q.r.run(p, false)
	switch {
	case err != nil:
		return 0, err
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

func (q *quietConn) Write(p []byte) (int, error) { return q.w.run(p, true) }

// run makes h's raw call on p through its RawConn, which waits in the
// poller whenever the call says the descriptor is not ready.
func (h *quietHalf) run(p []byte, write bool) (int, error) {
	h.p, h.n, h.errno = p, 0, 0
	var err error
	op := "read"
	if write {
		op = "write"
		err = h.rc.Write(h.fn)
	} else {
		err = h.rc.Read(h.fn)
	}
	n, errno := h.n, h.errno
	h.p = nil
	if err == nil && errno != 0 {
		err = &os.SyscallError{Syscall: op, Err: errno}
	}
	return n, err
}

func (q *quietConn) Close() error { return q.close() }

// rawRead makes one read(2); false asks RawConn to wait until the
// descriptor is readable and call again.
func (q *quietHalf) rawRead(fd uintptr) bool {
	for {
		n, _, e := unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&q.p[0])), uintptr(len(q.p)))
		switch e {
		case 0:
			q.n = int(n)
			return true
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false
		}
		q.errno = e
		return true
	}
}

// rawWrite writes all of q.p, waiting for room when the pipe or socket is
// full.
func (q *quietHalf) rawWrite(fd uintptr) bool {
	for q.n < len(q.p) {
		rest := q.p[q.n:]
		n, _, e := unix.RawSyscall(unix.SYS_WRITE, fd, uintptr(unsafe.Pointer(&rest[0])), uintptr(len(rest)))
		switch e {
		case 0:
			q.n += int(n)
		case unix.EINTR:
		case unix.EAGAIN:
			return false
		default:
			q.errno = e
			return true
		}
	}
	return true
}
