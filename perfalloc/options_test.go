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
		noWait  bool
		timeout time.Duration
	}{
		{args: nil, mode: modeForeground},
		{args: []string{"-D"}, mode: modeForeground},
		{args: []string{"--foreground", "--verbose"}, mode: modeForeground, verbose: true},
		{args: []string{"-d", "-f", "/x"}, mode: modeDaemon, file: "/x"},
		{args: []string{"-Ddf/x"}, mode: modeDaemon, file: "/x"},
		// getopt("dDf:hv"): -v and -h act at once, whatever follows.
		{args: []string{"-v"}, mode: modeVersion},
		{args: []string{"--version"}, mode: modeVersion},
		{args: []string{"-dv", "-x"}, mode: modeVersion},
		{args: []string{"-hv"}, mode: modeHelp},
		// Of -d and -D the last one counts, and a command beats both.
		{args: []string{"-D", "-d"}, mode: modeDaemon},
		{args: []string{"-d", "--foreground"}, mode: modeForeground},
		{args: []string{"-d", "true"}, mode: modeCommand, command: []string{"true"}},
		{args: []string{"--daemon", "--print-pid"}, mode: modeDaemon},
		{args: []string{"--file=/x", "--daemon"}, mode: modeDaemon, file: "/x"},
		{args: []string{"--file", "/x", "--status"}, mode: modeStatus, file: "/x"},
		{args: []string{"--ping"}, mode: modePing},
		{args: []string{"--verbose", "--help"}, mode: modeHelp, verbose: true},
		// No permutation: the command's own options stay its own.
		{args: []string{"sh", "-c", "exit 7"}, mode: modeCommand, command: []string{"sh", "-c", "exit 7"}},
		{args: []string{"--verbose", "--", "-weird", "-d"}, mode: modeCommand, command: []string{"-weird", "-d"}, verbose: true},
		{args: []string{"-D", "sleep", "1"}, mode: modeCommand, command: []string{"sleep", "1"}},
		{args: []string{"--timeout", "500ms", "true"}, mode: modeCommand, command: []string{"true"}, timeout: 500 * time.Millisecond},
		{args: []string{"--timeout=1.5", "--no-wait"}, mode: modeForeground, noWait: true, timeout: 1500 * time.Millisecond},
		// 0 is "do not wait", not "fail at once".
		{args: []string{"--timeout", "0", "true"}, mode: modeCommand, command: []string{"true"}, noWait: true, timeout: -1},
		{args: []string{"--timeout=0s"}, mode: modeForeground, noWait: true, timeout: -1},
	} {
		o, err := parseArgs(tc.args)
		if err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		switch tc.timeout {
		case 0:
			tc.timeout = defaultTimeout
		case -1:
			tc.timeout = 0
		}
		if o.mode != tc.mode || o.file != tc.file || !slices.Equal(o.command, tc.command) || o.verbose != tc.verbose || o.noWait != tc.noWait || o.timeout != tc.timeout {
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
		{[]string{"-Dx"}, "unknown option -x"},
		{[]string{"-x", "-v"}, "unknown option -x"},
		{[]string{"--version=1"}, "option --version takes no argument"},
		{[]string{"--bogus"}, "unknown option --bogus"},
		{[]string{"-f"}, "option -f needs an argument"},
		{[]string{"--file"}, "option --file needs an argument"},
		{[]string{"--file="}, "option --file needs a file name"},
		{[]string{"--verbose=yes"}, "option --verbose takes no argument"},
		{[]string{"--timeout", "soon"}, `--timeout "soon": not a duration (try 500ms, 2s or 1.5)`},
		{[]string{"--timeout=-1s"}, `--timeout "-1s": must not be negative`},
		{[]string{"--status", "--ping"}, "--status and --ping cannot be combined"},
		{[]string{"--ping", "true"}, "--ping cannot be combined with -D, -d or a command"},
	} {
		_, err := parseArgs(tc.args)
		if err == nil || err.Error() != tc.want || !isUsageError(err) {
			t.Errorf("%q: got %v, want %q", tc.args, err, tc.want)
		}
	}
}
