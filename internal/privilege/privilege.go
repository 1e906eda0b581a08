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
// Drop makes each of its system calls on every thread through
// syscall.AllThreadsSyscall, which works only in a program built with
// CGO_ENABLED=0 (as the Makefile builds the agent). Elsewhere Drop fails
// and the caller stays root.
package privilege

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"perfevent/internal/hostfs"
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
// later), CAP_SYS_ADMIN before. The kernel answers PR_CAPBSET_READ for a
// capability it knows and refuses one beyond its last with EINVAL: one
// system call, where reading /proc/sys/kernel/cap_last_cap took an open,
// a walk of procfs, two reads and a close.
func CounterCapability() int {
	if _, err := unix.PrctlRetInt(unix.PR_CAPBSET_READ, unix.CAP_PERFMON, 0, 0, 0); err == nil {
		return unix.CAP_PERFMON
	}
	return unix.CAP_SYS_ADMIN
}

// Identity is who the process became.
type Identity struct {
	User       string
	UID, GID   int
	Capability int // the one capability kept
}

// Account is a user's ids and groups, as Lookup found them.
type Account struct {
	Name     string
	UID, GID int
	Groups   []int // supplementary groups, the primary one included
}

// Drop makes every thread of the process run as user name, with only
// capability c in its permitted and effective sets, nothing inheritable
// or ambient, and no_new_privs set. It must be called as root. If it fails
// part way the process may have lost root already; the error says so, and
// the caller should stop rather than run with unknown credentials.
func Drop(name string, c int) (Identity, error) {
	a, err := LookupAccount(name)
	if err != nil {
		return Identity{User: name, Capability: c}, err
	}
	return a.Drop(c)
}

// dropCallCount is how many system calls Drop makes on every thread. Each is
// a stop of the world that signals every other thread of the runtime and
// spins until all of them have run the call: on a busy machine one
// sleeping thread that the scheduler leaves waiting holds up the whole
// start. The test counts them. Two more put every thread's nice value and
// CPU mask back after the boost (see boostThreads); they are quick, as
// every thread is still lifted and on one CPU.
const dropCallCount = 6

const restoreCallCount = 2

// Drop is Drop for an account already looked up.
func (a Account) Drop(c int) (Identity, error) {
	id := Identity{User: a.Name, UID: a.UID, GID: a.GID, Capability: c}
	if os.Geteuid() != 0 {
		return id, errors.New("not running as root")
	}
	if a.UID == 0 {
		return id, fmt.Errorf("user %s is root", a.Name)
	}
	if c < 0 || c >= 64 {
		return id, fmt.Errorf("capability %d is out of range", c)
	}
	// The calls, all on every thread, in the order the kernel needs:
	//
	//  1. keepcaps: without it the change of uid below, from root to a
	//     user, empties every capability set. Probing it first also tells
	//     whether all-thread calls work in this build before anything is
	//     changed.
	//  2. the groups, then the gids, while CAP_SETGID is still effective;
	//  3. the uids: real, effective and saved at once, so that no saved
	//     root uid can be taken back. The kernel empties the effective set
	//     and, thanks to keepcaps, leaves the permitted one full;
	//  4. capset: permitted and effective down to c alone, inheritable
	//     empty. The ambient set is empty: the change of uids cleared
	//     it, and it can hold only what is permitted and inheritable;
	//  5. no_new_privs, so that no program executed later can gain
	//     anything through set-user-ID bits or file capabilities.
	//
	// Keepcaps is left set. It matters only when a thread moves all its
	// uids away from 0, which none can do again without CAP_SETUID, and
	// any thread may set it on itself without privilege, so clearing it
	// protected nothing; it is also cleared by execve. Clearing it cost
	// a seventh all-thread call.
	//
	// During the calls every thread runs at boostNice on the caller's CPU,
	// so that on a busy machine the rounds do not wait behind the load
	// (see boostNice).
	p := newDropCalls(a, c)
	restore := boostThreads()
	defer restore()
	for i, s := range p.steps {
		err := allThreads(s.trap, s.a1, s.a2, s.a3)
		if err == nil {
			continue
		}
		if i == 0 && errors.Is(err, syscall.ENOTSUP) {
			return id, errors.New("this build cannot change the credentials of every thread (build with CGO_ENABLED=0)")
		}
		return id, p.failed(i, a, c, err)
	}
	runtime.KeepAlive(p) // the kernel read its arrays during the calls
	return id, nil
}

