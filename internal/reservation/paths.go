package reservation

import (
	"path/filepath"

	"perfevent/internal/pcpconf"
)

// DefaultLockPath returns $PCP_PMDAS_DIR/perfevent/perflock, where
// PCP_PMDAS_DIR comes from the environment, else from pcp.conf ($PCP_CONF or
// /etc/pcp.conf), else is Debian's /var/lib/pcp/pmdas: the search PCP's own
// tools make, so that C and Go agents and tools agree on the file.
func DefaultLockPath() string { return LockPathIn(pcpconf.Load()) }

// LockPathIn is DefaultLockPath for a pcp.conf already loaded: the agent
// reads the file once at start-up.
func LockPathIn(c *pcpconf.Config) string {
	return filepath.Join(c.Get("PCP_PMDAS_DIR"), "perfevent", "perflock")
}
