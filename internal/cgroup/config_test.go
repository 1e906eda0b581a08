package cgroup

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
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
descriptors 2000
counting perf
cgroup system.slice
event cpu-clock
max 0
bogus x
cgroup /a/[
descriptors lots
counting ebpf
counting
`
	cfg, errs := ParseConfig("cgroups.conf", []byte(conf))
	want := Config{
		Patterns:    []string{"/system.slice/*.service", "/kubepods.slice/**"},
		Events:      []string{"cpu-clock", "context-switches"},
		Max:         16,
		Descriptors: 2000,
		Counting:    CountingPerf,
	}
	if !slices.Equal(cfg.Patterns, want.Patterns) || !slices.Equal(cfg.Events, want.Events) || cfg.Max != want.Max || cfg.Descriptors != want.Descriptors || cfg.Counting != want.Counting {
		t.Errorf("ParseConfig = %+v, want %+v", cfg, want)
	}
	wantErrs := []string{
		"cgroups.conf:9: pattern \"system.slice\": must start with /",
		"cgroups.conf:10: event \"cpu-clock\" is listed twice",
		"cgroups.conf:11: max \"0\" is not a number from 1 to 4096",
		"cgroups.conf:12: unknown keyword \"bogus\" (want cgroup, event, max, descriptors or counting)",
		"cgroups.conf:13: pattern \"/a/[\": syntax error in pattern",
		"cgroups.conf:14: descriptors \"lots\" is not a number from 1 to 1048576",
		"cgroups.conf:15: counting \"ebpf\" is not bpf, perf or auto",
		"cgroups.conf:16: want \"cgroup PATTERN\", \"event NAME\", \"max N\", \"descriptors N\" or \"counting MODE\"",
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

func TestParseConfigCountsAutoByDefault(t *testing.T) {
	cfg, errs := ParseConfig("cgroups.conf", []byte("cgroup /\nevent cpu-clock\n"))
	if len(errs) != 0 || cfg.Counting != CountingAuto {
		t.Errorf("counting %q, errors %v; want %q and none", cfg.Counting, errs, CountingAuto)
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
	os.WriteFile(filepath.Join(root, "a", "cgroup.procs"), nil, 0o644) // files are not cgroups
	ino := func(p string) uint64 {
		var st unix.Stat_t
		if err := unix.Stat(filepath.Join(root, p), &st); err != nil {
			t.Fatal(err)
		}
		return st.Ino
	}
	matched, dirs, _ := scan(root, []string{"/", "/*", "/*/*"}, nil)
	if want := []match{{"/", 0, ino("/")}, {"/a", 1, ino("/a")}, {"/a/b", 2, ino("/a/b")}}; !slices.Equal(matched, want) {
		t.Errorf("matched %v, want %v", matched, want)
	}
	if want := []node{{"/", ino("/")}, {"/a", ino("/a")}}; !slices.Equal(dirs, want) {
		t.Errorf("watched %v, want %v", dirs, want)
	}
	matched, _, _ = scan(root, []string{"/a/**"}, nil)
	if want := []match{{"/a", 0, ino("/a")}, {"/a/b", 0, ino("/a/b")}, {"/a/b/c", 0, ino("/a/b/c")}}; !slices.Equal(matched, want) {
		t.Errorf("/a/** matched %v, want %v", matched, want)
	}
}

// A directory of many entries takes several getdents calls.
func TestScanManyEntries(t *testing.T) {
	root := t.TempDir()
	var want []string
	for i := range 2000 {
		name := fmt.Sprintf("/cgroup-with-a-long-name-%04d", i)
		mkdirs(t, root, name)
		want = append(want, name)
	}
	matched, _, _ := scan(root, []string{"/*"}, nil)
	var got []string
	for _, m := range matched {
		got = append(got, m.path)
	}
	if !slices.Equal(got, want) {
		t.Errorf("%d cgroups found of %d", len(got), len(want))
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

func TestBelow(t *testing.T) {
	for _, c := range []struct {
		pattern, dir string
		want         bool
	}{
		{"/*", "/", true},
		{"/*", "/system.slice", false},
		{"/*/*", "/system.slice", true},
		{"/kubepods.slice/**", "/", true},
		{"/kubepods.slice/**", "/kubepods.slice", true},
		{"/kubepods.slice/**", "/kubepods.slice/a/b", true},
		{"/kubepods.slice/**", "/user.slice", false},
		{"/*/kubepods*/**", "/system.slice", true},
		{"/*/kubepods*/**", "/system.slice/pmcd.service", false},
		{"/**/x", "/a/b/c", true},
		{"/", "/", false},
		{"/user.slice/*/*", "/user.slice/user-0.slice", true},
		{"/user.slice/*/*", "/user.slice/user-0.slice/session-1.scope", false},
	} {
		if got := below(c.pattern, c.dir); got != c.want {
			t.Errorf("below(%q, %q) = %v, want %v", c.pattern, c.dir, got, c.want)
		}
	}
	pat := "/" + strings.Repeat("**/a/", 12) + "b"
	if !below(pat, "/"+strings.Repeat("a/", 40)+"c") {
		t.Errorf("%q: nothing below a deep path", pat)
	}
}
