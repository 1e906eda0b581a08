package qa

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// perfevent.reservation.* through pmcd names the holder of perfalloc's
// lock, and the shipped pmieconf rule (install/pmieconf), enabled with a
// threshold of one second, fires while the lock is held and not before.
func TestReservationMetricsAndPmieRule(t *testing.T) {
	l := StartLab(t, Agent{Go: true, Reservation: true})
	for _, c := range []string{"pmprobe", "pminfo", "pmie", "pmieconf"} {
		needClient(t, l, c)
	}
	probe := func(name string) string {
		t.Helper()
		// "NAME NUMVAL VALUE...": the number of values and the values.
		f := strings.Fields(l.Run(t, "pmprobe", "-v", name))
		if len(f) < 2 {
			t.Fatalf("pmprobe -v %s: %q", name, f)
		}
		return strings.Join(f[1:], " ")
	}
	if v := probe("perfevent.reservation.held"); v != "1 0" {
		t.Fatalf("perfevent.reservation.held before any reservation: %q, want one value, 0", v)
	}

	// The rule, as an administrator would enable it, with a threshold
	// that a test can wait out, and a shell action in place of syslog.
	cfg := filepath.Join(l.Dir, "pmie.config")
	rules := filepath.Join(l.env.Repo, "install", "pmieconf") + ":" + filepath.Join(l.env.PCP.Get("PCP_VAR_DIR"), "config", "pmieconf", "global")
	for _, m := range [][]string{
		{"perfevent.reservation_held", "enabled", "yes"},
		{"perfevent.reservation_held", "threshold", "1"},
		{"perfevent.reservation_held", "delta", "1sec"},
		{"global", "syslog_action", "no"},
		{"global", "user_action", "yes"},
		{"global", "user_command", "echo perfevent.reservation_held fired"},
	} {
		r := l.Exec(Cmd{Env: []string{"PMIECONF_PATH=" + rules}, Args: append([]string{"pmieconf", "-f", cfg, "modify"}, m...)})
		if r.Err != nil {
			t.Fatalf("pmieconf modify %v:\n%s", m, r)
		}
	}
	pmie := func() string {
		t.Helper()
		r := l.RunErr(t, "pmie", "-c", cfg, "-v", "-T", "3sec")
		if r.Err != nil {
			t.Fatalf("pmie:\n%s\n%s", r, l.Logs())
		}
		return r.Stdout
	}
	if out := pmie(); !strings.Contains(out, "perfevent.reservation_held: false") || strings.Contains(out, "fired") {
		t.Errorf("the rule without a reservation:\n%s", out)
	}

	unlock := l.ReadLock(t)
	pid := strconv.Itoa(os.Getpid())
	waitFor(t, 10*time.Second, "perfevent.reservation.held to be 1", func() bool { return probe("perfevent.reservation.held") == "1 1" })
	for name, want := range map[string]string{
		"perfevent.reservation.holders":    "1 1",
		"perfevent.reservation.count":      "1 1",
		"perfevent.reservation.holder.pid": "1 " + pid,
		"perfevent.reservation.holder.uid": "1 0",
	} {
		if v := probe(name); v != want {
			t.Errorf("%s while the test holds the lock: %q, want %q", name, v, want)
		}
	}
	comm, _ := os.ReadFile("/proc/self/comm")
	out := l.Run(t, "pminfo", "-f", "perfevent.reservation.holder.command")
	inst := `inst [` + pid + ` or "` + strings.Repeat("0", max(0, 6-len(pid))) + pid + ` ` + strings.TrimSpace(string(comm)) + `"] value "` + strings.TrimSpace(string(comm)) + `"`
	if !strings.Contains(out, inst) {
		t.Errorf("pminfo -f perfevent.reservation.holder.command:\n%s\nwant %s", out, inst)
	}
	waitFor(t, 10*time.Second, "perfevent.reservation.seconds to pass 1", func() bool {
		f := strings.Fields(probe("perfevent.reservation.seconds"))
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		return err == nil && v > 1.5
	})
	if out := pmie(); !strings.Contains(out, "perfevent.reservation_held: true") || !strings.Contains(out, "perfevent.reservation_held fired") {
		t.Errorf("the rule while the lock has been held for more than its threshold:\n%s", out)
	}

	unlock()
	waitFor(t, 10*time.Second, "perfevent.reservation.held to be 0", func() bool { return probe("perfevent.reservation.held") == "1 0" })
	if v := probe("perfevent.reservation.holder.pid"); v != "0" {
		t.Errorf("perfevent.reservation.holder.pid after the release: %q, want no values", v)
	}
	if out := pmie(); !strings.Contains(out, "perfevent.reservation_held: false") {
		t.Errorf("the rule after the release:\n%s", out)
	}
}
