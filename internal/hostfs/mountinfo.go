package hostfs

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// Mount is one line of /proc/self/mountinfo (proc(5)):
//
//	36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
//
// It holds everything /proc/mounts says, and the mount's place in the
// tree besides.
type Mount struct {
	ID, Parent   int
	Device       string   // major:minor of st_dev
	Root         string   // the directory of the filesystem mounted here; unescaped
	Point        string   // the mount point; unescaped
	Options      string   // per-mount options, e.g. rw,relatime
	Optional     []string // propagation tags, e.g. shared:7, master:1
	FSType       string   // e.g. cgroup2, tracefs, fuse.sshfs
	Source       string   // unescaped; "none" and the like when there is none
	SuperOptions string   // per-superblock options, e.g. rw,perf_event for a v1 cgroup
}

// ParseMountinfo parses the text of a mountinfo file, name being where it
// was read for errors. The file is the kernel's: a line of another shape
// (too few fields, no "-" separator, ids that are not numbers) is skipped,
// as a newer kernel's addition would be, and parsing goes on. The only
// error is a line too long to read, which names the line; the mounts
// before it are returned with it.
func ParseMountinfo(name string, text []byte) ([]Mount, error) {
	var out []Mount
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(nil, 1<<20)
	sc.Split(splitLines)
	line := 0
	for sc.Scan() {
		line++
		if m, ok := parseMount(sc.Text()); ok {
			out = append(out, m)
		}
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("%s:%d: %w", name, line+1, err)
	}
	return out, nil
}

// splitLines splits at each newline and nothing else. The kernel ends
// every line with one; bufio.ScanLines would also drop a carriage return
// before it, which in a mount table is part of the last field.
func splitLines(data []byte, atEOF bool) (advance int, token []byte, err error) {
	if i := bytes.IndexByte(data, '\n'); i >= 0 {
		return i + 1, data[:i], nil
	}
	if atEOF && len(data) > 0 {
		return len(data), data, nil
	}
	return 0, nil, nil
}

func parseMount(line string) (Mount, bool) {
	// Fields are separated by spaces; the kernel escapes a space, tab,
	// newline or backslash in a name, but no other character: a name may
	// hold a no-break space, which strings.Fields would split on.
	f := strings.FieldsFunc(line, func(r rune) bool { return r == ' ' || r == '\t' })
	// The separator comes after the six fixed fields and any optional ones.
	sep := -1
	for i := 6; i < len(f); i++ {
		if f[i] == "-" {
			sep = i
			break
		}
	}
	if sep < 0 || sep+1 >= len(f) {
		return Mount{}, false
	}
	id, err1 := strconv.Atoi(f[0])
	parent, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil {
		return Mount{}, false
	}
	m := Mount{
		ID: id, Parent: parent, Device: f[2],
		Root: Unescape(f[3]), Point: Unescape(f[4]), Options: f[5],
		FSType: f[sep+1],
	}
	if sep > 6 {
		m.Optional = f[6:sep]
	}
	if len(f) > sep+2 {
		m.Source = Unescape(f[sep+2])
	}
	if len(f) > sep+3 {
		m.SuperOptions = f[sep+3]
	}
	return m, true
}

// Unescape undoes the kernel's octal escapes in mount tables (\040 for a
// space; tab, newline and backslash likewise). A backslash not followed
// by three octal digits is kept.
func Unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1:i+4]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '7' {
			return false
		}
	}
	return len(s) == 3
}
