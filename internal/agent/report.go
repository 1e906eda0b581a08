package agent

import (
	"fmt"
	"strings"

	"perfevent/internal/setup"
)

// report is what building a generation has to say: start-up logs all of
// it, a later build only its summary and what changed since the
// generation it replaces, so that a reload or a CPU coming back does not
// write the whole plan again.
type report struct {
	lines   []reportLine
	summary string
}

// reportLine is one line of a report; key is what it is compared by
// across generations: a note's text without its position, so that a line
// moved in perfevent.conf is not a change.
type reportLine struct {
	level string // "Info", "Warning" or "Error"
	text  string
	key   string
	short string // what "no longer" names: the text up to its first ": "
}

func (r *report) add(level, key, format string, args ...any) {
	r.addText(level, key, fmt.Sprintf(format, args...), "")
}

// addText adds a line of text; key "" compares it by its text, short ""
// names it by its text.
func (r *report) addText(level, key, text, short string) {
	if key == "" {
		key = text
	}
	if short == "" {
		short = text
	}
	r.lines = append(r.lines, reportLine{level: level, text: text, key: level + "\x00" + key, short: short})
}

// addKeyed adds a line whose key is already level + "\x00" + its key.
func (r *report) addKeyed(level, key, text, short string) {
	r.lines = append(r.lines, reportLine{level: level, text: text, key: key, short: short})
}

func (r *report) infof(format string, args ...any)    { r.add("Info", "", format, args...) }
func (r *report) warningf(format string, args ...any) { r.add("Warning", "", format, args...) }
func (r *report) errorf(format string, args ...any)   { r.add("Error", "", format, args...) }

// note adds a plan's note: its position and text, as Note.String writes
// them, put together once here rather than through fmt.
func (r *report) note(n setup.Note) {
	level := "Info"
	if n.Severity == setup.Problem {
		level = "Warning"
	}
	text := n.Text
	short, _, _ := strings.Cut(n.Text, ": ")
	if n.Pos.Line != 0 {
		pos := n.Pos.String()
		text = pos + ": " + n.Text
		short = text[:len(pos)+2+len(short)] // its own prefix: no copy
	}
	// Compared without its CPU list: a CPU going offline or coming back
	// changes every line's list, and the summary and the hotplug line
	// already say so. The key is written once, level first.
	var key strings.Builder
	key.Grow(len(level) + 1 + len(n.Text) + 8) // a list masked may grow by a few bytes
	key.WriteString(level)
	key.WriteByte(0)
	writeMasked(&key, n.Text)
	r.addKeyed(level, key.String(), text, short)
}

// maskCPULists replaces each CPU list in s ("cpu 3", "cpus 0-1,4",
// "cpus0-3": cpu or cpus at the start of a word, an optional space, a
// digit, then digits, commas and dashes) with "cpus *". It is what the
// regular expression \bcpus? ?[0-9][0-9,-]* replacing would do, without
// compiling one at every start or running it on every note.
func maskCPULists(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	writeMasked(&b, s)
	return b.String()
}

// writeMasked writes s to b with each CPU list masked (maskCPULists).
func writeMasked(b *strings.Builder, s string) {
	done := 0 // s[:done] is in b
	for i := 0; i+3 < len(s); i++ {
		j := cpuListAt(s, i)
		if j < 0 {
			continue
		}
		b.WriteString(s[done:i])
		b.WriteString("cpus *")
		done = j
		i = j - 1
	}
	b.WriteString(s[done:])
}

// cpuListAt is where a CPU list that starts at s[i] ("cpu" or "cpus" at
// the start of a word, then cpuListEnd's list) ends, or -1 if none does.
func cpuListAt(s string, i int) int {
	if s[i] != 'c' || s[i+1] != 'p' || s[i+2] != 'u' || (i > 0 && isWordByte(s[i-1])) {
		return -1
	}
	j := i + 3
	if end := cpuListEnd(s, j+1); j < len(s) && s[j] == 's' && end > 0 {
		return end
	}
	if end := cpuListEnd(s, j); end > 0 {
		return end
	}
	return -1
}

// cpuListEnd is where a CPU list starting at s[i] (an optional space, a
// digit, then digits, commas and dashes) ends, or 0 if there is none.
func cpuListEnd(s string, i int) int {
	if i < len(s) && s[i] == ' ' {
		i++
	}
	if i >= len(s) || s[i] < '0' || s[i] > '9' {
		return 0
	}
	for i++; i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == ',' || s[i] == '-'); i++ {
	}
	return i
}

// isWordByte is regexp's \w, which \b looks at.
func isWordByte(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_'
}

// logLine writes one line at its level.
func (a *Agent) logLine(l reportLine) {
	switch l.level {
	case "Error":
		a.log.Errorf("%s", l.text)
	case "Warning":
		a.log.Warningf("%s", l.text)
	default:
		a.log.Infof("%s", l.text)
	}
}

// logReport logs a generation's report. Without prev (start-up, or a
// generation that had none) it is logged whole. Otherwise one line says
// what is served and how the plan changed, followed by the lines that
// are new and those that are gone; a new line that this agent has logged
// before (an event that cannot open here, in a generation before the
// last) is counted, not repeated: each is explained once per agent life.
// The lines go to the log in one write.
func (a *Agent) logReport(r, prev *report, summary string) {
	a.log.Batch(func() { a.writeReport(r, prev, summary) })
}

func (a *Agent) writeReport(r, prev *report, summary string) {
	if prev == nil {
		for _, l := range r.lines {
			a.told[l.key] = true
			a.logLine(l)
		}
		a.log.Infof("serving %s", r.summary)
		return
	}
	had := make(map[string]bool, len(prev.lines))
	for _, l := range prev.lines {
		had[l.key] = true
	}
	has := make(map[string]bool, len(r.lines))
	var fresh []reportLine
	again := 0
	for _, l := range r.lines {
		has[l.key] = true
		switch {
		case had[l.key]:
		case a.told[l.key]:
			again++
		default:
			fresh = append(fresh, l)
			a.told[l.key] = true
		}
	}
	var gone []reportLine
	for _, l := range prev.lines {
		if !has[l.key] {
			gone = append(gone, l)
		}
	}
	var change []string
	if n := len(fresh) + again; n > 0 {
		s := plural(n, "new line") + " in the plan"
		if again > 0 {
			s += fmt.Sprintf(" (%d of them logged before, not repeated)", again)
		}
		change = append(change, s)
	}
	if len(gone) > 0 {
		change = append(change, plural(len(gone), "line")+" gone from it")
	}
	how := "the plan is unchanged"
	if len(change) > 0 {
		how = strings.Join(change, ", ")
	}
	if len(fresh) > 0 || len(gone) > 0 {
		how += ", below"
	}
	a.log.Infof("%s: %s; %s", summary, r.summary, how)
	for _, l := range fresh {
		a.logLine(l)
	}
	for _, l := range gone {
		a.log.Infof("no longer: %s", l.short)
	}
}
