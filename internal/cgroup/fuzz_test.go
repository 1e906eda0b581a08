package cgroup

import (
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
