package hostapi

import (
	"errors"
	"fmt"
)

// ErrorCode names what went wrong with a request. Codes are stable strings
// on the wire; clients compare them, messages are for people.
type ErrorCode string

// Error codes of protocol version 1.
const (
	CodeBadRequest         ErrorCode = "bad_request"         // malformed body or invalid field
	CodeUnknownOp          ErrorCode = "unknown_op"          // op code not defined
	CodeUnsupportedVersion ErrorCode = "unsupported_version" // no common protocol version
	CodeHelloRequired      ErrorCode = "hello_required"      // an op before hello
	CodePermissionDenied   ErrorCode = "permission_denied"   // peer uid/gid not allowed
	CodeNoSuchRegion       ErrorCode = "no_such_region"      // region not registered by this client
	CodeNoSuchFlow         ErrorCode = "no_such_flow"        // flow not created by this client
	CodeFlowExists         ErrorCode = "flow_exists"         // flow id already open on this host
	CodeFlowReserved       ErrorCode = "flow_reserved"       // flow id reserved for another job, or outside the caller's job's
	CodeNoSuchStep         ErrorCode = "no_such_step"        // step not begun by the caller's job
	CodeOutOfBounds        ErrorCode = "out_of_bounds"       // offset+length outside the region
	CodeLimitExceeded      ErrorCode = "limit_exceeded"      // a per-client or daemon limit
	CodeBadFD              ErrorCode = "bad_fd"              // missing, extra or unusable descriptor
	CodeBackend            ErrorCode = "backend"             // the NIC refused; message says why
	CodeInternal           ErrorCode = "internal"            // the daemon failed; not the client's fault
)

// Error is the body of an error reply, and the error the client returns
// for it. Match codes with errors.Is against the Err* values below:
//
//	if errors.Is(err, hostapi.ErrNoSuchRegion) { ... }
type Error struct {
	Code    ErrorCode `json:"code"`
	Message string    `json:"message"`
}

func (e *Error) Error() string {
	if e.Message == "" {
		return "hostapi: " + string(e.Code)
	}
	return fmt.Sprintf("hostapi: %s: %s", e.Code, e.Message)
}

// Is reports whether target is an *Error with the same code, so that the
// sentinels below match any message.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Sentinels for errors.Is, one per code.
var (
	ErrBadRequest         = &Error{Code: CodeBadRequest}
	ErrUnknownOp          = &Error{Code: CodeUnknownOp}
	ErrUnsupportedVersion = &Error{Code: CodeUnsupportedVersion}
	ErrHelloRequired      = &Error{Code: CodeHelloRequired}
	ErrPermissionDenied   = &Error{Code: CodePermissionDenied}
	ErrNoSuchRegion       = &Error{Code: CodeNoSuchRegion}
	ErrNoSuchFlow         = &Error{Code: CodeNoSuchFlow}
	ErrFlowExists         = &Error{Code: CodeFlowExists}
	ErrFlowReserved       = &Error{Code: CodeFlowReserved}
	ErrNoSuchStep         = &Error{Code: CodeNoSuchStep}
	ErrOutOfBounds        = &Error{Code: CodeOutOfBounds}
	ErrLimitExceeded      = &Error{Code: CodeLimitExceeded}
	ErrBadFD              = &Error{Code: CodeBadFD}
	ErrBackend            = &Error{Code: CodeBackend}
	ErrInternal           = &Error{Code: CodeInternal}
)

// errorf builds an *Error with a formatted message.
func errorf(code ErrorCode, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// asError turns any error into the *Error sent on the wire. A backend may
// return an *Error (wrapped or not) to choose the code; anything else is
// reported as CodeBackend with the error's text.
func asError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		if e.Message == "" && err != e {
			return &Error{Code: e.Code, Message: err.Error()}
		}
		return e
	}
	return &Error{Code: CodeBackend, Message: err.Error()}
}

// Local errors (never sent on the wire).
var (
	// ErrFraming reports a frame that is not this protocol: too short, bad
	// magic or too long. The connection that sent it is closed.
	ErrFraming = errors.New("hostapi: framing error")
	// ErrClosed reports a call on a closed client, or a server push to a
	// client that is gone.
	ErrClosed = errors.New("hostapi: closed")
	// ErrConnLost reports that the daemon connection failed; every pending
	// and later call on the client fails with it.
	ErrConnLost = errors.New("hostapi: connection to daemon lost")
	// ErrUnknownClient reports Complete for a client that is not connected.
	ErrUnknownClient = errors.New("hostapi: unknown client")
	// ErrBadCompletion reports a completion without a valid kind or status.
	ErrBadCompletion = errors.New("hostapi: invalid completion")
	// ErrQueueFull reports a completion dropped because the client's queue
	// was full; the client has been disconnected.
	ErrQueueFull = errors.New("hostapi: completion queue full")
	// ErrDaemonRunning reports that Listen found a live daemon on the path.
	ErrDaemonRunning = errors.New("hostapi: a daemon is already serving this socket")
	// ErrNotSocket reports that Listen's path exists and is not a socket;
	// it is left alone.
	ErrNotSocket = errors.New("hostapi: path exists and is not a socket")
)
