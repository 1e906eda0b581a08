package reservation

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
)

// DefaultLockPath returns $PCP_PMDAS_DIR/perfevent/perflock, where
// PCP_PMDAS_DIR comes from the environment, else from pcp.conf ($PCP_CONF or
// /etc/pcp.conf), else is Debian's /var/lib/pcp/pmdas: the same search PCP's
// own tools make, so that C and Go agents and tools agree on the file.
func DefaultLockPath() string {
	return filepath.Join(pmdasDir(), "perfevent", "perflock")
}

func pmdasDir() string {
	if dir := os.Getenv("PCP_PMDAS_DIR"); dir != "" {
		return dir
	}
	conf := os.Getenv("PCP_CONF")
	if conf == "" {
		conf = "/etc/pcp.conf"
	}
	if f, err := os.Open(conf); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "PCP_PMDAS_DIR=")
			if ok {
				if v = strings.Trim(v, `"'`); v != "" {
					return v
				}
			}
		}
	}
	return "/var/lib/pcp/pmdas"
}
