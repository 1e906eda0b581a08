package config

import (
	"fmt"
	"strings"
)

// Error is a problem with one line of the file.
type Error struct {
	Pos Pos
	Msg string
}

func (e *Error) Error() string { return e.Pos.String() + ": " + e.Msg }

func errorf(pos Pos, format string, args ...any) *Error {
	return &Error{Pos: pos, Msg: fmt.Sprintf(format, args...)}
}

// ErrorList holds every problem Parse found, in line order. Its Error method
// joins them with newlines; callers that log one line per problem range over
// the list (errors.As finds it).
type ErrorList []*Error

func (l ErrorList) Error() string {
	var b strings.Builder
	for i, e := range l {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

// Unwrap lets errors.As and errors.Is see the individual errors.
func (l ErrorList) Unwrap() []error {
	errs := make([]error, len(l))
	for i, e := range l {
		errs[i] = e
	}
	return errs
}

// Err returns the list as an error, or nil when it is empty, so that an
// empty list never becomes a non-nil error interface.
func (l ErrorList) Err() error {
	if len(l) == 0 {
		return nil
	}
	return l
}
