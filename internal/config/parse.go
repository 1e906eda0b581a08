package config

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"perfevent/internal/conffile"
)

// Limits on what ParseFile and Parse accept. A perfevent.conf is a few
// kilobytes with lines of tens of bytes; the limits only keep a wrong -c
// (a log, a device, a huge generated file) from costing the root agent
// memory, and a huge line from being copied into the log.
const (
	MaxFileSize = conffile.MaxSize // bytes in a file
	MaxLine     = conffile.MaxLine // bytes in a line, without its newline
)

// ParseFile reads and parses the file at path. A read failure returns a nil
// File; otherwise see Parse.
//
// Symbolic links are followed (a packaged config may be one), but what is
// opened must be a regular file of at most MaxFileSize bytes: the open
// never blocks (O_NONBLOCK), so a FIFO or a device is refused at once
// instead of hanging or flooding the agent.
func ParseFile(path string) (*File, error) {
	src, err := conffile.Read(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, src)
}

// Parse parses src, the contents of a perfevent.conf; filename is used in
// positions and messages only. It returns every section it could read and,
// if any line was bad, an ErrorList naming each bad line (which was skipped).
// The File is never nil.
func Parse(filename string, src []byte) (*File, error) {
	p := &parser{
		file:        &File{Path: filename},
		pos:         Pos{File: filename},
		dynSeen:     map[string]int{},
		derivedSeen: map[string]int{},
	}
	text := strings.TrimPrefix(string(src), "\ufeff")
	line := 0
	for len(text) > 0 {
		line++
		var l string
		l, text, _ = strings.Cut(text, "\n")
		p.pos.Line = line
		p.line(l)
	}
	p.endSection()
	// Section-level problems are found at the section's end; report in line order.
	slices.SortStableFunc(p.errs, func(a, b *Error) int { return a.Pos.Line - b.Pos.Line })
	return p.file, p.errs.Err()
}

// blanks separate words. '\r' is among them so that CRLF files parse.
const blanks = " \t\r\v\f"

func isBlank(c byte) bool { return strings.IndexByte(blanks, c) >= 0 }

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func isLetter(c byte) bool { return 'a' <= c|0x20 && c|0x20 <= 'z' }

// words splits a line on blanks, stopping at a word that starts with '#'.
func words(s string) []string {
	var out []string
	for {
		s = strings.TrimLeft(s, blanks)
		if s == "" || s[0] == '#' {
			return out
		}
		n := strings.IndexAny(s, blanks)
		if n < 0 {
			n = len(s)
		}
		out = append(out, s[:n])
		s = s[n:]
	}
}

// badNameChar returns the first byte of s that is not a letter, digit or
// ASCII punctuation (what the C lexer allows in names), or -1.
func badNameChar(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return i
		}
	}
	return -1
}

type parser struct {
	file *File
	errs ErrorList
	pos  Pos // of the current line

	sec   *Section // the section being read; nil before the first header
	keep  bool     // false when sec's header was bad: its lines are checked, then dropped
	lines int      // event or member lines seen in sec, good or bad
	seen  map[string]int

	dynSeen     map[string]int // events of all [dynamic] sections → line
	derivedSeen map[string]int // derived names → line

	// Derived sections only: the alternative group being read.
	group    Group
	started  bool // the group has had a member line, good or bad
	groupBad bool // one of its member lines was bad
	sepLine  int  // a "||" line not yet followed by a member, or 0
}

func (p *parser) errorf(format string, args ...any) *Error {
	e := errorf(p.pos, format, args...)
	p.errs = append(p.errs, e)
	return e
}

func (p *parser) line(l string) {
	t := strings.TrimLeft(l, blanks)
	if t == "" || t[0] == '#' {
		return
	}
	if len(l) > MaxLine {
		p.longLine(len(l), t[0] == '[')
		return
	}
	if t[0] == '[' {
		p.header(t[1:])
		return
	}
	ws := words(t)
	if strings.HasPrefix(ws[0], "||#") {
		ws[0] = "||" // the C lexer reads "||#…" as || and a comment
	}
	if ws[0] == "||" {
		if len(ws) > 1 {
			p.errorf("|| must stand alone on its line, found %q after it", ws[1])
			return
		}
		p.separator()
		return
	}
	p.eventLine(ws[0], optionWords(ws[1:]))
}

