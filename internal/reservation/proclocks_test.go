package reservation

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestParseProcLocks(t *testing.T) {
	f, err := os.Open("testdata/proc-locks.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	locks, err := ParseProcLocks(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(locks) != 12 {
		t.Fatalf("%d locks, want 12", len(locks))
	}
	want := ProcLock{ID: 1, Blocked: true, Class: "POSIX", Mode: "ADVISORY", Access: "WRITE", PID: 5151, Major: 0xfe, Minor: 0, Inode: 754976}
	if locks[1] != want {
		t.Errorf("blocked waiter:\n got %+v\nwant %+v", locks[1], want)
	}
	want = ProcLock{ID: 4, Class: "OFDLCK", Mode: "ADVISORY", Access: "READ", PID: -1, Major: 0xfe, Inode: 754976, ToEOF: true}
	if locks[4] != want {
		t.Errorf("OFD lock:\n got %+v\nwant %+v", locks[4], want)
	}
	if l := locks[10]; l.Major != 0x103 || l.Minor != 2 {
		t.Errorf("major:minor are hex: got %x:%x, want 103:2", l.Major, l.Minor)
	}
	if l := locks[11]; l.Inode != 0 || l.Class != "DELEG" {
		t.Errorf("<none> device: %+v", l)
	}

	// Granted POSIX read locks on byte 0 of fe:00:754976 only: not the
	// blocked waiter, the OFD lock (no pid), the flock, the lock on byte 1,
	// nor the same inode on other devices.
	if got := HoldersOf(locks, unix.Mkdev(0xfe, 0), 754976); !slices.Equal(got, []int{4242, 4343}) {
		t.Errorf("holders %v, want [4242 4343]", got)
	}
	if got := HoldersOf(locks, unix.Mkdev(0x103, 2), 754976); !slices.Equal(got, []int{1003}) {
		t.Errorf("holders on 103:02: %v, want [1003]", got)
	}
	if got := HoldersOf(locks, unix.Mkdev(0xfe, 0), 1); got != nil {
		t.Errorf("holders of an unlocked inode: %v", got)
	}
}

func TestParseProcLocksErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"1: POSIX ADVISORY READ 42 fe:00:1 0 0\nPOSIX ADVISORY READ 42 fe:00:1 0 0\n", "/proc/locks:2: line does not start with a lock id"},
		{"1: POSIX ADVISORY READ x fe:00:1 0 0\n", `/proc/locks:1: bad pid "x"`},
		{"1: POSIX ADVISORY READ 42 fe:00 0 0\n", `/proc/locks:1: bad MAJ:MIN:INODE "fe:00"`},
		{"1: POSIX ADVISORY READ 42 zz:00:1 0 0\n", `/proc/locks:1: bad MAJ:MIN:INODE "zz:00:1"`},
		{"1: POSIX ADVISORY READ 42 fe:00:1 0\n", "/proc/locks:1: want 7 fields after the id, got 6"},
		{"1: POSIX ADVISORY READ 42 fe:00:1 0 END\n", `/proc/locks:1: bad end offset "END"`},
	} {
		_, err := ParseProcLocks(strings.NewReader(tc.in))
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want %q", tc.in, err, tc.want)
		}
	}
}

// The real /proc/locks must parse, whatever is in it now.
func TestParseRealProcLocks(t *testing.T) {
	f, err := os.Open("/proc/locks")
	if err != nil {
		t.Skip("needs /proc/locks")
	}
	defer f.Close()
	if _, err := ParseProcLocks(f); err != nil {
		t.Fatal(err)
	}
}

// lockHolders parses only the lines about the lock file, and reads no more
// than procLocksLimit: any user can fill /proc/locks with locks of their own.
func TestLockHoldersReadsABoundedPrefix(t *testing.T) {
	const mine = "7: POSIX  ADVISORY  READ 4242 fe:00:754976 0 0\n"
	var other strings.Builder
	for i := 0; other.Len() <= procLocksLimit; i++ {
		fmt.Fprintf(&other, "%d: POSIX  ADVISORY  READ 99 fe:00:%d %d %d\n", i+8, 1000+i, 2*i, 2*i)
	}
	path := filepath.Join(t.TempDir(), "locks")
	for _, tc := range []struct {
		name, text string
		want       []int
	}{
		{"first", mine + other.String(), []int{4242}},
		{"past the limit", other.String() + mine, nil},
		{"a bad line about another file", "1: POSIX what 99 fe:00:1\n" + mine, []int{4242}},
		{"on another device", strings.Replace(mine, "fe:00", "fe:01", 1), nil},
	} {
		if err := os.WriteFile(path, []byte(tc.text), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := lockHolders(path, unix.Mkdev(0xfe, 0), 754976)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v %v, want %v", tc.name, got, err, tc.want)
		}
	}
	if err := os.WriteFile(path, []byte("1: POSIX what 4242 fe:00:754976 0 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := lockHolders(path, unix.Mkdev(0xfe, 0), 754976); err == nil || !strings.HasPrefix(err.Error(), path+":1: ") {
		t.Errorf("a bad line about the file: %v, want an error naming %s:1", err, path)
	}
}
