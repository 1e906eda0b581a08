// Package atomicfile replaces a file so that readers see its old content or
// its new content, never a mixture: the new content goes into a temporary
// file in the same directory, which is then renamed over the old one.
//
// Everything happens relative to one open descriptor of the directory
// (openat, renameat, unlinkat): the temporary file is created in the very
// directory the rename acts in, even if the directory's path is changed
// meanwhile. The temporary file is created exclusively and without
// following a symbolic link, so nothing planted in the directory is ever
// written through, and a link at the final name is replaced, not followed.
// On any error the temporary file is removed again.
//
// The agent's state file (internal/reservation) and its PMID map
// (internal/metrics) are both written this way; they differ in whether the
// new content must survive a crash (Options.Sync).
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Options says how the new file is made.
type Options struct {
	// Mode is the file's permission bits, set through its descriptor so
	// that the umask cannot narrow them.
	Mode fs.FileMode

	// Sync flushes the file to the disk before the rename, so that after a
	// crash the name holds the old content or the new, never an empty
	// file. Readers see whole files either way; without Sync a write costs
	// no disk round trip.
	Sync bool
}

// WriteAt replaces the file name in the directory open at dirfd with data.
// name must be a plain name in that directory, not a path. Errors name the
// temporary file relative to the directory; the caller knows where that is.
func WriteAt(dirfd int, name string, data []byte, o Options) error {
	return write(dirfd, "", name, data, o)
}

// Write replaces the file at path with data, through a descriptor of
// path's directory opened for this write. Unlike the file itself, the
// directory is reached as any path is: a symbolic link to it is followed.
func Write(path string, data []byte, o Options) error {
	dir := filepath.Dir(path)
	dirfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(dirfd)
	return write(dirfd, dir, filepath.Base(path), data, o)
}

// tempName names a temporary file for name: hidden, and told apart from
// others by chance alone. A test replaces it to predict the names.
var tempName = func(name string) string { return fmt.Sprintf(".%s.%08x", name, rand.Uint32()) }

// write is WriteAt; dir, when not "", is the directory's path for messages.
func write(dirfd int, dir, name string, data []byte, o Options) error {
	if name == "" || name == "." || name == ".." || filepath.Base(name) != name {
		return fmt.Errorf("atomicfile: %q is not a file name", name)
	}
	shown := func(n string) string {
		if dir == "" {
			return n
		}
		return filepath.Join(dir, n)
	}
	var tmp string
	var fd int
	var err error
	// The name only has to be new: O_EXCL refuses anything already there,
	// a planted link included, and a clash merely costs another try.
	for range 10 {
		tmp = tempName(name)
		fd, err = unix.Openat(dirfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if !errors.Is(err, unix.EEXIST) {
			break
		}
	}
	if err != nil {
		return &fs.PathError{Op: "create temporary file", Path: shown(tmp), Err: err}
	}
	f := os.NewFile(uintptr(fd), tmp)
	fail := func(op string, err error) error {
		if f != nil {
			f.Close()
		}
		unix.Unlinkat(dirfd, tmp, 0)
		if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
			err = pe.Err // the cause alone; os.File's error repeats the name
		}
		return &fs.PathError{Op: op, Path: shown(tmp), Err: err}
	}
	if _, err := f.Write(data); err != nil {
		return fail("write", err)
	}
	if err := f.Chmod(o.Mode.Perm()); err != nil {
		return fail("chmod", err)
	}
	if o.Sync {
		if err := f.Sync(); err != nil {
			return fail("fsync", err)
		}
	}
	err = f.Close()
	f = nil
	if err != nil {
		return fail("close", err)
	}
	if err := unix.Renameat(dirfd, tmp, dirfd, name); err != nil {
		unix.Unlinkat(dirfd, tmp, 0)
		return &os.LinkError{Op: "rename", Old: shown(tmp), New: shown(name), Err: err}
	}
	return nil
}
