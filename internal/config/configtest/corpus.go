// Package configtest gives tests of the packages that consume a parsed
// perfevent.conf the inputs package config is tested with.
package configtest

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
)

// Corpus returns config's fuzz corpus, its .conf fixtures and the shipped
// perfevent.conf, each by its path relative to the calling test's
// package directory when that is a sibling of internal/config (as
// "../config/testdata/fuzz/FuzzParse/names"), else by its absolute path.
func Corpus(t testing.TB) map[string][]byte {
	t.Helper()
	_, self, _, _ := runtime.Caller(0)
	config := filepath.Dir(filepath.Dir(self))
	wd, _ := os.Getwd()
	name := func(path string) string {
		if rel, err := filepath.Rel(wd, path); err == nil {
			return rel
		}
		return path
	}
	out := map[string][]byte{}
	seeds, _ := filepath.Glob(filepath.Join(config, "testdata", "fuzz", "FuzzParse", "*"))
	for _, path := range seeds {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		// "go test fuzz v1", then []byte("...") for the one argument.
		_, arg, _ := bytes.Cut(data, []byte("\n"))
		arg = bytes.TrimSpace(arg)
		quoted, ok := bytes.CutPrefix(arg, []byte("[]byte("))
		src, err := strconv.Unquote(string(bytes.TrimSuffix(quoted, []byte(")"))))
		if !ok || err != nil {
			t.Fatalf("%s: not a []byte corpus entry: %v", path, err)
		}
		out[name(path)] = []byte(src)
	}
	confs, _ := filepath.Glob(filepath.Join(config, "testdata", "*.conf"))
	confs = append(confs, filepath.Join(config, "..", "..", "perfevent.conf"))
	for _, path := range confs {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		out[name(path)] = data
	}
	if len(out) < 10 {
		t.Fatalf("only %d inputs", len(out))
	}
	return out
}
