package pcpconf

import (
	"os"
	"path/filepath"
	"testing"
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
	if got := Load().Get("PCP_PMDAS_DIR"); got != "/var/lib/pcp/pmdas" {
		t.Errorf("got %q", got)
	}
}
