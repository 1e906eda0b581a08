package bpf

import (
	"errors"
	"fmt"
	"strings"
)

// ErrKeyNotExist is the error of a lookup or delete of a key the map has
// not (ENOENT).
var ErrKeyNotExist = errors.New("key does not exist")

// ErrKeyExist is the error of an update with UpdateNoExist of a key the
// map has (EEXIST).
var ErrKeyExist = errors.New("key already exists")

// Error is a bpf(2) call the kernel refused: what was asked of which map
// or program, and the errno, which it wraps.
type Error struct {
	Op     string // "create map", "load program", "update"...
	Object string // the map's or program's name and type: "map pe_prev (array)"
	Errno  error
	// Log is the verifier's log of a program the kernel refused,
	// excerpted: its first and last lines.
	Log string
	// is is ErrKeyNotExist or ErrKeyExist when the errno says so.
	is error
}

func (e *Error) Error() string {
	s := e.Op + " " + e.Object + ": " + errnoText(e.Errno)
	if e.Log != "" {
		s += "; the verifier's log:\n" + e.Log
	}
	return s
}

// Unwrap gives the errno, and ErrKeyNotExist or ErrKeyExist when it means
// that.
func (e *Error) Unwrap() []error {
	if e.is != nil {
		return []error{e.Errno, e.is}
	}
	return []error{e.Errno}
}

// Verifier log excerpts: the first lines say what the program is, the
// last where the verifier gave up and why.
const (
	logHead    = 5
	logTail    = 25
	logLineMax = 240
)

// excerpt is the first logHead and last logTail lines of log, each cut at
// logLineMax bytes, and how many lines it left out between them.
func excerpt(log string) string {
	log = strings.TrimRight(strings.TrimRight(log, "\x00"), "\n")
	if log == "" {
		return ""
	}
	lines := strings.Split(log, "\n")
	for i, l := range lines {
		if len(l) > logLineMax {
			lines[i] = l[:logLineMax] + "..."
		}
	}
	if len(lines) > logHead+logTail+1 {
		left := len(lines) - logHead - logTail
		lines = append(append(lines[:logHead:logHead], fmt.Sprintf("... (%d lines left out)", left)), lines[len(lines)-logTail:]...)
	}
	return strings.Join(lines, "\n")
}
