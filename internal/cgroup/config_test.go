package cgroup

import (
	"slices"
	"strings"
	"testing"
)

func TestMatch(t *testing.T) {
	cases := []struct {
		pattern, path string
		want          bool
	}{
		{"/*", "/system.slice", true},
		{"/*", "/system.slice/pmcd.service", false},
		{"/*/*", "/system.slice/pmcd.service", true},
		{"/system.slice/*.service", "/system.slice/pmcd.service", true},
		{"/system.slice/*.service", "/system.slice/dev-hugepages.mount", false},
		{"/kubepods.slice/**", "/kubepods.slice", true},
		{"/kubepods.slice/**", "/kubepods.slice/a/b/c", true},
		{"/kubepods.slice/**", "/user.slice/a", false},
		{"/**/*.scope", "/user.slice/user-0.slice/session-1.scope", true},
		{"/**/*.scope", "/user.slice", false},
		{"/user.slice/*", "/user.slice", false},
	}
	for _, c := range cases {
		if got := Match(c.pattern, c.path); got != c.want {
			t.Errorf("Match(%q, %q) = %v, want %v", c.pattern, c.path, got, c.want)
		}
	}
}

func TestParseConfig(t *testing.T) {
	conf := `# per-cgroup counting
cgroup /system.slice/*.service
cgroup /kubepods.slice/**   # every pod
event cpu-clock
event context-switches
max 16
cgroup system.slice
event cpu-clock
max 0
bogus x
cgroup /a/[
`
	cfg, errs := ParseConfig("cgroups.conf", []byte(conf))
	want := Config{
		Patterns: []string{"/system.slice/*.service", "/kubepods.slice/**"},
		Events:   []string{"cpu-clock", "context-switches"},
		Max:      16,
	}
	if !slices.Equal(cfg.Patterns, want.Patterns) || !slices.Equal(cfg.Events, want.Events) || cfg.Max != want.Max {
		t.Errorf("ParseConfig = %+v, want %+v", cfg, want)
	}
	wantErrs := []string{
		"cgroups.conf:7: pattern \"system.slice\": must start with /",
		"cgroups.conf:8: event \"cpu-clock\" is listed twice",
		"cgroups.conf:9: max \"0\" is not a number from 1 to 4096",
		"cgroups.conf:10: unknown keyword \"bogus\"",
		"cgroups.conf:11: pattern \"/a/[\": syntax error in pattern",
	}
	if len(errs) != len(wantErrs) {
		t.Fatalf("errors %q, want %d", errs, len(wantErrs))
	}
	for i, e := range errs {
		if !strings.HasPrefix(e.Error(), wantErrs[i]) {
			t.Errorf("error %d = %q, want it to start with %q", i, e, wantErrs[i])
		}
	}
}

func TestDepth(t *testing.T) {
	if d := depth([]string{"/*", "/*/*"}); d != 2 {
		t.Errorf("depth = %d, want 2", d)
	}
	if d := depth([]string{"/*", "/k/**"}); d != -1 {
		t.Errorf("depth = %d, want -1", d)
	}
}

func TestFindHierarchy(t *testing.T) {
	const hybrid = `25 30 0:23 / /sys rw,nosuid shared:7 - sysfs sysfs rw
30 25 0:26 / /sys/fs/cgroup ro,nosuid shared:9 - tmpfs tmpfs ro,mode=755
31 30 0:27 / /sys/fs/cgroup/unified rw,nosuid shared:10 - cgroup2 cgroup2 rw,nsdelegate
35 30 0:31 / /sys/fs/cgroup/perf_event rw,nosuid shared:16 - cgroup cgroup rw,perf_event
`
	const pure = "40 1 0:35 / /sys/fs/cgroup rw shared:4 - cgroup2 cgroup2 rw\n"
	const v1only = "35 30 0:31 / /sys/fs/cgroup/cpu\\040perf rw - cgroup cgroup rw,cpu,perf_event\n36 30 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
	cases := []struct {
		name, info string
		want       Hierarchy
	}{
		// perf_event is bound to the v1 mount: nothing counts on v2.
		{"hybrid", hybrid, Hierarchy{"/sys/fs/cgroup/perf_event", 1}},
		{"hybrid, perf_event on v2", hybrid[:strings.LastIndex(hybrid[:len(hybrid)-1], "\n")+1], Hierarchy{"/sys/fs/cgroup/unified", 2}},
		{"pure v2", pure, Hierarchy{"/sys/fs/cgroup", 2}},
		{"v1", v1only, Hierarchy{"/sys/fs/cgroup/cpu perf", 1}},
	}
	for _, c := range cases {
		got, err := FindHierarchy([]byte(c.info))
		if err != nil || got != c.want {
			t.Errorf("%s: FindHierarchy = %v, %v; want %v", c.name, got, err, c.want)
		}
	}
	if _, err := FindHierarchy([]byte("36 30 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n")); err != ErrNoHierarchy {
		t.Errorf("without a usable hierarchy: err = %v, want ErrNoHierarchy", err)
	}
}

func TestScanRoot(t *testing.T) {
	root := t.TempDir()
	mkdirs(t, root, "a/b/c")
	matched, dirs, _ := scan(root, []string{"/", "/*", "/*/*"})
	if want := []string{"/", "/a", "/a/b"}; !slices.Equal(matched, want) {
		t.Errorf("matched %q, want %q", matched, want)
	}
	if want := []string{"/", "/a"}; !slices.Equal(dirs, want) {
		t.Errorf("watched %q, want %q", dirs, want)
	}
	if matched, _, _ := scan(root, []string{"/a/**"}); !slices.Equal(matched, []string{"/a", "/a/b", "/a/b/c"}) {
		t.Errorf("/a/** matched %q", matched)
	}
}

func TestMatchManyDoubleStars(t *testing.T) {
	pat := "/" + strings.Repeat("**/a/", 12) + "b"
	deep := "/" + strings.Repeat("a/", 40) + "c"
	if Match(pat, deep) {
		t.Errorf("%q matched %q", pat, deep)
	}
	if !Match(pat, "/"+strings.Repeat("a/", 40)+"b") {
		t.Errorf("%q did not match a deep path ending in b", pat)
	}
}
