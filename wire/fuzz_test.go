package wire

import (
	"bytes"
	"testing"
)

// FuzzValidate feeds Validate arbitrary bytes. It must never panic, every
// error must wrap a sentinel, and a packet it accepts must have exactly one
// encoding: building it again from its fields reproduces it byte for byte.
func FuzzValidate(f *testing.F) {
	addPacketSeeds(f)
	f.Add([]byte{})
	f.Add([]byte{Version<<4 | uint8(TypeData)})
	f.Add([]byte{Version<<4 | 0x0F, 0, 0, 0, 0, 0, 0, 0})

	f.Fuzz(func(t *testing.T, b []byte) {
		typ, err := Validate(b)
		checkTrim(t, b, err == nil && typ == TypeData)
		if err != nil {
			if !isSentinel(err) {
				t.Fatalf("error %v wraps no sentinel", err)
			}
			return
		}
		if got := reencode(t, typ, b); !bytes.Equal(got, b) {
			t.Fatalf("%v re-encoded differs\n got % x\nwant % x", typ, got, b)
		}
	})
}

// checkTrim trims a copy of b. Trim must never panic; on a valid untrimmed
// DATA packet it must succeed and leave a valid header with the same fields.
func checkTrim(t *testing.T, b []byte, validData bool) {
	c := bytes.Clone(b)
	trimmed, err := Trim(c)
	if !validData || Data(b).Trimmed() {
		return
	}
	if err != nil {
		t.Fatalf("Trim of a valid DATA packet: %v", err)
	}
	if Sealed(b) {
		checkSealedTrim(t, b, trimmed)
		return
	}
	d, err := ParseData(trimmed)
	if err != nil {
		t.Fatalf("trimmed header does not parse: %v", err)
	}
	want := Data(b).Fields()
	want.Flags |= DataTrimmed
	if d.Fields() != want || d.PayloadLen() != Data(b).PayloadLen() {
		t.Fatalf("trim changed the header: %+v, want %+v", d.Fields(), want)
	}
}

// checkSealedTrim checks what Trim left of the valid sealed DATA packet
// b: a valid sealed packet with the same header but T, the same extension,
// and no body.
func checkSealedTrim(t *testing.T, b, trimmed []byte) {
	t.Helper()
	hdr, ext, body, err := SplitSealed(trimmed)
	if err != nil {
		t.Fatalf("trimmed sealed packet does not validate: %v", err)
	}
	wantHdr, wantExt, _, err := SplitSealed(b)
	if err != nil {
		t.Fatalf("SplitSealed of a valid sealed packet: %v", err)
	}
	want := bytes.Clone(wantHdr)
	want[offFlags] |= DataTrimmed
	if !bytes.Equal(hdr, want) || ext != wantExt || len(body) != 0 {
		t.Fatalf("trim changed the sealed packet: header % x ext %+v body %d bytes; want header % x ext %+v",
			hdr, ext, len(body), want, wantExt)
	}
}

// addPacketSeeds seeds a fuzzer with every packet type. The DATA seed
// keeps a short payload: minimizing a 4 KiB input would take the fuzzer
// most of its time.
func addPacketSeeds(f *testing.F) {
	for _, s := range samples(f) {
		if s.typ == TypeData && !Data(s.b).Trimmed() {
			continue
		}
		f.Add(s.b)
	}
	short, err := AppendData(nil, testData, testPayload(24))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(short)
	for _, b := range sealedSamples(f) {
		f.Add(b)
	}
}

// sealedSamples seals the header of every sample but PAUSE with a fixed
// extension and, for untrimmed DATA (of a short payload), a body of the
// payload's length plus a tag.
func sealedSamples(t testing.TB) [][]byte {
	t.Helper()
	ext := SealExt{Domain: 7}
	for i := range ext.Nonce {
		ext.Nonce[i] = byte(i)
	}
	var out [][]byte
	for _, s := range samples(t) {
		if s.typ == TypePause {
			continue
		}
		hl, _ := HeaderLen(s.typ)
		hdr, body := s.b[:hl], []byte(nil)
		if s.typ == TypeData && !Data(s.b).Trimmed() {
			h, err := AppendDataHeader(nil, Data(s.b).Fields(), 24)
			if err != nil {
				t.Fatal(err)
			}
			hdr, body = h, make([]byte, 24+SealTagLen)
		}
		b, err := AppendSealed(nil, hdr, ext, body)
		if err != nil {
			t.Fatalf("%s: AppendSealed: %v", s.name, err)
		}
		out = append(out, b)
	}
	return out
}
