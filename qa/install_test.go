package qa

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The files in install/ checked on their own, without pmcd.

func TestRootNamespace(t *testing.T) {
	e := Direct(t)
	out := e.Run(t, "pminfo", "-m", "-n", filepath.Join(e.Repo, "install", "root"), "perfevent")
	want := "perfevent.version PMID: 127.0.0\n" +
		"perfevent.active PMID: 127.0.1\n" +
		"perfevent.hwcounters PMID: 127.*.*\n" +
		"perfevent.derived PMID: 127.*.*\n" +
		"perfevent.cgroup PMID: 127.*.*\n" +
		"perfevent.ratio PMID: 127.*.*\n" +
		"perfevent.reservation PMID: 127.*.*\n"
	if out != want {
		t.Errorf("pminfo -m -n install/root perfevent:\n got: %q\nwant: %q", out, want)
	}
}

func TestInstallRejectsUnknownIPC(t *testing.T) {
	e := Direct(t)
	r := e.Exec(Cmd{Dir: filepath.Join(e.Repo, "install"), Args: []string{"./Install", "--socket=carrier-pigeon"}})
	if r.Err == nil || !strings.Contains(r.Stderr, `unknown IPC method "carrier-pigeon"`) {
		t.Errorf("Install --socket=carrier-pigeon: want exit 1 naming the method:\n%s", r)
	}
	r = e.Exec(Cmd{Dir: filepath.Join(e.Repo, "install"), Args: []string{"./Install"}, Env: []string{"PERFEVENT_IPC=tcp"}})
	if r.Err == nil || !strings.Contains(r.Stderr, `unknown IPC method "tcp"`) {
		t.Errorf("PERFEVENT_IPC=tcp ./Install: want exit 1 naming the method:\n%s", r)
	}
}

// A wrong PERFEVENT_C_CONFIG fails Install before it registers anything:
// pmdaproc.sh's exit trap would turn a plain "exit 1" into status 0.
func TestInstallRejectsUnknownCConfigChoice(t *testing.T) {
	e := Direct(t)
	r := e.Exec(Cmd{Dir: filepath.Join(e.Repo, "install"), Args: []string{"./Install"}, Env: []string{"PERFEVENT_C_CONFIG=maybe"}})
	if r.Err == nil || !strings.Contains(r.Stderr, `PERFEVENT_C_CONFIG="maybe": use yes or no`) {
		t.Errorf("PERFEVENT_C_CONFIG=maybe ./Install: want exit 1 naming the value:\n%s", r)
	}
}

// Upgrade runs at every pmcd start; it must add or drop -c as
// perfevent.conf comes and goes, and leave every other line alone.
func TestUpgradeFollowsConfigFile(t *testing.T) {
	e := Direct(t)
	home := filepath.Join(t.TempDir(), "perfevent-go")
	if err := os.Mkdir(home, 0o755); err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile(filepath.Join(e.Repo, "install", "Upgrade"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "Upgrade"), script, 0o755); err != nil {
		t.Fatal(err)
	}
	// Stand-ins for pmpost and pmsignal keep the machine's NOTICES and
	// pmcd out of this, and record whether pmcd would have been told.
	binadm := t.TempDir()
	calls := filepath.Join(binadm, "calls")
	for _, tool := range []string{"pmpost", "pmsignal"} {
		stub := "#!/bin/sh\necho " + tool + " \"$*\" >>" + calls + "\n"
		if err := os.WriteFile(filepath.Join(binadm, tool), []byte(stub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	pmcdConf := filepath.Join(t.TempDir(), "pmcd.conf")
	agent := filepath.Join(home, "pmdaperfevent")
	conf := filepath.Join(home, "perfevent.conf")
	other := "linux\t60\tpipe\tbinary\t\t/var/lib/pcp/pmdas/linux/pmdalinux\n"
	access := "\n[access]\nallow \"local:*\" : all;\n"
	write := func(perfevent string) {
		t.Helper()
		if err := os.WriteFile(pmcdConf, []byte(other+perfevent+"\n"+access), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	upgrade := func() string {
		t.Helper()
		os.Remove(calls)
		r := e.Exec(Cmd{Dir: home, Args: []string{"./Upgrade"}, Env: []string{
			"PCP_PMCDCONF_PATH=" + pmcdConf,
			"PCP_BINADM_DIR=" + binadm,
		}})
		if r.Err != nil {
			t.Fatalf("Upgrade failed:\n%s", r)
		}
		data, err := os.ReadFile(pmcdConf)
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}

	plain := "perfevent\t127\tpipe\tbinary\t\t" + agent + " -d 127"
	write(plain)
	if got := upgrade(); got != other+plain+"\n"+access {
		t.Errorf("no perfevent.conf, no -c: Upgrade changed pmcd.conf to\n%s", got)
	}

	if err := os.WriteFile(conf, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := upgrade(); got != other+plain+" -c "+conf+"\n"+access {
		t.Errorf("perfevent.conf appeared: want -c added, got\n%s", got)
	}
	if told, _ := os.ReadFile(calls); !strings.Contains(string(told), "pmsignal -a -s HUP pmcd\n") {
		t.Errorf("Upgrade changed pmcd.conf without a SIGHUP to pmcd; calls: %q", told)
	}
	if got := upgrade(); got != other+plain+" -c "+conf+"\n"+access {
		t.Errorf("second Upgrade is not a no-op:\n%s", got)
	}
	if told, err := os.ReadFile(calls); err == nil {
		t.Errorf("an Upgrade that changed nothing still called: %q", told)
	}

	if err := os.Remove(conf); err != nil {
		t.Fatal(err)
	}
	if got := upgrade(); got != other+plain+"\n"+access {
		t.Errorf("perfevent.conf went away: want -c dropped, got\n%s", got)
	}

	cLine := "perfevent\t127\tpipe\tbinary\t\t/var/lib/pcp/pmdas/perfevent/pmdaperfevent -d 127"
	write(cLine)
	if err := os.WriteFile(conf, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := upgrade(); got != other+cLine+"\n"+access {
		t.Errorf("Upgrade touched the C agent's line:\n%s", got)
	}
}

// A second scripts/setup on a machine that is set up must only verify:
// same pmcd.conf line, same agent process.
func TestSetupAgainChangesNothing(t *testing.T) {
	e := Setup(t)
	e.Baseline(t)
	r := e.Exec(Cmd{Dir: e.Repo, Args: []string{"scripts/setup"}})
	if r.Err != nil {
		t.Fatalf("scripts/setup failed:\n%s", r)
	}
	lineBefore := e.PMCDLine(t)
	pidBefore := checkAgentIsOurs(t, e)

	r = e.Exec(Cmd{Dir: e.Repo, Args: []string{"scripts/setup"}})
	if r.Err != nil {
		t.Fatalf("second scripts/setup failed:\n%s", r)
	}
	requireLines(t, "second scripts/setup", r.Stdout,
		`   already installed`,
		`   already answering`,
		`   already registered: perfevent 127 pipe binary .*`,
		`perfevent\.version`,
	)
	if line := e.PMCDLine(t); line != lineBefore {
		t.Errorf("pmcd.conf changed: %q, then %q", lineBefore, line)
	}
	if pid := checkAgentIsOurs(t, e); pid != pidBefore {
		t.Errorf("the agent was restarted: pid %d, then %d", pidBefore, pid)
	}
}
