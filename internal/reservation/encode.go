package reservation

import (
	"errors"
	"math"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// appendState appends the state file's content for s to b: what
// json.MarshalIndent(s, "", "  ") writes, and a newline, byte for byte
// (TestEncodeStateIsMarshalIndent, FuzzEncodeState). encoding/json builds
// its encoder for State by reflection on the first write, which was most of
// the agent's first write of the file; perfalloc still reads it with
// encoding/json.
func appendState(b []byte, s *State) ([]byte, error) {
	// Room for it all at once, escapes aside: growing from nothing took
	// as long as the encoding.
	n := 512 + len(s.Program) + len(s.Config) + len(s.LockFile) + len(s.Counters) + 12*len(s.Holders)
	for _, ev := range s.Events {
		n += 128 + len(ev.Name) + len(ev.State) + len(ev.Error)
	}
	e := stateEncoder{b: slices.Grow(b, n)}
	e.b = append(e.b, '{')
	e.key(1, "generation")
	e.b = strconv.AppendUint(e.b, s.Generation, 10)
	e.key(1, "written")
	e.time(s.Written)
	e.key(1, "refresh_seconds")
	e.float(s.RefreshSeconds)
	e.key(1, "program")
	e.str(s.Program)
	e.key(1, "pid")
	e.b = strconv.AppendInt(e.b, int64(s.PID), 10)
	if s.StartTicks != 0 {
		e.key(1, "pid_start_ticks")
		e.b = strconv.AppendUint(e.b, s.StartTicks, 10)
	}
	e.key(1, "started")
	e.time(s.Started)
	e.key(1, "config")
	e.str(s.Config)
	e.key(1, "lock_file")
	e.str(s.LockFile)
	e.key(1, "counters")
	e.str(s.Counters)
	e.key(1, "since")
	e.time(s.Since)
	e.key(1, "holders")
	appendArray(&e, s.Holders, func(pid int) {
		e.b = strconv.AppendInt(e.b, int64(pid), 10)
	})
	e.key(1, "events")
	appendArray(&e, s.Events, func(ev EventState) {
		e.b = append(e.b, '{')
		e.key(3, "name")
		e.str(ev.Name)
		e.key(3, "state")
		e.str(ev.State)
		e.key(3, "cpus")
		e.b = strconv.AppendInt(e.b, int64(ev.CPUs), 10)
		if ev.Error != "" {
			e.key(3, "error")
			e.str(ev.Error)
		}
		e.end(2, '}')
	})
	e.end(0, '}')
	e.b = append(e.b, '\n')
	return e.b, e.err
}

// appendArray writes a member's slice as encoding/json does: null when
// nil, [] when empty, else each element on its own line one level below
// the member, written by elem.
func appendArray[T any](e *stateEncoder, s []T, elem func(T)) {
	switch {
	case s == nil:
		e.b = append(e.b, "null"...)
	case len(s) == 0:
		e.b = append(e.b, "[]"...)
	default:
		e.b = append(e.b, '[')
		for i, v := range s {
			e.next(i, 2)
			elem(v)
		}
		e.end(1, ']')
	}
}

// stateEncoder writes indented JSON, two spaces a level, as
// json.MarshalIndent(v, "", "  ") lays it out; err is its first error.
type stateEncoder struct {
	b   []byte
	err error
}

// key starts a member at depth (1 for the state's own) of the object
// being written: after a comma unless it is the object's first.
func (e *stateEncoder) key(depth int, name string) {
	if e.b[len(e.b)-1] != '{' {
		e.b = append(e.b, ',')
	}
	e.newline(depth)
	e.b = append(e.b, '"')
	e.b = append(e.b, name...)
	e.b = append(e.b, `": `...)
}

// next starts element i of an array at depth.
func (e *stateEncoder) next(i, depth int) {
	if i > 0 {
		e.b = append(e.b, ',')
	}
	e.newline(depth)
}

// end closes an object or array whose '{' or '[' is at depth.
func (e *stateEncoder) end(depth int, c byte) {
	e.newline(depth)
	e.b = append(e.b, c)
}

func (e *stateEncoder) newline(depth int) {
	e.b = append(e.b, '\n')
	for range depth {
		e.b = append(e.b, ' ', ' ')
	}
}

// time writes t as time.Time's MarshalJSON does: RFC 3339 with the
// nanoseconds it has, and an error for a year RFC 3339 cannot hold.
func (e *stateEncoder) time(t time.Time) {
	if y := t.Year(); y < 0 || y > 9999 {
		e.fail(errors.New("json: error calling MarshalJSON for type time.Time: Time.MarshalJSON: year outside of range [0,9999]"))
	}
	e.b = append(e.b, '"')
	e.b = t.AppendFormat(e.b, time.RFC3339Nano)
	e.b = append(e.b, '"')
}

// float writes f as encoding/json writes a float64: the shortest decimal
// that reads back as f, in exponent form only for very small or large
// magnitudes, with a one-digit negative exponent unpadded (1e-7, not
// 1e-07).
func (e *stateEncoder) float(f float64) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		e.fail(errors.New("json: unsupported value: " + strconv.FormatFloat(f, 'g', -1, 64)))
		e.b = append(e.b, '0')
		return
	}
	format := byte('f')
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
		format = 'e'
	}
	e.b = strconv.AppendFloat(e.b, f, format, -1, 64)
	if n := len(e.b); format == 'e' && n >= 4 && e.b[n-4] == 'e' && e.b[n-3] == '-' && e.b[n-2] == '0' {
		e.b[n-2] = e.b[n-1]
		e.b = e.b[:n-1]
	}
}

// str writes s as encoding/json writes a string: quoted; '"' and '\\'
// escaped; control characters as \b, \f, \n, \r, \t or \u00XX; '<', '>'
// and '&' as \u003c, \u003e, \u0026 (its HTML-safe default); U+2028 and
// U+2029 as \u2028, \u2029; each byte that is not UTF-8 as \ufffd.
func (e *stateEncoder) str(s string) {
	const hex = "0123456789abcdef"
	b := append(e.b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	e.b = append(b, '"')
}

func (e *stateEncoder) fail(err error) {
	if e.err == nil {
		e.err = err
	}
}
