package privilege

import (
	"bytes"
	"fmt"
	"strconv"

	"perfevent/internal/hostfs"
)

// The files LookupAccount reads; the tests point them at fixtures.
var (
	passwdFile = "/etc/passwd"
	groupFile  = "/etc/group"
)

// LookupAccount finds a user's ids and groups in /etc/passwd and
// /etc/group, as os/user does in a build without cgo, which the agent is:
// the first passwd entry of that name gives the uid and gid, and the
// groups are the primary gid followed by every group that lists the user
// as a member. Each file is read once, with a plain open, read and close:
// os/user read /etc/passwd twice, and each of its opens handed the file
// to the runtime's poller, which refuses a regular file after four fcntl
// calls and an epoll_ctl.
func LookupAccount(name string) (Account, error) {
	a := Account{Name: name}
	if name == "" {
		return a, fmt.Errorf("user: empty name")
	}
	// One buffer serves both files, one after the other: each is a few
	// KiB at most on a host with local users only.
	passwd, err := hostfs.AppendFile(make([]byte, 0, 4096), passwdFile)
	if err != nil {
		return a, err
	}
	uid, gid, ok := findUser(passwd, name)
	if !ok {
		return a, fmt.Errorf("user: unknown user %s (not in %s)", name, passwdFile)
	}
	a.UID, a.GID = uid, gid
	a.Groups = []int{gid}
	// os/user's GroupIds falls back to the primary gid alone when
	// /etc/group cannot be read; so does this.
	if group, err := hostfs.AppendFile(passwd[:0], groupFile); err == nil {
		a.Groups = appendMemberGroups(a.Groups, group, name, gid)
	}
	return a, nil
}

// colonLines calls f with each line of b that os/user's parsers consider:
// leading blanks and trailing space trimmed, neither empty nor a comment.
func colonLines(b []byte, f func(line []byte) bool) {
	for line := range bytes.Lines(b) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		if !f(line) {
			return
		}
	}
}

// findUser returns the uid and gid of the first passwd entry named name
// with at least six fields and numeric ids; os/user skips the others, and
// the NIS compat entries that start with + or -.
func findUser(passwd []byte, name string) (uid, gid int, found bool) {
	colonLines(passwd, func(line []byte) bool {
		if bytes.Count(line, []byte{':'}) < 6 {
			return true
		}
		parts := bytes.SplitN(line, []byte{':'}, 7)
		if len(parts) < 6 || string(parts[0]) != name || name[0] == '+' || name[0] == '-' {
			return true
		}
		u, err1 := strconv.Atoi(string(parts[2]))
		g, err2 := strconv.Atoi(string(parts[3]))
		if err1 != nil || err2 != nil {
			return true
		}
		uid, gid, found = u, g, true
		return false
	})
	return uid, gid, found
}

// appendMemberGroups appends to groups the gid of every /etc/group entry
// whose member list names user, but the primary gid, in file order, as
// os/user's GroupIds lists them.
func appendMemberGroups(groups []int, group []byte, user string, primary int) []int {
	colonLines(group, func(line []byte) bool {
		if line[0] == '+' || line[0] == '-' {
			return true
		}
		// name:password:gid:member,member
		i := bytes.LastIndexByte(line, ':')
		if i < 0 || i == len(line)-1 || bytes.Count(line[:i], []byte{':'}) != 2 {
			return true
		}
		if !isMember(line[i+1:], user) {
			return true
		}
		parts := bytes.Split(line[:i], []byte{':'})
		if len(parts[0]) == 0 {
			return true
		}
		if g, err := strconv.Atoi(string(parts[2])); err == nil && g != primary {
			groups = append(groups, g)
		}
		return true
	})
	return groups
}

// isMember reports whether the comma-separated list names user.
func isMember(list []byte, user string) bool {
	for len(list) > 0 {
		m := list
		if i := bytes.IndexByte(list, ','); i >= 0 {
			m, list = list[:i], list[i+1:]
		} else {
			list = nil
		}
		if string(m) == user {
			return true
		}
	}
	return false
}
