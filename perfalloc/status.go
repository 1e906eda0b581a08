package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"text/tabwriter"
	"time"

	"perfevent/internal/reservation"
)

// agentState reads the state file and checks that its writer still runs.
// It returns the state (when readable) and, if anything is wrong, why.
func agentState(o *options) (*reservation.State, error) {
	path := reservation.StatePath(o.file)
	s, err := reservation.ReadState(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no state file %s: the agent is not running, or it is the C pmdaperfevent, which writes none", path)
	}
	if err != nil {
		return nil, err
	}
	if err := s.Alive(); err != nil {
		return s, fmt.Errorf("%v (state file %s)", err, path)
	}
	if err := s.Fresh(time.Now()); err != nil {
		return s, fmt.Errorf("%s (pid %d) may be stuck: %v (state file %s)", agentName(s), s.PID, err, path)
	}
	return s, nil
}

// ping prints OK and returns 0 when the agent is alive: its pid runs (the
// same process, by start time) and it rewrote its state file within three
// of the refresh periods it promised in the file.
func ping(o *options, stdout io.Writer, u *ui) int {
	if _, err := agentState(o); err != nil {
		u.say("not OK: %v", err)
		return exitFail
	}
	fmt.Fprintln(stdout, "OK")
	return exitOK
}

// status prints what the agent reports. A stale state is printed with a
// warning and exit status 1; no state at all, or a dead agent, only the
// reason.
func status(o *options, stdout io.Writer, u *ui) int {
	s, err := agentState(o)
	if s == nil || (err != nil && s.Alive() != nil) {
		u.say("%v", err)
		return exitFail
	}
	now := time.Now()
	ago := func(t time.Time) string {
		return fmt.Sprintf("%s (%v ago)", t.Local().Format("2006-01-02 15:04:05"), now.Sub(t).Round(100*time.Millisecond))
	}
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 8, 2, ' ', 0)
	up := "uptime unknown"
	if !s.Started.IsZero() {
		up = fmt.Sprintf("up %v", now.Sub(s.Started).Round(time.Second))
	}
	fmt.Fprintf(tw, "agent:\t%s, pid %d, %s\n", agentName(s), s.PID, up)
	fmt.Fprintf(tw, "config:\t%s\n", s.Config)
	fmt.Fprintf(tw, "lock file:\t%s\n", s.LockFile)
	fmt.Fprintf(tw, "counters:\t%s since %s\n", s.Counters, ago(s.Since))
	holders := "none"
	if len(s.Holders) > 0 {
		holders = strings.Trim(fmt.Sprint(s.Holders), "[]")
	}
	fmt.Fprintf(tw, "holders:\t%s\n", holders)
	fmt.Fprintf(tw, "state:\tgeneration %d, written %s\n", s.Generation, ago(s.Written))
	tw.Flush()
	fmt.Fprintf(&buf, "events: %d\n", len(s.Events))
	if len(s.Events) > 0 {
		tw = tabwriter.NewWriter(&buf, 0, 8, 2, ' ', 0)
		fmt.Fprintf(tw, "  NAME\tSTATE\tCPUS\tERROR\n")
		for _, e := range s.Events {
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\n", e.Name, e.State, e.CPUs, e.Error)
		}
		tw.Flush()
	}
	// tabwriter pads the column before an empty last cell.
	for line := range strings.Lines(buf.String()) {
		fmt.Fprintln(stdout, strings.TrimRight(line, " \n"))
	}
	if err != nil {
		u.say("warning: %v", err)
		return exitFail
	}
	return exitOK
}
