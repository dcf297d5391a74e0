package wire

import (
	"encoding/binary"
	"fmt"
)

// Offsets of an ACK's own fields (the diagram below).
const (
	ackReserved = 2 // 2-3
	ackCumPSN   = 20
	ackSackBase = 24
	ackSack     = 28
	ackEchoPSN  = 36
)

// Flags shared by ACK and NACK (byte 1): the receiver's feedback.
const (
	FlagECNEcho   uint8 = 0x01 // the acknowledged packet arrived CE-marked
	FlagEligible  uint8 = 0x02 // FORGIVE: flow is exemption-eligible
	FlagExhausted uint8 = 0x04 // FORGIVE: the receiver's step budget is exhausted
	AckRetx       uint8 = 0x08 // ACK of a retransmission
	AckProbe      uint8 = 0x10 // ACK answering a probe
	ackFlags            = FlagECNEcho | FlagEligible | FlagExhausted | AckRetx | AckProbe
	nackFlags           = FlagECNEcho | FlagEligible | FlagExhausted
)

// SackBits is the number of PSNs the selective-acknowledgement bitmap covers.
const SackBits = 64

// Ack is a view of an acknowledgement:
//
//	 0: ver|type   1: flags      2-3: reserved, zero
//	 4-5: src host               6-7: dst host
//	 8-11: flow id
//	12-15: cumulative PSN: every PSN before it is settled
//	16-19: SACK base PSN
//	20-27: SACK bitmap, bit i (LSB first) = PSN base+i settled
//	28-31: echoed PSN: the packet that triggered this ACK
//
// Settled means received or forgiven: after a forgiveness the receiver
// acknowledges past the hole.
type Ack []byte

// AckFields holds the values used to build an ACK.
type AckFields struct {
	Flags    uint8
	Src, Dst uint16
	Flow     uint32
	Tags     Tags
	CumPSN   PSN
	SackBase PSN
	Sack     uint64
	EchoPSN  PSN
}

// ParseAck validates b as an ACK.
func ParseAck(b []byte) (Ack, error) {
	if err := checkFixed(b, TypeAck, AckLen); err != nil {
		return nil, err
	}
	if b[offFlags]&^ackFlags != 0 {
		return nil, fmt.Errorf("%w: ACK flags %#x", ErrBadField, b[offFlags])
	}
	if err := checkReserved(TypeAck, b[ackReserved:ackReserved+2], ackReserved); err != nil {
		return nil, err
	}
	return Ack(b), nil
}

// AppendAck appends an ACK to dst.
func AppendAck(dst []byte, f AckFields) []byte {
	dst, b := grow(dst, AckLen)
	putCommon(b, TypeAck, f.Flags&ackFlags, f.Src, f.Dst)
	b[ackReserved], b[ackReserved+1] = 0, 0
	binary.BigEndian.PutUint32(b[offFlow:], f.Flow)
	putTags(b, f.Tags)
	binary.BigEndian.PutUint32(b[ackCumPSN:], uint32(f.CumPSN))
	binary.BigEndian.PutUint32(b[ackSackBase:], uint32(f.SackBase))
	binary.BigEndian.PutUint64(b[ackSack:], f.Sack)
	binary.BigEndian.PutUint32(b[ackEchoPSN:], uint32(f.EchoPSN))
	return dst
}

// Fields returns the values of a.
func (a Ack) Fields() AckFields {
	return AckFields{Flags: a.Flags(), Src: a.Src(), Dst: a.Dst(), Flow: a.Flow(), Tags: a.Tags(),
		CumPSN: a.CumPSN(), SackBase: a.SackBase(), Sack: a.Sack(), EchoPSN: a.EchoPSN()}
}

// Flags returns the flag byte.
func (a Ack) Flags() uint8 { return a[offFlags] }

// Src returns the source host id (the receiver that acknowledges).
func (a Ack) Src() uint16 { return binary.BigEndian.Uint16(a[offSrc:]) }

// Dst returns the destination host id (the data sender).
func (a Ack) Dst() uint16 { return binary.BigEndian.Uint16(a[offDst:]) }

// Flow returns the flow id.
func (a Ack) Flow() uint32 { return binary.BigEndian.Uint32(a[offFlow:]) }

// Tags returns the destination and source tags.
func (a Ack) Tags() Tags { t, _ := Header(a).Tags(); return t }

// CumPSN returns the cumulative PSN.
func (a Ack) CumPSN() PSN { return PSN(binary.BigEndian.Uint32(a[ackCumPSN:])) }

// SackBase returns the PSN of bitmap bit 0.
func (a Ack) SackBase() PSN { return PSN(binary.BigEndian.Uint32(a[ackSackBase:])) }

// Sack returns the selective-acknowledgement bitmap.
func (a Ack) Sack() uint64 { return binary.BigEndian.Uint64(a[ackSack:]) }

// EchoPSN returns the PSN of the packet that triggered the ACK.
func (a Ack) EchoPSN() PSN { return PSN(binary.BigEndian.Uint32(a[ackEchoPSN:])) }

// Eligible reports the FORGIVE exemption-eligible flag.
func (a Ack) Eligible() bool { return a[offFlags]&FlagEligible != 0 }

// Exhausted reports the FORGIVE budget-exhausted flag.
func (a Ack) Exhausted() bool { return a[offFlags]&FlagExhausted != 0 }

// ECNEcho reports whether the acknowledged packet was CE-marked.
func (a Ack) ECNEcho() bool { return a[offFlags]&FlagECNEcho != 0 }

// Acked reports whether the ACK settles p, cumulatively or in the bitmap.
func (f AckFields) Acked(p PSN) bool {
	if p.Before(f.CumPSN) {
		return true
	}
	d := p.Sub(f.SackBase)
	return d >= 0 && d < SackBits && f.Sack&(1<<uint(d)) != 0
}
