package wire

import (
	"bytes"
	"testing"

	"pgregory.net/rapid"
)

// prefix is written before each encoded packet to check that Append keeps
// what the buffer already holds.
var prefix = []byte{0xAA, 0xBB, 0xCC}

// appended checks that out starts with prefix, validates as typ with length
// n, and returns the packet after the prefix.
func appended(t *rapid.T, out []byte, typ Type, n int) []byte {
	if !bytes.HasPrefix(out, prefix) {
		t.Fatalf("Append overwrote the buffer's prefix: % x", out[:len(prefix)])
	}
	pkt := out[len(prefix):]
	if len(pkt) != n {
		t.Fatalf("%v is %d bytes, want %d", typ, len(pkt), n)
	}
	got, err := Validate(pkt)
	if err != nil || got != typ {
		t.Fatalf("Validate = %v, %v; want %v, nil", got, err, typ)
	}
	return pkt
}

func TestRoundTripData(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		payload := rapid.SliceOfN(rapid.Byte(), 0, 9000).Draw(t, "payload")
		want := dataGen(len(payload)).Draw(t, "fields")
		out, err := AppendData(bytes.Clone(prefix), want, payload)
		if err != nil {
			t.Fatalf("AppendData: %v", err)
		}
		d, err := ParseData(appended(t, out, TypeData, DataLen+len(payload)))
		if err != nil {
			t.Fatalf("ParseData: %v", err)
		}
		if got := d.Fields(); got != want {
			t.Fatalf("fields\n got %+v\nwant %+v", got, want)
		}
		if !bytes.Equal(d.Payload(), payload) || int(d.PayloadLen()) != len(payload) || d.Trimmed() {
			t.Fatalf("payload %d bytes (header says %d, trimmed %v), want %d",
				len(d.Payload()), d.PayloadLen(), d.Trimmed(), len(payload))
		}
	})
}

// A header built with DataTrimmed set is the packet Trim would have left.
func TestRoundTripTrimmedHeader(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, MaxPayload).Draw(t, "payloadLen")
		f := dataGen(n).Draw(t, "fields")
		full, err := AppendData(nil, f, make([]byte, n))
		if err != nil {
			t.Fatalf("AppendData: %v", err)
		}
		trimmed, err := Trim(full)
		if err != nil {
			t.Fatalf("Trim: %v", err)
		}
		f.Flags |= DataTrimmed
		hdr, err := AppendDataHeader(bytes.Clone(prefix), f, n)
		if err != nil {
			t.Fatalf("AppendDataHeader: %v", err)
		}
		if got := appended(t, hdr, TypeData, DataLen); !bytes.Equal(got, trimmed) {
			t.Fatalf("AppendDataHeader % x\nTrim             % x", got, trimmed)
		}
	})
}

func TestRoundTripAck(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		want := ackGen.Draw(t, "fields")
		a, err := ParseAck(appended(t, AppendAck(bytes.Clone(prefix), want), TypeAck, AckLen))
		if err != nil {
			t.Fatalf("ParseAck: %v", err)
		}
		if got := a.Fields(); got != want {
			t.Fatalf("fields\n got %+v\nwant %+v", got, want)
		}
		if a.ECNEcho() != (want.Flags&FlagECNEcho != 0) || a.Eligible() != (want.Flags&FlagEligible != 0) ||
			a.Exhausted() != (want.Flags&FlagExhausted != 0) {
			t.Fatalf("flag accessors disagree with flags %#x", want.Flags)
		}
	})
}

func TestRoundTripNack(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		want := nackGen.Draw(t, "fields")
		n, err := ParseNack(appended(t, AppendNack(bytes.Clone(prefix), want), TypeNack, NackLen))
		if err != nil {
			t.Fatalf("ParseNack: %v", err)
		}
		if got := n.Fields(); got != want {
			t.Fatalf("fields\n got %+v\nwant %+v", got, want)
		}
		if n.Eligible() != (want.Flags&FlagEligible != 0) || n.Exhausted() != (want.Flags&FlagExhausted != 0) {
			t.Fatalf("flag accessors disagree with flags %#x", want.Flags)
		}
	})
}

func TestRoundTripCNP(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		want := cnpGen.Draw(t, "fields")
		out := AppendCNPFields(bytes.Clone(prefix), want)
		c, err := ParseCNP(appended(t, out, TypeCNP, CNPLen))
		if err != nil {
			t.Fatalf("ParseCNP: %v", err)
		}
		if got := c.Fields(); got != want {
			t.Fatalf("fields\n got %+v\nwant %+v", got, want)
		}
	})
}

func TestRoundTripProbe(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		want := probeGen.Draw(t, "fields")
		p, err := ParseProbe(appended(t, AppendProbe(bytes.Clone(prefix), want), TypeProbe, ProbeLen))
		if err != nil {
			t.Fatalf("ParseProbe: %v", err)
		}
		if got := p.Fields(); got != want {
			t.Fatalf("fields\n got %+v\nwant %+v", got, want)
		}
	})
}

