// Package install holds the scripts that register the agent with pmcd;
// the tests here run them outside pmcd.
package install

import (
	"crypto/md5"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const (
	stock  = "[perf]\ncycles\n"
	edited = "[perf]\ncycles\n[dynamic]\nsoftware.page-faults\n"
	ours   = "[perf]\ncpu-clock\n"
)

// cConfig runs c-config with the C agent's file holding cText, a package
// manager that shipped stock (none when stock is ""), and choice as
// PERFEVENT_C_CONFIG. It returns what it printed and the Go agent's file.
func cConfig(t *testing.T, cText, shipped, choice string) (out, target string) {
	t.Helper()
	dir := t.TempDir()
	cFile := filepath.Join(dir, "etc", "perfevent.conf")
	target = filepath.Join(dir, "perfevent-go", "perfevent.conf")
	bin := filepath.Join(dir, "bin")
	for _, d := range []string{filepath.Dir(cFile), filepath.Dir(target), bin} {
		os.MkdirAll(d, 0o755)
	}
	os.WriteFile(cFile, []byte(cText), 0o644)
	os.WriteFile(target, []byte(ours), 0o644)
	// dpkg-query -W -f='${Conffiles}\n' as dpkg answers it.
	listing := ""
	if shipped != "" {
		listing = fmt.Sprintf(" %s %x\n", cFile, md5.Sum([]byte(shipped)))
	}
	os.WriteFile(filepath.Join(bin, "dpkg-query"), []byte("#!/bin/sh\nprintf '%s' '"+listing+"'\n"), 0o755)
	cmd := exec.Command("sh", "c-config", target, filepath.Join(dir, "missing.conf"), cFile)
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "PERFEVENT_C_CONFIG="+choice)
	cmd.Stdin = strings.NewReader("") // not a terminal: no question
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("c-config: %v\n%s", err, b)
	}
	return string(b), target
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, _ := os.ReadFile(path)
	return string(b)
}

func TestCConfig(t *testing.T) {
	// Asked for: the edited C file replaces ours, which is kept.
	out, target := cConfig(t, edited, stock, "yes")
	if read(t, target) != edited || read(t, target+".prev") != ours || !strings.Contains(out, "Using the C agent's configuration") {
		t.Errorf("yes: %s now holds %q, .prev %q; said %q", target, read(t, target), read(t, target+".prev"), out)
	}
	// Not asked, no terminal: ours stays, and it says how to choose.
	out, target = cConfig(t, edited, stock, "")
	if read(t, target) != ours || !strings.Contains(out, "PERFEVENT_C_CONFIG=yes ./Install") {
		t.Errorf("unset: %s holds %q; said %q", target, read(t, target), out)
	}
	// A file no package knows may be an edit too.
	if out, _ = cConfig(t, edited, "", ""); !strings.Contains(out, "was edited") {
		t.Errorf("unknown to dpkg: said %q", out)
	}
	// As shipped: nothing to offer, nothing said.
	if out, target = cConfig(t, stock, stock, ""); out != "" || read(t, target) != ours {
		t.Errorf("stock: said %q, %s holds %q", out, target, read(t, target))
	}
	if out, target = cConfig(t, edited, stock, "no"); out != "" || read(t, target) != ours {
		t.Errorf("no: said %q, %s holds %q", out, target, read(t, target))
	}
}

func TestCConfigRejectsUnknownChoice(t *testing.T) {
	cmd := exec.Command("sh", "c-config", filepath.Join(t.TempDir(), "perfevent.conf"))
	cmd.Env = append(os.Environ(), "PERFEVENT_C_CONFIG=maybe")
	out, err := cmd.CombinedOutput()
	if err == nil || string(out) != "Install: PERFEVENT_C_CONFIG=\"maybe\": use yes or no\n" {
		t.Errorf("c-config with PERFEVENT_C_CONFIG=maybe: %v, %q", err, out)
	}
}
