package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Version is the wire-format version carried in the high nibble of byte 0.
const Version = 2

// DefaultPort is the UDP port every endpoint listens on. It is the port
// Wireshark associates with Ultra Ethernet PDS; RoCEv2's 4791 is avoided so
// captures are not mistaken for InfiniBand BTH.
const DefaultPort = 4793

// Type identifies a packet type (low nibble of byte 0).
type Type uint8

// Packet types.
const (
	TypeData  Type = 1 // data, or a trimmed data header
	TypeAck   Type = 2 // cumulative + selective acknowledgement
	TypeNack  Type = 3 // retransmission request
	TypeCNP   Type = 4 // congestion notification packet
	TypeProbe Type = 5 // loss-detection probe
	TypePause Type = 6 // link-level priority flow control
	// TypeConnect opens a flow end's handshake: its source tag is the
	// sender's own tag, its destination tag the peer's if known, else 0.
	TypeConnect Type = 7
	// TypeAccept answers a CONNECT statelessly: its destination tag is the
	// CONNECT's source tag, its source tag the answering end's own.
	TypeAccept Type = 8
)

var typeNames = [...]string{"invalid", "DATA", "ACK", "NACK", "CNP", "PROBE", "PAUSE", "CONNECT", "ACCEPT"}

func (t Type) String() string {
	if int(t) < len(typeNames) {
		return typeNames[t]
	}
	return fmt.Sprintf("Type(%d)", uint8(t))
}

// Fixed header lengths in bytes.
const (
	CommonLen  = 8
	DataLen    = 40 // data header; a trimmed packet is exactly this long
	AckLen     = 40
	NackLen    = 40
	CNPLen     = 24
	ProbeLen   = 28
	PauseLen   = 12
	ConnectLen = 20 // CONNECT and ACCEPT alike
)

// MaxPayload is the largest payload a data header can describe.
const MaxPayload = 0xFFFF

// Sentinel errors returned (wrapped) by the parsers.
var (
	ErrTooShort    = errors.New("wire: packet too short")
	ErrBadVersion  = errors.New("wire: unsupported version")
	ErrUnknownType = errors.New("wire: unknown packet type")
	ErrBadLength   = errors.New("wire: length does not match header")
	ErrBadField    = errors.New("wire: invalid field value")
	ErrNotData     = errors.New("wire: not an untrimmed data packet")
)

// Offsets of the fields every packet shares, gVisor's header style: the
// views below read and write through these names, never through numbers.
// The flow id, the two tags and the PSN sit at the same offsets in every
// packet that carries them (every type but PAUSE has a flow id and tags;
// PAUSE uses bytes 8-9 for its time; CONNECT and ACCEPT end with the tags).
const (
	offVerType = 0 // version (high nibble) | type (low nibble)
	offFlags   = 1
	offSrc     = 4
	offDst     = 6
	offFlow    = 8
	offDstTag  = 12
	offSrcTag  = 16
	offPSN     = 20

	typeMask = 0x0F
	flowEnd  = offFlow + 4
	tagsEnd  = offSrcTag + 4
)

// Tags are a flow's identity on the wire, SCTP's verification tags: each
// end of a flow picks a random non-zero 32-bit tag when it creates the
// flow. Dst is the tag the receiving end chose, Src the sending end's own.
// A receiver checks Dst before anything else, so an off-path sender that
// cannot guess it cannot inject, and packets of an earlier incarnation of
// the flow (which had other tags) are refused.
type Tags struct {
	Dst, Src uint32
}

// Header is a view of the 8-byte prefix every packet starts with:
//
//	byte 0: version (high nibble) | type (low nibble)
//	byte 1: flags (meaning depends on the type)
//	bytes 2-3: type-specific
//	bytes 4-5: source host, bytes 6-7: destination host
//
// Switches route on Dst without knowing the rest of the packet.
type Header []byte

// Version returns the version nibble.
func (h Header) Version() uint8 { return h[offVerType] >> 4 }

// Type returns the packet type.
func (h Header) Type() Type { return Type(h[offVerType] & typeMask) }

// Flags returns the type-specific flag byte.
func (h Header) Flags() uint8 { return h[offFlags] }

// Src returns the source host id.
func (h Header) Src() uint16 { return binary.BigEndian.Uint16(h[offSrc:]) }

// Dst returns the destination host id.
func (h Header) Dst() uint16 { return binary.BigEndian.Uint16(h[offDst:]) }

// Flow returns the flow id that every packet type but PAUSE carries at
// bytes 8-11; ok is false for a PAUSE or a packet too short to hold one.
// It reads only the prefix and the flow id, as a switch hashing for ECMP
// or a NIC finding the flow of a validated packet does.
func (h Header) Flow() (flow uint32, ok bool) {
	if len(h) < flowEnd || h.Type() == TypePause {
		return 0, false
	}
	return binary.BigEndian.Uint32(h[offFlow:]), true
}

