package config

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"perfevent/internal/testwait"
)

// ParseFile accepts only a regular file, reached through links if need be,
// and never blocks on what it opens.
func TestParseFileRefusesWhatIsNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "perfevent.conf")
	if err := os.WriteFile(conf, []byte("[software]\ncpu-clock\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.conf")
	if err := os.Symlink(conf, link); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.conf")
	if err := os.WriteFile(big, make([]byte, MaxFileSize+1), 0o644); err != nil {
		t.Fatal(err)
	}

	if f, err := ParseFile(link); err != nil || len(f.Sections) != 1 {
		t.Errorf("through a symbolic link: %v", err)
	}
	for path, want := range map[string]string{
		fifo:        fifo + " is a FIFO, not a regular file",
		"/dev/zero": "/dev/zero is a device, not a regular file",
		dir:         dir + " is a directory, not a regular file",
		big:         big + " is 1048577 bytes long, more than the 1048576 a configuration may have",
	} {
		done := make(chan error, 1)
		go func() { _, err := ParseFile(path); done <- err }()
		select {
		case err := <-done:
			if err == nil || err.Error() != want {
				t.Errorf("ParseFile(%s): %v, want %q", path, err, want)
			}
		case <-time.After(testwait.Settle):
			t.Fatalf("ParseFile(%s) still blocks after %v", path, testwait.Settle)
		}
	}
}

// A line longer than MaxLine is reported by number without being quoted, and
// only its own line (or section, or group) is lost; each line of a lost
// section is named.
func TestLongLines(t *testing.T) {
	long := strings.Repeat("x", MaxLine+1)
	src := "[software]\ncpu-clock\n" + long + "\ntask-clock\n" +
		"[" + long + "]\npage-faults\n" +
		"[ipc:derived]\ncpu-clock\n" + long + "\n||\ntask-clock\n"
	f, err := Parse(name, []byte(src))
	want := []string{
		"perfevent.conf:3: line is 4097 bytes long, more than the 4096 allowed; line skipped",
		"perfevent.conf:5: line is 4099 bytes long, more than the 4096 allowed; the section is ignored",
		`perfevent.conf:6: "page-faults" is under the broken section header at line 5, so it is ignored too`,
		"perfevent.conf:9: line is 4097 bytes long, more than the 4096 allowed; line skipped; dropping the group that starts at line 8",
	}
	if err == nil || err.Error() != strings.Join(want, "\n") {
		t.Errorf("errors:\n%v\nwant:\n%s", err, strings.Join(want, "\n"))
	}
	if len(f.Sections) != 2 {
		t.Fatalf("%d sections, want [software] and [ipc:derived]", len(f.Sections))
	}
	if evs := f.Sections[0].Events; len(evs) != 2 || evs[1].Name != "task-clock" {
		t.Errorf("[software] events %v, want cpu-clock and task-clock", evs)
	}
	if g := f.Sections[1].Groups; len(g) != 1 || g[0].Terms[0].Event != "task-clock" {
		t.Errorf("[ipc:derived] groups %v, want the task-clock group only", g)
	}
}
