package privilege

import (
	"bufio"
	"errors"
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
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

// TestCounterCapabilityMatchesCapLastCap: the kernel's answer to
// PR_CAPBSET_READ agrees with the last capability it lists in procfs.
func TestCounterCapabilityMatchesCapLastCap(t *testing.T) {
	data, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		t.Skipf("needs /proc/sys/kernel/cap_last_cap: %v", err)
	}
	last, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatalf("cap_last_cap %q: %v", data, err)
	}
	want := unix.CAP_SYS_ADMIN
	if last >= unix.CAP_PERFMON {
		want = unix.CAP_PERFMON
	}
	if got := CounterCapability(); got != want {
		t.Errorf("CounterCapability() = %s, want %s (cap_last_cap %d)", Name(got), Name(want), last)
	}
}

// TestReadStatusParses every field from a status file as the kernel
// writes it, tabs and all.
func TestReadStatusParses(t *testing.T) {
	text := "Name:\tpmdaperfevent\nUmask:\t0022\nState:\tS (sleeping)\n" +
		"Uid:\t995\t996\t997\t998\nGid:\t990\t991\t992\t993\nFDSize:\t64\n" +
		"Groups:\t995 20 4 \nVmPeak:\t  1234 kB\n" +
		"CapInh:\t0000000000000001\nCapPrm:\t0000004000000000\nCapEff:\t0000004000000002\n" +
		"CapBnd:\t000001ffffffffff\nCapAmb:\t0000000000000100\nNoNewPrivs:\t1\nSeccomp:\t0\n"
	path := filepath.Join(t.TempDir(), "status")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := readStatus(path)
	if err != nil {
		t.Fatal(err)
	}
	want := Status{UIDs: [4]int{995, 996, 997, 998}, GIDs: [4]int{990, 991, 992, 993}, Groups: []int{995, 20, 4},
		CapEff: 0x4000000002, CapPrm: 0x4000000000, CapInh: 1, CapAmb: 0x100, NoNewPrivs: true}
	if got.UIDs != want.UIDs || got.GIDs != want.GIDs || !slices.Equal(got.Groups, want.Groups) ||
		got.CapEff != want.CapEff || got.CapPrm != want.CapPrm || got.CapInh != want.CapInh ||
		got.CapAmb != want.CapAmb || got.NoNewPrivs != want.NoNewPrivs {
		t.Errorf("readStatus = %+v, want %+v", got, want)
	}
	if _, err := readStatus(filepath.Join(t.TempDir(), "gone")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("readStatus of a missing file: %v, want not exist", err)
	}
}

// TestSelfMatchesProc: the calling thread's credentials from system calls
// are those its /proc status file shows.
func TestSelfMatchesProc(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	self, err := Self()
	if err != nil {
		t.Fatal(err)
	}
	proc, err := readStatus("/proc/thread-self/status")
	if err != nil {
		t.Fatal(err)
	}
	if self.UIDs != proc.UIDs || self.GIDs != proc.GIDs || !slices.Equal(self.Groups, proc.Groups) ||
		self.CapEff != proc.CapEff || self.CapPrm != proc.CapPrm || self.CapInh != proc.CapInh ||
		self.CapAmb != proc.CapAmb || self.NoNewPrivs != proc.NoNewPrivs {
		t.Errorf("Self() = %+v, /proc/thread-self/status says %+v", self, proc)
	}
}
