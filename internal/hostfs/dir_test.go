package hostfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestReadDirNames: the names, in the order, that Readdirnames gives, for
// an empty directory, one larger than a getdents buffer, and sysfs ones;
// a missing directory and a file fail with *fs.PathError.
func TestReadDirNames(t *testing.T) {
	empty, big := t.TempDir(), t.TempDir()
	for i := range 300 {
		if err := os.WriteFile(filepath.Join(big, fmt.Sprintf("event-with-a-long-name-%03d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, dir := range []string{empty, big, "/sys/devices/system/cpu", "/sys/bus/event_source/devices"} {
		got, err := ReadDirNames(dir)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		d, err := os.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		want, err := d.Readdirnames(-1)
		d.Close()
		if err != nil {
			t.Fatal(err)
		}
		if want == nil {
			want = []string{}
		}
		if got == nil || !slices.Equal(got, want) {
			t.Errorf("%s: ReadDirNames = %d names %.5q...; Readdirnames: %d %.5q...", dir, len(got), got, len(want), want)
		}
	}
	if n, _ := ReadDirNames(big); len(n) != 300 {
		t.Errorf("%s: %d names, want 300", big, len(n))
	}
	file := filepath.Join(empty, "f")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(empty, "missing"), file} {
		_, err := ReadDirNames(p)
		var pe *fs.PathError
		if !errors.As(err, &pe) || pe.Path != p {
			t.Errorf("ReadDirNames(%s) error = %v, want a PathError for it", p, err)
		}
	}
}

// TestOpen: a File reads what os.ReadFile gives, in reads as small as the
// caller asks for, then io.EOF; a missing file fails as os.Open does.
func TestOpen(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	text := []byte("processor\t: 0\nvendor_id\t: GenuineIntel\n")
	if err := os.WriteFile(p, text, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	var got []byte
	buf := make([]byte, 5)
	for {
		n, err := f.Read(buf)
		if n > 5 {
			t.Fatalf("read %d bytes into 5", n)
		}
		got = append(got, buf[:n]...)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if string(got) != string(text) {
		t.Errorf("read %q, want %q", got, text)
	}
	if err := f.Close(); err != nil {
		t.Error(err)
	}
	_, err = Open(filepath.Join(dir, "missing"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open(missing) error = %v, want ErrNotExist", err)
	}
	var pe *fs.PathError
	if !errors.As(err, &pe) || pe.Op != "open" {
		t.Errorf("Open(missing) error = %#v, want an open PathError", err)
	}
}
