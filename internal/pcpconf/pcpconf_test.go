package pcpconf

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
)

func TestGetOrder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pcp.conf")
	os.WriteFile(path, []byte("# comment\nPCP_PMDAS_DIR=/opt/pmdas\nPCP_LOG_DIR=\"/opt/log\"\nnot an assignment\n"), 0o644)
	t.Setenv("PCP_CONF", path)
	t.Setenv("PCP_LOG_DIR", "/env/log")
	c := Load()
	for name, want := range map[string]string{
		"PCP_PMDAS_DIR": "/opt/pmdas", // from the file
		"PCP_LOG_DIR":   "/env/log",   // the environment wins
		"PCP_RUN_DIR":   "/run/pcp",   // the default
		"PCP_NOSUCH":    "",           // unknown
	} {
		if got := c.Get(name); got != want {
			t.Errorf("Get(%s) = %q, want %q", name, got, want)
		}
	}
}

func TestMissingFile(t *testing.T) {
	t.Setenv("PCP_CONF", filepath.Join(t.TempDir(), "absent"))
	t.Setenv("PCP_PMDAS_DIR", "")
	c := Load()
	if got := c.Get("PCP_PMDAS_DIR"); got != "/var/lib/pcp/pmdas" || c.Err() != nil {
		t.Errorf("got %q, %v", got, c.Err())
	}
}

// A line longer than any buffer does not end the file early.
func TestLongLine(t *testing.T) {
	text := "PCP_BLOB=" + strings.Repeat("x", 200<<10) + "\nPCP_VAR_DIR=/opt/var\n"
	m, err := Parse(strings.NewReader(text))
	if err != nil || m["PCP_VAR_DIR"] != "/opt/var" || len(m["PCP_BLOB"]) != 200<<10 {
		t.Errorf("Parse: PCP_VAR_DIR=%q, %d bytes of PCP_BLOB, %v", m["PCP_VAR_DIR"], len(m["PCP_BLOB"]), err)
	}
}

// A read error keeps what came before it and is reported, with the file.
func TestReadError(t *testing.T) {
	broken := io.MultiReader(strings.NewReader("PCP_LOG_DIR=/opt/log\nPCP_RUN"), iotest.ErrReader(errors.New("input/output error")))
	m, err := Parse(broken)
	if err == nil || m["PCP_LOG_DIR"] != "/opt/log" || len(m) != 1 {
		t.Errorf("Parse = %q, %v; want PCP_LOG_DIR alone and an error", m, err)
	}

	dir := t.TempDir() // open(2) works on a directory, read(2) fails
	t.Setenv("PCP_CONF", dir)
	t.Setenv("PCP_RUN_DIR", "")
	c := Load()
	if err := c.Err(); err == nil || !strings.Contains(err.Error(), dir+": is a directory after 0 settings") {
		t.Errorf("Err() = %v", err)
	}
	if got := c.Get("PCP_RUN_DIR"); got != "/run/pcp" {
		t.Errorf("PCP_RUN_DIR = %q, want the default", got)
	}
}
