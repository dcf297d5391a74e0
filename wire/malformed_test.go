package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
)

// parsers maps each type to its own parser, as a receiver dispatches.
var parsers = map[Type]func([]byte) error{
	TypeData:  func(b []byte) error { _, err := ParseData(b); return err },
	TypeAck:   func(b []byte) error { _, err := ParseAck(b); return err },
	TypeNack:  func(b []byte) error { _, err := ParseNack(b); return err },
	TypeCNP:   func(b []byte) error { _, err := ParseCNP(b); return err },
	TypeProbe: func(b []byte) error { _, err := ParseProbe(b); return err },
	TypePause: func(b []byte) error { _, err := ParsePause(b); return err },
	TypeConnect: func(b []byte) error {
		if _, err := Peek(b); err == nil && Header(b).Type() != TypeConnect {
			return fmt.Errorf("%w: not a CONNECT", ErrUnknownType)
		}
		_, err := ParseConnect(b)
		return err
	},
	TypeAccept: func(b []byte) error {
		if _, err := Peek(b); err == nil && Header(b).Type() != TypeAccept {
			return fmt.Errorf("%w: not an ACCEPT", ErrUnknownType)
		}
		_, err := ParseConnect(b)
		return err
	},
}

// wantErr checks that both Validate and the type's own parser refuse b with
// the sentinel want.
func wantErr(t *testing.T, what string, typ Type, b []byte, want error) {
	t.Helper()
	if _, err := Validate(b); !errors.Is(err, want) {
		t.Errorf("%s: Validate error %v, want %v", what, err, want)
	}
	if err := parsers[typ](b); !errors.Is(err, want) {
		t.Errorf("%s: Parse%v error %v, want %v", what, typ, err, want)
	}
}

// mutate returns a copy of b with f applied.
func mutate(b []byte, f func(c []byte)) []byte {
	c := bytes.Clone(b)
	f(c)
	return c
}

// Every prefix of a valid packet is refused: before the header is complete
// it is too short, and a DATA packet cut inside its payload no longer
// matches its payload length.
func TestShortBuffersEveryLength(t *testing.T) {
	for _, s := range samples(t) {
		hdr := map[Type]int{TypeData: DataLen, TypeAck: AckLen, TypeNack: NackLen,
			TypeCNP: CNPLen, TypeProbe: ProbeLen, TypePause: PauseLen, TypeConnect: ConnectLen, TypeAccept: ConnectLen}[s.typ]
		for n := range len(s.b) {
			want := ErrTooShort
			if n >= hdr {
				want = ErrBadLength
			}
			wantErr(t, fmt.Sprintf("%s cut to %d bytes", s.name, n), s.typ, s.b[:n], want)
			if n < CommonLen {
				if _, err := Peek(s.b[:n]); !errors.Is(err, ErrTooShort) {
					t.Errorf("%s cut to %d bytes: Peek error %v", s.name, n, err)
				}
			}
		}
	}
}

func TestTrailingBytes(t *testing.T) {
	for _, s := range samples(t) {
		if s.typ == TypeData && !Data(s.b).Trimmed() {
			continue // covered by TestDataPayloadLengthMismatch
		}
		wantErr(t, s.name+" with a trailing byte", s.typ, append(bytes.Clone(s.b), 0), ErrBadLength)
	}
}

func TestBadVersion(t *testing.T) {
	for _, s := range samples(t) {
		for _, v := range []uint8{0, 1, 3, 15} {
			b := mutate(s.b, func(c []byte) { c[0] = v<<4 | c[0]&0x0F })
			wantErr(t, fmt.Sprintf("%s version %d", s.name, v), s.typ, b, ErrBadVersion)
			if _, err := Peek(b); !errors.Is(err, ErrBadVersion) {
				t.Errorf("%s version %d: Peek error %v", s.name, v, err)
			}
		}
	}
}

func TestUnknownType(t *testing.T) {
	ack := AppendAck(nil, testAck)
	for _, typ := range []uint8{0, 9, 10, 15} {
		b := mutate(ack, func(c []byte) { c[0] = Version<<4 | typ })
		if _, err := Validate(b); !errors.Is(err, ErrUnknownType) {
			t.Errorf("type %d: Validate error %v, want ErrUnknownType", typ, err)
		}
		if _, err := Peek(b); !errors.Is(err, ErrUnknownType) {
			t.Errorf("type %d: Peek error %v, want ErrUnknownType", typ, err)
		}
	}
}

// A parser handed another type's packet refuses it, even when the lengths
// happen to match (ACK, NACK and DATA headers are all 40 bytes).
func TestParserOfAnotherType(t *testing.T) {
	for _, s := range samples(t) {
		for typ, parse := range parsers {
			if typ == s.typ {
				continue
			}
			if err := parse(s.b); !errors.Is(err, ErrUnknownType) {
				t.Errorf("Parse%v(%s) error %v, want ErrUnknownType", typ, s.name, err)
			}
		}
	}
}

