// Package tsv cuts the lines of the tab-separated tables this project's
// generators write (libpfm4's event tables, the vendors' indexes and
// events) into fields, without allocating: every start reads some of them.
package tsv

import "strings"

// Split cuts line at its tabs into cols, as slices of line, and returns
// how many fields it has; more than len(cols) counts as len(cols)+1.
func Split(line string, cols []string) int {
	for n := range cols {
		i := strings.IndexByte(line, '\t')
		if i < 0 {
			cols[n] = line
			return n + 1
		}
		cols[n], line = line[:i], line[i+1:]
	}
	return len(cols) + 1
}
