package hostfs

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
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