func TestRoundTripConnect(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		want := connectGen.Draw(t, "fields")
		typ := TypeConnect
		if want.Accept {
			typ = TypeAccept
		}
		c, err := ParseConnect(appended(t, AppendConnect(bytes.Clone(prefix), want), typ, ConnectLen))
		if err != nil {
			t.Fatalf("ParseConnect: %v", err)
		}
		if got := c.Fields(); got != want {
			t.Fatalf("fields\n got %+v\nwant %+v", got, want)
		}
	})
}

// A CONNECT names its sender's tag and an ACCEPT both: a zero where a tag
// must be is refused, so a handshake packet always carries what it binds.
func TestConnectZeroTagsRefused(t *testing.T) {
	noSrc := testConnect
	noSrc.Tags.Src = 0
	wantErr(t, "CONNECT with source tag 0", TypeConnect, AppendConnect(nil, noSrc), ErrBadField)
	noDst := testAccept
	noDst.Tags.Dst = 0
	wantErr(t, "ACCEPT with destination tag 0", TypeAccept, AppendConnect(nil, noDst), ErrBadField)
	if _, err := ParseConnect(AppendConnect(nil, testConnect)); err != nil {
		t.Errorf("CONNECT with destination tag 0 (peer's tag unknown): %v", err)
	}
}

func TestRoundTripPause(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		want := pauseGen.Draw(t, "fields")
		p, err := ParsePause(appended(t, AppendPauseFields(bytes.Clone(prefix), want), TypePause, PauseLen))
		if err != nil {
			t.Fatalf("ParsePause: %v", err)
		}
		if got := p.Fields(); got != want {
			t.Fatalf("fields\n got %+v\nwant %+v", got, want)
		}
	})
}

// "stops (or, with zero time, resumes)": AppendPause is the link-local form,
// with both hosts zero.
func TestAppendPauseIsLinkLocal(t *testing.T) {
	p, err := ParsePause(AppendPause(nil, 0b101, 0))
	if err != nil {
		t.Fatal(err)
	}
	want := PauseFields{ClassMask: 0b101}
	if got := p.Fields(); got != want {
		t.Errorf("fields %+v, want %+v", got, want)
	}
}

// Headers route on the common prefix alone.
func TestHeaderView(t *testing.T) {
	for _, s := range samples(t) {
		h := Header(s.b)
		var src, dst uint16
		switch s.typ {
		case TypeData:
			src, dst = Data(s.b).Src(), Data(s.b).Dst()
		case TypeAck:
			src, dst = Ack(s.b).Src(), Ack(s.b).Dst()
		case TypeNack:
			src, dst = Nack(s.b).Src(), Nack(s.b).Dst()
		case TypeCNP:
			src, dst = CNP(s.b).Src(), CNP(s.b).Dst()
		case TypeProbe:
			src, dst = Probe(s.b).Src(), Probe(s.b).Dst()
		case TypePause:
			src, dst = Pause(s.b).Src(), Pause(s.b).Dst()
		case TypeConnect, TypeAccept:
			src, dst = Connect(s.b).Src(), Connect(s.b).Dst()
		}
		if h.Version() != Version || h.Type() != s.typ || h.Flags() != s.b[1] || h.Src() != src || h.Dst() != dst {
			t.Errorf("%s: Header sees v%d %v flags %#x %d->%d, want v%d %v flags %#x %d->%d", s.name,
				h.Version(), h.Type(), h.Flags(), h.Src(), h.Dst(), Version, s.typ, s.b[1], src, dst)
		}
		if got, err := Peek(s.b); err != nil || got != s.typ {
			t.Errorf("%s: Peek = %v, %v", s.name, got, err)
		}
	}
}

func TestTypeAndReasonStrings(t *testing.T) {
	for typ, want := range map[Type]string{TypeData: "DATA", TypePause: "PAUSE", 0: "invalid", 9: "Type(9)"} {
		if got := typ.String(); got != want {
			t.Errorf("Type(%d).String() = %q, want %q", uint8(typ), got, want)
		}
	}
	for r, want := range map[NackReason]string{NackTrimmed: "trimmed", NackProbe: "probe", 0x77: "NackReason(0x77)"} {
		if got := r.String(); got != want {
			t.Errorf("NackReason(%#x).String() = %q, want %q", uint8(r), got, want)
		}
	}
	for k, want := range map[ProbeKind]string{ProbeTail: "tail", ProbePeriodic: "periodic", 0: "ProbeKind(0)"} {
		if got := k.String(); got != want {
			t.Errorf("ProbeKind(%d).String() = %q, want %q", uint8(k), got, want)
		}
	}
}

func TestDefaultClass(t *testing.T) {
	for _, tc := range []struct {
		typ       Type
		dscp, ecn uint8
	}{
		{TypeData, 0, ECNECT0},
		{TypeProbe, 0, ECNECT0},
		{TypeAck, 46, ECNNotECT},
		{TypeNack, 46, ECNNotECT},
		{TypePause, 46, ECNNotECT},
		{TypeCNP, 48, ECNNotECT},
	} {
		if d, e := DefaultDSCP(tc.typ), DefaultECN(tc.typ); d != tc.dscp || e != tc.ecn {
			t.Errorf("%v: DSCP %d ECN %02b, want %d %02b", tc.typ, d, e, tc.dscp, tc.ecn)
		}
	}
}
