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
	modeVersion
)

type options struct {
	mode     mode
	file     string // "" means the default lock file
	verbose  bool
	noWait   bool
	printPID bool // -d: print the background process's pid on stdout
	timeout  time.Duration
	command  []string
}

const defaultTimeout = 2 * time.Second

const usage = `Usage: perfalloc [options] [command [argument ...]]

Reserve the performance counters: while perfalloc holds its lock on the lock
file, pmdaperfevent releases its counters. With a command, perfalloc holds the
lock while the command runs and exits with the command's status. Without one,
it holds the lock until SIGINT, SIGHUP or SIGTERM. It prints nothing unless
something fails.

Options:
  -D, --foreground        hold the lock in the foreground (the default)
  -d, --daemon            take the lock, confirm, then hold it in the background
                          (ignored with a command; of -d and -D the last counts)
  -f, --file FILE         the lock file (default %s)
  -h, --help              show this help and exit
  -v, --version           print the version and exit
      --verbose           report progress on stderr
      --print-pid         with -d, print the background process's pid on stdout
      --no-wait           do not wait for the agent to confirm the release
      --timeout DURATION  how long to wait for that confirmation (default %v;
                          e.g. 500ms, 5s, or plain seconds; 0 means --no-wait)
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

// parseArgs parses the arguments after the program name as the C
// perfalloc's getopt("dDf:hv") would, with long options besides: -h and -v
// act at once, before anything after them is looked at; of -d and -D the
// last one counts; a command wins over both. Unlike that getopt, it never
// permutes: the first argument that is not an option starts the command.
func parseArgs(args []string) (*options, error) {
	o := &options{timeout: defaultTimeout}
	daemon := false
	var status, ping, runMode bool
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
	now := func(m mode) (*options, error) {
		o.mode = m
		return o, nil
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
			flag := func(p *bool, v bool) error {
				if hasInline {
					return badUsage("option --%s takes no argument", name)
				}
				*p = v
				return nil
			}
			var err error
			switch name {
			case "help", "version":
				if hasInline {
					return nil, badUsage("option --%s takes no argument", name)
				}
				if name == "help" {
					return now(modeHelp)
				}
				return now(modeVersion)
			case "foreground":
				err = flag(&daemon, false)
				runMode = true
			case "daemon":
				err = flag(&daemon, true)
				runMode = true
			case "verbose":
				err = flag(&o.verbose, true)
			case "print-pid":
				err = flag(&o.printPID, true)
			case "no-wait":
				err = flag(&o.noWait, true)
			case "status":
				err = flag(&status, true)
			case "ping":
				err = flag(&ping, true)
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
		// A group of short options: -dD, -f FILE, -fFILE, -dfFILE.
		for j := 1; j < len(arg); j++ {
			switch c := arg[j]; c {
			case 'D':
				daemon, runMode = false, true
			case 'd':
				daemon, runMode = true, true
			case 'h':
				return now(modeHelp)
			case 'v':
				return now(modeVersion)
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
	if o.timeout == 0 {
		o.noWait = true
	}

	switch {
	case status && ping:
		return nil, badUsage("--status and --ping cannot be combined")
	case (status || ping) && (runMode || len(o.command) > 0):
		which := "--status"
		if ping {
			which = "--ping"
		}
		return nil, badUsage("%s cannot be combined with -D, -d or a command", which)
	case status:
		o.mode = modeStatus
	case ping:
		o.mode = modePing
	case len(o.command) > 0:
		// As in the C perfalloc, a command overrides -d.
		o.mode = modeCommand
	case daemon:
		o.mode = modeDaemon
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
