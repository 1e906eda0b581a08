package conffile_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"perfevent/internal/cgroup"
	"perfevent/internal/conffile"
	"perfevent/internal/config"
	"perfevent/internal/ratio"
	"perfevent/internal/testexec"
	"perfevent/internal/testneed"
)

// readers are the agent's three configuration files, each read through
// conffile as the agent reads it after start-up: what each returns as the
// reason the file could not be used, "" when it could.
var readers = []struct {
	name string
	read func(f *conffile.File) (n int, err error) // n: items read
}{
	{"perfevent.conf", func(f *conffile.File) (int, error) {
		c, err := config.ParseHeld(f)
		if c == nil {
			return 0, err
		}
		return len(c.Sections), err
	}},
	{"ratios.conf", func(f *conffile.File) (int, error) {
		defs, err := ratio.ParseHeld(f)
		return len(defs), err
	}},
	{"cgroups.conf", func(f *conffile.File) (int, error) {
		cfg, _, errs := cgroup.ReadHeld(f)
		return len(cfg.Patterns), errors.Join(errs...)
	}},
}

// A FIFO or a device in any configuration's place is refused at once, by
// name: the open never blocks, and /dev/zero is never read.
func TestNotARegularFileIsRefused(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	zero := filepath.Join(dir, "zero")
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	for _, r := range readers {
		for path, want := range map[string]string{
			fifo:        fifo + " is a FIFO, not a regular file",
			zero:        zero + " is a device, not a regular file",
			dir:         dir + " is a directory, not a regular file",
			"/dev/zero": "/dev/zero is a device, not a regular file",
		} {
			done := make(chan error, 1)
			go func() {
				f := conffile.Hold(path)
				defer f.Close()
				_, err := r.read(f)
				done <- err
			}()
			select {
			case err := <-done:
				if err == nil || err.Error() != want {
					t.Errorf("%s as %s: %v, want %q", r.name, path, err, want)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%s as %s: still reading after 10 s", r.name, path)
			}
		}
	}
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	if m.TotalAlloc > 64<<20 {
		t.Errorf("the test allocated %d bytes: something read /dev/zero", m.TotalAlloc)
	}
}

// Size and line caps, with the file and line named; a missing file is
// fs.ErrNotExist (each parser then reads no items, and no error).
func TestLimits(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, make([]byte, conffile.MaxSize+1), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := conffile.Read(big); err == nil || err.Error() != fmt.Sprintf("%s is %d bytes long, more than the %d a configuration may have", big, conffile.MaxSize+1, conffile.MaxSize) {
		t.Errorf("too big: %v", err)
	}
	missing := filepath.Join(dir, "missing")
	if _, err := conffile.Read(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing: %v", err)
	}
	for _, r := range readers[1:] {
		if n, err := r.read(conffile.Hold(missing)); n != 0 || err != nil {
			t.Errorf("%s missing: %d items, %v", r.name, n, err)
		}
	}

	src := []byte("\ufeffa\r\n" + strings.Repeat("x", conffile.MaxLine+1) + "\nbad\n\nb")
	var got []string
	errs := conffile.Lines("f.conf", src, func(n int, line string) error {
		got = append(got, fmt.Sprintf("%d:%s", n, line))
		if line == "bad" {
			return errors.New("not good")
		}
		return nil
	})
	if want := "1:a 3:bad 4: 5:b"; strings.Join(got, " ") != want {
		t.Errorf("lines %q, want %q", strings.Join(got, " "), want)
	}
	want := fmt.Sprintf("f.conf:2: line is %d bytes long, more than the %d allowed; line skipped\nf.conf:3: not good", conffile.MaxLine+1, conffile.MaxLine)
	if e := errors.Join(errs...); e == nil || e.Error() != want {
		t.Errorf("errors:\n%v\nwant:\n%s", e, want)
	}

	// A long line in ratios.conf or cgroups.conf costs that line only.
	long := filepath.Join(dir, "long")
	text := map[string]string{
		"ratios.conf":  "r1 = page-faults / cpu-clock\n",
		"cgroups.conf": "cgroup /a\n",
	}
	for _, r := range readers[1:] {
		os.WriteFile(long, []byte(strings.Repeat("#", 70000)+"\n"+text[r.name]), 0o644)
		n, err := r.read(conffile.Hold(long))
		if n != 1 || err == nil || !strings.HasPrefix(err.Error(), long+":1: line is 70000 bytes long") {
			t.Errorf("%s with a long line 1: %d items, %v", r.name, n, err)
		}
	}
}

// The agent opens its configuration files as root and reloads them as
// $PCP_USER: a 0600 root file must still be read, an edit in place
// included, and a replaced one refused with the remedy. Each file, not
// only perfevent.conf.
func TestHeldAfterThePrivilegeDrop(t *testing.T) {
	if testexec.Rerunning(t) {
		heldChild(t)
		return
	}
	testneed.Root(t, "to open a 0600 root file and then lose the right to")
	testexec.Rerun(t)
}

// heldChild runs in a process of its own: it changes its effective uid,
// which every thread shares.
func heldChild(t *testing.T) {
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	os.Chmod(filepath.Dir(dir), 0o755)
	as := func(uid int) {
		t.Helper()
		if err := syscall.Setresuid(-1, uid, -1); err != nil {
			t.Fatal(err)
		}
	}
	text := map[string][2]string{
		"perfevent.conf": {"[perf]\ncpu-clock\n", "[perf]\ncpu-clock\n[x86_64]\nfaults\n"},
		"ratios.conf":    {"r1 = page-faults / cpu-clock\n", "r1 = page-faults / cpu-clock\nr2 = faults / cpu-clock\n"},
		"cgroups.conf":   {"cgroup /a\n", "cgroup /a\ncgroup /b\n"},
	}
	for _, r := range readers {
		path := filepath.Join(dir, r.name)
		if err := os.WriteFile(path, []byte(text[r.name][0]), 0o600); err != nil {
			t.Fatal(err)
		}
		f := conffile.Hold(path)
		defer f.Close()
		as(65534)
		if _, err := conffile.Read(path); !errors.Is(err, fs.ErrPermission) {
			t.Fatalf("%s read by name as nobody: %v; the test needs it unreadable", r.name, err)
		}
		if n, err := r.read(f); n != 1 || err != nil {
			t.Errorf("%s as nobody: %d items, %v; want 1", r.name, n, err)
		}
		as(0)
		if err := os.WriteFile(path, []byte(text[r.name][1]), 0o600); err != nil {
			t.Fatal(err)
		}
		as(65534)
		if n, err := r.read(f); n != 2 || err != nil {
			t.Errorf("%s edited in place, as nobody: %d items, %v; want 2", r.name, n, err)
		}
		as(0)
		tmp := path + ".new"
		os.WriteFile(tmp, []byte(text[r.name][0]), 0o600)
		os.Rename(tmp, path)
		as(65534)
		want := "open " + path + ": permission denied (uid 65534), and it is no longer the file opened at start-up (it was replaced, e.g. by an editor that saves by renaming): make it readable by uid 65534, or restart the agent"
		if _, err := r.read(f); err == nil || err.Error() != want {
			t.Errorf("%s replaced:\n got %v\nwant %s", r.name, err, want)
		}
		as(0)
	}
}
