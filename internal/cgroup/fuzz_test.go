package cgroup

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// FuzzParseConfig: any bytes give a usable configuration and errors that
// name the file and line; what is kept is what Match can use.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte("cgroup /*\ncgroup /*/*\nevent cpu-clock\nmax 64\ndescriptors 4096\n"))
	f.Add([]byte("cgroup /kubepods.slice/**\nevent a\nevent a\nmax 0\n"))
	f.Add([]byte("cgroup /a/[\ncgroup rel\nbogus\n\x00\xff cgroup"))
	pos := regexp.MustCompile(`^cgroups\.conf:[0-9]+: |^cgroups\.conf: `)
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, errs := ParseConfig("cgroups.conf", data)
		for _, e := range errs {
			if !pos.MatchString(e.Error()) {
				t.Errorf("error %q does not name the file and line", e)
			}
		}
		if cfg.Max < 1 || cfg.Max > maxMax {
			t.Errorf("Max %d out of range", cfg.Max)
		}
		for _, p := range cfg.Patterns {
			if !strings.HasPrefix(p, "/") || checkPattern(p) != nil {
				t.Errorf("kept pattern %q", p)
			}
			Match(p, "/system.slice/pmcd.service") // must not panic
		}
	})
}

// FuzzLocate: any text of /proc/cgroups and mountinfo gives a hierarchy
// that is mounted in it, or an error; never a panic.
func FuzzLocate(f *testing.F) {
	for _, name := range []string{"rhel8", "ubuntu2004", "centos7", "debian12"} {
		c, err1 := os.ReadFile(filepath.Join("testdata", name+".cgroups"))
		m, err2 := os.ReadFile(filepath.Join("testdata", name+".mountinfo"))
		if err1 != nil || err2 != nil {
			f.Fatal(err1, err2)
		}
		f.Add(c, m)
	}
	f.Add([]byte("perf_event\t3\t1\t1\n"), []byte("1 2 0:1 / /a\\134\\040b rw - cgroup x rw,perf_event\n - \n"))
	f.Fuzz(func(t *testing.T, controllers, mountinfo []byte) {
		h, err := Locate(controllers, mountinfo)
		if err != nil {
			return
		}
		if h.Version != 1 && h.Version != 2 || h.Mount == "" {
			t.Errorf("Locate = %+v", h)
		}
	})
}
