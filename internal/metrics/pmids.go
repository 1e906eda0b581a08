package metrics

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"perfevent/internal/atomicfile"
	"perfevent/internal/hostfs"
)

// Clusters remembers which PMID cluster each dynamic metric got, so that a
// name keeps its PMID across restarts and config edits. The C agent numbers
// clusters by position in the config, so an edit renumbers everything after
// it and archives need pmlogrewrite; here a name is numbered once, and a new
// name always gets a number never used before, even if an old name went away.
//
// The map is a text file with one "cluster key" pair a line, where key is
// the name below perfevent (e.g. "hwcounters.cpu_clock", "derived.ipc").
//
// A new name is numbered by one rule, whoever adds it (counters, derived
// metrics, ratios, cgroups):
//   - a name the C agent serves on this machine (Prefer) gets the C agent's
//     cluster, if no name of the map holds it, so that switching agents
//     keeps its PMID;
//   - any other name gets a number from FirstOwn up, where the C agent,
//     which numbers from 2 by position, never reaches: above the highest
//     number in the map, so that a number whose line was deleted is not
//     handed to another name while numbers are left above it. Once the top
//     (4095) is taken, the lowest free number is used, from FirstOwn and
//     then below it, the C agent's last.
//
// A name already in the map keeps its number whatever the C agent gives
// it: an upgrade never renumbers silently (Disagree lists them).
type Clusters struct {
	path    string // "" for a map that is never saved
	byKey   map[string]int
	used    map[int]bool
	next    int
	size    int // bytes of the file Save would write
	changed bool
	// c is the C agent's cluster of each name it serves here (Prefer),
	// cUsed the clusters it gives.
	c     map[string]int
	cUsed map[int]bool
}

// FirstOwn is the first cluster of the names the C agent does not serve.
// The C agent gives clusters 2, 3, … to its counters and derived metrics
// in order, one each: it would need 2046 of them to reach this one.
const FirstOwn = 1 << 11

// NewClusters returns an empty map that lives in memory only: Save does
// nothing. The agent numbers its metrics with it when the map on disk
// cannot be used, rather than serve nothing.
func NewClusters() *Clusters {
	return &Clusters{byKey: map[string]int{}, used: map[int]bool{}, next: FirstOwn, size: len(mapHeader)}
}

// LoadClusters reads the map at path. A missing file is an empty map. Lines
// that cannot be used are reported (file:line: reason) and skipped, and
// the rest of the map is kept: losing one number is better than losing all.
//
// A map that exists but cannot be read (permissions, no descriptor left) is
// another matter: numbering metrics without it would put new data under old
// PMIDs in existing archives, and saving would overwrite it. LoadClusters
// then returns a nil map and the error alone.
//
// The map must belong to root, to the user the agent runs as, or to one of
// trusted: the users an earlier agent ran as (a change of -U must not lose
// the numbers it saved).
func LoadClusters(path string, trusted ...int) (*Clusters, []error) {
	c := NewClusters()
	c.path = path
	data, err := readMap(path, trusted)
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return nil, []error{fmt.Errorf("reading the PMID map %s: %w", path, err)}
	}
	var errs []error
	// The lines' names are cut from one string of the whole file, and
	// the maps made for as many lines as it has.
	rest := string(data)
	lines := strings.Count(rest, "\n") + 1
	c.byKey, c.used = make(map[string]int, lines), make(map[int]bool, lines)
	for line := 1; rest != ""; line++ {
		var text string
		text, rest, _ = strings.Cut(rest, "\n")
		text = strings.TrimSpace(text)
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
		if c.used[n] {
			errs = append(errs, fmt.Errorf("%s:%d: cluster %d is already used by %s", path, line, n, c.keyOf(n)))
			continue
		}
		if prev, ok := c.byKey[key]; ok {
			errs = append(errs, fmt.Errorf("%s:%d: %s already has cluster %d", path, line, key, prev))
			continue
		}
		c.add(key, n)
	}
	return c, errs
}

// keyOf is the name that has cluster n, for a message.
func (c *Clusters) keyOf(n int) string {
	for k, m := range c.byKey {
		if m == n {
			return k
		}
	}
	return ""
}

