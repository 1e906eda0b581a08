// Package testlog holds the log buffer of a test whose code under test
// logs from its own goroutines (watchers, a served connection) while the
// test reads what was logged so far.
package testlog

import (
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