// longLine reports a line longer than MaxLine, without quoting it, and
// treats it as a bad line of its kind: a header whose section is ignored,
// or an event line that is skipped (with its group, in a derived section).
func (p *parser) longLine(n int, header bool) {
	if header {
		p.endSection()
		p.sec, p.keep, p.lines = &Section{Pos: p.pos}, false, 0
		p.seen = map[string]int{}
		p.errorf("line is %d bytes long, more than the %d allowed; the section is ignored", n, MaxLine)
		return
	}
	e := p.errorf("line is %d bytes long, more than the %d allowed; line skipped", n, MaxLine)
	if p.sec == nil {
		return
	}
	p.lines++
	if p.sec.Kind == DerivedSection {
		if !p.started {
			p.group.Pos = p.pos
			p.started = true
		}
		p.sepLine = 0
		p.groupBad = true
		e.Msg += fmt.Sprintf("; dropping the group that starts at line %d", p.group.Pos.Line)
	}
}

// optionWords drops everything from a '#' inside an option word on, as the
// C lexer does ("cpu#all" is cpu and a comment). No option contains '#';
// event names may, so the name is left alone.
func optionWords(args []string) []string {
	for i, w := range args {
		if j := strings.IndexByte(w, '#'); j >= 0 {
			if j == 0 {
				return args[:i]
			}
			return append(args[:i:i], w[:j])
		}
	}
	return args
}

// header reads a section header; s is what follows the '['.
func (p *parser) header(s string) {
	p.endSection()

	var names []string
	problem := ""
	note := func(format string, args ...any) {
		if problem == "" {
			problem = fmt.Sprintf(format, args...)
		}
	}
	closed := false
	i := 0
scan:
	for i < len(s) {
		c := s[i]
		switch {
		case isBlank(c) || c == ',':
			i++
		case c == ']':
			closed = true
			i++
			break scan
		case c == '#':
			i = len(s) // a comment before the ']'
		case c == '"':
			j := strings.IndexByte(s[i+1:], '"')
			if j < 0 {
				note("unterminated quote in section header")
				i = len(s)
				break
			}
			if name := s[i+1 : i+1+j]; name == "" {
				note(`empty name "" in section header`)
			} else {
				names = append(names, name)
			}
			i += j + 2
		default:
			j := i
			for j < len(s) && !isBlank(s[j]) && s[j] != ',' && s[j] != ']' && s[j] != '"' {
				j++
			}
			names = append(names, s[i:j])
			i = j
		}
	}
	if !closed {
		note("section header has no closing ]")
	} else if rest := words(s[i:]); len(rest) > 0 {
		note("unexpected %q after the ] of a section header", rest[0])
	}

	sec := &Section{Pos: p.pos}
	switch {
	case slices.Contains(names, "dynamic"):
		sec.Kind = DynamicSection
		if len(names) > 1 {
			note("[dynamic] must stand alone in its header, found %d names", len(names))
		}
	case slices.ContainsFunc(names, func(n string) bool { return strings.HasSuffix(n, ":derived") }):
		sec.Kind = DerivedSection
		if len(names) > 1 {
			note("a derived section header names one metric, found %d names", len(names))
			break
		}
		sec.Name = strings.TrimSuffix(names[0], ":derived")
		switch {
		case sec.Name == "":
			note("derived section needs a name before :derived, e.g. [ipc:derived]")
		case strings.Contains(sec.Name, ":"):
			note("derived name %q must not contain ':'", sec.Name)
		case badNameChar(sec.Name) >= 0:
			note("derived name %q may hold only letters, digits and punctuation", sec.Name)
		case slices.Contains(strings.Split(sec.Name, "."), ""):
			note("derived name %q has an empty part: '.' separates levels of the metric name and may not lead, trail or repeat", sec.Name)
		default:
			if line, dup := p.derivedSeen[sec.Name]; dup {
				note("derived metric %q is already defined at line %d", sec.Name, line)
			}
		}
	default:
		sec.Kind = PMUSection
		sec.PMUs = names
		if len(names) == 0 {
			note("empty section header; name a PMU, dynamic, or NAME:derived")
		}
	}

	p.sec, p.keep, p.lines = sec, problem == "", 0
	p.seen = map[string]int{}
	if problem != "" {
		p.errorf("%s; the section is ignored", problem)
		return
	}
	if sec.Kind == DerivedSection {
		p.derivedSeen[sec.Name] = p.pos.Line
	}
}