// maxMapSize bounds the map both ways: LoadClusters reads no more, and
// Cluster numbers no name that would make Save write more, so that the
// agent never writes a map it would refuse at its next start. 4094 names
// of a thousand bytes fit.
const maxMapSize = 4 << 20

const mapHeader = "# PMID clusters of pmdaperfevent's dynamic metrics: cluster name.\n" +
	"# Written by the agent. A name keeps its number; delete a line to forget it.\n"

// lineSize is the length of key's line in the saved map.
func lineSize(key string, n int) int {
	digits := 1
	if n < 0 {
		digits++ // never in a map LoadClusters accepts, but Cluster's bound must not be fooled
		n = -n
	}
	for ; n >= 10; n /= 10 {
		digits++
	}
	return digits + 1 + len(key) + 1
}

func (c *Clusters) add(key string, n int) {
	c.byKey[key] = n
	c.used[n] = true
	c.size += lineSize(key, n)
	if n >= c.next {
		c.next = n + 1
	}
}

// readMap reads the map without following a symbolic link, and only if it
// is a regular file of root's, of the user the agent runs as, or of a
// trusted uid. The root agent reads it, and its directory may belong to
// that user: a link there must not let the user have root copy some other
// file into the log.
func readMap(path string, trusted []int) ([]byte, error) {
	// The system calls alone: an os.File of a descriptor opened
	// non-blocking (so that a FIFO there cannot hang the agent) would first
	// offer the file to the poller, in five calls.
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		if err == unix.ELOOP {
			return nil, errors.New("it is a symbolic link; remove it")
		}
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("it is not a regular file (%v)", modeType(st.Mode))
	}
	if st.Uid != 0 && int(st.Uid) != os.Geteuid() && !slices.Contains(trusted, int(st.Uid)) {
		return nil, fmt.Errorf("it belongs to uid %d, not to root or the agent's user", st.Uid)
	}
	// As much as fstat says, and a byte more to see the end (or that the
	// file grew).
	data, err := hostfs.AppendFrom(make([]byte, 0, min(max(st.Size, 0), maxMapSize)+1), fd, path, maxMapSize)
	if errors.Is(err, hostfs.ErrTooLarge) {
		return nil, fmt.Errorf("it is larger than %d bytes", maxMapSize)
	}
	if err != nil {
		return nil, err
	}
	return data, nil
}

// modeType is the type bits of a stat mode as fs.FileMode has them, as
// os.Stat would report them.
func modeType(mode uint32) fs.FileMode {
	switch mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return fs.ModeDir
	case unix.S_IFLNK:
		return fs.ModeSymlink
	case unix.S_IFIFO:
		return fs.ModeNamedPipe
	case unix.S_IFSOCK:
		return fs.ModeSocket
	case unix.S_IFCHR:
		return fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		return fs.ModeDevice
	}
	return fs.ModeIrregular
}

// clip quotes at most the start of a bad line: the log is world-readable.
func clip(s string) string {
	const max = 40
	if len(s) > max {
		return s[:max] + "…"
	}
	return s
}

// Prefer tells the map how the C agent numbers the names it serves here:
// keys[i] has cluster i+2 (setup.CLayout). A key that appears twice keeps
// its first cluster, as a name in the C agent's namespace does.
func (c *Clusters) Prefer(keys []string) {
	c.c, c.cUsed = map[string]int{}, map[int]bool{}
	for i, k := range keys {
		n := firstDynamic + i
		if n > maxCluster {
			break
		}
		c.cUsed[n] = true
		if _, ok := c.c[k]; !ok {
			c.c[k] = n
		}
	}
}

// Disagreement is a name the map numbers otherwise than the C agent.
type Disagreement struct {
	Key    string
	Map, C int
	Holder string // the name that holds C in the map, if one does
}

// Disagree lists the names of Prefer whose cluster differs from the C
// agent's, by C's cluster. Cluster must have numbered them first.
func (c *Clusters) Disagree() []Disagreement {
	var out []Disagreement
	byNum := map[int]string{}
	for k, n := range c.byKey {
		byNum[n] = k
	}
	for k, want := range c.c {
		got, ok := c.byKey[k]
		if !ok || got == want {
			continue
		}
		out = append(out, Disagreement{Key: k, Map: got, C: want, Holder: byNum[want]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].C < out[j].C })
	return out
}

