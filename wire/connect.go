package wire

import (
	"encoding/binary"
	"fmt"
)

// connectReserved is bytes 2-3 of a CONNECT or ACCEPT; the flag byte is
// zero too.
const connectReserved = 2

// Connect is a view of a CONNECT or an ACCEPT, the flow handshake (RDMA
// CM's REQ/REP, SCTP's INIT/INIT ACK, without their cookies):
//
//	 0: ver|type (7 CONNECT, 8 ACCEPT)   1: flags, zero   2-3: reserved, zero
//	 4-5: src host   6-7: dst host
//	 8-11: flow (queue pair) id
//	12-15: destination tag   16-19: source tag
//
// A flow end sends CONNECT with its own tag as the source tag and the
// peer's as the destination tag (0 while unknown) until it knows the
// peer's tag; the peer answers every CONNECT for a flow it has with an
// ACCEPT whose destination tag is the CONNECT's source tag, keeping no
// state. An end learns the peer's tag only from a packet whose destination
// tag is its own, so a forged CONNECT binds nothing.
type Connect []byte

// ConnectFields holds the values of a CONNECT or ACCEPT.
type ConnectFields struct {
	Accept   bool // ACCEPT rather than CONNECT
	Src, Dst uint16
	Flow     uint32
	Tags     Tags
}

// ParseConnect validates b as a CONNECT or ACCEPT and returns a view of it.
func ParseConnect(b []byte) (Connect, error) {
	t, err := Peek(b)
	if err != nil {
		return nil, err
	}
	if t != TypeConnect && t != TypeAccept {
		return nil, fmt.Errorf("%w: got %v, want CONNECT or ACCEPT", ErrUnknownType, t)
	}
	if err := checkFixed(b, t, ConnectLen); err != nil {
		return nil, err
	}
	if err := checkReserved(t, b[offFlags:connectReserved+2], offFlags); err != nil {
		return nil, err
	}
	c := Connect(b)
	if c.Tags().Src == 0 {
		return nil, fmt.Errorf("%w: %v with source tag 0", ErrBadField, t)
	}
	if t == TypeAccept && c.Tags().Dst == 0 {
		return nil, fmt.Errorf("%w: ACCEPT with destination tag 0", ErrBadField)
	}
	return c, nil
}

// AppendConnect appends a CONNECT (or, with f.Accept, an ACCEPT).
func AppendConnect(dst []byte, f ConnectFields) []byte {
	t := TypeConnect
	if f.Accept {
		t = TypeAccept
	}
	dst, b := grow(dst, ConnectLen)
	putCommon(b, t, 0, f.Src, f.Dst)
	b[connectReserved], b[connectReserved+1] = 0, 0
	binary.BigEndian.PutUint32(b[offFlow:], f.Flow)
	putTags(b, f.Tags)
	return dst
}

// Fields returns the values of c.
func (c Connect) Fields() ConnectFields {
	return ConnectFields{Accept: c.Accept(), Src: c.Src(), Dst: c.Dst(), Flow: c.Flow(), Tags: c.Tags()}
}

// Accept reports an ACCEPT.
func (c Connect) Accept() bool { return Header(c).Type() == TypeAccept }

// Src returns the source host id.
func (c Connect) Src() uint16 { return binary.BigEndian.Uint16(c[offSrc:]) }

// Dst returns the destination host id.
func (c Connect) Dst() uint16 { return binary.BigEndian.Uint16(c[offDst:]) }

// Flow returns the flow id.
func (c Connect) Flow() uint32 { return binary.BigEndian.Uint32(c[offFlow:]) }

// Tags returns the destination and source tags.
func (c Connect) Tags() Tags { t, _ := Header(c).Tags(); return t }
