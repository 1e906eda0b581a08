package hostfs

import (
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func parseFixture(t testing.TB, name string) []Mount {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	ms, err := ParseMountinfo(name, b)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); len(ms) != n {
		t.Fatalf("%s: %d mounts from %d lines", name, len(ms), n)
	}
	return ms
}

// vm.mountinfo is this project's test VM: v1 controllers and the hybrid
// layout's cgroup2 under a tmpfs, tracefs at its usual place.
func TestParseMountinfoVM(t *testing.T) {
	ms := parseFixture(t, "vm.mountinfo")
	ids := map[int]bool{}
	for _, m := range ms {
		ids[m.ID] = true
	}
	for _, m := range ms {
		if !ids[m.Parent] && m.Point != "/" {
			t.Errorf("mount %d (%s): parent %d is not in the table", m.ID, m.Point, m.Parent)
		}
	}
	want := map[string]Mount{
		"/": {ID: 26, Parent: 1, Device: "254:0", Root: "/", Point: "/", Options: "rw,relatime", FSType: "ext4",
			Source: "/dev/vda", SuperOptions: "rw,discard,resv_strict,resuid=65534,resgid=65534"},
		"/sys/fs/cgroup/cpu": {ID: 31, Parent: 30, Device: "0:28", Root: "/", Point: "/sys/fs/cgroup/cpu", Options: "rw,relatime",
			FSType: "cgroup", Source: "cgroup", SuperOptions: "rw,cpu"},
		"/sys/fs/cgroup/unified": {ID: 40, Parent: 30, Device: "0:37", Root: "/", Point: "/sys/fs/cgroup/unified", Options: "rw,relatime",
			FSType: "cgroup2", Source: "cgroup2", SuperOptions: "rw"},
		"/sys/kernel/tracing": {ID: 67, Parent: 22, Device: "0:13", Root: "/", Point: "/sys/kernel/tracing", Options: "rw,relatime",
			FSType: "tracefs", Source: "tracefs", SuperOptions: "rw"},
	}
	for _, m := range ms {
		if w, ok := want[m.Point]; ok {
			if !reflect.DeepEqual(m, w) {
				t.Errorf("%s:\n got %+v\nwant %+v", m.Point, m, w)
			}
			delete(want, m.Point)
		}
	}
	if len(want) > 0 {
		t.Errorf("not found: %v", want)
	}
}

// namespace.mountinfo is the kernel's text for mount points a mount
// namespace of the test VM made awkward on purpose: a space and a
// backslash (escaped), a no-break space (not escaped), a source with a
// space, a propagation tag, tracefs and debugfs elsewhere than usual.
func TestParseMountinfoNames(t *testing.T) {
	ms := parseFixture(t, "namespace.mountinfo")
	byPoint := map[string]Mount{}
	for _, m := range ms {
		byPoint[m.Point] = m
	}
	const dir = "/tmp/fsroot-mi/"
	for _, c := range []struct {
		point, fstype, source string
		optional              []string
	}{
		{dir + "a b", "tmpfs", "my src", []string{"shared:1"}},
		{dir + `back\slash`, "tmpfs", "none", nil},
		{dir + "nb\u00a0sp", "tmpfs", "none", nil},
		{dir + "tr", "tracefs", "nodev", nil},
		{dir + "dbg", "debugfs", "nodev", nil},
	} {
		m, ok := byPoint[c.point]
		if !ok {
			t.Errorf("no mount at %q", c.point)
			continue
		}
		if m.FSType != c.fstype || m.Source != c.source || !reflect.DeepEqual(m.Optional, c.optional) || m.SuperOptions != "rw" {
			t.Errorf("%q: %+v, want %s from %q with %q", c.point, m, c.fstype, c.source, c.optional)
		}
	}
}

