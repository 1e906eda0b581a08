// Package logging holds the one interface every package logs through: a
// message at a level, formatted as fmt.Sprintf formats it. The agent's
// log, in libpcp's format, is pmda.Logger; tests record with
// testlog.Recorder. Packages below the agent take a Logger where they have
// something to tell and treat nil as Discard, so that they need no logger
// to be used or tested.
package logging

// Logger writes one message per call at its level. Implementations are
// safe for concurrent use; a trailing newline in the message is dropped.
// Debugf is for what only someone debugging asks to see (the agent's -D):
// an implementation may discard it.
type Logger interface {
	Debugf(format string, args ...any)
	Infof(format string, args ...any)
	Warningf(format string, args ...any)
	Errorf(format string, args ...any)
}

// Discard writes nothing.
var Discard Logger = discard{}

type discard struct{}

func (discard) Debugf(string, ...any)   {}
func (discard) Infof(string, ...any)    {}
func (discard) Warningf(string, ...any) {}
func (discard) Errorf(string, ...any)   {}

// Or is l, or Discard when l is nil.
func Or(l Logger) Logger {
	if l == nil {
		return Discard
	}
	return l
}

// AsDebug passes every message to l's Debugf, whatever its level: for a
// part whose problems are routine where it is used (one cgroup's counters
// among thousands coming and going), so that they reach the log only
// when someone debugging asks. AsDebug(nil) is Discard.
func AsDebug(l Logger) Logger {
	if l == nil {
		return Discard
	}
	return asDebug{l}
}

type asDebug struct{ l Logger }

func (d asDebug) Debugf(format string, args ...any)   { d.l.Debugf(format, args...) }
func (d asDebug) Infof(format string, args ...any)    { d.l.Debugf(format, args...) }
func (d asDebug) Warningf(format string, args ...any) { d.l.Debugf(format, args...) }
func (d asDebug) Errorf(format string, args ...any)   { d.l.Debugf(format, args...) }
