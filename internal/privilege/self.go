package privilege

import (
	"golang.org/x/sys/unix"
)

// Self returns the calling thread's credentials as the kernel reports
// them through system calls, in the form ReadStatus gives: one cheap call
// each, where /proc/self/status costs a walk of procfs and the writing of
// some fifty lines. After Drop every thread has the same credentials (the
// runtime stops the process if an all-thread call's result differs
// between threads), so the caller's stand for all.
//
// The kernel gives the ambient set only one capability at a time; it can
// hold only capabilities both permitted and inheritable, so only those are
// asked about, and none when the inheritable set is empty.
func Self() (Status, error) {
	var s Status
	s.UIDs[0], s.UIDs[1], s.UIDs[2] = unix.Getresuid()
	s.GIDs[0], s.GIDs[1], s.GIDs[2] = unix.Getresgid()
	// An invalid id (-1) changes nothing and returns the current one.
	fsuid, err := unix.SetfsuidRetUid(-1)
	if err != nil {
		return s, err
	}
	fsgid, err := unix.SetfsgidRetGid(-1)
	if err != nil {
		return s, err
	}
	s.UIDs[3], s.GIDs[3] = fsuid, fsgid
	if s.Groups, err = unix.Getgroups(); err != nil {
		return s, err
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return s, err
	}
	s.CapEff = uint64(data[1].Effective)<<32 | uint64(data[0].Effective)
	s.CapPrm = uint64(data[1].Permitted)<<32 | uint64(data[0].Permitted)
	s.CapInh = uint64(data[1].Inheritable)<<32 | uint64(data[0].Inheritable)
	for c := 0; c < 64; c++ {
		if s.CapPrm&s.CapInh&(1<<c) == 0 {
			continue
		}
		set, err := unix.PrctlRetInt(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_IS_SET, uintptr(c), 0, 0)
		if err != nil {
			return s, err
		}
		if set == 1 {
			s.CapAmb |= 1 << c
		}
	}
	nnp, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0)
	if err != nil {
		return s, err
	}
	s.NoNewPrivs = nnp == 1
	return s, nil
}
