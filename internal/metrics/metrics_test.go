package metrics

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"perfevent/internal/pmda"
	"perfevent/internal/testneed"
)

func TestInstanceName(t *testing.T) {
	if got := InstanceName(17); got != "cpu17" {
		t.Errorf("InstanceName(17) = %q", got)
	}
}

func TestClustersStableAcrossEdits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "pmids")
	c, errs := LoadClusters(path)
	if len(errs) != 0 {
		t.Fatalf("missing file: %v", errs)
	}
	for i, key := range []string{"hwcounters.cpu_clock", "hwcounters.page_faults", "derived.ipc"} {
		n, err := c.Cluster(key)
		if err != nil || n != FirstOwn+i {
			t.Fatalf("Cluster(%s) = %d, %v; want %d", key, n, err, FirstOwn+i)
		}
	}
	if err := c.Save(); err != nil {
		t.Fatal(err)
	}

	// A restart with an edited config: page_faults is gone, a new event
	// arrives. Old names keep their numbers; the new one does not reuse
	// page_faults'.
	c, errs = LoadClusters(path)
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	if n, _ := c.Cluster("derived.ipc"); n != FirstOwn+2 {
		t.Errorf("derived.ipc moved to %d", n)
	}
	if n, _ := c.Cluster("hwcounters.task_clock"); n != FirstOwn+3 {
		t.Errorf("new name got %d, want %d", n, FirstOwn+3)
	}
	if n, _ := c.Cluster("hwcounters.cpu_clock"); n != FirstOwn {
		t.Errorf("cpu_clock moved to %d", n)
	}
	if !c.Changed() {
		t.Error("Changed() = false after a new name")
	}
	if err := c.Save(); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	if !strings.Contains(string(data), "2051 hwcounters.task_clock\n") {
		t.Errorf("saved map lacks the new name:\n%s", data)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", fi.Mode().Perm())
	}
}

func TestClustersBadLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pmids")
	os.WriteFile(path, []byte("# comment\n2 hwcounters.a\nbogus\n1 hwcounters.b\n2 hwcounters.c\n3 hwcounters.a\n9 hwcounters.d\n"), 0o644)
	c, errs := LoadClusters(path)
	want := []string{
		path + ":3: want \"cluster name\", got \"bogus\"",
		path + ":4: cluster \"1\" is not a number from 2 to 4095",
		path + ":5: cluster 2 is already used by hwcounters.a",
		path + ":6: hwcounters.a already has cluster 2",
	}
	if len(errs) != len(want) {
		t.Fatalf("got %d errors %v, want %d", len(errs), errs, len(want))
	}
	for i := range want {
		if errs[i].Error() != want[i] {
			t.Errorf("error %d = %q, want %q", i, errs[i], want[i])
		}
	}
	// The good lines survive, and a new name is numbered from FirstOwn,
	// above the old map's numbers.
	if n, _ := c.Cluster("hwcounters.d"); n != 9 {
		t.Errorf("hwcounters.d = %d, want 9", n)
	}
	if n, _ := c.Cluster("hwcounters.new"); n != FirstOwn {
		t.Errorf("new = %d, want %d", n, FirstOwn)
	}
	if n, _ := c.Cluster("hwcounters.newer"); n != FirstOwn+1 {
		t.Errorf("newer = %d, want %d", n, FirstOwn+1)
	}
}

// A map that holds the top cluster, 4095, is not full: new names take the
// lowest free numbers from FirstOwn, then below it, past those the C agent
// gives, until every one of the 4094 is taken.
func TestClustersAfterTheTopIsTaken(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pmids")
	os.WriteFile(path, []byte("4095 hwcounters.last\n2 hwcounters.first\n"), 0o644)
	c, _ := LoadClusters(path)
	c.Prefer([]string{"hwcounters.first", "hwcounters.c3", "hwcounters.c4"})
	want := []int{}
	for i := FirstOwn; i < 4095; i++ {
		want = append(want, i)
	}
	for i := 5; i < FirstOwn; i++ {
		want = append(want, i)
	}
	want = append(want, 3, 4) // the C agent's, taken last
	for i, w := range want {
		if n, err := c.Cluster(fmt.Sprintf("hwcounters.e%d", i)); n != w || err != nil {
			t.Fatalf("Cluster = %d, %v; want %d", n, err, w)
		}
	}
	if _, err := c.Cluster("hwcounters.over"); err == nil || !strings.Contains(err.Error(), "no PMID cluster left") {
		t.Errorf("err = %v", err)
	}
}

