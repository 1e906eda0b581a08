package main

import (
	"errors"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"perfevent/internal/testwait"
)

// TestHangupWatch: the watch ends when the pipe's last writer closes, not
// before; a descriptor that cannot hang up is refused at once.
func TestHangupWatch(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	h, err := watchHangup(int(r.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- h.wait() }()
	if _, err := w.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		t.Fatalf("the watch ended (%v) while the pipe was open, with data to read", err)
	default:
	}
	w.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("after the hangup: %v", err)
		}
	case <-time.After(testwait.Settle):
		t.Fatalf("no hangup seen %v after the writer closed", testwait.Settle)
	}

	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	if _, err := watchHangup(int(null.Fd())); !errors.Is(err, unix.EPERM) {
		t.Errorf("%s: %v; want EPERM, as it never hangs up", os.DevNull, err)
	}
	if _, err := watchHangup(1 << 20); !errors.Is(err, unix.EBADF) {
		t.Errorf("a descriptor not open: %v; want EBADF", err)
	}
}
