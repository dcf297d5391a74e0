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
}