// Every flag bit a type does not define is refused. A PROBE's byte 1 is its
// kind and is checked in TestBadProbe.
func TestUndefinedFlagBits(t *testing.T) {
	defined := map[Type]uint8{TypeData: dataFlags, TypeAck: ackFlags, TypeNack: nackFlags, TypeCNP: 0, TypePause: 0, TypeConnect: 0, TypeAccept: 0}
	for _, s := range samples(t) {
		mask, ok := defined[s.typ]
		if !ok {
			continue
		}
		for bit := range 8 {
			f := uint8(1) << bit
			if mask&f != 0 {
				continue
			}
			b := mutate(s.b, func(c []byte) { c[1] |= f })
			if f == FlagSealed && s.typ != TypePause {
				// The parsers refuse the bit (the engines see opened
				// packets only); Validate reads the packet as sealed and
				// finds the sublayer's fields missing.
				if err := parsers[s.typ](b); !errors.Is(err, ErrBadField) {
					t.Errorf("%s sealed flag: Parse%v error %v, want ErrBadField", s.name, s.typ, err)
				}
				if _, err := Validate(b); !errors.Is(err, ErrTooShort) && !errors.Is(err, ErrBadLength) {
					t.Errorf("%s sealed flag: Validate error %v, want ErrTooShort or ErrBadLength", s.name, err)
				}
				continue
			}
			wantErr(t, fmt.Sprintf("%s flag %#x", s.name, f), s.typ, b, ErrBadField)
		}
	}
}

// "reserved, zero": a non-zero reserved byte is refused, so a packet that
// parses has exactly one encoding.
func TestReservedBytes(t *testing.T) {
	reserved := map[Type][]int{
		TypeData: {39}, TypeAck: {2, 3}, TypeNack: {26, 27},
		TypeCNP: {2, 3}, TypeProbe: {26, 27}, TypePause: {3, 10, 11},
		TypeConnect: {2, 3}, TypeAccept: {2, 3},
	}
	for _, s := range samples(t) {
		for _, i := range reserved[s.typ] {
			b := mutate(s.b, func(c []byte) { c[i] = 0x40 })
			wantErr(t, fmt.Sprintf("%s reserved byte %d", s.name, i), s.typ, b, ErrBadField)
		}
	}
}

// "trimmed DATA carries ... payload bytes": a switch cuts the packet to its
// header, so a trimmed flag with payload behind it is malformed.
func TestTrimmedWithPayload(t *testing.T) {
	data, err := AppendData(nil, testData, testPayload(100))
	if err != nil {
		t.Fatal(err)
	}
	b := mutate(data, func(c []byte) { c[1] |= DataTrimmed })
	wantErr(t, "trimmed DATA with its payload", TypeData, b, ErrBadLength)
	wantErr(t, "trimmed DATA with one byte", TypeData, b[:DataLen+1], ErrBadLength)
}

func TestDataPayloadLengthMismatch(t *testing.T) {
	data, err := AppendData(nil, testData, testPayload(100))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []uint16{0, 99, 101, MaxPayload} {
		b := mutate(data, func(c []byte) { binary.BigEndian.PutUint16(c[dataPayloadLen:], n) })
		wantErr(t, fmt.Sprintf("100-byte payload, header says %d", n), TypeData, b, ErrBadLength)
	}
	wantErr(t, "one extra byte", TypeData, append(bytes.Clone(data), 0), ErrBadLength)
}

// The payload is bytes [Offset, Offset+PayloadLen) of the message; a range
// past the message's end is refused, trimmed or not, and Append will not
// build one.
func TestRangeBeyondMessage(t *testing.T) {
	f := testData
	f.Offset, f.MsgLen = 1000, 1099
	if _, err := AppendData(nil, f, testPayload(100)); !errors.Is(err, ErrBadField) {
		t.Errorf("AppendData of [1000,1100) in a 1099-byte message: error %v, want ErrBadField", err)
	}
	f.MsgLen = 1100
	ok, err := AppendData(nil, f, testPayload(100))
	if err != nil {
		t.Fatalf("[1000,1100) in a 1100-byte message: %v", err)
	}
	past := mutate(ok, func(c []byte) { binary.BigEndian.PutUint32(c[dataMsgLen:], 1099) })
	wantErr(t, "DATA past the message end", TypeData, past, ErrBadField)
	trimmed, err := Trim(past)
	if err != nil {
		t.Fatal(err)
	}
	wantErr(t, "trimmed DATA past the message end", TypeData, trimmed, ErrBadField)

	// The sum Offset+PayloadLen must not wrap around 2^32 into a valid range.
	wrap := mutate(ok, func(c []byte) {
		binary.BigEndian.PutUint32(c[dataOffset:], 0xFFFFFFF0)
		binary.BigEndian.PutUint32(c[dataMsgLen:], 0xFFFFFFFF)
	})
	wantErr(t, "DATA range wrapping 2^32", TypeData, wrap, ErrBadField)
}

