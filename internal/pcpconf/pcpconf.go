// Package pcpconf finds PCP's directories the way PCP's own tools do: a
// variable set in the environment wins, then the PCP_* lines of
// /etc/pcp.conf (or the file named by $PCP_CONF), then the Debian defaults.
package pcpconf

import (
	"bufio"
	"io"
	"os"
	"strings"
)

// Defaults are Debian's values, used when neither the environment nor
// pcp.conf says otherwise.
var Defaults = map[string]string{
	"PCP_PMDAS_DIR":     "/var/lib/pcp/pmdas",
	"PCP_VAR_DIR":       "/var/lib/pcp",
	"PCP_LOG_DIR":       "/var/log/pcp",
	"PCP_RUN_DIR":       "/run/pcp",
	"PCP_SYSCONF_DIR":   "/etc/pcp",
	"PCP_BINADM_DIR":    "/usr/lib/pcp/bin",
	"PCP_SHARE_DIR":     "/usr/share/pcp",
	"PCP_PMCDCONF_PATH": "/etc/pcp/pmcd/pmcd.conf",
	"PCP_USER":          "pcp",
	"PCP_GROUP":         "pcp",
	"PCP_TMPFILE_DIR":   "/var/tmp",
	"PCP_RC_DIR":        "/etc/init.d",
}

// Config is a resolved set of PCP_* variables.
type Config struct {
	file map[string]string
	env  func(string) (string, bool)
}

// Load reads pcp.conf from $PCP_CONF or /etc/pcp.conf. A missing or
// unreadable file is not an error: PCP may live elsewhere, and the
// environment and defaults still give usable paths.
func Load() *Config {
	path := os.Getenv("PCP_CONF")
	if path == "" {
		path = "/etc/pcp.conf"
	}
	c := &Config{file: map[string]string{}, env: os.LookupEnv}
	if f, err := os.Open(path); err == nil {
		c.file = Parse(f)
		f.Close()
	}
	return c
}

// Parse reads NAME=value lines, ignoring comments and anything that is not
// an assignment. Quotes around a value are dropped.
func Parse(r io.Reader) map[string]string {
	m := map[string]string{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		name, value, ok := strings.Cut(line, "=")
		if !ok || strings.ContainsAny(name, " \t") {
			continue
		}
		m[name] = strings.Trim(value, `"'`)
	}
	return m
}

// Get returns the value of a PCP_* variable.
func (c *Config) Get(name string) string {
	if v, ok := c.env(name); ok && v != "" {
		return v
	}
	if v, ok := c.file[name]; ok && v != "" {
		return v
	}
	return Defaults[name]
}
