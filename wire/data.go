package wire

import (
	"encoding/binary"
	"fmt"
)

// Offsets of a data header's own fields (the diagram below); the common
// prefix's are in header.go.
const (
	dataEntropy    = 2 // probeEntropy too: Header.Entropy reads either
	dataMsg        = 24
	dataOffset     = 28
	dataMsgLen     = 32
	dataPayloadLen = 36
	dataSubflows   = 38
	dataReserved   = 39
)

// Data packet flags (byte 1).
const (
	DataFirst   uint8 = 0x01 // first packet of a message
	DataLast    uint8 = 0x02 // last packet of a message
	DataRetx    uint8 = 0x04 // retransmission
	DataAckReq  uint8 = 0x08 // receiver should acknowledge at once
	DataTrimmed uint8 = 0x10 // a switch removed the payload
	dataFlags         = DataFirst | DataLast | DataRetx | DataAckReq | DataTrimmed
)

// Data is a view of a data packet or a trimmed data header:
//
//	 0: ver|type   1: flags      2-3: entropy
//	 4-5: src host               6-7: dst host
//	 8-11: flow (queue pair) id
//	12-15: destination tag   16-19: source tag
//	20-23: PSN
//	24-27: message id
//	28-31: byte offset of the payload within the message
//	32-35: message length in bytes
//	36-37: payload length as sent (kept when trimmed)
//	38: subflow count (0 or 1: single path)   39: reserved, zero
//	40-: payload (absent when trimmed)
//
// A switch trims in place with Trim: the slice is cut to DataLen and the
// trimmed flag set, so PSN, offset and original length survive.
type Data []byte

// DataFields holds the header values used to build a data packet.
type DataFields struct {
	Flags    uint8
	Entropy  uint16
	Src, Dst uint16
	Flow     uint32
	Tags     Tags
	PSN      PSN
	Msg      uint32
	Offset   uint32
	MsgLen   uint32
	Subflows uint8
}

// ParseData validates b as a data packet and returns a view of it.
func ParseData(b []byte) (Data, error) {
	t, err := Peek(b)
	if err != nil {
		return nil, err
	}
	if t != TypeData {
		return nil, fmt.Errorf("%w: got %v, want DATA", ErrUnknownType, t)
	}
	if len(b) < DataLen {
		return nil, fmt.Errorf("%w: DATA is %d bytes, need %d", ErrTooShort, len(b), DataLen)
	}
	d := Data(b)
	if d.Flags()&^dataFlags != 0 {
		return nil, fmt.Errorf("%w: DATA flags %#x", ErrBadField, d.Flags())
	}
	if b[dataReserved] != 0 {
		return nil, fmt.Errorf("%w: DATA reserved byte %#x", ErrBadField, b[dataReserved])
	}
	n := int(d.PayloadLen())
	switch {
	case d.Trimmed() && len(b) != DataLen:
		return nil, fmt.Errorf("%w: trimmed DATA carries %d payload bytes", ErrBadLength, len(b)-DataLen)
	case !d.Trimmed() && len(b) != DataLen+n:
		return nil, fmt.Errorf("%w: DATA payload %d bytes, header says %d", ErrBadLength, len(b)-DataLen, n)
	case uint64(d.Offset())+uint64(n) > uint64(d.MsgLen()):
		return nil, fmt.Errorf("%w: DATA range [%d,%d) beyond message length %d",
			ErrBadField, d.Offset(), uint64(d.Offset())+uint64(n), d.MsgLen())
	}
	return d, nil
}

// AppendData appends a data packet with the given header and payload to dst
// and returns the extended slice. It allocates only if dst lacks capacity.
// A fresh packet is never trimmed, so DataTrimmed in f.Flags is ignored.
func AppendData(dst []byte, f DataFields, payload []byte) ([]byte, error) {
	return AppendDataFrom(dst, &f, payload)
}

// AppendDataFrom is AppendData reading the header from *f in place: a
// sender that builds a header for every packet passes its 40-byte fields
// once, by pointer, instead of copying them into each call. The packets
// and errors are AppendData's.
func AppendDataFrom(dst []byte, f *DataFields, payload []byte) ([]byte, error) {
	if err := checkDataRange(f, len(payload)); err != nil {
		return dst, err
	}
	dst, b := grow(dst, DataLen+len(payload))
	putData((*[DataLen]byte)(b), f, f.Flags&^DataTrimmed, len(payload))
	copy(b[DataLen:], payload)
	return dst, nil
}

// AppendDataHeader appends only the header of a data packet whose payload is
// payloadLen bytes long; the caller appends the payload, for instance by
// reading it from registered memory straight into the packet buffer. With
// DataTrimmed in f.Flags the header alone is a complete trimmed packet, as a
// switch's Trim leaves it.
func AppendDataHeader(dst []byte, f DataFields, payloadLen int) ([]byte, error) {
	return AppendDataHeaderFrom(dst, &f, payloadLen)
}

// AppendDataHeaderFrom is AppendDataHeader reading the header from *f in
// place, as AppendDataFrom is AppendData's; the bytes and errors are
// AppendDataHeader's.
func AppendDataHeaderFrom(dst []byte, f *DataFields, payloadLen int) ([]byte, error) {
	if err := checkDataRange(f, payloadLen); err != nil {
		return dst, err
	}
	dst, b := grow(dst, DataLen)
	putData((*[DataLen]byte)(b), f, f.Flags, payloadLen)
	return dst, nil
}

