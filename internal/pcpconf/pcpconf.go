// Package pcpconf finds PCP's directories the way PCP's own tools do: a
// variable set in the environment wins, then the PCP_* lines of
// /etc/pcp.conf (or the file named by $PCP_CONF), then the Debian defaults.
package pcpconf

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"unsafe"

	"perfevent/internal/hostfs"
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
	// The system calls alone, into a buffer the size of a usual pcp.conf
	// (Debian's is 7 KiB): os.Open and a bufio.Reader would add four calls
	// (the poller's fcntl and epoll_ctl) and a read per 4 KiB to every
	// start of the agent. A failed open returns nil, a failed read what
	// came before it.
	data, err := hostfs.AppendFile(make([]byte, 0, 8<<10), path)
	if errors.Is(err, fs.ErrNotExist) {
		return c
	}
	if data == nil {
		c.err = err
		return c
	}
	c.file = parse(data)
	if err != nil {
		// The read's *fs.PathError would name the file a second time.
		c.err = fmt.Errorf("%s: %w after %d settings; the environment and defaults stand in for the rest", path, errors.Unwrap(err), len(c.file))
	}
	return c
}

// Err reports why pcp.conf could not be read in full, or nil.
func (c *Config) Err() error { return c.err }

// Parse reads NAME=value lines, ignoring comments and anything that is not
// an assignment. Quotes around a value are dropped. Lines may be of any
// length. On a read error it returns what it read so far, and the error.
func Parse(r io.Reader) (map[string]string, error) {
	data, err := io.ReadAll(r)
	return parse(data), err
}

// parse is Parse of the whole text, read already, which it takes: data
// becomes the string every name and value kept is cut from (a string
// made of each was a hundred and more allocations), and the caller must
// not write it again. The map is made for as many as there may be.
func parse(data []byte) map[string]string {
	if len(data) == 0 {
		return map[string]string{}
	}
	text := unsafe.String(&data[0], len(data))
	m := make(map[string]string, strings.Count(text, "="))
	for len(text) > 0 {
		var line string
		line, text, _ = strings.Cut(text, "\n")
		if line = strings.TrimSpace(line); len(line) > 0 && line[0] != '#' {
			name, value, ok := strings.Cut(line, "=")
			if ok && strings.IndexAny(name, " \t") < 0 {
				m[name] = strings.Trim(value, `"'`)
			}
		}
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
	return defaultOf(name)
}
