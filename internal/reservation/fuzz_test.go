package reservation

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

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

// FuzzEncodeState writes states with arbitrary strings, numbers and times:
// the state file must be what encoding/json writes, byte for byte, since
// perfalloc reads it with encoding/json, and an error exactly when
// encoding/json refuses the state.
//
//	go test -run '^$' -fuzz '^FuzzEncodeState$' ./internal/reservation
func FuzzEncodeState(f *testing.F) {
	f.Add("pmdaperfevent", "cpu-clock", "no such device\n<x>", int64(1764944584123456789), 60.0, 3, uint64(12345))
	f.Add("\xff\u2028\x00", "", "", int64(-62135596800000000), 1e-7, 0, uint64(0))
	f.Fuzz(func(t *testing.T, program, name, errText string, nanos int64, refresh float64, holders int, ticks uint64) {
		at := time.Unix(0, nanos).In(time.FixedZone("", int(ticks%100000)-50000))
		s := State{Generation: ticks, Written: at, RefreshSeconds: refresh, Program: program, PID: holders,
			StartTicks: ticks, Started: at.UTC(), Config: name, Counters: errText, Since: at}
		if n := holders & 3; n != 0 {
			s.Holders = make([]int, n-1)
			for i := range s.Holders {
				s.Holders[i] = holders - i
			}
			s.Events = []EventState{{Name: name, State: program, CPUs: holders, Error: errText}, {Name: errText}}
		}
		want, werr := json.MarshalIndent(&s, "", "  ")
		got, err := encodeState(&s)
		if (err != nil) != (werr != nil) {
			t.Fatalf("error %v, encoding/json's %v", err, werr)
		}
		if werr == nil && !bytes.Equal(got, append(want, '\n')) {
			t.Fatalf("wrote\n%s\nencoding/json writes\n%s", got, want)
		}
	})
}
