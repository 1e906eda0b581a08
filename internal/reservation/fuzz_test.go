package reservation

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// FuzzParseProcLocks parses arbitrary /proc/locks text. /proc/locks is
// kernel output, but its layout has changed between kernels, and a
// misparse here would name the wrong perfalloc users, or none. The target
// checks that an accepted file written back out parses to the same locks,
// and that HoldersOf only ever names granted byte-0 locks by real pids.
//
//	go test -run '^$' -fuzz '^FuzzParseProcLocks$' ./internal/reservation
func FuzzParseProcLocks(f *testing.F) {
	if b, err := os.ReadFile("testdata/proc-locks.txt"); err == nil {
		f.Add(string(b), uint64(unix.Mkdev(0xfe, 0)), uint64(754976))
	}
	f.Fuzz(func(t *testing.T, text string, dev, ino uint64) {
		locks, err := ParseProcLocks(strings.NewReader(text))
		if err != nil {
			if locks != nil {
				t.Fatalf("locks and error %v", err)
			}
			if !strings.HasPrefix(err.Error(), "/proc/locks") {
				t.Fatalf("error does not name /proc/locks: %v", err)
			}
			return
		}
		var b strings.Builder
		for _, lk := range locks {
			b.WriteString(formatProcLock(lk))
			b.WriteByte('\n')
		}
		again, err := ParseProcLocks(strings.NewReader(b.String()))
		if err != nil || !slices.Equal(again, locks) {
			t.Fatalf("written back as\n%s\nparses to %+v, %v\nwant %+v", b.String(), again, err, locks)
		}

		for _, d := range []uint64{dev, unix.Mkdev(0xfe, 0)} {
			holders := HoldersOf(locks, d, ino)
			for i, pid := range holders {
				if pid <= 0 || (i > 0 && pid <= holders[i-1]) {
					t.Fatalf("HoldersOf = %v: not sorted distinct positive pids", holders)
				}
				if !slices.ContainsFunc(locks, func(lk ProcLock) bool {
					return lk.PID == pid && !lk.Blocked && lk.Start == 0 && lk.Inode == ino &&
						lk.Major == unix.Major(d) && lk.Minor == unix.Minor(d)
				}) {
					t.Fatalf("HoldersOf names pid %d, which holds no granted lock on byte 0 of %d:%d:%d", pid, unix.Major(d), unix.Minor(d), ino)
				}
			}
		}
	})
}

// formatProcLock writes a lock the way the kernel's lock_get_status does.
func formatProcLock(lk ProcLock) string {
	blocked := ""
	if lk.Blocked {
		blocked = "-> "
	}
	end := strconv.FormatUint(lk.End, 10)
	if lk.ToEOF {
		end = "EOF"
	}
	return fmt.Sprintf("%d: %s%s %s %s %d %02x:%02x:%d %d %s",
		lk.ID, blocked, lk.Class, lk.Mode, lk.Access, lk.PID, lk.Major, lk.Minor, lk.Inode, lk.Start, end)
}
