package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// mode is what a run of perfalloc does.
type mode int

const (
	modeForeground mode = iota // hold the lock until a signal
	modeDaemon                 // confirm, then hold the lock in a detached child
	modeCommand                // hold the lock while a command runs
	modeStatus                 // print the agent's state
	modePing                   // say whether the agent is alive
	modeHelp
)

type options struct {
	mode    mode
	file    string // "" means the default lock file
	verbose bool
	noWait  bool
	timeout time.Duration
	command []string
}

const defaultTimeout = 2 * time.Second

const usage = `Usage: perfalloc [options] [command [argument ...]]

Reserve the performance counters: while perfalloc holds its lock on the lock
file, pmdaperfevent releases its counters. With a command, perfalloc holds the
lock while the command runs and exits with the command's status. Without one,
it holds the lock until SIGINT, SIGHUP or SIGTERM.

Options:
  -D, --foreground        hold the lock in the foreground (the default)
  -d, --daemon            take the lock, confirm, then hold it in the background
                          and print the background process's pid
  -f, --file FILE         the lock file (default %s)
  -h, --help              show this help and exit
  -v, --verbose           report progress on stderr
      --no-wait           do not wait for the agent to confirm the release
      --timeout DURATION  how long to wait for that confirmation (default %v;
                          e.g. 500ms, 5s, or plain seconds)
      --status            show what the agent reports and exit
      --ping              print OK and exit 0 if the agent is alive
      --                  end of the options

Options end at the first argument that is not one, so the command keeps its
own: perfalloc sh -c 'exit 7' runs sh -c 'exit 7'.

Exit status: the command's own (128+N if signal N killed it); 126 if it
cannot be executed, 127 if it does not exist; otherwise 0, or 1 when the lock
cannot be taken or the agent does not confirm the release in time.
`

// usageError is a mistake on the command line: perfalloc prints it and the
// usage on stderr, and exits 1.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func badUsage(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

// parseArgs parses the arguments after the program name. Unlike C
// perfalloc's getopt, it never permutes: the first argument that is not an
// option starts the command.
func parseArgs(args []string) (*options, error) {
	o := &options{timeout: defaultTimeout}
	var daemon, foreground, status, ping, help bool
	i := 0
	// value returns the argument of an option: the rest of a short-option
	// group, the part after "=", or the next argument.
	value := func(name, inline string, hasInline bool) (string, error) {
		if hasInline {
			return inline, nil
		}
		if i+1 >= len(args) {
			return "", badUsage("option %s needs an argument", name)
		}
		i++
		return args[i], nil
	}
	for ; i < len(args); i++ {
		arg := args[i]
		if arg == "--" {
			i++
			break
		}
		if !strings.HasPrefix(arg, "-") || arg == "-" {
			break
		}
		if long, ok := strings.CutPrefix(arg, "--"); ok {
			name, inline, hasInline := strings.Cut(long, "=")
			flag := func(p *bool) error {
				if hasInline {
					return badUsage("option --%s takes no argument", name)
				}
				*p = true
				return nil
			}
			var err error
			switch name {
			case "foreground":
				err = flag(&foreground)
			case "daemon":
				err = flag(&daemon)
			case "help":
				err = flag(&help)
			case "verbose":
				err = flag(&o.verbose)
			case "no-wait":
				err = flag(&o.noWait)
			case "status":
				err = flag(&status)
			case "ping":
				err = flag(&ping)
			case "file":
				o.file, err = value("--file", inline, hasInline)
				if err == nil && o.file == "" {
					err = badUsage("option --file needs a file name")
				}
			case "timeout":
				var v string
				if v, err = value("--timeout", inline, hasInline); err == nil {
					o.timeout, err = parseTimeout(v)
				}
			default:
				err = badUsage("unknown option --%s", name)
			}
			if err != nil {
				return nil, err
			}
			continue
		}
		// A group of short options: -vD, -f FILE, -fFILE, -vfFILE.
		for j := 1; j < len(arg); j++ {
			switch c := arg[j]; c {
			case 'D':
				foreground = true
			case 'd':
				daemon = true
			case 'h':
				help = true
			case 'v':
				o.verbose = true
			case 'f':
				rest := arg[j+1:]
				v, err := value("-f", rest, rest != "")
				if err != nil {
					return nil, err
				}
				if v == "" {
					return nil, badUsage("option -f needs a file name")
				}
				o.file = v
				j = len(arg)
			default:
				return nil, badUsage("unknown option -%c", c)
			}
		}
	}
	o.command = args[i:]

	switch {
	case help:
		o.mode = modeHelp
		return o, nil
	case status && ping:
		return nil, badUsage("--status and --ping cannot be combined")
	case (status || ping) && (daemon || foreground || len(o.command) > 0):
		which := "--status"
		if ping {
			which = "--ping"
		}
		return nil, badUsage("%s cannot be combined with -D, -d or a command", which)
	case daemon && foreground:
		return nil, badUsage("-d and -D cannot be combined")
	case daemon && len(o.command) > 0:
		return nil, badUsage("-d cannot be combined with a command: perfalloc holds the lock while the command runs")
	case status:
		o.mode = modeStatus
	case ping:
		o.mode = modePing
	case daemon:
		o.mode = modeDaemon
	case len(o.command) > 0:
		o.mode = modeCommand
	default:
		o.mode = modeForeground
	}
	return o, nil
}

// parseTimeout accepts a Go duration ("500ms", "2s") or plain seconds ("1.5").
func parseTimeout(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		f, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil {
			return 0, badUsage("--timeout %q: not a duration (try 500ms, 2s or 1.5)", s)
		}
		d = time.Duration(f * float64(time.Second))
	}
	if d < 0 {
		return 0, badUsage("--timeout %q: must not be negative", s)
	}
	return d, nil
}

func isUsageError(err error) bool {
	var ue *usageError
	return errors.As(err, &ue)
}