// Lines of another shape are skipped and the rest kept; only a line too
// long to read is an error, and it names the file and line.
func TestParseMountinfoOtherShapes(t *testing.T) {
	text := strings.Join([]string{
		"",
		"garbage",
		"1 2 0:1 / /a rw - ",                // no filesystem type
		"x 2 0:1 / /a rw - tmpfs none rw",   // the id is not a number
		"1 2 0:1 / /a - tmpfs none rw",      // no options: the separator is taken for them
		"3 1 0:5 / /ok rw,relatime - tmpfs", // an old kernel's short line: kept
		"4 1 0:6 /sub /b\\040c rw  - xfs /dev/sda rw", // two spaces
		"",
	}, "\n")
	ms, err := ParseMountinfo("mi", []byte(text))
	want := []Mount{
		{ID: 3, Parent: 1, Device: "0:5", Root: "/", Point: "/ok", Options: "rw,relatime", FSType: "tmpfs"},
		{ID: 4, Parent: 1, Device: "0:6", Root: "/sub", Point: "/b c", Options: "rw", FSType: "xfs", Source: "/dev/sda", SuperOptions: "rw"},
	}
	if err != nil || !reflect.DeepEqual(ms, want) {
		t.Errorf("ParseMountinfo =\n %+v, %v\nwant\n %+v", ms, err, want)
	}
	long := "5 1 0:7 / /d rw - tmpfs none rw\n" + strings.Repeat("x", 2<<20) + "\n"
	ms, err = ParseMountinfo("mi", []byte(long))
	if err == nil || !strings.HasPrefix(err.Error(), "mi:2: ") || len(ms) != 1 {
		t.Errorf("a 2 MiB line: %d mounts, err %v; want 1 and an error naming mi:2", len(ms), err)
	}
}

func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{
		"/plain":         "/plain",
		`/a\040b`:        "/a b",
		`/t\011n\012`:    "/t\tn\n",
		`\134\134`:       `\\`,
		`/x\04`:          `/x\04`,
		`/x\0400`:        "/x 0",
		`/x\089`:         `/x\089`,
		`\`:              `\`,
		`/end\040`:       "/end ",
		"/nb\u00a0sp":    "/nb\u00a0sp",
		`/\040\040\040x`: "/   x",
	} {
		if got := Unescape(in); got != want {
			t.Errorf("Unescape(%q) = %q, want %q", in, got, want)
		}
	}
}

// escape is the kernel's mangling of a name in a mount table.
func escape(s string) string {
	return strings.NewReplacer(" ", `\040`, "\t", `\011`, "\n", `\012`, `\`, `\134`).Replace(s)
}

func format(m Mount) string {
	f := []string{strconv.Itoa(m.ID), strconv.Itoa(m.Parent), m.Device, escape(m.Root), escape(m.Point), m.Options}
	f = append(f, m.Optional...)
	f = append(f, "-", m.FSType)
	if m.Source != "" || m.SuperOptions != "" {
		f = append(f, escape(m.Source))
	}
	if m.SuperOptions != "" {
		f = append(f, m.SuperOptions)
	}
	return strings.Join(f, " ")
}

// FuzzParseMountinfo: any text parses without a panic, and each mount
// found is found again, the same, in the line the kernel would print for
// it.
func FuzzParseMountinfo(f *testing.F) {
	for _, name := range []string{"vm.mountinfo", "namespace.mountinfo"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("1 2 0:1 / /a\\134\\040b rw - cgroup x rw,perf_event\n - \n1 2 3 4 5 6 7 - 8\n"))
	f.Fuzz(func(t *testing.T, text []byte) {
		ms, _ := ParseMountinfo("fuzz", text)
		for _, m := range ms {
			line := format(m)
			again, err := ParseMountinfo("again", []byte(line))
			if err != nil || len(again) != 1 || !reflect.DeepEqual(again[0], m) {
				t.Errorf("%+v\nprinted as %q\nparses as %+v, %v", m, line, again, err)
			}
		}
	})
}
