package reservation

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"perfevent/internal/hostfs"
	"perfevent/internal/reservation/reservationtest"
	"perfevent/internal/testneed"
)

func mode(t *testing.T, path string) fs.FileMode {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode()
}

func TestOpenCreatesWorldReadable(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	openWorldReadable(t, filepath.Join(t.TempDir(), "perflock"))
}

// openWorldReadable opens the lock file at path, which must then be 0644.
func openWorldReadable(t *testing.T, path string) {
	t.Helper()
	lf, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	if m := mode(t, path); m != 0o644 {
		t.Errorf("mode %v, want -rw-r--r--", m)
	}
}

func TestOpenResetsMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "perflock")
	if err := os.WriteFile(path, nil, 0o744); err != nil { // what the C agent leaves
		t.Fatal(err)
	}
	os.Chmod(path, 0o744)
	openWorldReadable(t, path)
}

func TestOpenRefusesSymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	path := filepath.Join(dir, "perflock")
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	_, err := Open(path)
	want := "lock file " + path + " is a symbolic link: refusing to follow it (remove it and the agent will create the file)"
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}
	if _, err := os.Lstat(target); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the link's target was created: %v", err)
	}
}

func TestOpenRefusesFIFO(t *testing.T) {
	path := filepath.Join(t.TempDir(), "perflock")
	if err := unix.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Open(path)
	want := "lock file " + path + " is not a regular file (it is a FIFO): remove it and the agent will create the file"
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}
}

func TestOpenMissingDirectory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nodir", "perflock")
	_, err := Open(path)
	if err == nil || !strings.Contains(err.Error(), "directory "+filepath.Dir(path)+" does not exist") {
		t.Fatalf("got %v", err)
	}
}

func TestEnsureRecreates(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "perflock")
	lf, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	if re, err := lf.Ensure(); re != "" || err != nil {
		t.Fatalf("Ensure on an intact file: %q %v", re, err)
	}

	os.Chmod(path, 0)
	if re, err := lf.Ensure(); re != "had mode 0000: put back 0644" || err != nil {
		t.Fatalf("Ensure after chmod 000: %q %v", re, err)
	}
	if m := mode(t, path); m != 0o644 {
		t.Errorf("mode after Ensure %v", m)
	}

	os.Remove(path)
	if re, err := lf.Ensure(); re != "was deleted: created it again" || err != nil {
		t.Fatalf("Ensure after delete: %q %v", re, err)
	}
	if m := mode(t, path); m != 0o644 {
		t.Errorf("recreated with mode %v", m)
	}

	// Replaced by rename: the descriptor must follow the new file, so
	// that locks on it are seen.
	other := filepath.Join(dir, "other")
	os.WriteFile(other, nil, 0o600)
	if err := os.Rename(other, path); err != nil {
		t.Fatal(err)
	}
	if re, err := lf.Ensure(); re != "was replaced: watching the new file" || err != nil {
		t.Fatalf("Ensure after replace: %q %v", re, err)
	}
	h := startHolder(t, path, false)
	st, err := lf.Check()
	if err != nil || !st.Reserved || !slices.Equal(st.Holders, []int{h.pid()}) {
		t.Fatalf("after replace: %+v %v, want reserved by %d", st, err, h.pid())
	}
	h.release(t)

	// Replaced by a symbolic link: refused, and the old fd stays usable.
	os.Remove(path)
	os.Symlink("/etc/passwd", path)
	if _, err := lf.Ensure(); err == nil || !strings.Contains(err.Error(), "is a symbolic link") {
		t.Fatalf("Ensure with a symlink: %v", err)
	}
	if _, err := lf.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestCheckAcrossProcesses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "perflock")
	lf, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	if st, err := lf.Check(); err != nil || st.Reserved || st.Holders != nil {
		t.Fatalf("fresh lock file: %+v %v", st, err)
	}

	a := startHolder(t, path, false)
	b := startHolder(t, path, false) // read locks are shared
	st, err := lf.Check()
	want := []int{a.pid(), b.pid()}
	slices.Sort(want)
	if err != nil || !st.Reserved || !slices.Equal(st.Holders, want) {
		t.Fatalf("two holders: %+v %v, want holders %v", st, err, want)
	}

	a.release(t)
	st, _ = lf.Check()
	if !st.Reserved || !slices.Equal(st.Holders, []int{b.pid()}) {
		t.Fatalf("after one release: %+v, want holder %d", st, b.pid())
	}

	// SIGKILL: the kernel drops the lock with the process.
	b.Cmd.Process.Kill()
	b.Cmd.Wait()
	if st, _ := lf.Check(); st.Reserved {
		t.Fatalf("after SIGKILL: %+v", st)
	}
}

// OpenIn names holders from the procfs it is given: here one whose locks
// file names pid 1 for the lock file (F_GETLK, which the agent falls back
// on, would name the real holder), then one without a locks file.
func TestOpenInReadsItsProcfs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "perflock")
	host := hostfs.FS{Proc: t.TempDir()}
	lf, err := OpenIn(host, path, Access{})
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	h := startHolder(t, path, false)
	dev, ino := lf.Identity()
	line := fmt.Sprintf("1: POSIX  ADVISORY  READ 1 %02x:%02x:%d 0 0\n", unix.Major(dev), unix.Minor(dev), ino)
	if err := os.WriteFile(host.LocksFile(), []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	if st, err := lf.Check(); err != nil || !st.Reserved || !slices.Equal(st.Holders, []int{1}) {
		t.Errorf("with %s naming pid 1: %+v %v", host.LocksFile(), st, err)
	}
	os.Remove(host.LocksFile())
	if st, err := lf.Check(); err != nil || !st.Reserved || !slices.Equal(st.Holders, []int{h.pid()}) {
		t.Errorf("without %s: %+v %v, want F_GETLK's holder %d", host.LocksFile(), st, err, h.pid())
	}
}

