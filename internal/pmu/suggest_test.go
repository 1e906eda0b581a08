package pmu

import (
	"strings"
	"testing"

	"perfevent/internal/hostfs"
)

// A misspelt tracepoint, sysfs event or [dynamic] software event gets the
// nearest names as suggestions, written as perfevent.conf takes them.
func TestTyposGetSuggestions(t *testing.T) {
	fs := &FS{FS: hostfs.FS{Sys: "testdata/vm/sys", Proc: "testdata/vm/proc"}, Tracing: []string{"testdata/vm/tracing"}}
	for name, want := range map[string]string{
		"sched:sched_swich":    "no tracepoint sched_swich in testdata/vm/tracing/events/sched; did you mean sched:sched_switch?",
		"shed:sched_switch":    "has no tracepoint subsystem shed; did you mean sched:sched_switch?",
		"msr.tsx":              "PMU msr has no event tsx (no file testdata/vm/sys/bus/event_source/devices/msr/events/tsx); did you mean msr.tsc?",
		"software.page-faultz": "major-faults, alignment-faults, emulation-faults; did you mean software.page-faults,",
	} {
		_, err := fs.Resolve(name)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Resolve(%s) = %v; want %q", name, err, want)
		}
	}
}
