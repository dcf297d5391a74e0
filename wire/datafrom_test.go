package wire

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// refDataHeader encodes a data header straight from the diagram of Data,
// independently of putData, so that a fault shared by AppendDataHeader and
// AppendDataHeaderFrom (one calls the other) still shows.
func refDataHeader(f DataFields, flags uint8, n int) []byte {
	b := make([]byte, DataLen)
	b[0] = Version<<4 | uint8(TypeData)
	b[1] = flags & dataFlags
	binary.BigEndian.PutUint16(b[2:], f.Entropy)
	binary.BigEndian.PutUint16(b[4:], f.Src)
	binary.BigEndian.PutUint16(b[6:], f.Dst)
	binary.BigEndian.PutUint32(b[8:], f.Flow)
	binary.BigEndian.PutUint32(b[12:], f.Tags.Dst)
	binary.BigEndian.PutUint32(b[16:], f.Tags.Src)
	binary.BigEndian.PutUint32(b[20:], uint32(f.PSN))
	binary.BigEndian.PutUint32(b[24:], f.Msg)
	binary.BigEndian.PutUint32(b[28:], f.Offset)
	binary.BigEndian.PutUint32(b[32:], f.MsgLen)
	binary.BigEndian.PutUint16(b[36:], uint16(n))
	b[38] = f.Subflows
	return b
}

// errText is err's message, "" for nil.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestAppendDataFromMatches holds the pointer forms to the by-value ones
// and both to the layout of the diagram: the same bytes, the same errors,
// dst untouched on an error, for random fields, every flag byte and payload
// lengths around the limits (negative, past MaxPayload, past the message).
func TestAppendDataFromMatches(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 40))
	lens := []int{-1, 0, 1, 1500, MaxPayload, MaxPayload + 1}
	prefix := []byte{0xAA, 0xBB}
	var bad, good int
	for i := 0; i < 4000; i++ {
		f := DataFields{Flags: uint8(r.Uint32()), Entropy: uint16(r.Uint32()),
			Src: uint16(r.Uint32()), Dst: uint16(r.Uint32()), Flow: r.Uint32(),
			Tags: Tags{Dst: r.Uint32(), Src: r.Uint32()}, PSN: PSN(r.Uint32()),
			Msg: r.Uint32(), Offset: r.Uint32N(1 << 17), MsgLen: r.Uint32N(1 << 18),
			Subflows: uint8(r.Uint32())}
		n := lens[i%len(lens)]
		if i%3 == 0 && f.MsgLen > f.Offset { // a length that ends inside or at the message
			n = int(r.Uint32N(min(f.MsgLen-f.Offset, MaxPayload) + 1))
		}
		want := refDataHeader(f, f.Flags, n)
		valid := n >= 0 && n <= MaxPayload && uint64(f.Offset)+uint64(n) <= uint64(f.MsgLen)

		byVal, errVal := AppendDataHeader(bytes.Clone(prefix), f, n)
		g := f
		byPtr, errPtr := AppendDataHeaderFrom(bytes.Clone(prefix), &g, n)
		if g != f {
			t.Fatalf("AppendDataHeaderFrom changed its fields: %+v, was %+v", g, f)
		}
		if errText(errVal) != errText(errPtr) || !bytes.Equal(byVal, byPtr) {
			t.Fatalf("%+v, %d: AppendDataHeader gives %x, %v; AppendDataHeaderFrom %x, %v", f, n, byVal, errVal, byPtr, errPtr)
		}
		if (errPtr == nil) != valid {
			t.Fatalf("%+v, %d: error %v, valid %v", f, n, errPtr, valid)
		}
		if !valid {
			bad++
			if !bytes.Equal(byPtr, prefix) {
				t.Fatalf("%+v, %d: a refused header changed dst to %x", f, n, byPtr)
			}
			continue
		}
		good++
		if !bytes.Equal(byPtr, append(bytes.Clone(prefix), want...)) {
			t.Fatalf("%+v, %d: header %x, want %x", f, n, byPtr[len(prefix):], want)
		}

		payload := make([]byte, n)
		for j := range payload {
			payload[j] = byte(j * 7)
		}
		pVal, errVal := AppendData(bytes.Clone(prefix), f, payload)
		pPtr, errPtr := AppendDataFrom(bytes.Clone(prefix), &g, payload)
		if errVal != nil || errPtr != nil || !bytes.Equal(pVal, pPtr) {
			t.Fatalf("%+v, %d: AppendData gives %v, AppendDataFrom %v, same bytes %v", f, n, errVal, errPtr, bytes.Equal(pVal, pPtr))
		}
		wantPkt := append(append(bytes.Clone(prefix), refDataHeader(f, f.Flags&^DataTrimmed, n)...), payload...)
		if !bytes.Equal(pPtr, wantPkt) {
			t.Fatalf("%+v, %d: packet header %x, want %x", f, n, pPtr[len(prefix):len(prefix)+DataLen], wantPkt[len(prefix):len(prefix)+DataLen])
		}
		if _, err := ParseData(pPtr[len(prefix):]); err != nil {
			t.Fatalf("%+v, %d: AppendDataFrom built a packet ParseData refuses: %v", f, n, err)
		}
	}
	if bad < 1000 || good < 1000 {
		t.Fatalf("%d refused and %d accepted headers: the cases do not cover both", bad, good)
	}
}

// TestAppendDataFromErrors holds the refusals of the pointer forms to the
// messages of the by-value ones, case by case.
func TestAppendDataFromErrors(t *testing.T) {
	cases := []struct {
		f    DataFields
		n    int
		want string
	}{
		{DataFields{MsgLen: 10}, -1, "wire: invalid field value: payload -1 bytes exceeds 65535"},
		{DataFields{MsgLen: 1 << 20}, MaxPayload + 1, "wire: invalid field value: payload 65536 bytes exceeds 65535"},
		{DataFields{Offset: 8, MsgLen: 10}, 3, "wire: invalid field value: DATA range [8,11) beyond message length 10"},
		{DataFields{Offset: 0xFFFFFFFF, MsgLen: 0xFFFFFFFF}, 1, "wire: invalid field value: DATA range [4294967295,4294967296) beyond message length 4294967295"},
	}
	for _, c := range cases {
		_, e1 := AppendDataHeaderFrom(nil, &c.f, c.n)
		_, e2 := AppendDataFrom(nil, &c.f, make([]byte, max(c.n, 0)))
		if c.n < 0 {
			e2 = e1 // a payload slice cannot be negative
		}
		if errText(e1) != c.want || errText(e2) != c.want {
			t.Errorf("%+v, %d: errors %q and %q, want %q", c.f, c.n, errText(e1), errText(e2), c.want)
		}
	}
}
