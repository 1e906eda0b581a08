package pmda

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"perfevent/internal/pdu"
	"perfevent/internal/testexec"
	"perfevent/internal/testneed"

	"golang.org/x/sys/unix"
)

func TestUnixSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent.sock")
	if err := os.WriteFile(path, []byte("stale"), 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := Listen(Endpoint{Transport: Unix, Path: path})
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o660 {
		t.Fatalf("socket file: %v %v", fi.Mode(), err)
	}
	tab, err := NewTable(exampleSpec())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer conn.Close()
		done <- New(Config{Fetcher: &exampleFetcher{}}, tab).Serve(conn)
	}()

	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	r := pdu.NewReader(c)
	if h, _, err := r.Next(); err != nil || h.Type != pdu.TypeCreds || h.From != int32(os.Getpid()) {
		t.Fatalf("first PDU: %+v %v", h, err)
	}
	var b pdu.Builder
	c.Write(b.Creds(1, pdu.VersionCred(0)))
	c.Write(b.DescReq(0, pmidActive))
	if h, _, err := r.Next(); err != nil || h.Type != pdu.TypeDesc {
		t.Fatalf("reply: %+v %v", h, err)
	}
	// One connection only: the listener is closed once pmcd is in.
	if c2, err := net.Dial("unix", path); err == nil {
		c2.Close()
		t.Error("a second connection was accepted")
	}
	c.Close()
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
}

func TestListenErrors(t *testing.T) {
	for _, ep := range []Endpoint{
		{Transport: Unix},
		{Transport: Unix, Path: "/nonexistent-dir/x.sock"},
		{Transport: Inet, Port: 0},
		{Transport: IPv6, Port: 70000},
		{Transport: Transport(9)},
	} {
		if ln, err := Listen(ep); err == nil {
			ln.Close()
			t.Errorf("Listen(%+v) succeeded", ep)
		}
	}
}

func TestInet(t *testing.T) {
	// Find a free port, then listen on it the way -i does.
	probe, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Skip("no IPv4 loopback")
	}
	port := probe.Addr().(*net.TCPAddr).Port
	probe.Close()
	ln, err := Listen(Endpoint{Transport: Inet, Port: port})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		if c, err := net.Dial("tcp4", "127.0.0.1:"+strconv.Itoa(port)); err == nil {
			c.Close()
		}
	}()
	conn, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
}

// The loopback listeners, made without package net, are what net.Listen
// makes, and the connection accepted from one gets net's TCP options.
func TestLoopbackSockets(t *testing.T) {
	for _, c := range []struct {
		tr      Transport
		network string
		host    string
	}{{Inet, "tcp4", "127.0.0.1"}, {IPv6, "tcp6", "[::1]"}} {
		t.Run(c.tr.String(), func(t *testing.T) {
			probe, err := net.Listen(c.network, c.host+":0")
			if err != nil {
				t.Skipf("needs a %s loopback address: %v", c.network, err)
			}
			port := probe.Addr().(*net.TCPAddr).Port
			probe.Close()
			ln, err := Listen(Endpoint{Transport: c.tr, Port: port})
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			if got, want := ln.Addr(), c.tr.String()+":"+c.host+":"+strconv.Itoa(port); got != want {
				t.Errorf("Addr() = %q, want %q", got, want)
			}
			lfd := int(ln.ln.Fd())
			if v, err := unix.GetsockoptInt(lfd, unix.SOL_SOCKET, unix.SO_REUSEADDR); v != 1 || err != nil {
				t.Errorf("listener SO_REUSEADDR = %d, %v", v, err)
			}
			if c.tr == IPv6 {
				if v, err := unix.GetsockoptInt(lfd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY); v != 1 || err != nil {
					t.Errorf("listener IPV6_V6ONLY = %d, %v", v, err)
				}
			}
			dialed := make(chan net.Conn, 1)
			go func() {
				cl, err := net.Dial(c.network, c.host+":"+strconv.Itoa(port))
				if err != nil {
					t.Error(err)
				}
				dialed <- cl
			}()
			conn, err := accept(ln.ln, true)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			cl := <-dialed
			if cl == nil {
				return
			}
			defer cl.Close()
			fd := int(conn.Fd())
			for _, o := range []struct {
				name       string
				level, opt int
				want       int
			}{
				{"TCP_NODELAY", unix.IPPROTO_TCP, unix.TCP_NODELAY, 1},
				{"SO_KEEPALIVE", unix.SOL_SOCKET, unix.SO_KEEPALIVE, 1},
				{"TCP_KEEPIDLE", unix.IPPROTO_TCP, unix.TCP_KEEPIDLE, 15},
				{"TCP_KEEPINTVL", unix.IPPROTO_TCP, unix.TCP_KEEPINTVL, 15},
				{"TCP_KEEPCNT", unix.IPPROTO_TCP, unix.TCP_KEEPCNT, 9},
			} {
				if v, err := unix.GetsockoptInt(fd, o.level, o.opt); v != o.want || err != nil {
					t.Errorf("accepted %s = %d, %v; want %d", o.name, v, err, o.want)
				}
			}
			if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); err != nil || fl&unix.O_NONBLOCK == 0 {
				t.Errorf("accepted socket flags %#x, %v: not non-blocking", fl, err)
			}
			// Bytes go both ways.
			cl.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := cl.Write([]byte("pmcd")); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 4)
			if _, err := io.ReadFull(conn, buf); err != nil || string(buf) != "pmcd" {
				t.Fatalf("read %q, %v", buf, err)
			}
			if _, err := conn.Write([]byte("agent")); err != nil {
				t.Fatal(err)
			}
			buf = make([]byte, 5)
			if _, err := io.ReadFull(cl, buf); err != nil || string(buf) != "agent" {
				t.Fatalf("client read %q, %v", buf, err)
			}
		})
	}
}

