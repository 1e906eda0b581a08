package reservation

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ProcLock is one line of /proc/locks, e.g.
//
//	1: POSIX  ADVISORY  READ 4242 fe:00:754976 0 0
//	1: -> POSIX  ADVISORY  WRITE 4343 fe:00:754976 0 0
type ProcLock struct {
	ID      int    // the first column; a blocked waiter shares its blocker's ID
	Blocked bool   // "->": waiting for the lock with the same ID
	Class   string // POSIX, OFDLCK, FLOCK, LEASE, DELEG
	Mode    string // ADVISORY, MANDATORY, ACTIVE, BREAKING, BREAKER
	Access  string // READ, WRITE, UNLCK
	PID     int    // -1 for OFD locks, which belong to no process
	Major   uint32 // device of the file, printed in hex by the kernel
	Minor   uint32
	Inode   uint64 // 0 when the kernel printed "<none>"
	Start   uint64
	End     uint64 // meaningless when ToEOF
	ToEOF   bool
}

// ParseProcLocks parses the text of /proc/locks. Errors name the line.
func ParseProcLocks(r io.Reader) ([]ProcLock, error) {
	var locks []ProcLock
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		lk, err := parseProcLock(sc.Text())
		if err != nil {
			return nil, fmt.Errorf("/proc/locks:%d: %v", n, err)
		}
		locks = append(locks, lk)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("/proc/locks: %w", err)
	}
	return locks, nil
}

func parseProcLock(line string) (ProcLock, error) {
	var lk ProcLock
	f := strings.Fields(line)
	if len(f) > 0 && strings.HasSuffix(f[0], ":") {
		id, err := strconv.Atoi(strings.TrimSuffix(f[0], ":"))
		if err != nil {
			return lk, fmt.Errorf("bad lock id %q", f[0])
		}
		lk.ID = id
		f = f[1:]
	} else {
		return lk, fmt.Errorf("line does not start with a lock id: %q", line)
	}
	if len(f) > 0 && f[0] == "->" {
		lk.Blocked = true
		f = f[1:]
	}
	if len(f) != 7 {
		return lk, fmt.Errorf("want 7 fields after the id, got %d: %q", len(f), line)
	}
	lk.Class, lk.Mode, lk.Access = f[0], f[1], f[2]
	pid, err := strconv.Atoi(f[3])
	if err != nil {
		return lk, fmt.Errorf("bad pid %q", f[3])
	}
	lk.PID = pid
	if !strings.HasPrefix(f[4], "<none>") {
		parts := strings.Split(f[4], ":")
		if len(parts) != 3 {
			return lk, fmt.Errorf("bad MAJ:MIN:INODE %q", f[4])
		}
		maj, err1 := strconv.ParseUint(parts[0], 16, 32)
		mnr, err2 := strconv.ParseUint(parts[1], 16, 32)
		ino, err3 := strconv.ParseUint(parts[2], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			return lk, fmt.Errorf("bad MAJ:MIN:INODE %q", f[4])
		}
		lk.Major, lk.Minor, lk.Inode = uint32(maj), uint32(mnr), ino
	}
	if lk.Start, err = strconv.ParseUint(f[5], 10, 64); err != nil {
		return lk, fmt.Errorf("bad start offset %q", f[5])
	}
	if f[6] == "EOF" {
		lk.ToEOF = true
	} else if lk.End, err = strconv.ParseUint(f[6], 10, 64); err != nil {
		return lk, fmt.Errorf("bad end offset %q", f[6])
	}
	return lk, nil
}

// coversByte0 reports whether the lock is granted and includes byte 0, so that it
// conflicts with the agent's F_GETLK probe. FLOCK locks and leases live in
// another namespace from fcntl locks and never conflict.
func (lk ProcLock) coversByte0() bool {
	if lk.Blocked || (lk.Class != "POSIX" && lk.Class != "OFDLCK") {
		return false
	}
	return lk.Start == 0 && (lk.Access == "READ" || lk.Access == "WRITE")
}

// HoldersOf returns the sorted, distinct pids in locks that hold a granted
// POSIX or OFD lock covering byte 0 of the file with the given device and
// inode (from stat(2)).
func HoldersOf(locks []ProcLock, dev, ino uint64) []int {
	maj, mnr := unix.Major(dev), unix.Minor(dev)
	var pids []int
	for _, lk := range locks {
		if lk.Inode == ino && lk.Major == maj && lk.Minor == mnr && lk.PID > 0 && lk.coversByte0() {
			pids = append(pids, lk.PID)
		}
	}
	slices.Sort(pids)
	return slices.Compact(pids)
}

// procLocksLimit bounds how much of /proc/locks is read to name holders.
// The kernel formats every line it hands out, a few microseconds each, and
// any user can make the file huge with locks on a file of their own:
// 60,000 of them make 3.3 MB, which took the kernel 0.28 s of CPU per read
// on our test VM. Holders past the limit go unnamed; F_GETLK still names
// one of them.
const procLocksLimit = 256 << 10

// ProcLocks is where the kernel lists the file locks.
const ProcLocks = "/proc/locks"

// LockHolders names the processes that hold byte 0 of the file with the
// given device and inode, from the first 256 KiB of the /proc/locks at path
// (normally [ProcLocks]).
func LockHolders(path string, dev, ino uint64) ([]int, error) { return lockHolders(path, dev, ino) }

// lockHolders names the processes that hold byte 0 of the file with the
// given device and inode, from the first procLocksLimit bytes of the
// /proc/locks at path. Only lines about that file are parsed.
func lockHolders(path string, dev, ino uint64) ([]int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// The kernel prints the file as "%02x:%02x:%lu" after the pid.
	file := fmt.Appendf(nil, " %02x:%02x:%d ", unix.Major(dev), unix.Minor(dev), ino)
	var locks []ProcLock
	r := bufio.NewReaderSize(f, 16<<10)
	for lineNo, read := 1, 0; ; lineNo++ {
		line, err := r.ReadSlice('\n')
		read += len(line)
		if err == io.EOF || read > procLocksLimit {
			break // a last line without its newline is cut, not kernel output
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if !bytes.Contains(line, file) {
			continue
		}
		lk, err := parseProcLock(string(line))
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", path, lineNo, err)
		}
		locks = append(locks, lk)
	}
	return HoldersOf(locks, dev, ino), nil
}
