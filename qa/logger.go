package qa

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"perfevent/internal/testwait"
)

// Logger is a pmlogger recording a lab into an archive until the test
// stops it. A test waits for the records it needs (WaitRecords) instead
// of giving pmlogger a fixed time: on a loaded machine pmlogger can take
// seconds to start, and a sample can come late.
type Logger struct {
	lab     *Lab
	cmd     *exec.Cmd
	dir     string
	Archive string
}

// StartLogger starts pmlogger on the lab with the configuration text
// config, into an archive in a temporary directory.
func (l *Lab) StartLogger(t testing.TB, config string) *Logger {
	t.Helper()
	needClient(t, l, "pmlogger")
	needClient(t, l, "pmdumplog")
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "config"), config)
	g := &Logger{lab: l, dir: dir, Archive: filepath.Join(dir, "archive")}
	g.cmd = l.Background(t, Cmd{Args: []string{"pmlogger", "-h", l.HostSpec(), "-c", filepath.Join(dir, "config"),
		"-l", filepath.Join(dir, "pmlogger.log"), g.Archive}}, filepath.Join(dir, "out"))
	return g
}

// Record is one record of a metric in an archive: each instance's value
// as pmdumplog prints it, under "" for a metric without instances.
type Record map[string]string

var (
	recordStart = regexp.MustCompile(`(?m)^\d\d:\d\d:\d\d\.\d+ `)
	recordInst  = regexp.MustCompile(`inst \[\d+ or "([^"]+)"\] value (\S+)`)
	recordValue = regexp.MustCompile(`\): value (\S+)`)
)

// Records reads the records of one metric so far, oldest first. pmlogger
// writes each record with one write, so an archive it is still writing
// reads back whole; before its first record, or if pmdumplog fails,
// there are none and the error says why.
func (g *Logger) Records(metric string) ([]Record, error) {
	r := g.lab.RunErr(nil, "pmdumplog", "-z", g.Archive, metric)
	if r.Err != nil {
		return nil, fmt.Errorf("%s", r)
	}
	var recs []Record
	for _, text := range recordStart.Split(r.Stdout, -1)[1:] {
		rec := Record{}
		for _, m := range recordInst.FindAllStringSubmatch(text, -1) {
			rec[m[1]] = m[2]
		}
		if m := recordValue.FindStringSubmatch(text); m != nil && len(rec) == 0 {
			rec[""] = m[1]
		}
		recs = append(recs, rec)
	}
	return recs, nil
}

// WaitRecords waits until cond holds of the metric's records so far, and
// returns them.
func (g *Logger) WaitRecords(t testing.TB, metric, what string, cond func([]Record) bool) []Record {
	t.Helper()
	var recs []Record
	var err error
	if !testwait.Until(Settle, func() bool {
		recs, err = g.Records(metric)
		return err == nil && cond(recs)
	}) {
		t.Fatalf("pmlogger: no %s after %v: %d records of %s (%v)\n%s", what, Settle, len(recs), metric, err, g.tail())
	}
	return recs
}

// Stop fails the test if pmlogger has gone (it must keep logging
// whatever happens to the agent's instances), then ends it.
func (g *Logger) Stop(t testing.TB) {
	t.Helper()
	if err := g.cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("pmlogger is gone: %v\n%s", err, g.tail())
	}
	g.cmd.Process.Signal(syscall.SIGTERM)
	waitFor(t, Settle, "pmlogger to exit", func() bool { return g.cmd.Process.Signal(syscall.Signal(0)) != nil })
}

func (g *Logger) tail() string {
	var b strings.Builder
	for _, f := range []string{"pmlogger.log", "out"} {
		fmt.Fprintf(&b, "--- %s\n%s", f, tail(filepath.Join(g.dir, f), 20))
	}
	return b.String()
}
