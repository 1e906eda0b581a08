// Command genman writes the metric catalog's section of perfevent.conf(5)
// between its markers (catalog.ManBegin, catalog.ManEnd).
package main

import (
	"fmt"
	"os"
	"strings"

	"perfevent/internal/catalog"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: genman perfevent.conf.5")
		os.Exit(2)
	}
	path := os.Args[1]
	src, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	s := string(src)
	i, j := strings.Index(s, catalog.ManBegin), strings.Index(s, catalog.ManEnd)
	if i < 0 || j < i {
		fmt.Fprintf(os.Stderr, "%s: no %q … %q section\n", path, catalog.ManBegin, catalog.ManEnd)
		os.Exit(1)
	}
	out := s[:i] + catalog.ManBegin + "\n" + catalog.ManSection() + s[j:]
	if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
