package udpio

import (
	"errors"
	"fmt"
)

// Sentinel errors. Errors from the kernel are returned wrapped with the
// operation that failed; a closed Conn reports net.ErrClosed and an expired
// deadline os.ErrDeadlineExceeded, both testable with errors.Is.
var (
	// ErrInvalidMsg reports a message WriteBatch cannot send: N outside Buf,
	// or a destination that is not an IPv4 address with a non-zero port.
	ErrInvalidMsg = errors.New("udpio: invalid message")
	// ErrNotIPv4 reports a Listen address that is not IPv4.
	ErrNotIPv4 = errors.New("udpio: not an IPv4 address")
	// ErrSocketOption reports a socket option the kernel refused.
	ErrSocketOption = errors.New("udpio: socket option refused")
)

func errorf(sentinel error, format string, args ...any) error {
	return fmt.Errorf("%w: %s", sentinel, fmt.Sprintf(format, args...))
}
