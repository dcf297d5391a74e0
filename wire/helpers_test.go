package wire

import (
	"bytes"
	"errors"
	"testing"

	"pgregory.net/rapid"
)

// sample is one well-formed packet of a given type.
type sample struct {
	name string
	typ  Type
	b    []byte
}

var (
	testData = DataFields{
		Flags: DataFirst | DataAckReq, Entropy: 0xBEEF, Src: 3, Dst: 9,
		Flow: 0x01020304, Tags: Tags{Dst: 0x9A9A0001, Src: 0x3B3B0002}, PSN: 0xFFFFFFF0, Msg: 77, Offset: 8192, MsgLen: 1 << 20, Subflows: 4,
	}
	testAck = AckFields{
		Flags: FlagECNEcho | FlagEligible, Src: 9, Dst: 3, Flow: 0x01020304, Tags: Tags{Dst: 0x3B3B0002, Src: 0x9A9A0001},
		CumPSN: 100, SackBase: 101, Sack: 0x8000_0000_0000_0005, EchoPSN: 164,
	}
	testNack = NackFields{
		Flags: FlagEligible | FlagExhausted, Reason: NackTrimmed, Priority: PriorityHigh,
		Src: 9, Dst: 3, Flow: 0x01020304, Tags: Tags{Dst: 0x3B3B0002, Src: 0x9A9A0001}, PSN: 4000, Count: 1, Msg: 77, Offset: 8192, Length: 4096,
	}
	testCNP   = CNPFields{Src: 9, Dst: 3, Flow: 0x01020304, Tags: Tags{Dst: 0x3B3B0002, Src: 0x9A9A0001}, PSN: 4001}
	testProbe = ProbeFields{Kind: ProbeTail, Entropy: 0xCAFE, Src: 3, Dst: 9, Flow: 0x01020304,
		Tags: Tags{Dst: 0x9A9A0001, Src: 0x3B3B0002}, PSN: 4002, Subflow: 2, Subflows: 4}
	testPause   = PauseFields{Src: 0, Dst: 0, ClassMask: 0b0000_1001, Micros: 250}
	testConnect = ConnectFields{Src: 3, Dst: 9, Flow: 0x01020304, Tags: Tags{Src: 0x3B3B0002}}
	testAccept  = ConnectFields{Accept: true, Src: 9, Dst: 3, Flow: 0x01020304, Tags: Tags{Dst: 0x3B3B0002, Src: 0x9A9A0001}}
)

// testPayload returns n bytes that are easy to tell apart.
func testPayload(n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(i*7 + 1)
	}
	return p
}

// samples returns one valid packet of every type, trimmed DATA included.
func samples(t testing.TB) []sample {
	t.Helper()
	data, err := AppendData(nil, testData, testPayload(4096))
	if err != nil {
		t.Fatal(err)
	}
	untrimmed, err := AppendData(nil, testData, testPayload(1000))
	if err != nil {
		t.Fatal(err)
	}
	trimmed, err := Trim(untrimmed)
	if err != nil {
		t.Fatal(err)
	}
	return []sample{
		{"DATA", TypeData, data},
		{"trimmed DATA", TypeData, trimmed},
		{"ACK", TypeAck, AppendAck(nil, testAck)},
		{"NACK", TypeNack, AppendNack(nil, testNack)},
		{"CNP", TypeCNP, AppendCNPFields(nil, testCNP)},
		{"PROBE", TypeProbe, AppendProbe(nil, testProbe)},
		{"PAUSE", TypePause, AppendPauseFields(nil, PauseFields{Src: 3, Dst: 9, ClassMask: 0xFF, Micros: 1})},
		{"CONNECT", TypeConnect, AppendConnect(nil, testConnect)},
		{"ACCEPT", TypeAccept, AppendConnect(nil, testAccept)},
	}
}