// dropCalls are Drop's system calls and the arrays they point to.
type dropCalls struct {
	gids  []uint32 // setgroups' gid_t array
	hdr   unix.CapUserHeader
	data  [2]unix.CapUserData
	steps [dropCallCount]dropStep
}

type dropStep struct {
	trap       uintptr
	a1, a2, a3 uintptr
}

// failed is the error of step i, naming the call and what the process is
// left as. It is built only when a step fails: formatting the groups with
// fmt for every drop cost more than the building of the calls.
func (p *dropCalls) failed(i int, a Account, c int, err error) error {
	var what, state string
	switch i {
	case 0:
		what, state = "prctl(PR_SET_KEEPCAPS)", "unchanged"
	case 1:
		what, state = fmt.Sprintf("setgroups(%v)", a.Groups), "still root"
	case 2:
		what, state = fmt.Sprintf("setresgid(%d)", a.GID), "still root"
	case 3:
		what, state = fmt.Sprintf("setresuid(%d)", a.UID), "still root"
	case 4:
		what, state = "capset("+Name(c)+")", fmt.Sprintf("now uid %d, without capabilities", a.UID)
	default:
		what = "prctl(PR_SET_NO_NEW_PRIVS)"
	}
	if state != "" {
		return fmt.Errorf("%s: %w (%s)", what, err, state)
	}
	return fmt.Errorf("%s: %w", what, err)
}

func newDropCalls(a Account, c int) *dropCalls {
	p := &dropCalls{hdr: unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}}
	var gids uintptr
	if len(a.Groups) > 0 {
		p.gids = make([]uint32, len(a.Groups))
		for i, g := range a.Groups {
			p.gids[i] = uint32(g)
		}
		gids = uintptr(unsafe.Pointer(&p.gids[0]))
	}
	p.data[c/32].Effective = 1 << (c % 32)
	p.data[c/32].Permitted = 1 << (c % 32)
	uid, gid := uintptr(a.UID), uintptr(a.GID)
	p.steps = [dropCallCount]dropStep{
		{unix.SYS_PRCTL, unix.PR_SET_KEEPCAPS, 1, 0},
		{unix.SYS_SETGROUPS, uintptr(len(p.gids)), gids, 0},
		{unix.SYS_SETRESGID, gid, gid, gid},
		{unix.SYS_SETRESUID, uid, uid, uid},
		{unix.SYS_CAPSET, uintptr(unsafe.Pointer(&p.hdr)), uintptr(unsafe.Pointer(&p.data[0])), 0},
		{unix.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1, 0},
	}
	return p
}

// allThreadsSyscall is syscall.AllThreadsSyscall; the tests record the
// calls instead.
var allThreadsSyscall = syscall.AllThreadsSyscall

func allThreads(trap, a1, a2, a3 uintptr) error {
	if _, _, errno := allThreadsSyscall(trap, a1, a2, a3); errno != 0 {
		return errno
	}
	return nil
}

// Status is what /proc/<pid>/status says about a process's credentials.
type Status struct {
	UIDs, GIDs [4]int // real, effective, saved, filesystem
	Groups     []int  // supplementary groups
	CapEff     uint64
	CapPrm     uint64
	CapInh     uint64
	CapAmb     uint64
	NoNewPrivs bool
}

// ReadStatus reads the credentials of process pid (0 for this process)
// from /proc, where anyone can check them.
func ReadStatus(pid int) (Status, error) {
	return readStatus(procDir(pid) + "/status")
}

