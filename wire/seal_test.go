package wire

import (
	"errors"
	"testing"
)

// Every type Peek accepts has a header length, so the security sublayer
// can seal it and a switch can validate it sealed; a new packet type
// without one fails here.
func TestHeaderLenEveryType(t *testing.T) {
	for typ := range Type(16) {
		b := make([]byte, 64)
		b[offVerType] = Version<<4 | uint8(typ)
		if _, err := Peek(b); err != nil {
			if _, ok := HeaderLen(typ); ok {
				t.Errorf("HeaderLen(%v) is known, but Peek refuses the type: %v", typ, err)
			}
			continue
		}
		if n, ok := HeaderLen(typ); !ok || n < CommonLen || n > maxHeaderLen {
			t.Errorf("HeaderLen(%v) = %d, %v: want a length in [%d, %d]", typ, n, ok, CommonLen, maxHeaderLen)
		}
	}
	for _, s := range samples(t) {
		n, _ := HeaderLen(s.typ)
		if s.typ != TypeData && n != len(s.b) {
			t.Errorf("HeaderLen(%v) = %d, the packet is %d bytes", s.typ, n, len(s.b))
		}
	}
}

// TrimmedLen is the header for a plain DATA packet and the header plus
// the sublayer's extension for a sealed one; it is ErrNotData otherwise.
func TestTrimmedLen(t *testing.T) {
	for _, s := range samples(t) {
		n, err := TrimmedLen(s.b)
		if s.typ != TypeData {
			if !errors.Is(err, ErrNotData) {
				t.Errorf("%s: TrimmedLen = %d, %v; want ErrNotData", s.name, n, err)
			}
			continue
		}
		if err != nil || n != DataLen {
			t.Errorf("%s: TrimmedLen = %d, %v; want %d", s.name, n, err, DataLen)
		}
		sealed := mutate(s.b, func(c []byte) { c[offFlags] |= FlagSealed })
		if n, err := TrimmedLen(sealed); err != nil || n != DataLen+SealExtLen {
			t.Errorf("%s sealed: TrimmedLen = %d, %v; want %d", s.name, n, err, DataLen+SealExtLen)
		}
	}
	if _, err := TrimmedLen([]byte{1}); !errors.Is(err, ErrNotData) {
		t.Errorf("TrimmedLen of one byte: %v, want ErrNotData", err)
	}
}
