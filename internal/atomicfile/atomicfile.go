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
	"io"
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
	// The descriptor is used as it is, without an os.File: this is a
	// regular file, which the poller does not take, and an os.File would
	// only ask the kernel so (fcntl) before the first write.
	fail := func(op string, err error) error {
		if fd >= 0 {
			unix.Close(fd)
		}
		unix.Unlinkat(dirfd, tmp, 0)
		return &fs.PathError{Op: op, Path: shown(tmp), Err: err}
	}
	for rest := data; len(rest) > 0; {
		n, err := unix.Write(fd, rest)
		if err == unix.EINTR {
			continue
		}
		if err == nil && n == 0 {
			err = io.ErrUnexpectedEOF // as os.File says of a write that makes no progress
		}
		if err != nil {
			return fail("write", err)
		}
		rest = rest[n:]
	}
	if err := ignoringEINTR(func() error { return unix.Fchmod(fd, uint32(o.Mode.Perm())) }); err != nil {
		return fail("chmod", err)
	}
	if o.Sync {
		if err := ignoringEINTR(func() error { return unix.Fsync(fd) }); err != nil {
			return fail("fsync", err)
		}
	}
	err = unix.Close(fd)
	fd = -1
	if err != nil {
		return fail("close", err)
	}
	if err := unix.Renameat(dirfd, tmp, dirfd, name); err != nil {
		unix.Unlinkat(dirfd, tmp, 0)
		return &os.LinkError{Op: "rename", Old: shown(tmp), New: shown(name), Err: err}
	}
	return nil
}

// ignoringEINTR retries fn while a signal interrupts it, as os.File's
// methods do.
func ignoringEINTR(fn func() error) error {
	for {
		if err := fn(); err != unix.EINTR {
			return err
		}
	}
}
