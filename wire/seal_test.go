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

// A sealed packet has one encoding: SplitSealed's parts rebuild it byte for
// byte through AppendSealed, and AppendSealed refuses parts that make no
// valid sealed packet (the fuzz corpus's sealed ACK of 84 bytes, once
// accepted and re-encoded without its seal, is one of FuzzValidate's
// inputs).
func TestSealedOneEncoding(t *testing.T) {
	sealed := sealedSamples(t)
	if len(sealed) == 0 {
		t.Fatal("no sealed samples")
	}
	for _, b := range sealed {
		hdr, ext, body, err := SplitSealed(b)
		if err != nil {
			t.Fatalf("SplitSealed: %v", err)
		}
		plain := append([]byte(nil), hdr...)
		plain[offFlags] &^= FlagSealed
		got, err := AppendSealed(nil, plain, ext, body)
		if err != nil || string(got) != string(b) {
			t.Fatalf("rebuilt % x, %v; want % x", got, err, b)
		}
		if _, err := AppendSealed(nil, hdr, ext, body); !errors.Is(err, ErrBadField) {
			t.Errorf("AppendSealed of a header with FlagSealed: %v, want ErrBadField", err)
		}
		if _, err := AppendSealed(nil, plain, ext, append(body, 0)); err == nil {
			t.Errorf("AppendSealed with a byte too many accepted")
		}
		if out, err := AppendSealed([]byte{1, 2}, plain, ext, append(body, 0)); err == nil || len(out) != 2 {
			t.Errorf("a refused AppendSealed left %d bytes, want the 2 of dst", len(out))
		}
	}
	if _, _, _, err := SplitSealed(sealed[0][:len(sealed[0])-1]); err == nil {
		t.Error("SplitSealed of a short packet accepted")
	}
	for _, s := range samples(t) {
		if _, _, _, err := SplitSealed(s.b); !errors.Is(err, ErrBadField) {
			t.Errorf("SplitSealed of plain %s: %v, want ErrBadField", s.name, err)
		}
		if s.typ == TypePause {
			if _, err := AppendSealed(nil, s.b, SealExt{}, nil); !errors.Is(err, ErrBadField) {
				t.Errorf("AppendSealed of a PAUSE: %v, want ErrBadField", err)
			}
		}
	}
}
