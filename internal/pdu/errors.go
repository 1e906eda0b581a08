package pdu

import "strconv"

// Err is a PCP error code as it travels on the wire: a negative int32,
// either one of the PM_ERR_* values below or a negated host errno.
type Err int32

// The PCP error codes an agent sends or receives. The values are those of
// PCP's pmapi.h; each is -(12345 + n).
const (
	ErrGeneric      Err = -12345 // PM_ERR_GENERIC
	ErrPMNS         Err = -12346 // PM_ERR_PMNS
	ErrNoPMNS       Err = -12347 // PM_ERR_NOPMNS
	ErrText         Err = -12349 // PM_ERR_TEXT
	ErrAppVersion   Err = -12350 // PM_ERR_APPVERSION
	ErrValue        Err = -12351 // PM_ERR_VALUE
	ErrTimeout      Err = -12353 // PM_ERR_TIMEOUT
	ErrName         Err = -12357 // PM_ERR_NAME
	ErrPMID         Err = -12358 // PM_ERR_PMID
	ErrInDom        Err = -12359 // PM_ERR_INDOM
	ErrInst         Err = -12360 // PM_ERR_INST
	ErrUnit         Err = -12361 // PM_ERR_UNIT
	ErrConv         Err = -12362 // PM_ERR_CONV
	ErrTrunc        Err = -12363 // PM_ERR_TRUNC
	ErrSign         Err = -12364 // PM_ERR_SIGN
	ErrProfile      Err = -12365 // PM_ERR_PROFILE
	ErrIPC          Err = -12366 // PM_ERR_IPC
	ErrEOF          Err = -12368 // PM_ERR_EOF
	ErrNoContext    Err = -12376 // PM_ERR_NOCONTEXT
	ErrNoProfile    Err = -12381 // PM_ERR_NOPROFILE
	ErrNoAgent      Err = -12386 // PM_ERR_NOAGENT
	ErrPermission   Err = -12387 // PM_ERR_PERMISSION
	ErrAgain        Err = -12389 // PM_ERR_AGAIN
	ErrNotConn      Err = -12391 // PM_ERR_NOTCONN: pmcd's end-of-context notice
	ErrNonLeaf      Err = -12394 // PM_ERR_NONLEAF
	ErrType         Err = -12397 // PM_ERR_TYPE
	ErrNoContainer  Err = -12399 // PM_ERR_NOCONTAINER
	ErrBadStore     Err = -12400 // PM_ERR_BADSTORE
	ErrNoLabels     Err = -12410 // PM_ERR_NOLABELS
	ErrPMDAFenced   Err = -12411 // PM_ERR_PMDAFENCED
	ErrTooBig       Err = -12444 // PM_ERR_TOOBIG
	ErrPMDAReady    Err = -13393 // PM_ERR_PMDAREADY
	ErrPMDANotReady Err = -13394 // PM_ERR_PMDANOTREADY
	ErrNYI          Err = -21344 // PM_ERR_NYI
)

// errText holds PCP's own messages (as printed by pmerr -l for PCP 6.0.3),
// so that logs read the same as the C agent's. It is an array, not a map,
// so that it is data in the binary rather than a map every start builds.
var errText = [...]errEntry{
	{ErrGeneric, "PM_ERR_GENERIC", "Generic error, already reported above"},
	{ErrPMNS, "PM_ERR_PMNS", "Problems parsing PMNS definitions"},
	{ErrNoPMNS, "PM_ERR_NOPMNS", "PMNS not accessible"},
	{ErrText, "PM_ERR_TEXT", "One-line or help text is not available"},
	{ErrAppVersion, "PM_ERR_APPVERSION", "Metric not supported by this version of monitored application"},
	{ErrValue, "PM_ERR_VALUE", "Missing metric value(s)"},
	{ErrTimeout, "PM_ERR_TIMEOUT", "Timeout waiting for a response from PMCD"},
	{ErrName, "PM_ERR_NAME", "Unknown metric name"},
	{ErrPMID, "PM_ERR_PMID", "Unknown or illegal metric identifier"},
	{ErrInDom, "PM_ERR_INDOM", "Unknown or illegal instance domain identifier"},
	{ErrInst, "PM_ERR_INST", "Unknown or illegal instance identifier"},
	{ErrUnit, "PM_ERR_UNIT", "Illegal pmUnits specification"},
	{ErrConv, "PM_ERR_CONV", "Impossible value or scale conversion"},
	{ErrTrunc, "PM_ERR_TRUNC", "Truncation in value conversion"},
	{ErrSign, "PM_ERR_SIGN", "Negative value in conversion to unsigned"},
	{ErrProfile, "PM_ERR_PROFILE", "Explicit instance identifier(s) required"},
	{ErrIPC, "PM_ERR_IPC", "IPC protocol failure"},
	{ErrEOF, "PM_ERR_EOF", "IPC channel closed"},
	{ErrNoContext, "PM_ERR_NOCONTEXT", "Attempt to use an illegal context"},
	{ErrNoProfile, "PM_ERR_NOPROFILE", "Missing profile - protocol botch"},
	{ErrNoAgent, "PM_ERR_NOAGENT", "No PMCD agent for domain of request"},
	{ErrPermission, "PM_ERR_PERMISSION", "No permission to perform requested operation"},
	{ErrAgain, "PM_ERR_AGAIN", "Try again. Information not currently available"},
	{ErrNotConn, "PM_ERR_NOTCONN", "Not Connected"},
	{ErrNonLeaf, "PM_ERR_NONLEAF", "Metric name is not a leaf in PMNS"},
	{ErrType, "PM_ERR_TYPE", "Unknown or illegal metric type"},
	{ErrNoContainer, "PM_ERR_NOCONTAINER", "Container not found"},
	{ErrBadStore, "PM_ERR_BADSTORE", "Bad input to pmstore"},
	{ErrNoLabels, "PM_ERR_NOLABELS", "No support for metric label metadata"},
	{ErrPMDAFenced, "PM_ERR_PMDAFENCED", "PMDA is currently fenced and unable to respond to requests"},
	{ErrTooBig, "PM_ERR_TOOBIG", "Result size exceeded"},
	{ErrPMDAReady, "PM_ERR_PMDAREADY", "PMDA is now responsive to requests"},
	{ErrPMDANotReady, "PM_ERR_PMDANOTREADY", "PMDA is not yet ready to respond to requests"},
	{ErrNYI, "PM_ERR_NYI", "Functionality not yet implemented"},
}

// Error returns PCP's message for the code. Codes outside the PM_ERR range
// are negated errnos, which only the sending host can name reliably.
func (e Err) Error() string {
	if t, ok := e.text(); ok {
		return t.msg
	}
	if e < 0 && e > -12345 {
		return "errno " + strconv.Itoa(int(-e))
	}
	return "PCP error " + strconv.Itoa(int(e))
}

type errEntry struct {
	code     Err
	sym, msg string
}

// text is the code's entry in errText.
func (e Err) text() (errEntry, bool) {
	for _, t := range errText {
		if t.code == e {
			return t, true
		}
	}
	return errEntry{}, false
}

// Symbol returns the C name of the code, such as "PM_ERR_PMID", or the
// decimal value when the code has no name here.
func (e Err) Symbol() string {
	if t, ok := e.text(); ok {
		return t.sym
	}
	return strconv.Itoa(int(e))
}