func (p *parser) endSection() {
	s := p.sec
	if s == nil {
		return
	}
	p.sec = nil
	at := func(format string, args ...any) {
		p.errs = append(p.errs, errorf(s.Pos, format, args...))
	}
	if s.Kind == DerivedSection {
		p.endGroup(s)
		if p.sepLine != 0 {
			p.errs = append(p.errs, errorf(Pos{p.pos.File, p.sepLine},
				"|| ends %s with no members after it", s.Header()))
			p.sepLine = 0
		}
	}
	if !p.keep {
		return
	}
	switch {
	case s.Kind == DerivedSection && len(s.Groups) == 0 && p.lines == 0:
		at("%s has no members; the section is ignored", s.Header())
	case s.Kind == DerivedSection && len(s.Groups) == 0:
		at("%s has no usable group (each has a bad member); the section is ignored", s.Header())
	case s.Kind == PMUSection && len(s.Events) == 0 && p.lines == 0:
		at("%s has no events; the section is ignored", s.Header())
	case s.Kind == PMUSection && len(s.Events) == 0:
		at("%s has no usable events (each line has an error); the section is ignored", s.Header())
	default:
		p.file.Sections = append(p.file.Sections, s)
	}
}

func (p *parser) separator() {
	if p.sec == nil || p.sec.Kind != DerivedSection {
		p.errorf("|| separates alternative groups and belongs in a [NAME:derived] section")
		return
	}
	if !p.started {
		if p.sepLine != 0 {
			p.errorf("empty alternative group: no members since the || at line %d", p.sepLine)
		} else {
			p.errorf("|| before any member of %s; it goes between groups of members", p.sec.Header())
		}
		return
	}
	p.endGroup(p.sec)
	p.sepLine = p.pos.Line
}

// endGroup closes the alternative group being read in derived section s,
// keeping it if all its member lines were good.
func (p *parser) endGroup(s *Section) {
	if p.started && !p.groupBad && p.keep {
		s.Groups = append(s.Groups, p.group)
	}
	p.group, p.started, p.groupBad = Group{}, false, false
	p.seen = map[string]int{}
}

// lineOpts collects the options of one event or member line.
type lineOpts struct {
	cpu       CPUOption
	cpuWord   string
	scale     float64
	scaleWord string
	perfScale bool
	raw       uint64
	rawWord   string
	params    []Param
}

