package pdu

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// HeaderLen is the size of the header on every PDU: len, type, from.
const HeaderLen = 12

// DefaultMaxLen bounds the PDUs a Reader accepts. pmcd itself allows
// almost 2 GiB; an agent never legitimately receives anything near 64 MiB
// (a 32768-PMID fetch is 128 KiB), so the guard costs nothing and stops a
// corrupt length from exhausting memory.
const DefaultMaxLen = 64 << 20

// Header is the fixed start of every PDU.
type Header struct {
	Len  int   // total length in bytes, header included
	Type Type  // PDU type code
	From int32 // sender: a pid in CREDS, pmcd's client slot in requests, 0 in agent replies
}

// FrameError reports a PDU header that cannot start a valid PDU.
type FrameError struct {
	Header Header
	Reason string
}

func (e *FrameError) Error() string {
	return fmt.Sprintf("pdu: bad header (len=%d type=%#x from=%d): %s",
		e.Header.Len, int32(e.Header.Type), e.Header.From, e.Reason)
}

// ErrTruncated wraps io.ErrUnexpectedEOF for a stream that ends inside a PDU.
var ErrTruncated = errors.New("pdu: stream ended inside a PDU")

// ParseHeader decodes the 12-byte header at the start of b without judging
// its values.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderLen {
		return Header{}, fmt.Errorf("pdu: header needs %d bytes, have %d", HeaderLen, len(b))
	}
	return Header{
		Len:  int(int32(binary.BigEndian.Uint32(b))),
		Type: Type(int32(binary.BigEndian.Uint32(b[4:]))),
		From: int32(binary.BigEndian.Uint32(b[8:])),
	}, nil
}

// checkHeader applies __pmGetPDU's rules plus our size guard.
func checkHeader(h Header, max int) error {
	switch {
	case h.Len < HeaderLen:
		return &FrameError{h, fmt.Sprintf("length below the %d-byte minimum", HeaderLen)}
	case h.Type < 0:
		return &FrameError{h, "negative type"}
	case h.Len > max:
		return &FrameError{h, fmt.Sprintf("length exceeds the %d-byte limit", max)}
	}
	return nil
}

// Reader reads whole PDUs from a stream into one reusable buffer.
//
// It reads as much as the stream has ready, up to the buffer's capacity,
// rather than a header and then a body: a request is then one read(2),
// not two, and PDUs that arrive together (a PROFILE and the FETCH behind
// it) cost one read between them. Bytes past the PDU returned stay in the
// buffer for the next call, so a Reader must be the stream's only reader.
type Reader struct {
	r      io.Reader
	buf    []byte // buf[:len(buf)] has been read; buf[:next] was returned
	next   int
	MaxLen int // PDUs longer than this are rejected; 0 means DefaultMaxLen
}

// growStep is the least a Reader's buffer grows by.
const growStep = 64 << 10

// NewReader returns a Reader on r.
func NewReader(r io.Reader) *Reader { return &Reader{r: r, buf: make([]byte, 0, 4096)} }

// Next reads one PDU. The returned slice holds the whole PDU, header
// included, and is valid until the following call.
//
// At a clean end of stream (no byte of a new PDU read) it returns io.EOF.
// A stream ending inside a PDU gives an error wrapping ErrTruncated and
// io.ErrUnexpectedEOF. A bad header gives a *FrameError; the stream cannot
// be resynchronised after that, so the caller should close it.
func (r *Reader) Next() (Header, []byte, error) {
	max := r.MaxLen
	if max <= 0 {
		max = DefaultMaxLen
	}
	// Move what follows the previous PDU to the front; usually nothing.
	if r.next > 0 {
		r.buf = r.buf[:copy(r.buf, r.buf[r.next:])]
		r.next = 0
	}
	if err := r.fill(HeaderLen); err != nil {
		if err == io.EOF {
			if len(r.buf) == 0 {
				return Header{}, nil, io.EOF
			}
			return Header{}, nil, fmt.Errorf("%w: header cut after %d of %d bytes: %w", ErrTruncated, len(r.buf), HeaderLen, io.ErrUnexpectedEOF)
		}
		return Header{}, nil, err
	}
	h, _ := ParseHeader(r.buf)
	if err := checkHeader(h, max); err != nil {
		return h, nil, err
	}
	// Grow the buffer only as the body arrives, so that a header claiming
	// megabytes costs memory only if the bytes really follow.
	for len(r.buf) < h.Len {
		if have := len(r.buf); have == cap(r.buf) {
			nb := make([]byte, have, min(h.Len, 2*have+growStep))
			copy(nb, r.buf)
			r.buf = nb
		}
		if err := r.fill(min(h.Len, cap(r.buf))); err != nil {
			if err == io.EOF {
				return h, nil, fmt.Errorf("%w: %s body cut after %d of %d bytes: %w", ErrTruncated, h.Type, len(r.buf)-HeaderLen, h.Len-HeaderLen, io.ErrUnexpectedEOF)
			}
			return h, nil, err
		}
	}
	r.next = h.Len
	return h, r.buf[:h.Len], nil
}

// maxEmptyReads is how many reads in a row may return nothing, and no
// error, before the stream is taken to be broken (as bufio does).
const maxEmptyReads = 100

// fill reads until the buffer holds at least want bytes (want is at most
// its capacity), taking whatever more the stream has ready. Its error is
// io.EOF if the stream ended first.
func (r *Reader) fill(want int) error {
	for empty := 0; len(r.buf) < want; {
		n, err := r.r.Read(r.buf[len(r.buf):cap(r.buf)])
		r.buf = r.buf[:len(r.buf)+n]
		switch {
		case len(r.buf) >= want:
			return nil
		case err != nil:
			return err
		case n == 0:
			if empty++; empty == maxEmptyReads {
				return io.ErrNoProgress
			}
		}
	}
	return nil
}