func TestLogger(t *testing.T) {
	var buf bytes.Buffer
	l := NewLogger(&buf, "pmdaperfevent")
	l.now = func() time.Time { return time.Date(2026, 12, 2, 9, 4, 5, 0, time.UTC) }
	l.Start("vm")
	l.Infof("perfevent version %s (maxfiles=%d)\n", "1.0.1", 20000)
	l.Warningf("w")
	l.Errorf("e")
	l.Finish()
	pid := strconv.Itoa(os.Getpid())
	want := "Log for pmdaperfevent on vm started Wed Dec  2 09:04:05 2026\n\n" +
		"[Wed Dec  2 09:04:05] pmdaperfevent(" + pid + ") Info: perfevent version 1.0.1 (maxfiles=20000)\n" +
		"[Wed Dec  2 09:04:05] pmdaperfevent(" + pid + ") Warning: w\n" +
		"[Wed Dec  2 09:04:05] pmdaperfevent(" + pid + ") Error: e\n" +
		"\nLog finished Wed Dec  2 09:04:05 2026\n"
	if buf.String() != want {
		t.Errorf("log:\n%s\nwant:\n%s", buf.String(), want)
	}
}

// A reply larger than the pipe's buffer is written whole, waiting for room
// in the poller, and the reader sees every byte, then io.EOF.
func TestQuietConnPipe(t *testing.T) {
	// Non-blocking, as newStdio leaves pmcd's pipes.
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	rf, wf := os.NewFile(uintptr(fds[0]), "r"), os.NewFile(uintptr(fds[1]), "w")
	q, err := newQuietConn(rf, wf, func() error { rf.Close(); return wf.Close() })
	if err != nil {
		t.Fatal(err)
	}
	// A request and its reply, as the agent exchanges them with pmcd,
	// allocate nothing.
	msg, buf := make([]byte, 1272), make([]byte, 1272)
	if allocs := testing.AllocsPerRun(100, func() {
		if _, err := q.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(q, buf); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Errorf("a write and a read through quietConn: %v allocations, want 0", allocs)
	}

	want := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB: 16 pipe buffers
	done := make(chan error, 1)
	go func() {
		n, err := q.Write(want)
		if err == nil && n != len(want) {
			err = fmt.Errorf("wrote %d of %d bytes", n, len(want))
		}
		wf.Close()
		done <- err
	}()
	got := make([]byte, 0, len(want))
	buf = make([]byte, 1000)
	for {
		n, err := q.Read(buf)
		got = append(got, buf[:n]...)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("read after %d bytes: %v", len(got), err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes, not the %d written", len(got), len(want))
	}
	rf.Close()
}

// pmcd's side of a pair of non-blocking pipes to an agent served through
// quietConn, as newStdio sets them up.
func quietPipes(t *testing.T) (q *quietConn, toAgent, fromAgent *os.File) {
	t.Helper()
	var req, rep [2]int
	for _, p := range []*[2]int{&req, &rep} {
		if err := unix.Pipe2(p[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
			t.Fatal(err)
		}
	}
	in, out := os.NewFile(uintptr(req[0]), "agent-in"), os.NewFile(uintptr(rep[1]), "agent-out")
	q, err := newQuietConn(in, out, func() error { in.Close(); return out.Close() })
	if err != nil {
		t.Fatal(err)
	}
	toAgent, fromAgent = os.NewFile(uintptr(req[1]), "pmcd-out"), os.NewFile(uintptr(rep[0]), "pmcd-in")
	t.Cleanup(func() { q.Close(); toAgent.Close(); fromAgent.Close() })
	return q, toAgent, fromAgent
}

// Served over pipes through quietConn, the agent answers requests that
// come one at a time, several in one write, and one cut into pieces that
// arrive apart; it writes a reply larger than the pipe whole, and ends
// cleanly when pmcd closes its end.
func TestQuietServe(t *testing.T) {
	q, toAgent, fromAgent := quietPipes(t)
	tab, err := NewTable(exampleSpec())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- New(Config{Fetcher: &exampleFetcher{}}, tab).Serve(q) }()

	r := pdu.NewReader(fromAgent)
	reply := func(want pdu.Type) []byte {
		t.Helper()
		fromAgent.SetReadDeadline(time.Now().Add(10 * time.Second))
		h, msg, err := r.Next()
		if err != nil || h.Type != want {
			t.Fatalf("reply %+v, %v; want %s", h, err, want)
		}
		return msg
	}
	send := func(b []byte) {
		t.Helper()
		if _, err := toAgent.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	reply(pdu.TypeCreds)
	var b pdu.Builder
	send(b.Creds(1, pdu.VersionCred(0)))
	for range 3 {
		send(b.DescReq(0, pmidActive))
		reply(pdu.TypeDesc)
	}

	// Two requests in one write: two replies.
	two := append([]byte(nil), b.DescReq(0, pmidActive)...)
	two = append(two, b.Fetch(0, 1, []pdu.PMID{pmidActive})...)
	send(two)
	reply(pdu.TypeDesc)
	reply(pdu.TypeResult)

	// One request in three pieces, with pauses long enough for the agent
	// to go back to waiting between them.
	one := append([]byte(nil), b.Fetch(0, 1, []pdu.PMID{pmidActive})...)
	for _, piece := range [][]byte{one[:5], one[5 : pdu.HeaderLen+2], one[pdu.HeaderLen+2:]} {
		time.Sleep(20 * time.Millisecond)
		send(piece)
	}
	reply(pdu.TypeResult)

	// 20,000 PMIDs: a RESULT of more than 64 KiB, a full pipe's worth.
	many := make([]pdu.PMID, 20000)
	for i := range many {
		many[i] = pmidActive
	}
	send(b.Fetch(0, 1, many))
	if msg := reply(pdu.TypeResult); len(msg) <= 64<<10 {
		t.Fatalf("RESULT of %d bytes, want one larger than a pipe holds", len(msg))
	}
	send(b.DescReq(0, pmidActive))
	reply(pdu.TypeDesc)

	// A PDU that wants no reply, and pmcd gone right behind it, as when
	// pmcd tells the agent a client left and then exits: the agent must
	// see the end although the data and the hang-up make one wake-up (a
	// read that leaves the pipe empty is no promise of another one).
	time.Sleep(20 * time.Millisecond)
	send(b.Error(0, pdu.ErrNotConn))
	toAgent.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve after pmcd closed: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return 10 s after pmcd closed its end")
	}
}

// The socket's directory belongs to pcp, who may swap the socket for a
// symlink the moment bind creates it. Listen, running as root, must then
// do nothing through that path: a chmod or chown by name would hand the
// symlink's target to pcp. Here an attacker woken by inotify renames a
// symlink to a root-only file over each new socket, for many rounds; the
// file must stay root's and 0600, and every socket that survives must have
// been created right (owner, group, 0660) by the bind itself.
func TestUnixSocketSymlinkRace(t *testing.T) {
	testneed.Root(t, "as pmcd starts the agent")
	testneed.User(t, "nobody")
	victim, dir, uid, gid := pcpDir(t, "run", 0o755)
	path := filepath.Join(dir, "agent.sock")
	// The next link is ready before each read, as an attacker's would be.
	link := filepath.Join(dir, "link")
	os.Symlink(victim, link)
	stop := attack(t, dir, unix.IN_CREATE, func(events []byte) bool {
		if !created(events, "agent.sock") {
			return false
		}
		swapped := os.Rename(link, path) == nil
		os.Symlink(victim, link)
		return swapped
	})

	const rounds = 2000
	for i := range rounds {
		ln, err := Listen(Endpoint{Transport: Unix, Path: path, SocketOwner: "nobody"})
		if err == nil {
			ln.Close()
		}
		var st unix.Stat_t
		if err := unix.Stat(victim, &st); err != nil {
			t.Fatal(err)
		}
		if st.Uid != 0 || st.Mode&0o777 != 0o600 {
			t.Fatalf("round %d: the root-only file behind the symlink is now uid %d, mode %o", i, st.Uid, st.Mode&0o777)
		}
		if err := unix.Lstat(path, &st); err == nil && st.Mode&unix.S_IFMT == unix.S_IFSOCK {
			if int(st.Uid) != uid || int(st.Gid) != gid || st.Mode&0o777 != 0o660 {
				t.Fatalf("round %d: the socket is uid %d gid %d mode %o, want %d %d 660", i, st.Uid, st.Gid, st.Mode&0o777, uid, gid)
			}
		}
	}
	swapped := stop(func() { os.WriteFile(filepath.Join(dir, "wake"), nil, 0o644) })
	if swapped == 0 {
		t.Fatalf("the attacker never swapped the socket in %d rounds: the race was not run", rounds)
	}
	t.Logf("%d of %d sockets swapped for a symlink", swapped, rounds)
}

// pcpDir makes, in a directory of the test's that every user may enter,
// a file only root may read or write (the victim an attacker aims at) and
// the directory name, owned by nobody as pcp owns the agent's directories,
// made with mode perm. It returns their paths and nobody's uid and gid.
func pcpDir(t *testing.T, name string, perm os.FileMode) (victim, dir string, uid, gid int) {
	t.Helper()
	u := testneed.User(t, "nobody")
	uid, _ = strconv.Atoi(u.Uid)
	gid, _ = strconv.Atoi(u.Gid)
	top := t.TempDir()
	os.Chmod(top, 0o755)
	victim = filepath.Join(top, "shadow")
	if err := os.WriteFile(victim, []byte("root only\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir = filepath.Join(top, name)
	if err := os.Mkdir(dir, perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	return victim, dir, uid, gid
}

// attack runs an attacker on a goroutine of its own: woken by inotify
// events of mask in dir, it calls act with each read's events, at once,
// and counts the times act says it struck. stop ends it: wake must make
// one more such event, for the attacker's last read, and stop returns the
// count once the goroutine is done.
func attack(t *testing.T, dir string, mask uint32, act func(events []byte) bool) (stop func(wake func()) int) {
	t.Helper()
	in, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(in) })
	if _, err := unix.InotifyAddWatch(in, dir, mask); err != nil {
		t.Fatal(err)
	}
	struck := 0
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		for {
			n, err := unix.Read(in, buf)
			select {
			case <-quit:
				return
			default:
			}
			if err != nil || n <= 0 {
				return
			}
			if act(buf[:n]) {
				struck++
			}
		}
	}()
	return func(wake func()) int {
		close(quit)
		wake()
		<-done
		return struck
	}
}

// created says whether inotify's events in buf include the creation of name.
func created(buf []byte, name string) bool {
	for len(buf) >= unix.SizeofInotifyEvent {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[0]))
		end := unix.SizeofInotifyEvent + int(ev.Len)
		if end > len(buf) {
			return false
		}
		if ev.Mask&unix.IN_CREATE != 0 && string(bytes.TrimRight(buf[unix.SizeofInotifyEvent:end], "\x00")) == name {
			return true
		}
		buf = buf[end:]
	}
	return false
}

