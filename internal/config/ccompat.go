package config

import (
	"strings"
)

// isCScale reports whether w is the C lexer's scale: digits, a point, at
// least one digit after it, and an optional exponent. Anything else that
// starts with digits is a CPU index to it. It is written out rather than a
// regular expression so that the agent does not link package regexp, whose
// tables every start would build.
func isCScale(w string) bool {
	digits := func(i int) int {
		for i < len(w) && '0' <= w[i] && w[i] <= '9' {
			i++
		}
		return i
	}
	i := digits(0)
	if i == len(w) || w[i] != '.' {
		return false
	}
	j := digits(i + 1)
	if j == i+1 {
		return false
	}
	if j == len(w) {
		return true
	}
	if w[j] != 'e' && w[j] != 'E' {
		return false
	}
	j++
	if j < len(w) && (w[j] == '+' || w[j] == '-') {
		j++
	}
	k := digits(j)
	return k > j && k == len(w)
}

// CCompat lists what PCP's C agent (6.0.3) rejects or reads differently in
// a file that Parse accepted as f from src, so that one file can serve both
// agents. present says whether this machine has a PMU of that name, for
// [dynamic] events. The facts come from the C agent's lexer and its
// handling of sections (docs/c-agent-config.md).
func CCompat(f *File, src []byte, present func(pmu string) bool) ErrorList {
	var errs ErrorList
	add := func(line int, format string, args ...any) {
		errs = append(errs, errorf(Pos{File: f.Path, Line: line}, format, args...))
	}
	derived := false
	text := strings.TrimPrefix(string(src), "\ufeff")
	for n, l := range strings.Split(text, "\n") {
		line := n + 1
		t := strings.TrimLeft(l, blanks)
		if t == "" || t[0] == '#' {
			continue
		}
		if len(t) < len(l) {
			add(line, "the C agent rejects the whole file here (\"Syntax error on line: %d\"): it reads names and headers only at the start of a line; remove the leading blanks", line)
		}
		if t[0] == '[' {
			end := strings.IndexByte(t, ']')
			if end < 0 {
				end = len(t)
			}
			header := t[1:end]
			derived = strings.Contains(header, ":derived")
			if i := strings.IndexByte(header, ','); i >= 0 {
				add(line, "the C agent splits section headers on blanks only, so a comma joins the names around it into one; separate PMU names with blanks")
			}
			continue
		}
		if !derived {
			continue
		}
		for _, w := range optionWords(words(t)[1:]) {
			if isDecimalFloat(w) && !isCScale(w) {
				add(line, "the C agent reads the scale %s as a CPU index and then rejects the whole file: write scales with a point and a digit after it, e.g. 0.000000001 for 1e-9", w)
			}
		}
	}

	var dynamic *Section
	events := 0
	for _, s := range f.Sections {
		events += len(s.Events) + len(s.Groups)
		switch s.Kind {
		case DynamicSection:
			if dynamic != nil {
				add(s.Pos.Line, "the C agent uses only the last [dynamic] section and drops the one at line %d; merge them", dynamic.Pos.Line)
			}
			dynamic = s
		case DerivedSection:
			if dynamic != nil {
				add(s.Pos.Line, "the C agent 6.0.3 ignores derived sections that follow [dynamic] (line %d): move %s above it", dynamic.Pos.Line, s.Header())
			}
		}
	}
	for _, ev := range f.DynamicEvents() {
		if name, _, _ := strings.Cut(ev.Name, "."); present != nil && !present(name) {
			add(ev.Pos.Line, "%s: this machine has no PMU %s; the C agent skips the line without a word, so a typo goes unnoticed there", ev.Name, name)
		}
	}
	if events == 0 {
		add(0, "%s has no events: the C agent refuses to start (\"Unable to create perf instance\")", f.Path)
	}
	return errs
}