// Tags returns the flow tags every packet type but PAUSE carries at bytes
// 12-19; ok is false for a PAUSE or a packet too short to hold them.
func (h Header) Tags() (tags Tags, ok bool) {
	if len(h) < tagsEnd || h.Type() == TypePause {
		return Tags{}, false
	}
	return Tags{Dst: binary.BigEndian.Uint32(h[offDstTag:]), Src: binary.BigEndian.Uint32(h[offSrcTag:])}, true
}

// SetTags overwrites the tags of a packet that carries them, in place; it
// reports false for a PAUSE or a packet too short to hold them.
func (h Header) SetTags(tags Tags) bool {
	if len(h) < tagsEnd || h.Type() == TypePause {
		return false
	}
	putTags(h, tags)
	return true
}

func putTags(b []byte, t Tags) {
	binary.BigEndian.PutUint32(b[offDstTag:], t.Dst)
	binary.BigEndian.PutUint32(b[offSrcTag:], t.Src)
}

// Entropy returns the path selector a DATA or PROBE packet carries at
// bytes 2-3 (a probe takes the path of the subflow it probes); ok is false
// for the other types.
func (h Header) Entropy() (entropy uint16, ok bool) {
	if t := h.Type(); len(h) < CommonLen || (t != TypeData && t != TypeProbe) {
		return 0, false
	}
	return binary.BigEndian.Uint16(h[dataEntropy:]), true
}

func putCommon(b []byte, t Type, flags uint8, src, dst uint16) {
	b[offVerType] = Version<<4 | uint8(t)
	b[offFlags] = flags
	binary.BigEndian.PutUint16(b[offSrc:], src)
	binary.BigEndian.PutUint16(b[offDst:], dst)
}

// Peek validates the common prefix and returns the packet type. It checks
// only what a switch needs to route and classify; Validate checks the rest.
func Peek(b []byte) (Type, error) {
	if len(b) < CommonLen {
		return 0, fmt.Errorf("%w: %d bytes, need %d", ErrTooShort, len(b), CommonLen)
	}
	if v := b[offVerType] >> 4; v != Version {
		return 0, fmt.Errorf("%w: %d", ErrBadVersion, v)
	}
	t := Type(b[offVerType] & typeMask)
	if t < TypeData || t > TypeAccept {
		return 0, fmt.Errorf("%w: %d", ErrUnknownType, uint8(t))
	}
	return t, nil
}

// Validate checks a whole packet of any type and returns its type. A packet
// that passes can be read through the matching view without bounds errors.
func Validate(b []byte) (Type, error) {
	if t := quickValid(b); t != 0 {
		return t, nil
	}
	return validate(b)
}

// quickValid returns the type of b when it is an unsealed DATA or ACK
// packet that passes every check Validate makes, and 0 for any other
// packet, which Validate then checks the long way (and explains what is
// wrong with it). It reads the first word of the header once and each
// other field it checks once, since nearly every packet a switch or a NIC
// receives is one of these two; TestQuickValidAgrees holds it to
// validate's verdict.
func quickValid(b []byte) Type {
	if len(b) < DataLen { // DataLen == AckLen: the smallest of both
		return 0
	}
	w := binary.BigEndian.Uint32(b) // ver|type, flags, entropy or reserved
	flags := uint8(w >> 16)
	switch uint8(w >> 24) {
	case Version<<4 | uint8(TypeData):
		if flags&^dataFlags != 0 || b[dataReserved] != 0 {
			return 0
		}
		n := binary.BigEndian.Uint16(b[dataPayloadLen:])
		want := DataLen
		if flags&DataTrimmed == 0 {
			want += int(n)
		}
		off, msgLen := binary.BigEndian.Uint32(b[dataOffset:]), binary.BigEndian.Uint32(b[dataMsgLen:])
		if len(b) != want || uint64(off)+uint64(n) > uint64(msgLen) {
			return 0
		}
		return TypeData
	case Version<<4 | uint8(TypeAck):
		if len(b) != AckLen || flags&^ackFlags != 0 || uint16(w) != 0 {
			return 0
		}
		return TypeAck
	}
	return 0
}

// Summary is what a switch reads of a packet's header to guard, route and
// queue it, decoded in one pass by Inspect.
type Summary struct {
	Type    Type
	Flags   uint8
	Entropy uint16 // DATA and PROBE (Header.Entropy); 0 for the other types
	Src     uint16
	Dst     uint16
	Flow    uint32 // every type but PAUSE (Header.Flow); 0 for a PAUSE
}

