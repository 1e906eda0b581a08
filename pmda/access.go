package main

import (
	"fmt"
	"os/user"
	"strconv"

	"perfevent/internal/reservation"
)

// lockAccess is -lockmode and -lockgroup as the lock file's access. The
// group is looked up now, as root, before anything else: a name that does
// not resolve is an error at start-up, not a lock file anyone may read.
func lockAccess(mode, group string) (reservation.Access, error) {
	m, err := strconv.ParseUint(mode, 8, 32)
	if err != nil {
		return reservation.Access{}, fmt.Errorf("-lockmode %q: an octal mode, such as 0644 or 0640", mode)
	}
	a := reservation.Access{Mode: uint32(m)}
	if group != "" {
		gid, err := strconv.Atoi(group)
		if err != nil {
			g, lerr := user.LookupGroup(group)
			if lerr != nil {
				return a, fmt.Errorf("-lockgroup %s: %v (create it with groupadd, or give a number)", group, lerr)
			}
			if gid, err = strconv.Atoi(g.Gid); err != nil {
				return a, fmt.Errorf("-lockgroup %s: gid %q", group, g.Gid)
			}
		}
		if gid < 0 {
			return a, fmt.Errorf("-lockgroup %d: not a group id", gid)
		}
		a.GID, a.Group = gid, true
	}
	if err := a.Check(); err != nil {
		return a, fmt.Errorf("-lockmode %s: %v", mode, err)
	}
	return a, nil
}