func (p *parser) eventLine(name string, args []string) {
	if p.sec == nil {
		p.errorf("event %q is outside any section; put a header such as [perf] above it", name)
		return
	}
	kind := p.sec.Kind
	p.lines++
	if kind == DerivedSection {
		if !p.started {
			p.group.Pos = p.pos
			p.started = true
		}
		p.sepLine = 0
	}
	var o lineOpts
	err := checkName(p.pos, name)
	if err == nil {
		o, err = p.options(kind, name, args)
	}
	if err == nil {
		err = p.checkEvent(kind, name, &o)
	}
	if err != nil {
		p.errs = append(p.errs, err)
		if kind == DerivedSection {
			p.groupBad = true
			err.Msg += fmt.Sprintf("; dropping the group that starts at line %d", p.group.Pos.Line)
		}
		return
	}
	if !p.keep {
		// Said for every line, not only at the header: a reader looking
		// for a missing metric looks at its own line.
		p.errorf("%q is under the broken section header at line %d, so it is ignored too", name, p.sec.Pos.Line)
		return
	}
	switch kind {
	case PMUSection, DynamicSection:
		p.seen[name] = p.pos.Line
		if kind == DynamicSection {
			p.dynSeen[name] = p.pos.Line
		}
		p.sec.Events = append(p.sec.Events, Event{
			Pos:        p.pos,
			Name:       name,
			CPU:        o.cpu,
			RawCode:    o.raw,
			HasRawCode: o.rawWord != "",
			Params:     o.params,
		})
	case DerivedSection:
		p.seen[name] = p.pos.Line
		scale := 1.0
		if o.scaleWord != "" && !o.perfScale {
			scale = o.scale
		}
		p.group.Terms = append(p.group.Terms, Term{
			Pos:       p.pos,
			Event:     name,
			CPU:       o.cpu,
			Scale:     scale,
			PerfScale: o.perfScale,
		})
	}
}

func checkName(pos Pos, name string) *Error {
	if !isLetter(name[0]) {
		return errorf(pos, "event name %q must start with a letter", name)
	}
	if i := badNameChar(name); i >= 0 {
		return errorf(pos, "event name %q contains %q; names hold letters, digits and punctuation", name, name[i])
	}
	return nil
}

// checkEvent applies the rules that depend on the whole line.
func (p *parser) checkEvent(kind SectionKind, name string, o *lineOpts) *Error {
	switch kind {
	case PMUSection:
		if raw, isRaw := strings.CutPrefix(name, "RAW:"); isRaw {
			if raw == "" {
				return errorf(p.pos, "RAW: needs a name after it, e.g. RAW:my_event rawcode=0x1c2")
			}
			if o.rawWord == "" {
				return errorf(p.pos, "raw event %q needs rawcode=0x…, the event code for this CPU", name)
			}
		}
	case DynamicSection:
		if i := strings.IndexByte(name, '.'); i <= 0 || i == len(name)-1 {
			return errorf(p.pos, "dynamic event %q must be written <pmu>.<event>, e.g. msr.tsc", name)
		}
		if line, dup := p.dynSeen[name]; dup {
			return errorf(p.pos, "event %q is already listed at line %d", name, line)
		}
	}
	if line, dup := p.seen[name]; dup {
		if kind == DerivedSection {
			return errorf(p.pos, "member %q is already in this group at line %d", name, line)
		}
		return errorf(p.pos, "event %q is already listed at line %d", name, line)
	}
	return nil
}

// expected lists, per section kind, the options a line may carry.
var expected = [...]string{
	PMUSection:     "cpu, cpu_rr, node, node_rr, a CPU index, or rawcode=0x… on a RAW: event",
	DynamicSection: "cpu, cpu_rr, node, node_rr, a CPU index, or an hv_24x7/hv_gpci parameter such as chip:0",
	DerivedSection: "cpu, cpu_rr, node, node_rr, a CPU index, a scale such as 0.000001, or perf_scale",
}

