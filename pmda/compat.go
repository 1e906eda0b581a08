package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"slices"

	"perfevent/internal/config"
	"perfevent/internal/pmu"
	"perfevent/internal/setup"
)

// What serves scripts and administrators coming from the C agent: the
// usage as the man page writes it, and --check's view of the C agent.

// usage prints the options as the man page writes them: one dash for the
// C agent's letters, two for the long names (the flag package's own
// listing gives every name one).
func usage(fs *flag.FlagSet, w io.Writer) {
	fmt.Fprintf(w, "Usage: %s [options]\n\nPCP's perfevent agent: performance counters as perfevent.* metrics.\n\nOptions:\n", prog)
	fs.VisitAll(func(f *flag.Flag) {
		head := "  -" + f.Name
		if len(f.Name) > 1 {
			head = "  --" + f.Name
		}
		arg, text := flag.UnquoteUsage(f)
		if arg != "" {
			head += " " + arg
		}
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" {
			text += " (default " + f.DefValue + ")"
		}
		if len(head) > 22 {
			fmt.Fprintf(w, "%s\n%24s%s\n", head, "", text)
			return
		}
		fmt.Fprintf(w, "%-22s  %s\n", head, text)
	})
}

// cNotes are --check's notes about what the C agent would make of the file:
// with --c-compatible, problems; without, only the warning about a file
// with no events, which neither agent can count anything from.
func cNotes(o *options, f *config.File) []setup.Note {
	if f == nil {
		return nil
	}
	src, err := os.ReadFile(o.config)
	if err != nil {
		return []setup.Note{{Severity: setup.Problem, Text: err.Error()}}
	}
	names, _ := pmu.Default().PMUNames()
	present := func(name string) bool { return name == "software" || slices.Contains(names, name) }
	var notes []setup.Note
	for _, e := range config.CCompat(f, src, present) {
		n := setup.Note{Pos: e.Pos, Severity: setup.Problem, Text: e.Msg}
		if e.Pos.Line == 0 {
			n.Pos = config.Pos{}
			if !o.cCompatible {
				n.Severity, n.Text = setup.Info, "warning: "+e.Msg
			}
		} else if !o.cCompatible {
			continue
		}
		notes = append(notes, n)
	}
	return notes
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
