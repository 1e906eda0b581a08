package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"

	"perfevent/internal/conffile"
)

// DefaultMax is the cap on counted cgroups when the configuration sets none.
const DefaultMax = 1024

// DefaultDescriptors is the budget of counter descriptors when the
// configuration sets none: cgroups × events × CPUs stay within it, so
// that a machine with many CPUs counts fewer cgroups rather than run out
// of descriptors (or of the kernel's patience at every context switch).
const DefaultDescriptors = 16384

// maxDescriptors bounds "descriptors".
const maxDescriptors = 1 << 20

// maxMax bounds "max": beyond it the descriptors (cgroups × events × CPUs)
// would exhaust any sensible limit long before the cap mattered.
const maxMax = 4096

// Config is what cgroups.conf asks for.
type Config struct {
	Patterns []string // cgroup path patterns, each starting with "/"
	Events   []string // configured event names (as in perfevent.conf)
	Max      int      // the most cgroups counted at once
	// Descriptors bounds the counter descriptors: cgroups × events × CPUs.
	Descriptors int
	// Counting is how the cgroups are counted: CountingAuto (BPF where
	// the kernel and the agent's privileges allow, perf otherwise),
	// CountingBPF or CountingPerf.
	Counting string
}

// The values of "counting" in cgroups.conf.
const (
	CountingAuto = "auto"
	CountingBPF  = "bpf"
	CountingPerf = "perf"
)

// ReadConfig reads and parses the file at name. A missing file is not an
// error: it counts nothing, and missing is true. (The shipped cgroups.conf
// is what counts by default; an agent run with a configuration of its own,
// and no cgroups.conf beside it, opens no more than it was told to.)
func ReadConfig(name string) (cfg Config, missing bool, errs []error) {
	data, err := conffile.Read(name)
	return parseRead(name, data, err)
}

// ReadHeld is ReadConfig through a file the agent holds from start-up
// (conffile.File.Read).
func ReadHeld(f *conffile.File) (cfg Config, missing bool, errs []error) {
	data, err := f.Read()
	return parseRead(f.Path(), data, err)
}

func parseRead(name string, data []byte, err error) (cfg Config, missing bool, errs []error) {
	if errors.Is(err, fs.ErrNotExist) {
		return Config{Max: DefaultMax, Descriptors: DefaultDescriptors, Counting: CountingAuto}, true, nil
	}
	if err != nil {
		return Config{Max: DefaultMax, Descriptors: DefaultDescriptors, Counting: CountingAuto}, false, []error{err}
	}
	cfg, errs = ParseConfig(name, data)
	return cfg, false, errs
}

// ParseConfig parses cgroups.conf. Each line is empty, a comment from
// "#", or one of
//
//	cgroup PATTERN   count the cgroups whose path matches PATTERN
//	event NAME       count the configured event NAME in each of them
//	max N            count at most N cgroups (default 1024)
//	descriptors N    open at most N counter descriptors (default 16384)
//	counting MODE    count with bpf, perf, or auto (the default: bpf
//	                 where it can, perf otherwise)
//
// Patterns are in priority order: under the caps a cgroup matching an
// earlier pattern is counted before one matching only a later one.
// A bad line is reported as name:line: reason and skipped; the rest is used.
func ParseConfig(name string, data []byte) (Config, []error) {
	cfg := Config{Max: DefaultMax, Descriptors: DefaultDescriptors, Counting: CountingAuto}
	seenEvent := map[string]bool{}
	errs := conffile.Lines(name, data, func(_ int, text string) error {
		if i := strings.IndexByte(text, '#'); i >= 0 {
			text = text[:i]
		}
		f := strings.Fields(text)
		if len(f) == 0 {
			return nil
		}
		if len(f) != 2 {
			return fmt.Errorf("want \"cgroup PATTERN\", \"event NAME\", \"max N\", \"descriptors N\" or \"counting MODE\", got %q", strings.TrimSpace(text))
		}
		switch f[0] {
		case "cgroup":
			if err := checkPattern(f[1]); err != nil {
				return fmt.Errorf("pattern %q: %v", f[1], err)
			}
			cfg.Patterns = append(cfg.Patterns, f[1])
		case "event":
			if seenEvent[f[1]] {
				return fmt.Errorf("event %q is listed twice", f[1])
			}
			seenEvent[f[1]] = true
			cfg.Events = append(cfg.Events, f[1])
		case "max":
			n, err := strconv.Atoi(f[1])
			if err != nil || n < 1 || n > maxMax {
				return fmt.Errorf("max %q is not a number from 1 to %d", f[1], maxMax)
			}
			cfg.Max = n
		case "descriptors":
			n, err := strconv.Atoi(f[1])
			if err != nil || n < 1 || n > maxDescriptors {
				return fmt.Errorf("descriptors %q is not a number from 1 to %d", f[1], maxDescriptors)
			}
			cfg.Descriptors = n
		case "counting":
			switch f[1] {
			case CountingAuto, CountingBPF, CountingPerf:
				cfg.Counting = f[1]
			default:
				return fmt.Errorf("counting %q is not bpf, perf or auto", f[1])
			}
		default:
			return fmt.Errorf("unknown keyword %q (want cgroup, event, max, descriptors or counting)", f[0])
		}
		return nil
	})
	return cfg, errs
}

