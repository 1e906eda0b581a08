// Package gzipfile writes gzip files that depend only on their content (no
// name, no time), so that generated data committed to the repository does
// not change when it is regenerated from the same input.
package gzipfile

import (
	"bytes"
	"compress/gzip"
	"os"
)

// Write compresses data at the best level into the file at path.
func Write(path string, data []byte) error {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return err
	}
	if _, err := zw.Write(data); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}
