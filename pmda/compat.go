package main

import (
	"flag"
	"fmt"
	"io"
)

// What serves scripts and administrators coming from the C agent: the
// usage as the man page writes it (--check's view of the C agent is in
// internal/agent).

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
