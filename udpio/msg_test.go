package udpio

import (
	"testing"

	"pgregory.net/rapid"
)

// RFC 3168 section 5: "The ECN field in the IP header ... with four ECN
// codepoints, '00' to '11'": Not-ECT 00, ECT(1) 01, ECT(0) 10, CE 11.
func TestECNCodepointsMatchRFC3168(t *testing.T) {
	cases := []struct {
		name string
		got  byte
		want byte
	}{
		{"Not-ECT", NotECT, 0b00},
		{"ECT(1)", ECT1, 0b01},
		{"ECT(0)", ECT0, 0b10},
		{"CE", CE, 0b11},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("%s = %02b, want %02b", c.name, c.got, c.want)
		}
	}
}

// The DSCP occupies the six high bits of the former TOS byte (RFC 2474) and
// ECN the two low ones: EF (46) with ECT(0) is 0xBA.
func TestMakeTOSPlacesDSCPAboveECN(t *testing.T) {
	if got := MakeTOS(46, ECT0); got != 0xBA {
		t.Fatalf("MakeTOS(46, ECT0) = %#x, want 0xba", got)
	}
	if got := MakeTOS(48, CE); got != 0xC3 {
		t.Fatalf("MakeTOS(48, CE) = %#x, want 0xc3", got)
	}
}

func TestTOSHelpersRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		dscp := rapid.ByteRange(0, 63).Draw(t, "dscp")
		ecn := rapid.ByteRange(0, 3).Draw(t, "ecn")
		tos := MakeTOS(dscp, ecn)
		if DSCP(tos) != dscp || ECN(tos) != ecn {
			t.Fatalf("MakeTOS(%d, %d) = %#x decodes to DSCP %d ECN %d", dscp, ecn, tos, DSCP(tos), ECN(tos))
		}
	})
}

// A switch marking congestion changes only the ECN field: the traffic class
// the DSCP carries must survive the mark.
func TestWithECNKeepsDSCP(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		tos := rapid.Byte().Draw(t, "tos")
		ecn := rapid.Byte().Draw(t, "ecn")
		got := WithECN(tos, ecn)
		if DSCP(got) != DSCP(tos) || ECN(got) != ecn&0b11 {
			t.Fatalf("WithECN(%#x, %d) = %#x", tos, ecn, got)
		}
	})
}

func TestPayloadIsBufUpToN(t *testing.T) {
	m := Msg{Buf: []byte("abcdef"), N: 3}
	if got := string(m.Payload()); got != "abc" {
		t.Fatalf("Payload() = %q, want %q", got, "abc")
	}
}
