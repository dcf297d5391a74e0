package wire

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// checkQuick requires the fast path of Validate to agree with the long
// way on b: when it accepts b, validate accepts it as the same type, and
// on the packets it is for (unsealed DATA and ACK) it must not fall back.
// It returns whether the fast path accepted b.
func checkQuick(t *testing.T, b []byte) bool {
	t.Helper()
	q := quickValid(b)
	typ, err := validate(b)
	if q != 0 && (err != nil || typ != q) {
		t.Fatalf("quickValid = %v, validate = %v, %v\n% x", q, typ, err, b)
	}
	if q == 0 && err == nil && (typ == TypeData || typ == TypeAck) && !Sealed(b) {
		t.Fatalf("quickValid refuses a valid unsealed %v\n% x", typ, b)
	}
	return q != 0
}

// checkInspect requires Inspect to agree with Validate and the Header
// accessors on b.
func checkInspect(t *testing.T, b []byte) {
	t.Helper()
	s, err := Inspect(b)
	typ, verr := Validate(b)
	if (err == nil) != (verr == nil) || s.Type != typ {
		t.Fatalf("Inspect = %+v, %v; Validate = %v, %v", s, err, typ, verr)
	}
	if err != nil {
		return
	}
	h := Header(b)
	flow, _ := h.Flow()
	entropy, _ := h.Entropy()
	want := Summary{Type: typ, Flags: h.Flags(), Entropy: entropy, Src: h.Src(), Dst: h.Dst(), Flow: flow}
	if s != want {
		t.Fatalf("Inspect = %+v, the accessors read %+v", s, want)
	}
	if s.Trimmed() != (typ == TypeData && Data(b).Trimmed()) {
		t.Fatalf("Summary.Trimmed = %v for %v with flags %#x", s.Trimmed(), typ, h.Flags())
	}
}

// TestQuickValidAgrees puts every sample, sealed or not, and every
// variant of it with one byte changed, its length cut or extended, through
// both paths of Validate and through Inspect.
func TestQuickValidAgrees(t *testing.T) {
	var packets [][]byte
	for _, s := range samples(t) {
		packets = append(packets, s.b, sealedFrame(s.b))
	}
	fast := 0
	for _, p := range packets {
		if p == nil {
			continue
		}
		variants := [][]byte{p, p[:len(p)-1], append(bytes.Clone(p), 0)}
		for i := range min(len(p), 48) {
			for _, v := range []byte{0, 0xFF, p[i] ^ 0x01, p[i] ^ 0x10, p[i] ^ 0x80} {
				c := bytes.Clone(p)
				c[i] = v
				variants = append(variants, c)
			}
		}
		if Header(p).Type() == TypeData && len(p) >= DataLen {
			// the message length at the payload's end and one byte short of it
			end := binary.BigEndian.Uint32(p[dataOffset:]) + uint32(binary.BigEndian.Uint16(p[dataPayloadLen:]))
			for _, m := range []uint32{end, end - 1} {
				c := bytes.Clone(p)
				binary.BigEndian.PutUint32(c[dataMsgLen:], m)
				variants = append(variants, c)
			}
		}
		for _, v := range variants {
			if checkQuick(t, v) {
				fast++
			}
			checkInspect(t, v)
		}
	}
	if fast == 0 {
		t.Fatal("the fast path accepted nothing")
	}
}

// sealedFrame returns b framed as the security sublayer seals it (the
// sealed flag, the extension and, for DATA, the payload tag; the bytes of
// the extension are arbitrary, as only tss can check them), or nil for a
// PAUSE, which is never sealed.
func sealedFrame(b []byte) []byte {
	if Header(b).Type() == TypePause {
		return nil
	}
	s := bytes.Clone(b)
	s[offFlags] |= FlagSealed
	s = append(s, make([]byte, SealExtLen)...)
	if Header(b).Type() == TypeData && !Data(b).Trimmed() {
		s = append(s, make([]byte, SealTagLen)...)
	}
	return s
}

// FuzzInspect: on any bytes, Validate's fast path agrees with its long
// way, and Inspect with Validate and the accessors.
func FuzzInspect(f *testing.F) {
	addPacketSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		checkQuick(t, b)
		checkInspect(t, b)
	})
}