// checkDataRange refuses a header ParseData would reject: Append and Parse
// accept exactly the same packets. Its two comparisons are all a valid
// header costs; the errors are built out of line.
func checkDataRange(f *DataFields, n int) error {
	if uint(n) > MaxPayload || uint64(f.Offset)+uint64(n) > uint64(f.MsgLen) {
		return dataRangeError(f, n)
	}
	return nil
}

// dataRangeError is the error checkDataRange returns for a bad range.
func dataRangeError(f *DataFields, n int) error {
	if n < 0 || n > MaxPayload {
		return fmt.Errorf("%w: payload %d bytes exceeds %d", ErrBadField, n, MaxPayload)
	}
	return fmt.Errorf("%w: DATA range [%d,%d) beyond message length %d",
		ErrBadField, f.Offset, uint64(f.Offset)+uint64(n), f.MsgLen)
}

// putData writes the header of *f, with flag byte flags (its undefined
// bits dropped), into b. b is an array pointer so that every store below
// is at a constant offset the compiler knows is in bounds: no check per
// field.
func putData(b *[DataLen]byte, f *DataFields, flags uint8, payloadLen int) {
	putCommon(b[:], TypeData, flags&dataFlags, f.Src, f.Dst)
	binary.BigEndian.PutUint16(b[dataEntropy:], f.Entropy)
	binary.BigEndian.PutUint32(b[offFlow:], f.Flow)
	putTags(b[:], f.Tags)
	binary.BigEndian.PutUint32(b[offPSN:], uint32(f.PSN))
	binary.BigEndian.PutUint32(b[dataMsg:], f.Msg)
	binary.BigEndian.PutUint32(b[dataOffset:], f.Offset)
	binary.BigEndian.PutUint32(b[dataMsgLen:], f.MsgLen)
	binary.BigEndian.PutUint16(b[dataPayloadLen:], uint16(payloadLen))
	b[dataSubflows] = f.Subflows
	b[dataReserved] = 0
}

// Trim cuts an untrimmed data packet to its header (TrimmedLen: with a
// sealed packet's domain, nonce and header tag) in place and flags it
// trimmed. The returned slice aliases b.
func Trim(b []byte) ([]byte, error) {
	n, err := TrimmedLen(b)
	if err != nil || len(b) < n || b[offFlags]&DataTrimmed != 0 {
		return b, ErrNotData
	}
	b[offFlags] |= DataTrimmed
	return b[:n], nil
}

// Fields returns the header values of d.
func (d Data) Fields() DataFields {
	return DataFields{
		Flags: d.Flags(), Entropy: d.Entropy(), Src: d.Src(), Dst: d.Dst(),
		Flow: d.Flow(), Tags: d.Tags(), PSN: d.PSN(), Msg: d.Msg(), Offset: d.Offset(),
		MsgLen: d.MsgLen(), Subflows: d.Subflows(),
	}
}

// Flags returns the flag byte.
func (d Data) Flags() uint8 { return d[offFlags] }

// Entropy returns the path selector a switch hashes for ECMP.
func (d Data) Entropy() uint16 { return binary.BigEndian.Uint16(d[dataEntropy:]) }

// Src returns the source host id.
func (d Data) Src() uint16 { return binary.BigEndian.Uint16(d[offSrc:]) }

// Dst returns the destination host id.
func (d Data) Dst() uint16 { return binary.BigEndian.Uint16(d[offDst:]) }

// Flow returns the flow (queue pair) id.
func (d Data) Flow() uint32 { return binary.BigEndian.Uint32(d[offFlow:]) }

// Tags returns the destination and source tags.
func (d Data) Tags() Tags { t, _ := Header(d).Tags(); return t }

// PSN returns the packet sequence number.
func (d Data) PSN() PSN { return PSN(binary.BigEndian.Uint32(d[offPSN:])) }

// Msg returns the message id.
func (d Data) Msg() uint32 { return binary.BigEndian.Uint32(d[dataMsg:]) }

// Offset returns the byte offset of the payload within its message.
func (d Data) Offset() uint32 { return binary.BigEndian.Uint32(d[dataOffset:]) }

// MsgLen returns the length of the whole message.
func (d Data) MsgLen() uint32 { return binary.BigEndian.Uint32(d[dataMsgLen:]) }

// PayloadLen returns the payload length as sent, also after trimming.
func (d Data) PayloadLen() uint16 { return binary.BigEndian.Uint16(d[dataPayloadLen:]) }

// Subflows returns the number of ordered subflows the sender sprays over.
func (d Data) Subflows() uint8 { return d[dataSubflows] }

// Trimmed reports whether a switch removed the payload.
func (d Data) Trimmed() bool { return d[offFlags]&DataTrimmed != 0 }

// Payload returns the payload bytes (empty when trimmed).
func (d Data) Payload() []byte { return d[DataLen:] }

// SetFlags overwrites the flag byte.
func (d Data) SetFlags(f uint8) { d[offFlags] = f }

// SetEntropy overwrites the entropy field.
func (d Data) SetEntropy(e uint16) { binary.BigEndian.PutUint16(d[dataEntropy:], e) }

// grow extends dst by n bytes and returns the new slice and the new part.
func grow(dst []byte, n int) ([]byte, []byte) {
	l := len(dst)
	if cap(dst)-l < n {
		nd := make([]byte, l, l+n)
		copy(nd, dst)
		dst = nd
	}
	dst = dst[:l+n]
	return dst, dst[l:]
}