// Cluster returns key's cluster, numbering it if it is new.
func (c *Clusters) Cluster(key string) (int, error) {
	if n, ok := c.byKey[key]; ok {
		return n, nil
	}
	n, ok := c.c[key]
	if !ok || c.used[n] {
		n = c.own()
	}
	if n > maxCluster {
		return 0, fmt.Errorf("no PMID cluster left for %s: all %d are in use in %s; remove stale lines from it", key, maxCluster-firstDynamic+1, c.where())
	}
	if c.size+lineSize(key, n) > maxMapSize {
		return 0, fmt.Errorf("no room for %s in the PMID map %s: it would grow beyond %d bytes; remove stale lines from it", key, c.where(), maxMapSize)
	}
	c.add(key, n)
	c.changed = true
	return n, nil
}

// own is the next number for a name the C agent does not give (or whose
// number the map gave to another name); maxCluster+1 when none is left.
func (c *Clusters) own() int {
	if c.next <= maxCluster {
		return c.next
	}
	for n := FirstOwn; n <= maxCluster; n++ {
		if !c.used[n] {
			return n
		}
	}
	for n := firstDynamic; n < FirstOwn; n++ {
		if !c.used[n] && !c.cUsed[n] {
			return n
		}
	}
	for n := firstDynamic; n < FirstOwn; n++ {
		if !c.used[n] {
			return n
		}
	}
	return maxCluster + 1
}

func (c *Clusters) where() string {
	if c.path == "" {
		return "(in memory)"
	}
	return c.path
}

// Changed reports whether Cluster numbered a new key since the map was loaded.
func (c *Clusters) Changed() bool { return c.changed }

// Save writes the map if it changed, replacing the file atomically so a
// crash never leaves half a map behind.
func (c *Clusters) Save() error {
	if !c.changed || c.path == "" {
		return nil
	}
	keys := make([]string, 0, len(c.byKey))
	for k := range c.byKey {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return c.byKey[keys[i]] < c.byKey[keys[j]] })
	var b strings.Builder
	b.WriteString(mapHeader)
	for _, k := range keys {
		fmt.Fprintf(&b, "%d %s\n", c.byKey[k], k)
	}
	if b.Len() > maxMapSize { // Cluster sees to it that this never happens
		return fmt.Errorf("the PMID map %s would be %d bytes, more than the %d it may be read back with", c.path, b.Len(), maxMapSize)
	}
	if err := os.MkdirAll(filepath.Dir(c.path), 0o755); err != nil {
		return err
	}
	// Synced, unlike the state file: after a crash an empty map would
	// give every metric a new PMID.
	if err := atomicfile.Write(c.path, []byte(b.String()), atomicfile.Options{Mode: 0o644, Sync: true}); err != nil {
		return err
	}
	c.changed = false
	return nil
}

// PrepareMapDir creates the directory of the map at path if it is missing
// and, when adopt is true, gives it to uid:gid so that an agent running as
// that user can replace the map after a reload. Only a real directory (no
// link is followed) owned by root or by one of trusted (as LoadClusters) is
// given away: the agent hands over what it or an earlier agent made, never
// something planted there. The map itself is not touched: a rename in the
// directory replaces it whoever owns it.
func PrepareMapDir(path string, uid, gid int, adopt bool, trusted ...int) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if !adopt {
		return nil
	}
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("PMID map directory %s: %w", dir, err)
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return fmt.Errorf("PMID map directory %s: %w", dir, err)
	}
	switch {
	case int(st.Uid) == uid && int(st.Gid) == gid:
		return nil
	case st.Uid != 0 && !slices.Contains(trusted, int(st.Uid)):
		return fmt.Errorf("PMID map directory %s belongs to uid %d, not to root or the agent's user; leaving it as it is", dir, st.Uid)
	case st.Mode&0o022 != 0:
		return fmt.Errorf("PMID map directory %s is writable by group or others (mode %#o); leaving it as it is", dir, st.Mode&0o7777)
	}
	if err := syscall.Fchown(fd, uid, gid); err != nil {
		return fmt.Errorf("PMID map directory %s: giving it to uid %d: %w", dir, uid, err)
	}
	return nil
}