func TestReserveErrors(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	if _, err := Reserve(missing); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing file: %v", err)
	}

	link := filepath.Join(dir, "link")
	os.WriteFile(filepath.Join(dir, "real"), nil, 0o644)
	os.Symlink("real", link)
	if _, err := Reserve(link); !errors.Is(err, unix.ELOOP) || !strings.Contains(err.Error(), "is a symbolic link") {
		t.Errorf("symlink: %v", err)
	}

	if _, err := Reserve(dir); err == nil || err.Error() != "lock file "+dir+" is not a regular file (it is a directory)" {
		t.Errorf("directory: %v", err)
	}

	path := filepath.Join(dir, "perflock")
	os.WriteFile(path, nil, 0o644)
	w := startHolder(t, path, true)
	_, err := Reserve(path)
	var held *HeldError
	if !errors.As(err, &held) || held.PID != w.pid() {
		t.Fatalf("write-locked file: %v, want a HeldError naming pid %d", err, w.pid())
	}
	want := "lock file " + path + ": process " + strconv.Itoa(w.pid()) + " holds a write lock on it, so the counters cannot be reserved now"
	if err.Error() != want {
		t.Errorf("got %q\nwant %q", err, want)
	}
}

func TestOpenRefusesHardLinks(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "perflock")
	os.WriteFile(path, nil, 0o644)
	if err := os.Link(path, filepath.Join(dir, "other-name")); err != nil {
		t.Skip("cannot make a hard link here:", err)
	}
	_, err := Open(path)
	want := "lock file " + path + " has 2 hard links: remove it and the agent will create the file"
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}
}

// An Access with a group: the file is created with that group and mode,
// and Ensure puts both back when someone changes them. A mode that would
// let others write, or keep the group out, is refused.
func TestOpenAccessGroup(t *testing.T) {
	testneed.Root(t, "to give the lock file a group it is not in")
	path := filepath.Join(t.TempDir(), "perflock")
	a := Access{Mode: 0o640, GID: 4243, Group: true}
	lf, err := OpenAccess(path, a)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	check := func(when string) {
		t.Helper()
		var st unix.Stat_t
		if err := unix.Lstat(path, &st); err != nil || st.Mode&0o7777 != 0o640 || st.Gid != 4243 {
			t.Errorf("%s: mode %04o gid %d (%v), want 0640 gid 4243", when, st.Mode&0o7777, st.Gid, err)
		}
	}
	check("created")
	os.Chmod(path, 0o644)
	if got, err := lf.Ensure(); err != nil || got != "had mode 0644: put back 0640" {
		t.Errorf("Ensure after chmod 0644: %q, %v", got, err)
	}
	os.Chown(path, -1, 0)
	if got, err := lf.Ensure(); err != nil || got != "had gid 0: put back 4243" {
		t.Errorf("Ensure after chgrp 0: %q, %v", got, err)
	}
	check("repaired")
	for _, bad := range []Access{{Mode: 0o664}, {Mode: 0o600, GID: 1, Group: true}, {Mode: 0o444}, {Mode: 0o755}} {
		if _, err := OpenAccess(filepath.Join(t.TempDir(), "perflock"), bad); err == nil {
			t.Errorf("OpenAccess %v: no error", bad)
		}
	}
}

func TestLockFileAlone(t *testing.T) {
	path := filepath.Join(t.TempDir(), "perflock")
	lf, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	alone := func() bool {
		t.Helper()
		ok, err := lf.Alone()
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !alone() {
		t.Error("only our own descriptor: not alone")
	}
	h := reservationtest.Start(t, path, "open")
	if alone() {
		t.Error("a helper has the file open read-only: alone")
	}
	h.Release(t)
	if !alone() {
		t.Error("helper gone: not alone")
	}
	// A descriptor of our own process counts too; O_PATH ones cannot lock
	// and do not.
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !alone() {
		t.Error("an O_PATH descriptor: not alone")
	}
	unix.Close(fd)
	fd, err = unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if alone() {
		t.Error("a second descriptor: alone")
	}
	unix.Close(fd)
}

func TestConflict(t *testing.T) {
	path := filepath.Join(t.TempDir(), "perflock")
	lf, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	if locked, pid, err := lf.Conflict(); locked || err != nil {
		t.Fatalf("no holder: locked %v (pid %d), %v", locked, pid, err)
	}
	h := startHolder(t, path, false)
	if locked, pid, err := lf.Conflict(); !locked || pid != h.pid() || err != nil {
		t.Fatalf("held by %d: locked %v, pid %d, %v", h.pid(), locked, pid, err)
	}
	h.release(t)
	if locked, _, err := lf.Conflict(); locked || err != nil {
		t.Fatalf("released: locked %v, %v", locked, err)
	}
}