// reencode builds a packet of type typ again from the fields of the valid
// packet b, using only the Append functions.
func reencode(t testing.TB, typ Type, b []byte) []byte {
	t.Helper()
	if Sealed(b) {
		return reencodeSealed(t, typ, b)
	}
	switch typ {
	case TypeData:
		d := Data(b)
		if d.Trimmed() {
			out, err := AppendDataHeader(nil, d.Fields(), int(d.PayloadLen()))
			if err != nil {
				t.Fatalf("AppendDataHeader of a valid trimmed packet: %v", err)
			}
			return out
		}
		out, err := AppendData(nil, d.Fields(), d.Payload())
		if err != nil {
			t.Fatalf("AppendData of a valid packet: %v", err)
		}
		return out
	case TypeAck:
		return AppendAck(nil, Ack(b).Fields())
	case TypeNack:
		return AppendNack(nil, Nack(b).Fields())
	case TypeCNP:
		return AppendCNPFields(nil, CNP(b).Fields())
	case TypeProbe:
		return AppendProbe(nil, Probe(b).Fields())
	case TypePause:
		return AppendPauseFields(nil, Pause(b).Fields())
	case TypeConnect, TypeAccept:
		return AppendConnect(nil, Connect(b).Fields())
	}
	t.Fatalf("reencode: type %v", typ)
	return nil
}

// reencodeSealed rebuilds a sealed packet from its parts: the plain
// header from its fields (so no header byte escapes the one-encoding
// rule), then the extension and the body through AppendSealed.
func reencodeSealed(t testing.TB, typ Type, b []byte) []byte {
	t.Helper()
	hdr, ext, body, err := SplitSealed(b)
	if err != nil {
		t.Fatalf("SplitSealed of a valid sealed %v: %v", typ, err)
	}
	plain := bytes.Clone(hdr)
	plain[offFlags] &^= FlagSealed
	var rebuilt []byte
	if typ == TypeData {
		d := Data(plain)
		rebuilt, err = AppendDataHeader(nil, d.Fields(), int(d.PayloadLen()))
		if err != nil {
			t.Fatalf("AppendDataHeader of a valid sealed header: %v", err)
		}
	} else {
		rebuilt = reencode(t, typ, plain)
	}
	out, err := AppendSealed(nil, rebuilt, ext, body)
	if err != nil {
		t.Fatalf("AppendSealed of a valid sealed %v's parts: %v", typ, err)
	}
	return out
}

// sentinels are every error the parsers may return, unwrapped.
var sentinels = []error{ErrTooShort, ErrBadVersion, ErrUnknownType, ErrBadLength, ErrBadField, ErrNotData}

