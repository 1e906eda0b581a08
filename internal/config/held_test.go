package config

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"perfevent/internal/conffile"
	"perfevent/internal/testexec"
	"perfevent/internal/testneed"
)

// The agent opens its configuration as root and reloads it as $PCP_USER:
// a 0600 root config must still reload, an edit in place included, and a
// replaced one must be refused with the reason and the remedy.
func TestHeldConfigAfterThePrivilegeDrop(t *testing.T) {
	if testexec.Rerunning(t) {
		heldChild(t)
		return
	}
	testneed.Root(t, "to open a 0600 root file and then lose the right to")
	testexec.Rerun(t)
}

// heldChild runs in a process of its own: it changes its effective uid,
// which every thread shares.
func heldChild(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "perfevent.conf")
	if err := os.WriteFile(path, []byte("[perf]\ncpu-clock\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	os.Chmod(filepath.Dir(dir), 0o755)
	h := conffile.Hold(path)
	defer h.Close()
	as := func(uid int) {
		t.Helper()
		if err := syscall.Setresuid(-1, uid, -1); err != nil {
			t.Fatal(err)
		}
	}
	events := func() []string {
		t.Helper()
		f, err := ParseHeld(h)
		if err != nil {
			t.Fatalf("Parse as uid %d: %v", os.Geteuid(), err)
		}
		var names []string
		for _, s := range f.Sections {
			for _, e := range s.Events {
				names = append(names, e.Name)
			}
		}
		return names
	}
	as(65534)
	defer as(0)
	if _, err := ParseFile(path); !os.IsPermission(err) {
		t.Fatalf("ParseFile as nobody: %v; the test needs the file to be unreadable", err)
	}
	if got := strings.Join(events(), " "); got != "cpu-clock" {
		t.Errorf("as nobody: %q", got)
	}

	// Edited in place (same inode), shorter than before.
	as(0)
	if err := os.WriteFile(path, []byte("[perf]\ntask-clock\nfaults\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	as(65534)
	if got := strings.Join(events(), " "); got != "task-clock faults" {
		t.Errorf("edited in place: %q", got)
	}

	// Saved by rename: the held descriptor is the old file.
	as(0)
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte("[perf]\npage-faults\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	as(65534)
	_, err := ParseHeld(h)
	want := "open " + path + ": permission denied (uid 65534), and it is no longer the file opened at start-up (it was replaced, e.g. by an editor that saves by renaming): make it readable by uid 65534, or restart the agent"
	if err == nil || err.Error() != want {
		t.Errorf("replaced:\n got %v\nwant %s", err, want)
	}

	// Made readable: read by path again.
	as(0)
	os.Chmod(path, 0o644)
	as(65534)
	if got := strings.Join(events(), " "); got != "page-faults" {
		t.Errorf("replaced and made readable: %q", got)
	}
}
