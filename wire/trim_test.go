package wire

import (
	"bytes"
	"errors"
	"testing"
)

// "A trimmed header carries the packet's original sequence number and
// length, so the receiver can compute how many of those bytes are still
// missing." (FORGIVE, The loss budget)
func TestTrimKeepsWhatTheReceiverNeeds(t *testing.T) {
	pkt, err := AppendData(make([]byte, 0, 2048), testData, testPayload(1500))
	if err != nil {
		t.Fatal(err)
	}
	before := bytes.Clone(pkt[:DataLen])

	trimmed, err := Trim(pkt)
	if err != nil {
		t.Fatalf("Trim: %v", err)
	}
	if len(trimmed) != DataLen || &trimmed[0] != &pkt[0] {
		t.Fatalf("Trim must cut in place to %d bytes: got %d bytes, same buffer %v",
			DataLen, len(trimmed), &trimmed[0] == &pkt[0])
	}
	d, err := ParseData(trimmed)
	if err != nil {
		t.Fatalf("a trimmed header must parse: %v", err)
	}
	if !d.Trimmed() || d.Flags() != testData.Flags|DataTrimmed {
		t.Errorf("flags %#x, want %#x", d.Flags(), testData.Flags|DataTrimmed)
	}
	want := testData
	want.Flags |= DataTrimmed
	if got := d.Fields(); got != want {
		t.Errorf("fields after trim\n got %+v\nwant %+v", got, want)
	}
	if d.PayloadLen() != 1500 || len(d.Payload()) != 0 {
		t.Errorf("payload length %d with %d bytes left, want 1500 with 0", d.PayloadLen(), len(d.Payload()))
	}
	// Only the flag byte changed: a switch rewrites nothing else.
	before[1] |= DataTrimmed
	if !bytes.Equal(trimmed, before) {
		t.Errorf("trimmed header % x\n           want % x", trimmed, before)
	}
}

// "A refused range is requested for retransmission and reconsidered if it is
// trimmed again": a retransmission is a fresh packet and may be trimmed, but
// a header already trimmed cannot be trimmed a second time.
func TestTrimTwiceFails(t *testing.T) {
	pkt, err := AppendData(nil, testData, testPayload(64))
	if err != nil {
		t.Fatal(err)
	}
	once, err := Trim(pkt)
	if err != nil {
		t.Fatal(err)
	}
	snapshot := bytes.Clone(once)
	again, err := Trim(once)
	if !errors.Is(err, ErrNotData) {
		t.Errorf("second Trim error %v, want ErrNotData", err)
	}
	if !bytes.Equal(again, snapshot) {
		t.Errorf("a refused Trim must leave the packet alone")
	}
}

func TestTrimRefusesOtherPackets(t *testing.T) {
	for _, s := range samples(t) {
		if s.typ == TypeData {
			continue
		}
		b := bytes.Clone(s.b)
		if _, err := Trim(b); !errors.Is(err, ErrNotData) {
			t.Errorf("Trim(%s) error %v, want ErrNotData", s.name, err)
		}
		if !bytes.Equal(b, s.b) {
			t.Errorf("Trim(%s) modified a packet it refused", s.name)
		}
	}
	data, err := AppendData(nil, testData, nil)
	if err != nil {
		t.Fatal(err)
	}
	for n := range DataLen {
		if _, err := Trim(bytes.Clone(data[:n])); !errors.Is(err, ErrNotData) {
			t.Errorf("Trim of %d bytes: error %v, want ErrNotData", n, err)
		}
	}
}

// A data packet without payload (an empty message) can still be trimmed: it
// reports an empty missing range.
func TestTrimEmptyPayload(t *testing.T) {
	f := testData
	f.Offset, f.MsgLen = 0, 0
	pkt, err := AppendData(nil, f, nil)
	if err != nil {
		t.Fatal(err)
	}
	trimmed, err := Trim(pkt)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := ParseData(trimmed); err != nil || !d.Trimmed() || d.PayloadLen() != 0 {
		t.Errorf("trimmed empty DATA: %v", err)
	}
}

// The setters let a sender reuse a packet for a retransmission without
// re-encoding it.
func TestDataSetters(t *testing.T) {
	pkt, err := AppendData(nil, testData, testPayload(10))
	if err != nil {
		t.Fatal(err)
	}
	d := Data(pkt)
	d.SetFlags(d.Flags() | DataRetx)
	d.SetEntropy(0x1234)
	got, err := ParseData(pkt)
	if err != nil {
		t.Fatal(err)
	}
	want := testData
	want.Flags |= DataRetx
	want.Entropy = 0x1234
	if got.Fields() != want {
		t.Errorf("fields %+v, want %+v", got.Fields(), want)
	}
}
