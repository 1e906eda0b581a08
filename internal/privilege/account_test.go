package privilege

import (
	"bufio"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestLookupAccountMatchesOSUser looks up every user of this machine's
// /etc/passwd both ways: the uid, gid and groups must be os/user's, in its
// order.
func TestLookupAccountMatchesOSUser(t *testing.T) {
	f, err := os.Open("/etc/passwd")
	if err != nil {
		t.Skipf("needs /etc/passwd: %v", err)
	}
	defer f.Close()
	var names []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if name, _, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":"); ok && name != "" && name[0] != '#' {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		t.Skip("needs users in /etc/passwd")
	}
	for _, name := range names {
		u, err := user.Lookup(name)
		if err != nil {
			t.Errorf("os/user: %s: %v", name, err)
			continue
		}
		ids, err := u.GroupIds()
		if err != nil {
			t.Fatalf("os/user: %s: groups: %v", name, err)
		}
		var want []int
		for _, id := range ids {
			g, _ := strconv.Atoi(id)
			want = append(want, g)
		}
		a, err := LookupAccount(name)
		if err != nil {
			t.Errorf("LookupAccount(%s): %v", name, err)
			continue
		}
		if strconv.Itoa(a.UID) != u.Uid || strconv.Itoa(a.GID) != u.Gid || !slices.Equal(a.Groups, want) || a.Name != name {
			t.Errorf("LookupAccount(%s) = %+v, os/user says uid %s gid %s groups %v", name, a, u.Uid, u.Gid, want)
		}
	}
	if _, err := LookupAccount("no-such-user-here"); err == nil {
		t.Error("LookupAccount found a user that does not exist")
	}
}

// TestLookupAccountParsing covers what os/user's parser skips or accepts
// that this machine's files may not show: comments, blanks, short and
// non-numeric entries, NIS compat entries, a second entry of the same
// name, and members listed first, last, alone or in the middle.
func TestLookupAccountParsing(t *testing.T) {
	dir := t.TempDir()
	passwd := strings.Join([]string{
		"# comment",
		"",
		"root:x:0:0:root:/root:/bin/bash",
		"short:x:5:5",
		"bad:x:abc:7::/:/bin/sh",
		"bad:x:8:8::/:/bin/sh",
		"+nis:x:9:9::/:/bin/sh",
		"  pcp:x:995:995:PCP,,,:/var/lib/pcp:/usr/sbin/nologin  ",
		"pcp:x:1:1::/:/bin/sh",
	}, "\n")
	group := strings.Join([]string{
		"#wheel:x:10:pcp",
		"root:x:0:",
		"pcp:x:995:pcp",
		"alone:x:20:pcp",
		"first:x:21:pcp,other",
		"last:x:22:other,pcp",
		"middle:x:23:a,pcp,b",
		"prefix:x:24:pcpx,xpcp",
		"spaced:x:25:a, pcp",
		"colons:x:x:26:pcp",
		"+nis:x:27:pcp",
		":x:28:pcp",
		"nonnum:x:abc:pcp",
		"later:x:29:pcp",
	}, "\n") + "\n"
	passwdFile, groupFile = filepath.Join(dir, "passwd"), filepath.Join(dir, "group")
	t.Cleanup(func() { passwdFile, groupFile = "/etc/passwd", "/etc/group" })
	if err := os.WriteFile(passwdFile, []byte(passwd), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(groupFile, []byte(group), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := LookupAccount("pcp")
	if err != nil {
		t.Fatal(err)
	}
	want := Account{Name: "pcp", UID: 995, GID: 995, Groups: []int{995, 20, 21, 22, 23, 29}}
	if a.UID != want.UID || a.GID != want.GID || !slices.Equal(a.Groups, want.Groups) {
		t.Errorf("pcp = %+v, want %+v", a, want)
	}
	if a, err := LookupAccount("bad"); err != nil || a.UID != 8 {
		t.Errorf("bad = %+v, %v; want the entry with numeric ids, uid 8", a, err)
	}
	for _, name := range []string{"short", "+nis", "nis", "", "comment"} {
		if a, err := LookupAccount(name); err == nil {
			t.Errorf("LookupAccount(%q) = %+v, want an error", name, a)
		}
	}
	// Without /etc/group the primary group stands alone, as in os/user.
	groupFile = filepath.Join(dir, "missing")
	if a, err := LookupAccount("pcp"); err != nil || !slices.Equal(a.Groups, []int{995}) {
		t.Errorf("pcp without a group file = %+v, %v; want groups [995]", a, err)
	}
}
