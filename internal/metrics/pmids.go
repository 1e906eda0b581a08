package metrics

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// Clusters remembers which PMID cluster each dynamic metric got, so that a
// name keeps its PMID across restarts and config edits. The C agent numbers
// clusters by position in the config, so an edit renumbers everything after
// it and archives need pmlogrewrite; here a name is numbered once, and a new
// name always gets a number never used before, even if an old name went away.
//
// The map is a text file with one "cluster key" pair a line, where key is
// the name below perfevent (e.g. "hwcounters.cpu_clock", "derived.ipc").
type Clusters struct {
	path    string
	byKey   map[string]int
	next    int
	changed bool
}

// LoadClusters reads the map at path. A missing file is an empty map. Lines
// that cannot be used are reported (file:line: reason) and skipped, and
// the rest of the map is kept: losing one number is better than losing all.
//
// A map that exists but cannot be read (permissions, no descriptor left) is
// another matter: numbering metrics without it would put new data under old
// PMIDs in existing archives, and saving would overwrite it. LoadClusters
// then returns a nil map and the error alone.
func LoadClusters(path string) (*Clusters, []error) {
	c := &Clusters{path: path, byKey: map[string]int{}, next: firstDynamic}
	data, err := readMap(path)
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return nil, []error{fmt.Errorf("reading the PMID map %s: %w", path, err)}
	}
	var errs []error
	used := map[int]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || text[0] == '#' {
			continue
		}
		fields := strings.Fields(text)
		if len(fields) != 2 {
			errs = append(errs, fmt.Errorf("%s:%d: want \"cluster name\", got %q", path, line, clip(text)))
			continue
		}
		n, err := strconv.Atoi(fields[0])
		if err != nil || n < firstDynamic || n > maxCluster {
			errs = append(errs, fmt.Errorf("%s:%d: cluster %q is not a number from %d to %d", path, line, clip(fields[0]), firstDynamic, maxCluster))
			continue
		}
		key := fields[1]
		if prev, ok := used[n]; ok {
			errs = append(errs, fmt.Errorf("%s:%d: cluster %d is already used by %s", path, line, n, prev))
			continue
		}
		if prev, ok := c.byKey[key]; ok {
			errs = append(errs, fmt.Errorf("%s:%d: %s already has cluster %d", path, line, key, prev))
			continue
		}
		used[n] = key
		c.byKey[key] = n
		if n >= c.next {
			c.next = n + 1
		}
	}
	return c, errs
}

// maxMapSize bounds what LoadClusters reads: a map of 4094 names is far
// smaller.
const maxMapSize = 1 << 20

// readMap reads the map without following a symbolic link, and only if it
// is a regular file of root's or of the user the agent runs as. The root
// agent reads it, and its directory may belong to that user: a link there
// must not let the user have root copy some other file into the log.
func readMap(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, errors.New("it is a symbolic link; remove it")
		}
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("it is not a regular file (%v)", fi.Mode().Type())
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != 0 && int(st.Uid) != os.Geteuid() && int(st.Uid) != owner {
		return nil, fmt.Errorf("it belongs to uid %d, not to root or the agent's user", st.Uid)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxMapSize+1))
	if err == nil && len(data) > maxMapSize {
		err = fmt.Errorf("it is larger than %d bytes", maxMapSize)
	}
	return data, err
}

// owner is the uid that may own the map besides root: the user the agent
// runs as after start-up (SetOwner).
var owner = -1

// SetOwner names the user, besides root, whose PMID map the agent trusts.
func SetOwner(uid int) { owner = uid }

// clip quotes at most the start of a bad line: the log is world-readable.
func clip(s string) string {
	const max = 40
	if len(s) > max {
		return s[:max] + "…"
	}
	return s
}

// Cluster returns key's cluster, numbering it if it is new.
func (c *Clusters) Cluster(key string) (int, error) {
	if n, ok := c.byKey[key]; ok {
		return n, nil
	}
	if c.next > maxCluster {
		return 0, fmt.Errorf("no PMID cluster left for %s: all %d are in use in %s; remove stale lines from it", key, maxCluster-firstDynamic+1, c.path)
	}
	n := c.next
	c.next++
	c.byKey[key] = n
	c.changed = true
	return n, nil
}

// Changed reports whether Cluster numbered a new key since the map was loaded.
func (c *Clusters) Changed() bool { return c.changed }

// Save writes the map if it changed, replacing the file atomically so a
// crash never leaves half a map behind.
func (c *Clusters) Save() error {
	if !c.changed {
		return nil
	}
	keys := make([]string, 0, len(c.byKey))
	for k := range c.byKey {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return c.byKey[keys[i]] < c.byKey[keys[j]] })
	var b strings.Builder
	b.WriteString("# PMID clusters of pmdaperfevent's dynamic metrics: cluster name.\n")
	b.WriteString("# Written by the agent. A name keeps its number; delete a line to forget it.\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "%d %s\n", c.byKey[k], k)
	}
	if err := writeAtomic(c.path, []byte(b.String()), 0o644); err != nil {
		return err
	}
	c.changed = false
	return nil
}

func writeAtomic(path string, data []byte, mode os.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