// Trimmed reports whether the packet is a trimmed DATA header.
func (s Summary) Trimmed() bool { return s.Type == TypeData && s.Flags&DataTrimmed != 0 }

// Inspect validates b as Validate does and returns, with its type, the
// header fields the Header accessors read: one call where a switch would
// otherwise validate and then read the prefix field by field. On an error
// the Summary holds only the type Validate returned.
func Inspect(b []byte) (Summary, error) {
	if s, ok := quickInspect(b); ok {
		return s, nil
	}
	t, err := validate(b)
	if err != nil {
		return Summary{Type: t}, err
	}
	// Every valid packet is at least PauseLen bytes, which covers the
	// prefix and the flow id.
	h := binary.BigEndian.Uint64(b)
	s := Summary{Type: t, Flags: uint8(h >> 48), Src: uint16(h >> 16), Dst: uint16(h)}
	if t == TypeData || t == TypeProbe {
		s.Entropy = uint16(h >> 32)
	}
	if t != TypePause {
		s.Flow = binary.BigEndian.Uint32(b[offFlow:])
	}
	return s, nil
}

// quickInspect is Inspect of an unsealed DATA or ACK packet that passes
// every check quickValid makes (ok false for any other packet, which
// Inspect then validates the long way). A switch's first touch of a packet
// is a cache miss, so it reads each header word it needs once, from the
// front: the prefix as one 64-bit word, the flow id, and for DATA the
// offset and the last eight bytes (message length, payload length,
// subflows, reserved) as one word each. TestQuickValidAgrees holds its
// verdict and its fields to Validate's and the Header accessors'.
func quickInspect(b []byte) (Summary, bool) {
	if len(b) < DataLen { // DataLen == AckLen: the smallest of both
		return Summary{}, false
	}
	h := binary.BigEndian.Uint64(b) // ver|type, flags, entropy or reserved, src, dst
	flags := uint8(h >> 48)
	s := Summary{Flags: flags, Src: uint16(h >> 16), Dst: uint16(h), Flow: binary.BigEndian.Uint32(b[offFlow:])}
	switch uint8(h >> 56) {
	case Version<<4 | uint8(TypeData):
		// tail: message length (32 bits), payload length (16), subflows, reserved
		tail := binary.BigEndian.Uint64(b[dataMsgLen:])
		n := uint16(tail >> 16)
		if flags&^dataFlags != 0 || uint8(tail) != 0 {
			return Summary{}, false
		}
		want := DataLen
		if flags&DataTrimmed == 0 {
			want += int(n)
		}
		off := binary.BigEndian.Uint32(b[dataOffset:])
		if len(b) != want || uint64(off)+uint64(n) > tail>>32 {
			return Summary{}, false
		}
		s.Type, s.Entropy = TypeData, uint16(h>>32)
		return s, true
	case Version<<4 | uint8(TypeAck):
		if len(b) != AckLen || flags&^ackFlags != 0 || uint16(h>>32) != 0 {
			return Summary{}, false
		}
		s.Type = TypeAck
		return s, true
	}
	return Summary{}, false
}

// validate is Validate without the fast path.
func validate(b []byte) (Type, error) {
	t, err := Peek(b)
	if err != nil {
		return 0, err
	}
	if Sealed(b) {
		return t, validateSealed(b, t)
	}
	switch t {
	case TypeData:
		_, err = ParseData(b)
	case TypeAck:
		_, err = ParseAck(b)
	case TypeNack:
		_, err = ParseNack(b)
	case TypeCNP:
		_, err = ParseCNP(b)
	case TypeProbe:
		_, err = ParseProbe(b)
	case TypePause:
		_, err = ParsePause(b)
	case TypeConnect, TypeAccept:
		_, err = ParseConnect(b)
	}
	return t, err
}

// checkReserved reports a reserved field of packet type t that is not zero.
// Parsers refuse such packets so every packet they accept has exactly one
// encoding: re-encoding its fields reproduces it byte for byte.
func checkReserved(t Type, b []byte, off int) error {
	for i, v := range b {
		if v != 0 {
			return fmt.Errorf("%w: %v reserved byte %d is %#x", ErrBadField, t, off+i, v)
		}
	}
	return nil
}

// checkFixed validates the prefix of a fixed-length packet of type t.
func checkFixed(b []byte, t Type, n int) error {
	got, err := Peek(b)
	if err != nil {
		return err
	}
	if got != t {
		return fmt.Errorf("%w: got %v, want %v", ErrUnknownType, got, t)
	}
	if len(b) < n {
		return fmt.Errorf("%w: %v is %d bytes, need %d", ErrTooShort, t, len(b), n)
	}
	if len(b) > n {
		return fmt.Errorf("%w: %v is %d bytes, want %d", ErrBadLength, t, len(b), n)
	}
	return nil
}
