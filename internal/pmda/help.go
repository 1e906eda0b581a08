package pmda

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// HelpText is one entry of a PCP help file.
type HelpText struct {
	OneLine string
	Help    string
	Line    int // where the entry starts, for messages
}

// ParseHelp reads PCP's ASCII help format, the input of newhelp(1):
//
//	# comment
//	@ perfevent.version The version number of the pmda
//	Long text, any number of lines,
//	up to the next "@" line.
//
// Entries are keyed by the identifier after "@": a metric name, a PMID
// "D.C.I" or an instance domain "D.S". The long text loses its trailing
// newlines, as newhelp stores it. name (usually the file name) prefixes
// error messages, which carry line numbers.
func ParseHelp(r io.Reader, name string) (map[string]HelpText, error) {
	out := make(map[string]HelpText)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	var (
		id   string
		cur  HelpText
		long strings.Builder
		n    int
	)
	flush := func() {
		if id != "" {
			cur.Help = strings.TrimRight(long.String(), "\n")
			out[id] = cur
		}
		long.Reset()
	}
	for sc.Scan() {
		n++
		line := sc.Text()
		if strings.HasPrefix(line, "@") {
			flush()
			rest := strings.TrimSpace(line[1:])
			fields := strings.SplitN(rest, " ", 2)
			id = fields[0]
			if id == "" {
				return nil, fmt.Errorf("%s:%d: \"@\" without a metric name, PMID or indom", name, n)
			}
			if prev, dup := out[id]; dup {
				return nil, fmt.Errorf("%s:%d: %s already has help text at line %d", name, n, id, prev.Line)
			}
			cur = HelpText{Line: n}
			if len(fields) == 2 {
				cur.OneLine = strings.TrimSpace(fields[1])
			}
			continue
		}
		if id == "" {
			// Before the first entry only comments and blank lines may appear.
			if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") {
				return nil, fmt.Errorf("%s:%d: text before the first \"@\" entry", name, n)
			}
			continue
		}
		long.WriteString(line)
		long.WriteByte('\n')
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: %w", name, n+1, err)
	}
	flush()
	return out, nil
}
