package gzipfile

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteIsDeterministic(t *testing.T) {
	dir := t.TempDir()
	data := bytes.Repeat([]byte("E\tINST_RETIRED\t0xc0\n"), 100)
	a, b := filepath.Join(dir, "a.gz"), filepath.Join(dir, "b.gz")
	if err := Write(a, data); err != nil {
		t.Fatal(err)
	}
	if err := Write(b, data); err != nil {
		t.Fatal(err)
	}
	ga, _ := os.ReadFile(a)
	gb, _ := os.ReadFile(b)
	if !bytes.Equal(ga, gb) {
		t.Error("two writes of the same data differ")
	}
	zr, err := gzip.NewReader(bytes.NewReader(ga))
	if err != nil {
		t.Fatal(err)
	}
	if zr.Name != "" || !zr.ModTime.IsZero() {
		t.Errorf("header has name %q, time %v", zr.Name, zr.ModTime)
	}
	back, _ := io.ReadAll(zr)
	if !bytes.Equal(back, data) {
		t.Error("the data does not come back")
	}
}
