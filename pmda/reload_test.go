package main

import (
	"os"
	"strings"
	"syscall"
	"testing"

	"perfevent/internal/testneed"
)

// TestReloadAsUserServesWhatStartupDid: start-up reads the configuration
// and tracefs as root; a reload runs as the agent's user, who can read
// neither a 0600 root config nor tracefs (0700 root). The reload must serve
// what start-up served from the same file, and say exactly what it cannot.
func TestReloadAsUserServesWhatStartupDid(t *testing.T) {
	testneed.User(t, "nobody")
	if _, err := os.Stat("/sys/kernel/tracing/events/sched/sched_switch/id"); err != nil {
		t.Skip("needs tracefs at /sys/kernel/tracing with sched:sched_switch")
	}
	h := startPMDA(t, "[perf]\ncpu-clock\nsched:sched_switch\n", "-U", "nobody")
	h.waitLog(t, "running as nobody")
	os.Chmod(h.conf, 0o600)
	const tp = "perfevent.hwcounters.sched_sched_switch.value"
	if v, n := h.fetch(tp); n < 1 {
		t.Fatalf("%s before the reload: %v (numval %d)", tp, v, n)
	}

	// Edited in place by root, with a tracepoint start-up never saw.
	os.WriteFile(h.conf, []byte("[perf]\ncpu-clock\nsched:sched_switch\nsched:sched_wakeup\npage-faults\n"), 0o600)
	h.cmd.Process.Signal(syscall.SIGHUP)
	h.waitLog(t, "reload done")
	if v, n := h.fetch(tp); n < 1 {
		t.Errorf("%s after the reload as nobody: %v (numval %d)", tp, v, n)
	}
	if _, n := h.fetch("perfevent.hwcounters.page_faults.value"); n < 1 {
		t.Errorf("page_faults, added by the reload: numval %d", n)
	}
	h.waitLog(t, `tracepoint sched:sched_wakeup is not resolvable after the privilege drop (/sys/kernel/tracing is readable by root only); restart the agent to add new tracepoints`)
	data, _ := os.ReadFile(h.log)
	if strings.Contains(string(data), "no tracefs or debugfs is mounted") {
		t.Errorf("the log says tracefs is not mounted:\n%s", data)
	}

	// Saved by rename, still 0600: not readable, and the log says why.
	tmp := h.conf + ".new"
	os.WriteFile(tmp, []byte("[perf]\ncpu-clock\n"), 0o600)
	os.Rename(tmp, h.conf)
	h.cmd.Process.Signal(syscall.SIGHUP)
	h.waitLog(t, "it is no longer the file opened at start-up (it was replaced, e.g. by an editor that saves by renaming): make it readable by uid ")
	if _, n := h.fetch(tp); n < 1 {
		t.Errorf("%s after a refused reload: numval %d; the previous configuration should be served", tp, n)
	}
}
