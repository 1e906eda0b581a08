package main

import (
	"slices"
	"testing"
	"time"
)

func TestParseArgs(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		mode    mode
		file    string
		command []string
		verbose bool
		timeout time.Duration
	}{
		{args: nil, mode: modeForeground},
		{args: []string{"-D"}, mode: modeForeground},
		{args: []string{"--foreground", "-v"}, mode: modeForeground, verbose: true},
		{args: []string{"-d", "-f", "/x"}, mode: modeDaemon, file: "/x"},
		{args: []string{"-vdf/x"}, mode: modeDaemon, file: "/x", verbose: true},
		{args: []string{"--file=/x", "--daemon"}, mode: modeDaemon, file: "/x"},
		{args: []string{"--file", "/x", "--status"}, mode: modeStatus, file: "/x"},
		{args: []string{"--ping"}, mode: modePing},
		{args: []string{"-v", "--help"}, mode: modeHelp, verbose: true},
		// No permutation: the command's own options stay its own.
		{args: []string{"sh", "-c", "exit 7"}, mode: modeCommand, command: []string{"sh", "-c", "exit 7"}},
		{args: []string{"-v", "--", "-weird", "-d"}, mode: modeCommand, command: []string{"-weird", "-d"}, verbose: true},
		{args: []string{"-D", "sleep", "1"}, mode: modeCommand, command: []string{"sleep", "1"}},
		{args: []string{"--timeout", "500ms", "true"}, mode: modeCommand, command: []string{"true"}, timeout: 500 * time.Millisecond},
		{args: []string{"--timeout=1.5", "--no-wait"}, mode: modeForeground, timeout: 1500 * time.Millisecond},
	} {
		o, err := parseArgs(tc.args)
		if err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		if tc.timeout == 0 {
			tc.timeout = defaultTimeout
		}
		if o.mode != tc.mode || o.file != tc.file || !slices.Equal(o.command, tc.command) || o.verbose != tc.verbose || o.timeout != tc.timeout {
			t.Errorf("%q: got %+v", tc.args, o)
		}
	}
}

func TestParseArgsErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-x"}, "unknown option -x"},
		{[]string{"-vx"}, "unknown option -x"},
		{[]string{"--bogus"}, "unknown option --bogus"},
		{[]string{"-f"}, "option -f needs an argument"},
		{[]string{"--file"}, "option --file needs an argument"},
		{[]string{"--file="}, "option --file needs a file name"},
		{[]string{"--verbose=yes"}, "option --verbose takes no argument"},
		{[]string{"--timeout", "soon"}, `--timeout "soon": not a duration (try 500ms, 2s or 1.5)`},
		{[]string{"--timeout=-1s"}, `--timeout "-1s": must not be negative`},
		{[]string{"-d", "true"}, "-d cannot be combined with a command: perfalloc holds the lock while the command runs"},
		{[]string{"-d", "-D"}, "-d and -D cannot be combined"},
		{[]string{"--status", "--ping"}, "--status and --ping cannot be combined"},
		{[]string{"--ping", "true"}, "--ping cannot be combined with -D, -d or a command"},
	} {
		_, err := parseArgs(tc.args)
		if err == nil || err.Error() != tc.want || !isUsageError(err) {
			t.Errorf("%q: got %v, want %q", tc.args, err, tc.want)
		}
	}
}
