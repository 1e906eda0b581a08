package agent

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"perfevent/internal/pmu"
	"perfevent/internal/setup"
)

// opens counts the opens of the files in a directory, as the kernel sees
// them (inotify's IN_OPEN): every way of reading a file opens it, whichever
// package reads it and by whatever path.
type opens struct{ fd int }

func watchOpens(t *testing.T, dir string) *opens {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	// The closes are watched too, though not counted: inotify merges an
	// event with the one before it when they are alike and unread, so two
	// opens of a file with nothing between would count as one.
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_OPEN|unix.IN_CLOSE); err != nil {
		t.Fatal(err)
	}
	return &opens{fd: fd}
}

// since are the opens of each file name since the last call; the events
// are queued when the open happens, so all of them are there to read.
func (o *opens) since(t *testing.T) map[string]int {
	t.Helper()
	n := map[string]int{}
	buf := make([]byte, 64<<10)
	for {
		size, err := unix.Read(o.fd, buf)
		if errors.Is(err, unix.EAGAIN) {
			return n
		}
		if err != nil {
			t.Fatal(err)
		}
		for b := buf[:size]; len(b) >= unix.SizeofInotifyEvent; {
			var ev unix.InotifyEvent
			if err := binary.Read(bytes.NewReader(b[:unix.SizeofInotifyEvent]), binary.NativeEndian, &ev); err != nil {
				t.Fatal(err)
			}
			name := b[unix.SizeofInotifyEvent : unix.SizeofInotifyEvent+int(ev.Len)]
			if ev.Mask&unix.IN_Q_OVERFLOW != 0 {
				t.Fatal("inotify's queue overflowed")
			}
			if ev.Mask&unix.IN_OPEN != 0 {
				n[string(bytes.TrimRight(name, "\x00"))]++
			}
			b = b[unix.SizeofInotifyEvent+int(ev.Len):]
		}
	}
}

// confDir is a directory with the three configuration files.
func confDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range map[string]string{
		"perfevent.conf": "[perf]\ncpu-clock\npage-faults\n\n[faults:derived]\npage-faults\n",
		"ratios.conf":    "faults_per_ms = page-faults / cpu-clock\n",
		"cgroups.conf":   "event cpu-clock\ncgroup /system.slice/*\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

var confNames = []string{"perfevent.conf", "ratios.conf", "cgroups.conf"}

// A build reads each configuration file once: --check opens each for
// conffile.Hold and once more to read it, nothing else opens them again.
func TestCheckReadsEachFileOnce(t *testing.T) {
	dir := confDir(t)
	w := watchOpens(t, dir)
	var out bytes.Buffer
	o := Options{Config: filepath.Join(dir, "perfevent.conf"), NoCatalog: true, FS: fixtureFS("vm", filepath.Join(dir, "none"))}
	if _, err := Check(o, &out); err != nil {
		t.Fatal(err)
	}
	got := w.since(t)
	for _, name := range confNames {
		if got[name] != 2 {
			t.Errorf("--check opened %s %d times, want twice (held, then read once): %v\n%s", name, got[name], got, out.String())
		}
	}
}

// When the C agent's configuration is the agent's own file (both are
// PCP_PMDAS_DIR's perfevent.conf), a build reads it once for both, and
// the C agent's numbering is that of its names all the same.
func TestCLayoutOfTheSameFileReadsItOnce(t *testing.T) {
	dir := confDir(t)
	conf := filepath.Join(dir, "perfevent.conf")
	src, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	w := watchOpens(t, dir)
	h := newAgentOn(t, "vm", "0-1", string(src), func(a *Agent) {
		a.o.Config, a.o.CLayout = conf, conf
	})
	if n := w.since(t)["perfevent.conf"]; n != 2 {
		t.Errorf("start-up opened perfevent.conf %d times, want twice (held, then read once)\n%s", n, h.log)
	}
	o := Options{Config: conf, CLayout: conf, NoCatalog: true, FS: fixtureFS("vm", filepath.Join(dir, "none"))}
	files := holdFiles(&o)
	defer files.Close()
	r, err := ready(&o, files)
	if err != nil {
		t.Fatal(err)
	}
	slots := func(c *setup.CPrepared) string {
		var b bytes.Buffer
		for _, s := range c.Slots(func(*pmu.Event, []int) bool { return true }) {
			fmt.Fprintf(&b, "%s %v %v", s.Key, s.CPUs, s.Counted)
			if s.Event != nil {
				fmt.Fprintf(&b, " %+v", *s.Event)
			}
			b.WriteByte('\n')
		}
		return b.String()
	}
	want := slots(setup.PrepareCLayout(r.plan.Config, machineOf(t, "vm"), false))
	got := slots(r.cLayout)
	if got == "" || got != want {
		t.Errorf("the C layout's slots:\n%v\nwant\n%v", got, want)
	}
}

// The agent holds each file from start-up and reads it once per build:
// once at start-up and once for each reload.
func TestBuildReadsEachFileOnce(t *testing.T) {
	dir := confDir(t)
	conf, err := os.ReadFile(filepath.Join(dir, "perfevent.conf"))
	if err != nil {
		t.Fatal(err)
	}
	w := watchOpens(t, dir)
	h := newAgentOn(t, "vm", "0-1", string(conf), func(a *Agent) {
		a.o.Config = filepath.Join(dir, "perfevent.conf")
	})
	got := w.since(t)
	for _, name := range confNames {
		if got[name] != 2 {
			t.Errorf("start-up opened %s %d times, want twice (held, then read once): %v\n%s", name, got[name], got, h.log)
		}
	}
	h.a.Reload()
	got = w.since(t)
	for _, name := range confNames {
		if got[name] != 1 {
			t.Errorf("a reload opened %s %d times, want once: %v\n%s", name, got[name], got, h.log)
		}
	}
}

// The spare descriptors are /dev/null held open through the build and
// closed after it.
func TestSpareDescriptors(t *testing.T) {
	held := holdFDs(spareFDs)
	if len(held) != spareFDs {
		t.Fatalf("held %d descriptors, want %d", len(held), spareFDs)
	}
	for _, fd := range held {
		if target, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd)); err != nil || target != os.DevNull {
			t.Errorf("descriptor %d: %q, %v; want %s", fd, target, err, os.DevNull)
		}
	}
	releaseFDs(held)
	for _, fd := range held {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); !errors.Is(err, unix.EBADF) {
			t.Errorf("descriptor %d still open after releaseFDs: %v", fd, err)
		}
	}
}
