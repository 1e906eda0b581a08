package atomicfile

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// openDir holds dir open as the callers do: a descriptor that no link at
// the path can redirect.
func openDir(t *testing.T, dir string) int {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// names lists dir, to show what a write left behind.
func names(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n []string
	for _, e := range ents {
		n = append(n, e.Name())
	}
	return n
}

func TestWriteAtReplacesWithModeAndOwner(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state")
	if err := os.WriteFile(path, []byte("old, and longer than the new\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		// The file is replaced, not rewritten: it becomes the writer's.
		if err := os.Chown(path, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	var before unix.Stat_t
	unix.Stat(path, &before)

	// The mode is set through the descriptor: a umask cannot narrow it.
	old := unix.Umask(0o077)
	err := WriteAt(openDir(t, dir), "state", []byte("new\n"), Options{Mode: 0o644})
	unix.Umask(old)
	if err != nil {
		t.Fatal(err)
	}

	data, err := os.ReadFile(path)
	if err != nil || string(data) != "new\n" {
		t.Fatalf("content %q, %v; want %q", data, err, "new\n")
	}
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		t.Fatal(err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Mode&0o7777 != 0o644 {
		t.Errorf("mode %#o, want a regular file 0644", st.Mode)
	}
	if int(st.Uid) != os.Geteuid() || int(st.Gid) != os.Getegid() {
		t.Errorf("owner %d:%d, want the writer %d:%d", st.Uid, st.Gid, os.Geteuid(), os.Getegid())
	}
	if st.Ino == before.Ino {
		t.Errorf("inode %d kept: the file was rewritten in place, not replaced", st.Ino)
	}
	if got := names(t, dir); !slices.Equal(got, []string{"state"}) {
		t.Errorf("directory holds %q, want only the state file", got)
	}
}

// A reader that opens the file while it is being replaced over and over
// gets one whole version each time, never a mixture or a short file.
func TestReadersSeeTheOldFileOrTheNew(t *testing.T) {
	dir := t.TempDir()
	dfd := openDir(t, dir)
	path := filepath.Join(dir, "state")
	versions := [][]byte{
		bytes.Repeat([]byte("a"), 200<<10),
		bytes.Repeat([]byte("b"), 3<<10),
	}
	if err := WriteAt(dfd, "state", versions[0], Options{Mode: 0o644}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := WriteAt(dfd, "state", versions[i%2], Options{Mode: 0o644}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	var seen [2]int
	for i := 0; i < 20000 && (seen[0] < 50 || seen[1] < 50); i++ {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("read while replaced: %v", err)
			break
		}
		switch {
		case bytes.Equal(data, versions[0]):
			seen[0]++
		case bytes.Equal(data, versions[1]):
			seen[1]++
		default:
			t.Errorf("read %d bytes starting %q: neither version", len(data), data[:min(len(data), 8)])
		}
	}
	close(stop)
	wg.Wait()
	if seen[0] == 0 || seen[1] == 0 {
		t.Errorf("read the versions %d and %d times: the reads did not overlap the writes", seen[0], seen[1])
	}
	if got := names(t, dir); !slices.Equal(got, []string{"state"}) {
		t.Errorf("directory holds %q, want only the state file", got)
	}
}

// The write lands in the directory the descriptor holds, even after its
// path was given to another directory.
func TestWriteAtFollowsTheDescriptorNotThePath(t *testing.T) {
	root := t.TempDir()
	held, moved := filepath.Join(root, "d"), filepath.Join(root, "moved")
	if err := os.Mkdir(held, 0o755); err != nil {
		t.Fatal(err)
	}
	dfd := openDir(t, held)
	if err := os.Rename(held, moved); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(held, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := WriteAt(dfd, "state", []byte("x"), Options{Mode: 0o644}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(moved, "state")); err != nil {
		t.Errorf("not written in the held directory: %v", err)
	}
	if got := names(t, held); len(got) != 0 {
		t.Errorf("the new directory at the old path got %q", got)
	}
}

// A symbolic link at the file's name is replaced, not written through.
func TestLinkAtTheNameIsReplaced(t *testing.T) {
	dir, elsewhere := t.TempDir(), t.TempDir()
	victim := filepath.Join(elsewhere, "victim")
	os.WriteFile(victim, []byte("keep\n"), 0o644)
	if err := os.Symlink(victim, filepath.Join(dir, "state")); err != nil {
		t.Fatal(err)
	}
	if err := WriteAt(openDir(t, dir), "state", []byte("new\n"), Options{Mode: 0o644}); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(victim); string(data) != "keep\n" {
		t.Errorf("the link's target became %q", data)
	}
	fi, err := os.Lstat(filepath.Join(dir, "state"))
	if err != nil || !fi.Mode().IsRegular() {
		t.Errorf("state is %v, %v; want a regular file in place of the link", fi.Mode(), err)
	}
}

// Links planted at the temporary names are never opened: each name is
// refused (O_EXCL, O_NOFOLLOW) until the tries run out, and the old file
// and the links' target stay as they were.
func TestPlantedLinksAtTemporaryNamesAreRefused(t *testing.T) {
	dir, elsewhere := t.TempDir(), t.TempDir()
	victim := filepath.Join(elsewhere, "victim")
	os.WriteFile(victim, []byte("keep\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "state"), []byte("old\n"), 0o644)
	var tries []string
	defer func(orig func(string) string) { tempName = orig }(tempName)
	tempName = func(name string) string {
		tmp := fmt.Sprintf(".%s.planted%d", name, len(tries))
		tries = append(tries, tmp)
		if err := os.Symlink(victim, filepath.Join(dir, tmp)); err != nil {
			t.Fatal(err)
		}
		return tmp
	}
	err := WriteAt(openDir(t, dir), "state", []byte("new\n"), Options{Mode: 0o644})
	if !errors.Is(err, unix.EEXIST) || !strings.HasPrefix(err.Error(), "create temporary file .state.planted9: ") {
		t.Errorf("error %v, want EEXIST for the tenth name", err)
	}
	if len(tries) != 10 {
		t.Errorf("%d names tried, want 10", len(tries))
	}
	if data, _ := os.ReadFile(victim); string(data) != "keep\n" {
		t.Errorf("the links' target became %q", data)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "state")); string(data) != "old\n" {
		t.Errorf("state became %q", data)
	}
}

// A rename that fails leaves the old file and no temporary one.
func TestFailedRenameRemovesTheTemporaryFile(t *testing.T) {
	dir := t.TempDir()
	// A directory that is not empty cannot be renamed over.
	if err := os.MkdirAll(filepath.Join(dir, "state", "in"), 0o755); err != nil {
		t.Fatal(err)
	}
	err := WriteAt(openDir(t, dir), "state", []byte("new\n"), Options{Mode: 0o644})
	if !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.ENOTEMPTY) && !errors.Is(err, unix.EEXIST) {
		t.Errorf("error %v, want the rename refused", err)
	}
	if err != nil && !strings.HasPrefix(err.Error(), "rename .state.") {
		t.Errorf("error %q does not say that the rename failed", err)
	}
	if got := names(t, dir); !slices.Equal(got, []string{"state"}) {
		t.Errorf("directory holds %q, want only what was there", got)
	}
}

// A write that fails (here beyond RLIMIT_FSIZE, as a full disk would)
// leaves the old file and no temporary one.
func TestFailedWriteRemovesTheTemporaryFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "pmids")
	os.WriteFile(path, []byte("old\n"), 0o644)
	dfd := openDir(t, dir)

	// Beyond the limit write returns EFBIG, once SIGXFSZ no longer kills.
	signal.Ignore(syscall.SIGXFSZ)
	defer signal.Reset(syscall.SIGXFSZ)
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_FSIZE, &lim); err != nil {
		t.Fatal(err)
	}
	small := lim
	small.Cur = 4096
	if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &small); err != nil {
		t.Fatal(err)
	}
	err := WriteAt(dfd, "pmids", make([]byte, 8192), Options{Mode: 0o644, Sync: true})
	unix.Setrlimit(unix.RLIMIT_FSIZE, &lim)

	if !errors.Is(err, unix.EFBIG) || !strings.HasPrefix(err.Error(), "write .pmids.") {
		t.Errorf("error %v, want a write failing with EFBIG", err)
	}
	if data, _ := os.ReadFile(path); string(data) != "old\n" {
		t.Errorf("the old file became %q", data)
	}
	if got := names(t, dir); !slices.Equal(got, []string{"pmids"}) {
		t.Errorf("directory holds %q, want only the old file", got)
	}
}

// Write reaches the directory by its path, as the PMID map's callers
// always have: through a link to it too. Its errors name full paths.
func TestWriteByPath(t *testing.T) {
	real := t.TempDir()
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	if err := Write(filepath.Join(link, "pmids"), []byte("1 a\n"), Options{Mode: 0o644, Sync: true}); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(filepath.Join(real, "pmids")); err != nil || string(data) != "1 a\n" {
		t.Errorf("pmids %q, %v", data, err)
	}
	missing := filepath.Join(real, "no", "pmids")
	if err := Write(missing, nil, Options{Mode: 0o644}); !errors.Is(err, unix.ENOENT) || !strings.HasPrefix(err.Error(), "open "+filepath.Dir(missing)+": ") {
		t.Errorf("a missing directory: %v", err)
	}
}

func TestNamesThatAreNotFileNames(t *testing.T) {
	dfd := openDir(t, t.TempDir())
	for _, name := range []string{"", ".", "..", "a/b", "/etc/passwd"} {
		if err := WriteAt(dfd, name, nil, Options{Mode: 0o644}); err == nil || !strings.Contains(err.Error(), "is not a file name") {
			t.Errorf("%q: %v, want it refused", name, err)
		}
	}
}
