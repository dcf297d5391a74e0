package wire

import (
	"encoding/binary"
	"fmt"
)

// Offsets of a NACK's own fields (the diagram below).
const (
	nackReason   = 2
	nackPriority = 3
	nackCount    = 24
	nackReserved = 26 // 26-27
	nackMsg      = 28
	nackOffset   = 32
	nackLength   = 36
)

// NackReason says why a retransmission is requested. Values follow the
// Ultra Ethernet PDS NACK codes where one exists.
type NackReason uint8

// NACK reason codes.
const (
	NackTrimmed        NackReason = 0x01 // a switch trimmed the packet
	NackTrimmedLastHop NackReason = 0x02 // trimmed at the receiver's last hop
	NackOutOfWindow    NackReason = 0x0B // PSN outside the receive window
	NackGap            NackReason = 0x12 // PKT_NOT_RCVD: inferred from a gap
	NackProbe          NackReason = 0x1A // RCVR_INFER_LOSS: inferred from a probe
)

func (r NackReason) String() string {
	switch r {
	case NackTrimmed:
		return "trimmed"
	case NackTrimmedLastHop:
		return "trimmed-last-hop"
	case NackOutOfWindow:
		return "out-of-window"
	case NackGap:
		return "gap"
	case NackProbe:
		return "probe"
	}
	return fmt.Sprintf("NackReason(%#x)", uint8(r))
}

func (r NackReason) valid() bool { return r.String()[0] != 'N' }

// Priority of a retransmission request.
const (
	PriorityNormal uint8 = 0
	PriorityHigh   uint8 = 1
)

// Nack is a view of a retransmission request:
//
//	 0: ver|type   1: flags      2: reason    3: priority
//	 4-5: src host               6-7: dst host
//	 8-11: flow id
//	12-15: first PSN requested
//	16-17: PSN count (0: the byte range alone names the request)
//	18-19: reserved, zero
//	20-23: message id
//	24-27: byte offset within the message
//	28-31: byte length
//
// The flags byte carries the same FORGIVE flags as an ACK.
type Nack []byte

// NackFields holds the values used to build a NACK.
type NackFields struct {
	Flags    uint8
	Reason   NackReason
	Priority uint8
	Src, Dst uint16
	Flow     uint32
	Tags     Tags
	PSN      PSN
	Count    uint16
	Msg      uint32
	Offset   uint32
	Length   uint32
}

// ParseNack validates b as a NACK.
func ParseNack(b []byte) (Nack, error) {
	if err := checkFixed(b, TypeNack, NackLen); err != nil {
		return nil, err
	}
	n := Nack(b)
	switch {
	case b[offFlags]&^nackFlags != 0:
		return nil, fmt.Errorf("%w: NACK flags %#x", ErrBadField, b[offFlags])
	case !n.Reason().valid():
		return nil, fmt.Errorf("%w: NACK reason %#x", ErrBadField, b[nackReason])
	case n.Priority() > PriorityHigh:
		return nil, fmt.Errorf("%w: NACK priority %d", ErrBadField, n.Priority())
	}
	if err := checkReserved(TypeNack, b[nackReserved:nackReserved+2], nackReserved); err != nil {
		return nil, err
	}
	return n, nil
}

// AppendNack appends a NACK to dst.
func AppendNack(dst []byte, f NackFields) []byte {
	dst, b := grow(dst, NackLen)
	putCommon(b, TypeNack, f.Flags&nackFlags, f.Src, f.Dst)
	b[nackReason] = uint8(f.Reason)
	b[nackPriority] = f.Priority
	binary.BigEndian.PutUint32(b[offFlow:], f.Flow)
	putTags(b, f.Tags)
	binary.BigEndian.PutUint32(b[offPSN:], uint32(f.PSN))
	binary.BigEndian.PutUint16(b[nackCount:], f.Count)
	b[nackReserved], b[nackReserved+1] = 0, 0
	binary.BigEndian.PutUint32(b[nackMsg:], f.Msg)
	binary.BigEndian.PutUint32(b[nackOffset:], f.Offset)
	binary.BigEndian.PutUint32(b[nackLength:], f.Length)
	return dst
}

// Fields returns the values of n.
func (n Nack) Fields() NackFields {
	return NackFields{Flags: n.Flags(), Reason: n.Reason(), Priority: n.Priority(),
		Src: n.Src(), Dst: n.Dst(), Flow: n.Flow(), Tags: n.Tags(), PSN: n.PSN(), Count: n.Count(),
		Msg: n.Msg(), Offset: n.Offset(), Length: n.Length()}
}

// Flags returns the flag byte.
func (n Nack) Flags() uint8 { return n[offFlags] }

// Reason returns the reason code.
func (n Nack) Reason() NackReason { return NackReason(n[nackReason]) }

// Priority returns the request's priority.
func (n Nack) Priority() uint8 { return n[nackPriority] }

// Src returns the source host id (the receiver).
func (n Nack) Src() uint16 { return binary.BigEndian.Uint16(n[offSrc:]) }

// Dst returns the destination host id (the data sender).
func (n Nack) Dst() uint16 { return binary.BigEndian.Uint16(n[offDst:]) }

// Flow returns the flow id.
func (n Nack) Flow() uint32 { return binary.BigEndian.Uint32(n[offFlow:]) }

// Tags returns the destination and source tags.
func (n Nack) Tags() Tags { t, _ := Header(n).Tags(); return t }

// PSN returns the first PSN requested.
func (n Nack) PSN() PSN { return PSN(binary.BigEndian.Uint32(n[offPSN:])) }

// Count returns the number of PSNs requested.
func (n Nack) Count() uint16 { return binary.BigEndian.Uint16(n[nackCount:]) }

// Msg returns the message id of the byte range.
func (n Nack) Msg() uint32 { return binary.BigEndian.Uint32(n[nackMsg:]) }

// Offset returns the byte offset of the range.
func (n Nack) Offset() uint32 { return binary.BigEndian.Uint32(n[nackOffset:]) }

// Length returns the byte length of the range.
func (n Nack) Length() uint32 { return binary.BigEndian.Uint32(n[nackLength:]) }

// Eligible reports the FORGIVE exemption-eligible flag.
func (n Nack) Eligible() bool { return n[offFlags]&FlagEligible != 0 }

// Exhausted reports the FORGIVE budget-exhausted flag.
func (n Nack) Exhausted() bool { return n[offFlags]&FlagExhausted != 0 }