// The agent reads back every map it writes: Cluster refuses a name that
// would make the map larger than LoadClusters accepts.
func TestClustersWriteOnlyWhatCanBeReadBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pmids")
	c, _ := LoadClusters(path)
	long := strings.Repeat("x", 600)
	for i := range 2000 { // 1.2 MB, which a 1 MiB read limit once refused
		if _, err := c.Cluster(fmt.Sprintf("hwcounters.%s%d", long, i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Save(); err != nil {
		t.Fatal(err)
	}
	c, errs := LoadClusters(path)
	if c == nil || len(errs) != 0 || len(c.byKey) != 2000 {
		t.Fatalf("reading back the map the agent wrote: %v", errs)
	}
	huge := strings.Repeat("y", 1<<20)
	var err error
	for i := 0; err == nil && i < 4; i++ {
		_, err = c.Cluster(fmt.Sprintf("hwcounters.%s%d", huge, i))
	}
	if err == nil || !strings.Contains(err.Error(), "it would grow beyond 4194304 bytes") {
		t.Fatalf("a map beyond the read limit: %v", err)
	}
	if err := c.Save(); err != nil {
		t.Fatal(err)
	}
	if c, errs := LoadClusters(path); c == nil || len(errs) != 0 {
		t.Fatalf("reading back the map the agent wrote: %v", errs)
	}
}

func TestClustersUnreadableIsNotEmpty(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "pmids")
	os.Mkdir(path, 0o755) // exists, cannot be read as a file
	c, errs := LoadClusters(path)
	if c != nil || len(errs) != 1 || !strings.Contains(errs[0].Error(), "reading the PMID map "+path) {
		t.Errorf("LoadClusters = %v, %v; want nil and the read error", c, errs)
	}
}

// A map that belongs to another user is read only if the caller trusts
// that user, and so is its directory given away; root's always is.
func TestClustersTrustsTheOwnersItIsGiven(t *testing.T) {
	testneed.Root(t, "to give the map to another user")
	const other = 65534 // nobody's uid on Debian; any uid but root's does
	dir := filepath.Join(t.TempDir(), "perfevent")
	os.Mkdir(dir, 0o755)
	path := filepath.Join(dir, "pmids")
	os.WriteFile(path, []byte("7 hwcounters.cpu_clock\n"), 0o644)
	if err := os.Chown(path, other, other); err != nil {
		t.Fatal(err)
	}
	if c, errs := LoadClusters(path); c != nil || len(errs) != 1 || !strings.Contains(errs[0].Error(), "it belongs to uid 65534, not to root or the agent's user") {
		t.Errorf("a map of an untrusted uid: %v, %v", c, errs)
	}
	c, errs := LoadClusters(path, 1000, other)
	if c == nil || len(errs) != 0 {
		t.Fatalf("a map of a trusted uid: %v", errs)
	}
	if n, _ := c.Cluster("hwcounters.cpu_clock"); n != 7 {
		t.Errorf("cpu_clock's cluster %d, want 7 from the map", n)
	}

	os.Chown(dir, other, other)
	if err := PrepareMapDir(path, 1000, 1000, true); err == nil || !strings.Contains(err.Error(), "belongs to uid 65534") {
		t.Errorf("giving away a directory of an untrusted uid: %v", err)
	}
	if err := PrepareMapDir(path, 1000, 1000, true, other); err != nil {
		t.Errorf("giving away a directory of a trusted uid: %v", err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Sys().(*syscall.Stat_t).Uid != 1000 {
		t.Errorf("the directory after PrepareMapDir: %v, %v; want uid 1000's", fi, err)
	}
}

func TestClustersRefusesALinkAndQuotesLittle(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	os.WriteFile(secret, []byte("root:$6$a-long-secret-hash-that-must-not-reach-the-log:19000:0:99999:7:::\n"), 0o600)
	link := filepath.Join(dir, "pmids")
	os.Symlink(secret, link)
	c, errs := LoadClusters(link)
	if c != nil || len(errs) != 1 || !strings.Contains(errs[0].Error(), "symbolic link") || strings.Contains(errs[0].Error(), "secret-hash") {
		t.Errorf("through a link: %v, %v", c, errs)
	}
	os.Remove(link)
	os.WriteFile(link, []byte("root:$6$a-long-secret-hash-that-must-not-reach-the-log:19000\n"), 0o644)
	_, errs = LoadClusters(link)
	if len(errs) != 1 || strings.Contains(errs[0].Error(), "must-not-reach") {
		t.Errorf("a bad line is quoted in full: %v", errs)
	}
}

// The help file that Install gives newhelp says what the agent says.
func TestHelpFileMatchesTheAgent(t *testing.T) {
	f, err := os.Open("../../install/help")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := pmda.ParseHelp(f, "install/help")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2]string{
		"perfevent.version":        {oneLineVersion, helpVersion},
		"perfevent.active":         {oneLineActive, helpActive},
		"perfevent.derived.active": {oneLineDerivedActive, helpDerivedActive},
	}
	if len(got) != len(want) {
		t.Errorf("install/help has %d entries, want %d", len(got), len(want))
	}
	for name, w := range want {
		h := got[name]
		if h.OneLine != w[0] || h.Help != w[1] {
			t.Errorf("install/help for %s:\n%q\n%q\nthe agent serves:\n%q\n%q", name, h.OneLine, h.Help, w[0], w[1])
		}
	}
}

// Names the C agent serves get its clusters where the map leaves them
// free; a map's name keeps its number (Disagree reports it), and a name
// the C agent does not serve is numbered from FirstOwn.
func TestClustersPreferTheCAgents(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pmids")
	// An older agent's map: cpu_clock took 2 and msr.tsc 9.
	os.WriteFile(path, []byte("2 hwcounters.cpu_clock\n9 hwcounters.msr.tsc\n"), 0o644)
	c, _ := LoadClusters(path)
	c.Prefer([]string{"hwcounters.msr.tsc", "hwcounters.software.alignment_faults", "hwcounters.software.context_switches", "hwcounters.software.context_switches", "derived.sw"})
	for key, want := range map[string]int{
		"hwcounters.msr.tsc":                   9, // the map's, not the C agent's 2
		"hwcounters.software.alignment_faults": 3,
		"hwcounters.software.context_switches": 4,
		"derived.sw":                           6, // 5 is the duplicate's
		"hwcounters.cpu_clock":                 2,
		"ratio.ipc":                            FirstOwn,
	} {
		if n, err := c.Cluster(key); n != want || err != nil {
			t.Errorf("Cluster(%s) = %d, %v; want %d", key, n, err, want)
		}
	}
	d := c.Disagree()
	if len(d) != 1 || d[0] != (Disagreement{Key: "hwcounters.msr.tsc", Map: 9, C: 2, Holder: "hwcounters.cpu_clock"}) {
		t.Errorf("Disagree() = %+v; want msr.tsc at 9 rather than 2, held by cpu_clock", d)
	}

	// Without a map, every name the C agent serves gets its number.
	c = NewClusters()
	c.Prefer([]string{"hwcounters.msr.tsc", "hwcounters.software.alignment_faults"})
	if n, _ := c.Cluster("hwcounters.software.alignment_faults"); n != 3 {
		t.Errorf("alignment_faults = %d, want 3", n)
	}
	if n, _ := c.Cluster("hwcounters.cpu_clock"); n != FirstOwn {
		t.Errorf("cpu_clock = %d, want %d", n, FirstOwn)
	}
	if n, _ := c.Cluster("hwcounters.msr.tsc"); n != 2 {
		t.Errorf("msr.tsc = %d, want 2", n)
	}
	if d := c.Disagree(); len(d) != 0 {
		t.Errorf("Disagree() = %+v; want none", d)
	}
}

// A FIFO at the map's path is refused by its type, without waiting for a
// writer; a map with CRLF line ends and no final newline is read whole.
func TestClustersReadsOnlyRegularFilesWhole(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	if c, errs := LoadClusters(fifo); c != nil || len(errs) != 1 || !strings.HasSuffix(errs[0].Error(), "it is not a regular file (p---------)") {
		t.Errorf("a FIFO: %v, %v", c, errs)
	}
	path := filepath.Join(dir, "pmids")
	os.WriteFile(path, []byte("# header\r\n2 hwcounters.a\r\n\r\n  3\thwcounters.b  \r\n2048 derived.c"), 0o644)
	c, errs := LoadClusters(path)
	if c == nil || len(errs) != 0 || len(c.byKey) != 3 || c.byKey["hwcounters.a"] != 2 || c.byKey["hwcounters.b"] != 3 || c.byKey["derived.c"] != 2048 {
		t.Errorf("LoadClusters = %v, %v", c, errs)
	}
	if n, _ := c.Cluster("derived.d"); n != 2049 {
		t.Errorf("a new name got %d, want 2049", n)
	}
}