func checkPattern(p string) error {
	if !strings.HasPrefix(p, "/") {
		return fmt.Errorf("must start with / (paths are relative to the cgroup mount)")
	}
	for _, c := range components(p) {
		if c == "**" {
			continue
		}
		if c == "." || c == ".." {
			return fmt.Errorf("%q is not a cgroup name", c)
		}
		if _, err := path.Match(c, ""); err != nil {
			return err
		}
	}
	return nil
}

// components splits a cgroup path or pattern: "/a/b" is [a b], "/" is [].
func components(p string) []string {
	p = strings.Trim(p, "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

// Match reports whether the cgroup path (e.g. "/system.slice/x.service")
// matches pattern. "**" matches any number of components, none included.
func Match(pattern, cgroup string) bool {
	return matchParts(components(pattern), components(cgroup))
}

// matchParts matches component by component. It fills a table of which
// pattern suffixes match which name suffixes, so that patterns with several
// "**" cost len(pat) × len(name) steps, never an exponential backtrack on a
// deep tree.
func matchParts(pat, name []string) bool {
	// ok[j] says whether pat[i:] matches name[j:], for the current i.
	ok := make([]bool, len(name)+1)
	ok[len(name)] = true // the empty pattern matches the empty name only
	for i := len(pat) - 1; i >= 0; i-- {
		if pat[i] == "**" {
			// pat[i:] matches name[j:] if pat[i+1:] matches any suffix.
			for j := len(name) - 1; j >= 0; j-- {
				ok[j] = ok[j] || ok[j+1]
			}
			continue
		}
		for j := 0; j <= len(name); j++ {
			if j == len(name) {
				ok[j] = false
				continue
			}
			m, _ := path.Match(pat[i], name[j])
			ok[j] = m && ok[j+1]
		}
	}
	return ok[0]
}

// below reports whether some cgroup below dir (a path) could match
// pattern, so that a scan reads only the directories that can lead to a
// match: "/kubepods.slice/**" never makes it read /user.slice. It follows
// the pattern as an automaton over dir's components, so that many "**"
// cost len(pattern) × len(dir) steps.
func below(pattern, dir string) bool {
	pat := components(pattern)
	at := make([]bool, len(pat)+1) // at[i]: pat[:i] matches the components so far
	next := make([]bool, len(pat)+1)
	skip := func(at []bool) { // "**" matches no component too
		for i := range pat {
			if at[i] && pat[i] == "**" {
				at[i+1] = true
			}
		}
	}
	at[0] = true
	skip(at)
	for _, c := range components(dir) {
		clear(next)
		for i := range pat {
			if !at[i] {
				continue
			}
			if pat[i] == "**" {
				next[i] = true
			} else if m, _ := path.Match(pat[i], c); m {
				next[i+1] = true
			}
		}
		skip(next)
		at, next = next, at
	}
	// Any rest of the pattern matches some non-empty path.
	for i := range pat {
		if at[i] {
			return true
		}
	}
	return false
}

// depth is how many levels below the mount the patterns can reach; -1
// when one has "**" and so no bound.
func depth(patterns []string) int {
	d := 0
	for _, p := range patterns {
		c := components(p)
		for _, s := range c {
			if s == "**" {
				return -1
			}
		}
		d = max(d, len(c))
	}
	return d
}