func (p *parser) options(kind SectionKind, name string, args []string) (lineOpts, *Error) {
	var o lineOpts
	fail := func(format string, args ...any) (lineOpts, *Error) {
		return o, errorf(p.pos, format, args...)
	}
	for _, w := range args {
		var cpu CPUOption
		switch w {
		case "cpu":
			cpu.Kind = CPUAll
		case "cpu_rr":
			cpu.Kind = CPURoundRobin
		case "node":
			cpu.Kind = CPUNode
		case "node_rr":
			cpu.Kind = CPUNodeRoundRobin
		}
		switch {
		case cpu.Kind != CPUDefault || allDigits(w):
			if cpu.Kind == CPUDefault {
				n, err := strconv.ParseInt(w, 10, 32)
				if err != nil {
					return fail("CPU index %s for event %q is too large", w, name)
				}
				cpu = CPUOption{Kind: CPUIndex, Index: int(n)}
			}
			if o.cpuWord != "" {
				return fail("event %q has two CPU options, %s and %s; give one", name, o.cpuWord, w)
			}
			o.cpu, o.cpuWord = cpu, w

		case w == "perf_scale" || isDecimalFloat(w):
			if kind != DerivedSection {
				return fail("scale %s for event %q is only meaningful in a [NAME:derived] section", w, name)
			}
			if o.scaleWord != "" {
				return fail("event %q has two scales, %s and %s; give one", name, o.scaleWord, w)
			}
			o.scaleWord = w
			if w == "perf_scale" {
				o.perfScale = true
				break
			}
			f, _ := strconv.ParseFloat(w, 64)
			if math.IsInf(f, 0) {
				return fail("scale %s for event %q is out of range", w, name)
			}
			o.scale = f

		case strings.HasPrefix(w, "rawcode="):
			if kind != PMUSection || !strings.HasPrefix(name, "RAW:") {
				return fail("rawcode= belongs to RAW:<name> events in a PMU section, not to %q", name)
			}
			if o.rawWord != "" {
				return fail("event %q has two rawcode= options", name)
			}
			hex, ok := strings.CutPrefix(w[len("rawcode="):], "0x")
			if !ok {
				hex, ok = strings.CutPrefix(w[len("rawcode="):], "0X")
			}
			v, err := strconv.ParseUint(hex, 16, 64)
			if !ok || err != nil || strings.HasPrefix(hex, "+") {
				if ok && len(hex) > 16 && strings.Trim(hex, "0123456789abcdefABCDEF") == "" {
					return fail("%s does not fit in 64 bits", w)
				}
				return fail("%s is not a hexadecimal code; write it like rawcode=0x1c2", w)
			}
			o.raw, o.rawWord = v, w

		case isParamWord(w):
			pname, val, _ := strings.Cut(w, ":")
			if kind != DynamicSection {
				return fail("%s applies only to hv_24x7 and hv_gpci events in [dynamic], not to %q", w, name)
			}
			if !allDigits(val) {
				return fail("%s needs a decimal number, e.g. %s:0", w, pname)
			}
			n, err := strconv.ParseInt(val, 10, 32)
			if err != nil {
				return fail("%s is too large", w)
			}
			if pname == "domain" && (n < 1 || n > 6) {
				return fail("%s is out of range; hv_24x7 domains are 1 to 6", w)
			}
			for _, q := range o.params {
				if q.Name == pname {
					return fail("event %q has %s: twice", name, pname)
				}
			}
			o.params = append(o.params, Param{Name: pname, Value: int(n)})

		case w == "||":
			return fail("|| must stand alone on its line")

		default:
			return fail("unknown option %q for event %q; expected %s", w, name, expected[kind])
		}
	}
	return o, nil
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return true
}

func isParamWord(w string) bool {
	name, _, ok := strings.Cut(w, ":")
	return ok && slices.Contains(paramNames, name)
}

// isDecimalFloat accepts unsigned decimal numbers with a point, an exponent
// or both: "0.5", ".5", "5.", "1e-6", "2.5E+3". Plain digits are CPU indexes,
// and strconv's other spellings (inf, nan, hex floats, '_') are not scales.
func isDecimalFloat(s string) bool {
	i, digits := 0, 0
	for i < len(s) && isDigit(s[i]) {
		i++
		digits++
	}
	point := i < len(s) && s[i] == '.'
	if point {
		i++
		for i < len(s) && isDigit(s[i]) {
			i++
			digits++
		}
	}
	if digits == 0 {
		return false
	}
	exp := i < len(s) && (s[i] == 'e' || s[i] == 'E')
	if exp {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if i == len(s) || !isDigit(s[i]) {
			return false
		}
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	}
	return i == len(s) && (point || exp)
}