func isSentinel(err error) bool {
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// Generators of valid field values for property tests.

func flagsIn(mask uint8) *rapid.Generator[uint8] {
	return rapid.Custom(func(t *rapid.T) uint8 { return rapid.Uint8().Draw(t, "flags") & mask })
}

func psnGen() *rapid.Generator[PSN] {
	return rapid.Custom(func(t *rapid.T) PSN { return PSN(rapid.Uint32().Draw(t, "psn")) })
}

func dataGen(payloadLen int) *rapid.Generator[DataFields] {
	return rapid.Custom(func(t *rapid.T) DataFields {
		off := rapid.Uint32Range(0, 1<<32-1-uint32(payloadLen)).Draw(t, "offset")
		return DataFields{
			Flags:    flagsIn(dataFlags&^DataTrimmed).Draw(t, "flags"),
			Entropy:  rapid.Uint16().Draw(t, "entropy"),
			Src:      rapid.Uint16().Draw(t, "src"),
			Dst:      rapid.Uint16().Draw(t, "dst"),
			Flow:     rapid.Uint32().Draw(t, "flow"),
			Tags:     tagsGen.Draw(t, "tags"),
			PSN:      psnGen().Draw(t, "psn"),
			Msg:      rapid.Uint32().Draw(t, "msg"),
			Offset:   off,
			MsgLen:   rapid.Uint32Range(off+uint32(payloadLen), 1<<32-1).Draw(t, "msgLen"),
			Subflows: rapid.Uint8().Draw(t, "subflows"),
		}
	})
}

var tagsGen = rapid.Custom(func(t *rapid.T) Tags {
	return Tags{Dst: rapid.Uint32().Draw(t, "dstTag"), Src: rapid.Uint32().Draw(t, "srcTag")}
})

var connectGen = rapid.Custom(func(t *rapid.T) ConnectFields {
	f := ConnectFields{
		Accept: rapid.Bool().Draw(t, "accept"),
		Src:    rapid.Uint16().Draw(t, "src"),
		Dst:    rapid.Uint16().Draw(t, "dst"),
		Flow:   rapid.Uint32().Draw(t, "flow"),
		Tags:   Tags{Src: rapid.Uint32Range(1, 1<<32-1).Draw(t, "srcTag")},
	}
	if f.Accept {
		f.Tags.Dst = rapid.Uint32Range(1, 1<<32-1).Draw(t, "dstTag")
	} else {
		f.Tags.Dst = rapid.Uint32().Draw(t, "dstTag")
	}
	return f
})

var ackGen = rapid.Custom(func(t *rapid.T) AckFields {
	return AckFields{
		Flags:    flagsIn(ackFlags).Draw(t, "flags"),
		Src:      rapid.Uint16().Draw(t, "src"),
		Dst:      rapid.Uint16().Draw(t, "dst"),
		Flow:     rapid.Uint32().Draw(t, "flow"),
		Tags:     tagsGen.Draw(t, "tags"),
		CumPSN:   psnGen().Draw(t, "cum"),
		SackBase: psnGen().Draw(t, "base"),
		Sack:     rapid.Uint64().Draw(t, "sack"),
		EchoPSN:  psnGen().Draw(t, "echo"),
	}
})

var nackReasons = []NackReason{NackTrimmed, NackTrimmedLastHop, NackOutOfWindow, NackGap, NackProbe}

var nackGen = rapid.Custom(func(t *rapid.T) NackFields {
	return NackFields{
		Flags:    flagsIn(nackFlags).Draw(t, "flags"),
		Reason:   rapid.SampledFrom(nackReasons).Draw(t, "reason"),
		Priority: rapid.SampledFrom([]uint8{PriorityNormal, PriorityHigh}).Draw(t, "priority"),
		Src:      rapid.Uint16().Draw(t, "src"),
		Dst:      rapid.Uint16().Draw(t, "dst"),
		Flow:     rapid.Uint32().Draw(t, "flow"),
		Tags:     tagsGen.Draw(t, "tags"),
		PSN:      psnGen().Draw(t, "psn"),
		Count:    rapid.Uint16().Draw(t, "count"),
		Msg:      rapid.Uint32().Draw(t, "msg"),
		Offset:   rapid.Uint32().Draw(t, "offset"),
		Length:   rapid.Uint32().Draw(t, "length"),
	}
})

var cnpGen = rapid.Custom(func(t *rapid.T) CNPFields {
	return CNPFields{
		Src:  rapid.Uint16().Draw(t, "src"),
		Dst:  rapid.Uint16().Draw(t, "dst"),
		Flow: rapid.Uint32().Draw(t, "flow"),
		Tags: tagsGen.Draw(t, "tags"),
		PSN:  psnGen().Draw(t, "psn"),
	}
})

var probeGen = rapid.Custom(func(t *rapid.T) ProbeFields {
	n := rapid.Uint8().Draw(t, "subflows")
	return ProbeFields{
		Kind:     rapid.SampledFrom([]ProbeKind{ProbeTail, ProbeRetx, ProbePeriodic}).Draw(t, "kind"),
		Entropy:  rapid.Uint16().Draw(t, "entropy"),
		Src:      rapid.Uint16().Draw(t, "src"),
		Dst:      rapid.Uint16().Draw(t, "dst"),
		Flow:     rapid.Uint32().Draw(t, "flow"),
		Tags:     tagsGen.Draw(t, "tags"),
		PSN:      psnGen().Draw(t, "psn"),
		Subflow:  rapid.Uint8Range(0, max(n, 1)-1).Draw(t, "subflow"),
		Subflows: n,
	}
})

var pauseGen = rapid.Custom(func(t *rapid.T) PauseFields {
	return PauseFields{
		Src:       rapid.Uint16().Draw(t, "src"),
		Dst:       rapid.Uint16().Draw(t, "dst"),
		ClassMask: rapid.Uint8().Draw(t, "mask"),
		Micros:    rapid.Uint16().Draw(t, "micros"),
	}
})
