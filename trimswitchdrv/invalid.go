package trimswitchdrv

import (
	"errors"

	"github.com/forgive-emu/forgive/udpio"
	"github.com/forgive-emu/forgive/wire"
)

// InvalidReason says why a datagram was not a packet the switch forwards.
type InvalidReason uint8

// Reasons a datagram is refused before it reaches the engine.
const (
	InvalidTruncated   InvalidReason = iota // longer than max_datagram
	InvalidTooShort                         // shorter than its header
	InvalidBadVersion                       // not this wire version (wire.Version)
	InvalidUnknownType                      // no such packet type
	InvalidBadLength                        // length disagrees with the header
	InvalidBadField                         // a reserved field or flag is set, or a field is out of range
	// InvalidForeignSource: the datagram did not come from the port's
	// configured neighbour address. Checked before anything else is read.
	InvalidForeignSource
	NumInvalidReasons
)

var invalidNames = [...]string{"truncated", "too_short", "bad_version", "unknown_type", "bad_length", "bad_field", "foreign_source"}

func (r InvalidReason) String() string {
	if int(r) < len(invalidNames) {
		return invalidNames[r]
	}
	return "unknown"
}

// classify reports whether m is a valid wire packet and, if not, why. It
// inspects the packet once (wire.Inspect) and fills hdr for the engine's
// ReceiveInspected, which then does not check it again.
func classify(m *udpio.Msg, hdr *wire.Summary) (InvalidReason, bool) {
	if m.Truncated {
		return InvalidTruncated, false
	}
	var err error
	*hdr, err = wire.Inspect(m.Buf[:m.N])
	switch {
	case err == nil:
		return 0, true
	case errors.Is(err, wire.ErrTooShort):
		return InvalidTooShort, false
	case errors.Is(err, wire.ErrBadVersion):
		return InvalidBadVersion, false
	case errors.Is(err, wire.ErrUnknownType):
		return InvalidUnknownType, false
	case errors.Is(err, wire.ErrBadLength):
		return InvalidBadLength, false
	default:
		return InvalidBadField, false
	}
}
