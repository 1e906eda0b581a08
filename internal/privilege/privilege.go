// Package privilege lets a root process become an ordinary user while
// keeping the one capability it needs to open system-wide perf counters:
// CAP_PERFMON, or CAP_SYS_ADMIN on kernels before 5.8 that lack it.
//
// The C pmdaperfevent drops every privilege after start-up and so can never
// reopen its counters; keeping CAP_PERFMON alone lets the agent give the
// counters back to perfalloc and take them again, and reload its
// configuration, without being root.
//
// Credentials are per thread in Linux, and a Go program has many threads.
// The standard library's Setuid family changes them on every thread; the
// capability calls here do the same through syscall.AllThreadsSyscall, which
// works only in a program built with CGO_ENABLED=0 (as the Makefile builds
// the agent). Elsewhere Drop fails and the caller stays root.
package privilege

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Name returns the capability's name, e.g. "CAP_PERFMON".
func Name(c int) string {
	switch c {
	case unix.CAP_SYS_ADMIN:
		return "CAP_SYS_ADMIN"
	case unix.CAP_PERFMON:
		return "CAP_PERFMON"
	}
	return "CAP_" + strconv.Itoa(c)
}

// CounterCapability is the capability that lets this kernel open perf
// counters on every CPU: CAP_PERFMON where the kernel knows it (5.8 and
// later), CAP_SYS_ADMIN before.
func CounterCapability() int {
	data, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err == nil {
		if last, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil && last >= unix.CAP_PERFMON {
			return unix.CAP_PERFMON
		}
	}
	return unix.CAP_SYS_ADMIN
}

// Identity is who the process became.
type Identity struct {
	User       string
	UID, GID   int
	Capability int // the one capability kept
}

// Lookup finds a user's ids and groups.
func Lookup(name string) (uid, gid int, groups []int, err error) {
	u, err := user.Lookup(name)
	if err != nil {
		return 0, 0, nil, err
	}
	if uid, err = strconv.Atoi(u.Uid); err != nil {
		return 0, 0, nil, fmt.Errorf("user %s: uid %q: %w", name, u.Uid, err)
	}
	if gid, err = strconv.Atoi(u.Gid); err != nil {
		return 0, 0, nil, fmt.Errorf("user %s: gid %q: %w", name, u.Gid, err)
	}
	ids, err := u.GroupIds()
	if err != nil {
		ids = []string{u.Gid}
	}
	for _, id := range ids {
		if g, err := strconv.Atoi(id); err == nil {
			groups = append(groups, g)
		}
	}
	return uid, gid, groups, nil
}

// Drop makes every thread of the process run as user name, with only
// capability c in its permitted and effective sets, nothing inheritable,
// and no_new_privs set. It must be called as root. If it fails part way the
// process may have lost root already; the error says so, and the caller
// should stop rather than run with unknown credentials.
func Drop(name string, c int) (Identity, error) {
	id := Identity{User: name, Capability: c}
	uid, gid, groups, err := Lookup(name)
	if err != nil {
		return id, err
	}
	id.UID, id.GID = uid, gid
	if os.Geteuid() != 0 {
		return id, errors.New("not running as root")
	}
	if uid == 0 {
		return id, fmt.Errorf("user %s is root", name)
	}
	// Without keepcaps, setuid from root to another user clears every
	// capability set. Probing it first also tells whether all-thread
	// system calls work in this build before anything is changed.
	if err := allThreads(unix.SYS_PRCTL, unix.PR_SET_KEEPCAPS, 1, 0); err != nil {
		if errors.Is(err, syscall.ENOTSUP) {
			return id, errors.New("this build cannot change the credentials of every thread (build with CGO_ENABLED=0)")
		}
		return id, fmt.Errorf("prctl(PR_SET_KEEPCAPS): %w", err)
	}
	if err := syscall.Setgroups(groups); err != nil {
		return id, fmt.Errorf("setgroups: %w", err)
	}
	if err := syscall.Setgid(gid); err != nil {
		return id, fmt.Errorf("setgid(%d): %w", gid, err)
	}
	if err := syscall.Setuid(uid); err != nil {
		return id, fmt.Errorf("setuid(%d): %w (still root)", uid, err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	data[c/32].Effective = 1 << (c % 32)
	data[c/32].Permitted = 1 << (c % 32)
	if err := allThreads(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); err != nil {
		return id, fmt.Errorf("capset(%s): %w (now uid %d, without capabilities)", Name(c), err, uid)
	}
	if err := allThreads(unix.SYS_PRCTL, unix.PR_SET_KEEPCAPS, 0, 0); err != nil {
		return id, fmt.Errorf("prctl(PR_SET_KEEPCAPS, 0): %w", err)
	}
	if err := allThreads(unix.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1, 0); err != nil {
		return id, fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	return id, nil
}

func allThreads(trap, a1, a2, a3 uintptr) error {
	if _, _, errno := syscall.AllThreadsSyscall(trap, a1, a2, a3); errno != 0 {
		return errno
	}
	return nil
}

// Status is what /proc/<pid>/status says about a process's credentials.
type Status struct {
	UIDs, GIDs [4]int // real, effective, saved, filesystem
	CapEff     uint64
	CapPrm     uint64
	CapInh     uint64
	NoNewPrivs bool
}

// ReadStatus reads the credentials of process pid (0 for this process)
// from /proc, where anyone can check them.
func ReadStatus(pid int) (Status, error) {
	path := "/proc/self/status"
	if pid != 0 {
		path = "/proc/" + strconv.Itoa(pid) + "/status"
	}
	f, err := os.Open(path)
	if err != nil {
		return Status{}, err
	}
	defer f.Close()
	var s Status
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(val)
		switch key {
		case "Uid", "Gid":
			dst := &s.UIDs
			if key == "Gid" {
				dst = &s.GIDs
			}
			for i := 0; i < 4 && i < len(fields); i++ {
				dst[i], _ = strconv.Atoi(fields[i])
			}
		case "CapEff", "CapPrm", "CapInh":
			if len(fields) == 1 {
				v, _ := strconv.ParseUint(fields[0], 16, 64)
				switch key {
				case "CapEff":
					s.CapEff = v
				case "CapPrm":
					s.CapPrm = v
				default:
					s.CapInh = v
				}
			}
		case "NoNewPrivs":
			s.NoNewPrivs = len(fields) == 1 && fields[0] == "1"
		}
	}
	return s, sc.Err()
}

// Only reports whether the process has exactly capability c, effective and
// permitted, nothing inheritable, and runs as uid everywhere.
func (s Status) Only(uid, c int) bool {
	for _, u := range s.UIDs {
		if u != uid {
			return false
		}
	}
	bit := uint64(1) << c
	return s.CapEff == bit && s.CapPrm == bit && s.CapInh == 0
}