func procDir(pid int) string {
	if pid == 0 {
		return "/proc/self"
	}
	return "/proc/" + strconv.Itoa(pid)
}

// ReadThreads reads the credentials of every thread of process pid (0 for
// this process), by thread id. Credentials are per thread: the process's
// own status file shows only its first thread's.
func ReadThreads(pid int) (map[int]Status, error) {
	tids, err := taskIDs(procDir(pid))
	if err != nil {
		return nil, err
	}
	threads := make(map[int]Status, len(tids))
	for _, tid := range tids {
		st, err := readStatus(procDir(pid) + "/task/" + strconv.Itoa(tid) + "/status")
		if errors.Is(err, os.ErrNotExist) {
			continue // the thread has exited
		}
		if err != nil {
			return nil, err
		}
		threads[tid] = st
	}
	return threads, nil
}

// taskIDs lists the thread ids in dir/task, for dir a process's /proc
// directory.
func taskIDs(dir string) ([]int, error) {
	ents, err := os.ReadDir(dir + "/task")
	if err != nil {
		return nil, err
	}
	tids := make([]int, 0, len(ents))
	for _, e := range ents {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids, nil
}

// readStatus reads a status file with a plain open, read and close into
// one buffer and parses it in place: it is about 1.5 KiB of text, of which
// only a few lines matter.
func readStatus(path string) (Status, error) {
	var buf [4096]byte
	b, err := hostfs.AppendFile(buf[:0], path)
	if err != nil {
		return Status{}, err
	}
	var s Status
	for line := range bytes.Lines(b) {
		key, val, ok := bytes.Cut(line, []byte{':'})
		if !ok {
			continue
		}
		switch string(key) {
		case "Uid", "Gid":
			dst := &s.UIDs
			if key[0] == 'G' {
				dst = &s.GIDs
			}
			i := 0
			for f := range bytes.FieldsSeq(val) {
				if i == 4 {
					break
				}
				dst[i], _ = strconv.Atoi(string(f))
				i++
			}
		case "Groups":
			for f := range bytes.FieldsSeq(val) {
				if g, err := strconv.Atoi(string(f)); err == nil {
					s.Groups = append(s.Groups, g)
				}
			}
		case "CapEff", "CapPrm", "CapInh", "CapAmb":
			f := bytes.TrimSpace(val)
			if len(f) == 0 || bytes.IndexAny(f, " \t") >= 0 {
				continue
			}
			v, _ := strconv.ParseUint(string(f), 16, 64)
			switch string(key) {
			case "CapEff":
				s.CapEff = v
			case "CapPrm":
				s.CapPrm = v
			case "CapInh":
				s.CapInh = v
			default:
				s.CapAmb = v
			}
		case "NoNewPrivs":
			s.NoNewPrivs = string(bytes.TrimSpace(val)) == "1"
		}
	}
	return s, nil
}

// Only reports whether the process has exactly capability c, effective and
// permitted, nothing inheritable or ambient, and runs as uid everywhere.
func (s Status) Only(uid, c int) bool {
	for _, u := range s.UIDs {
		if u != uid {
			return false
		}
	}
	bit := uint64(1) << c
	return s.CapEff == bit && s.CapPrm == bit && s.CapInh == 0 && s.CapAmb == 0
}

// Dropped reports whether the credentials are those Drop gives account a
// with capability c: Only(a.UID, c), every gid a.GID, the supplementary
// groups a's, and no_new_privs set.
func (s Status) Dropped(a Account, c int) bool {
	if !s.Only(a.UID, c) || !s.NoNewPrivs {
		return false
	}
	for _, g := range s.GIDs {
		if g != a.GID {
			return false
		}
	}
	return slices.Equal(slices.Sorted(slices.Values(s.Groups)), slices.Sorted(slices.Values(a.Groups)))
}
