package metrics

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"perfevent/internal/pmda"
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
		if err != nil || n != 2+i {
			t.Fatalf("Cluster(%s) = %d, %v; want %d", key, n, err, 2+i)
		}
	}
	if err := c.Save(); err != nil {
		t.Fatal(err)
	}

	// A restart with an edited config: page_faults is gone, a new event
	// arrives. Old names keep their numbers; the new one does not reuse 3.
	c, errs = LoadClusters(path)
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	if n, _ := c.Cluster("derived.ipc"); n != 4 {
		t.Errorf("derived.ipc moved to %d", n)
	}
	if n, _ := c.Cluster("hwcounters.task_clock"); n != 5 {
		t.Errorf("new name got %d, want 5", n)
	}
	if n, _ := c.Cluster("hwcounters.cpu_clock"); n != 2 {
		t.Errorf("cpu_clock moved to %d", n)
	}
	if !c.Changed() {
		t.Error("Changed() = false after a new name")
	}
	if err := c.Save(); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	if !strings.Contains(string(data), "5 hwcounters.task_clock\n") {
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
	// The good lines survive, and numbering continues past the highest.
	if n, _ := c.Cluster("hwcounters.d"); n != 9 {
		t.Errorf("hwcounters.d = %d, want 9", n)
	}
	if n, _ := c.Cluster("hwcounters.new"); n != 10 {
		t.Errorf("new = %d, want 10", n)
	}
}

// A map that holds the top cluster, 4095, is not full: new names take the
// lowest free numbers, until every one of the 4094 is taken.
func TestClustersAfterTheTopIsTaken(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pmids")
	os.WriteFile(path, []byte("4095 hwcounters.last\n2 hwcounters.first\n"), 0o644)
	c, _ := LoadClusters(path)
	if n, err := c.Cluster("hwcounters.more"); n != 3 || err != nil {
		t.Fatalf("Cluster = %d, %v; want 3, the lowest free", n, err)
	}
	for i := 4; i < 4095; i++ {
		if n, err := c.Cluster(fmt.Sprintf("hwcounters.e%d", i)); n != i || err != nil {
			t.Fatalf("Cluster = %d, %v; want %d", n, err, i)
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
	if os.Geteuid() != 0 {
		t.Skip("needs root, to give the map to another user")
	}
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
