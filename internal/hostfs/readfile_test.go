package hostfs

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadFile: the same bytes and the same errors as os.ReadFile, for a
// sysfs attribute, a procfs file, files around the first buffer's size, a
// missing file and a directory.
func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	paths := []string{"/proc/self/status", "/sys/devices/system/cpu/online", "/proc/self/mountinfo"}
	for _, n := range []int{0, 1, 511, 512, 513, 4096, 70000} {
		p := filepath.Join(dir, "f"+string(rune('a'+len(paths))))
		if err := os.WriteFile(p, bytes.Repeat([]byte{'x', '\n'}, n)[:n], 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	for _, p := range paths {
		got, err := ReadFile(p)
		want, werr := os.ReadFile(p)
		if err != nil || werr != nil {
			t.Fatalf("%s: %v; os.ReadFile: %v", p, err, werr)
		}
		// /proc/self/status differs between two reads in its counters:
		// compare its length's order and first line only.
		if p == "/proc/self/status" {
			got, want = got[:bytes.IndexByte(got, '\n')], want[:bytes.IndexByte(want, '\n')]
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: %d bytes %q...; os.ReadFile: %d bytes", p, len(got), got[:min(len(got), 20)], len(want))
		}
	}
	for _, p := range []string{filepath.Join(dir, "missing"), dir} {
		_, err := ReadFile(p)
		_, werr := os.ReadFile(p)
		if err == nil || werr == nil || err.Error() != werr.Error() {
			t.Errorf("%s: error %v; os.ReadFile's %v", p, err, werr)
		}
		var pe *fs.PathError
		if !errors.As(err, &pe) || pe.Path != p {
			t.Errorf("%s: %#v is not a *fs.PathError naming the file", p, err)
		}
	}
	if _, err := ReadFile(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing file: %v is not fs.ErrNotExist", err)
	}
}

// AppendFile appends to what the buffer holds, in its spare room when the
// file fits there, and grows it when not.
func TestAppendFile(t *testing.T) {
	dir := t.TempDir()
	short, long := filepath.Join(dir, "short"), filepath.Join(dir, "long")
	os.WriteFile(short, []byte("0-3\n"), 0o644)
	os.WriteFile(long, bytes.Repeat([]byte("x"), 3000), 0o644)
	buf := make([]byte, 0, 64)
	b, err := AppendFile(append(buf, "cpus: "...), short)
	if err != nil || string(b) != "cpus: 0-3\n" || &b[0] != &buf[:1][0] {
		t.Errorf("AppendFile(short) = %q, %v (in the buffer given: %v), want %q in it", b, err, err == nil && &b[0] == &buf[:1][0], "cpus: 0-3\n")
	}
	b, err = AppendFile(b[:0], long)
	if err != nil || len(b) != 3000 || !bytes.Equal(b, bytes.Repeat([]byte("x"), 3000)) {
		t.Errorf("AppendFile(long): %d bytes, %v; want its 3000", len(b), err)
	}
	if _, err := AppendFile(b[:0], filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing file: %v is not fs.ErrNotExist", err)
	}
}

// AppendFrom with a limit reads a file of exactly the limit, and stops a
// longer one at the limit's byte with ErrTooLarge, wherever the buffer
// starts; a failed read keeps what came before it.
func TestAppendFromLimit(t *testing.T) {
	dir := t.TempDir()
	const limit = 1000
	for _, n := range []int{0, 1, limit - 1, limit, limit + 1, 3 * limit} {
		p := filepath.Join(dir, "f")
		if err := os.WriteFile(p, bytes.Repeat([]byte("y"), n), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, c := range []int{0, 1, 7, 2 * limit} {
			f, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			b, err := AppendFrom(append(make([]byte, 0, 3+c), "ab:"...), int(f.Fd()), p, limit)
			f.Close()
			switch {
			case n <= limit && (err != nil || string(b) != "ab:"+strings.Repeat("y", n)):
				t.Errorf("%d bytes, room %d: %d bytes, %v; want the prefix and the file", n, c, len(b), err)
			case n > limit && (!errors.Is(err, ErrTooLarge) || len(b) != 3+limit+1):
				t.Errorf("%d bytes, room %d: %d bytes, %v; want ErrTooLarge after the limit's byte", n, c, len(b), err)
			}
		}
	}
	d, err := os.Open(dir) // read(2) of a directory fails
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	b, err := AppendFrom([]byte("kept"), int(d.Fd()), dir, 0)
	var pe *fs.PathError
	if string(b) != "kept" || !errors.As(err, &pe) || pe.Op != "read" || pe.Path != dir {
		t.Errorf("a failed read: %q, %v; want what came before and a read error naming %s", b, err, dir)
	}
}