// The log lives in $PCP_LOG_DIR/pmcd, which pcp owns, and the agent opens
// it as root: the old log is renamed to .prev and a new one created. A
// pcp process that puts a symlink at the name as soon as the old log has
// moved must not get root to write through it: the create is exclusive
// and never follows a link, so OpenLog fails (the agent then logs to
// stderr) and the link's target is untouched.
func TestLogSymlinkRace(t *testing.T) {
	if testexec.Rerunning(t) {
		logRaceChild(t)
		return
	}
	testneed.Root(t, "as pmcd starts the agent")
	testneed.User(t, "nobody")
	// OpenLog makes the log the process's stderr: a process of its own.
	testexec.Rerun(t)
}

func logRaceChild(t *testing.T) {
	victim, dir, _, _ := pcpDir(t, "pmcd", 0o775)
	path := filepath.Join(dir, "perfevent.log")
	stop := attack(t, dir, unix.IN_MOVED_FROM, func([]byte) bool { return os.Symlink(victim, path) == nil })
	const rounds = 500
	refused := 0
	for range rounds {
		w, _, closeLog, err := OpenLog(path, io.Discard)
		if err != nil {
			refused++
		} else {
			fmt.Fprintln(w, "agent log line")
		}
		closeLog()
		var st unix.Stat_t
		if err := unix.Stat(victim, &st); err != nil {
			t.Fatal(err)
		}
		if st.Uid != 0 || st.Mode&0o777 != 0o600 || st.Size != int64(len("root only\n")) {
			t.Fatalf("the file behind the symlink is now uid %d, mode %o, %d bytes", st.Uid, st.Mode&0o777, st.Size)
		}
		// An old log for the next round, made as carefully as OpenLog
		// makes one: a late link of the attacker's would otherwise have
		// this test write through it.
		os.Remove(path)
		if f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY|syscall.O_NOFOLLOW, 0o644); err == nil {
			f.Close()
		}
	}
	planted := stop(func() { os.Rename(path, path+".x") })
	if planted == 0 {
		t.Fatalf("the attacker never planted a link in %d rounds: the race was not run", rounds)
	}
	t.Logf("%d links planted, %d opens refused, of %d", planted, refused, rounds)
}