func TestAppendDataRefusesOversizedPayload(t *testing.T) {
	f := testData
	f.Offset, f.MsgLen = 0, 1<<20
	if _, err := AppendData(nil, f, make([]byte, MaxPayload+1)); !errors.Is(err, ErrBadField) {
		t.Errorf("AppendData of %d bytes: error %v, want ErrBadField", MaxPayload+1, err)
	}
	for _, n := range []int{-1, MaxPayload + 1} {
		if _, err := AppendDataHeader(nil, f, n); !errors.Is(err, ErrBadField) {
			t.Errorf("AppendDataHeader(%d): error %v, want ErrBadField", n, err)
		}
	}
	if out, err := AppendData(prefix, f, make([]byte, MaxPayload+1)); err == nil || !bytes.Equal(out, prefix) {
		t.Errorf("a refused AppendData must return dst unchanged, got %d bytes", len(out))
	}
}

// Undefined flags never reach the wire: Append drops them, as it drops
// DataTrimmed from a fresh packet.
func TestAppendDropsUndefinedFlags(t *testing.T) {
	f := testData
	f.Flags = 0xFF
	b, err := AppendData(nil, f, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := b[1], dataFlags&^DataTrimmed; got != want {
		t.Errorf("DATA flags %#x, want %#x", got, want)
	}
	a := testAck
	a.Flags = 0xFF
	if got := AppendAck(nil, a)[1]; got != ackFlags {
		t.Errorf("ACK flags %#x, want %#x", got, ackFlags)
	}
	n := testNack
	n.Flags = 0xFF
	if got := AppendNack(nil, n)[1]; got != nackFlags {
		t.Errorf("NACK flags %#x, want %#x", got, nackFlags)
	}
}

// Reason codes follow the Ultra Ethernet PDS NACK codes; any other value is
// refused. So is a priority above high.
func TestBadNack(t *testing.T) {
	nack := AppendNack(nil, testNack)
	valid := map[NackReason]bool{}
	for _, r := range nackReasons {
		valid[r] = true
	}
	for r := range 256 {
		b := mutate(nack, func(c []byte) { c[2] = uint8(r) })
		_, err := ParseNack(b)
		switch {
		case valid[NackReason(r)] && err != nil:
			t.Errorf("reason %#x refused: %v", r, err)
		case !valid[NackReason(r)] && !errors.Is(err, ErrBadField):
			t.Errorf("reason %#x: error %v, want ErrBadField", r, err)
		}
	}
	for _, p := range []uint8{2, 3, 0xFF} {
		b := mutate(nack, func(c []byte) { c[3] = p })
		wantErr(t, fmt.Sprintf("NACK priority %d", p), TypeNack, b, ErrBadField)
	}
}

// "subflow index" must name one of "subflow count" subflows, and a probe
// has a kind.
func TestBadProbe(t *testing.T) {
	probe := AppendProbe(nil, testProbe)
	for _, k := range []uint8{0, 4, 0x10, 0xFF} {
		b := mutate(probe, func(c []byte) { c[1] = k })
		wantErr(t, fmt.Sprintf("probe kind %d", k), TypeProbe, b, ErrBadField)
	}
	for _, tc := range []struct{ sub, subs uint8 }{{4, 4}, {5, 4}, {0xFF, 0xFF}, {1, 0}} {
		b := mutate(probe, func(c []byte) { c[probeSubflow], c[probeSubflows] = tc.sub, tc.subs })
		wantErr(t, fmt.Sprintf("subflow %d of %d", tc.sub, tc.subs), TypeProbe, b, ErrBadField)
	}
	for _, tc := range []struct{ sub, subs uint8 }{{0, 0}, {0, 1}, {254, 255}} {
		b := mutate(probe, func(c []byte) { c[probeSubflow], c[probeSubflows] = tc.sub, tc.subs })
		if _, err := ParseProbe(b); err != nil {
			t.Errorf("subflow %d of %d refused: %v", tc.sub, tc.subs, err)
		}
	}
}

// Every error a parser returns wraps one of the package's sentinels, so
// callers can classify it with errors.Is.
func TestErrorsWrapSentinels(t *testing.T) {
	for _, s := range samples(t) {
		for i := range len(s.b) {
			for _, v := range []byte{0x00, 0xFF, s.b[i] ^ 0x01} {
				b := mutate(s.b, func(c []byte) { c[i] = v })
				if _, err := Validate(b); err != nil && !isSentinel(err) {
					t.Errorf("%s byte %d = %#x: error %v wraps no sentinel", s.name, i, v, err)
				}
			}
		}
	}
}
