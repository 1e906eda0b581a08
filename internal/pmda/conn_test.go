package pmda

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"perfevent/internal/pdu"

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
