// Package pcpconf finds PCP's directories the way PCP's own tools do: a
// variable set in the environment wins, then the PCP_* lines of
// /etc/pcp.conf (or the file named by $PCP_CONF), then the Debian defaults.
package pcpconf

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
)

// defaultOf is Debian's value of a PCP_* variable, used when neither the
// environment nor pcp.conf says otherwise, or "". It is a switch, not a
// map, so that no start of the agent spends time building it.
func defaultOf(name string) string {
	switch name {
	case "PCP_PMDAS_DIR":
		return "/var/lib/pcp/pmdas"
	case "PCP_VAR_DIR":
		return "/var/lib/pcp"
	case "PCP_LOG_DIR":
		return "/var/log/pcp"
	case "PCP_RUN_DIR":
		return "/run/pcp"
	case "PCP_SYSCONF_DIR":
		return "/etc/pcp"
	case "PCP_BINADM_DIR":
		return "/usr/lib/pcp/bin"
	case "PCP_SHARE_DIR":
		return "/usr/share/pcp"
	case "PCP_PMCDCONF_PATH":
		return "/etc/pcp/pmcd/pmcd.conf"
	case "PCP_USER":
		return "pcp"
	case "PCP_GROUP":
		return "pcp"
	case "PCP_TMPFILE_DIR":
		return "/var/tmp"
	case "PCP_RC_DIR":
		return "/etc/init.d"
	}
	return ""
}

// Config is a resolved set of PCP_* variables.
type Config struct {
	file map[string]string
	env  func(string) (string, bool)
	err  error
}

// Load reads pcp.conf from $PCP_CONF or /etc/pcp.conf. A missing file is
// not an error: PCP may live elsewhere, and the environment and defaults
// still give usable paths. A file that exists but cannot be read in full
// is kept as far as it was read, and Err says why.
func Load() *Config {
	path := os.Getenv("PCP_CONF")
	if path == "" {
		path = "/etc/pcp.conf"
	}
	c := &Config{file: map[string]string{}, env: os.LookupEnv}
	f, err := os.Open(path)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			c.err = err
		}
		return c
	}
	defer f.Close()
	c.file, err = Parse(f)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) { // it names the file already
			err = pe.Err
		}
		c.err = fmt.Errorf("%s: %w after %d settings; the environment and defaults stand in for the rest", path, err, len(c.file))
	}
	return c
}

// Err reports why pcp.conf could not be read in full, or nil.
func (c *Config) Err() error { return c.err }

// Parse reads NAME=value lines, ignoring comments and anything that is not
// an assignment. Quotes around a value are dropped. Lines may be of any
// length. On a read error it returns what it read so far, and the error.
func Parse(r io.Reader) (map[string]string, error) {
	m := map[string]string{}
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadString('\n')
		if line = strings.TrimSpace(line); line != "" && line[0] != '#' {
			name, value, ok := strings.Cut(line, "=")
			if ok && !strings.ContainsAny(name, " \t") {
				m[name] = strings.Trim(value, `"'`)
			}
		}
		if err == io.EOF {
			return m, nil
		}
		if err != nil {
			return m, err
		}
	}
}

// Get returns the value of a PCP_* variable.
func (c *Config) Get(name string) string {
	if v, ok := c.env(name); ok && v != "" {
		return v
	}
	if v, ok := c.file[name]; ok && v != "" {
		return v
	}
	return defaultOf(name)
}
