// Package testlog holds what a test logs into while its code under test
// logs from its own goroutines (watchers, a served connection) and the
// test reads what was logged so far: a buffer for a whole log, and a
// recorder of messages and their levels.
package testlog

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Buffer is an io.Writer that any goroutine may write and String may read
// at any time; the zero value is an empty buffer.
type Buffer struct {
	mu sync.Mutex
	b  strings.Builder
}

// Write appends p; it never fails.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Recorder is a logging.Logger that keeps each message with its level, as
// "Level: message" (Debug, Info, Warning, Error, as pmda.Logger names
// them), for a test to assert; the zero value is empty, and any goroutine
// may log while the test reads.
type Recorder struct {
	mu    sync.Mutex
	lines []string
	texts []string
}

func (r *Recorder) Debugf(format string, args ...any)   { r.add("Debug", format, args...) }
func (r *Recorder) Infof(format string, args ...any)    { r.add("Info", format, args...) }
func (r *Recorder) Warningf(format string, args ...any) { r.add("Warning", format, args...) }
func (r *Recorder) Errorf(format string, args ...any)   { r.add("Error", format, args...) }

func (r *Recorder) add(level, format string, args ...any) {
	msg := strings.TrimRight(fmt.Sprintf(format, args...), "\n")
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, level+": "+msg)
	r.texts = append(r.texts, msg)
}

// Lines returns the messages so far, each as "Level: message".
func (r *Recorder) Lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.lines)
}

// Texts returns the messages so far without their levels.
func (r *Recorder) Texts() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.texts)
}

// String returns the lines so far, one per line.
func (r *Recorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.lines, "\n")
}
