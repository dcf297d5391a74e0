package layers

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/forgive-emu/forgive/wire"
)

// fieldSet is a Forgive without its byte slices, so it can be compared.
type fieldSet struct {
	Type       wire.Type
	Data       wire.DataFields
	PayloadLen uint16
	Ack        wire.AckFields
	Nack       wire.NackFields
	CNP        wire.CNPFields
	Probe      wire.ProbeFields
	Pause      wire.PauseFields
}

func fieldsOf(l *Forgive) fieldSet {
	return fieldSet{l.Type, l.Data, l.PayloadLen, l.Ack, l.Nack, l.CNP, l.Probe, l.Pause}
}

// A capture decoded from Ethernet shows the FORGIVE layer after UDP, with
// every field of every type, and a DATA payload as gopacket.Payload.
func TestDecodeEveryTypeFromEthernet(t *testing.T) {
	for _, e := range examples() {
		t.Run(e.name, func(t *testing.T) {
			p := gopacket.NewPacket(exampleFrame(t, e), layers.LayerTypeEthernet, strict)
			if el := p.ErrorLayer(); el != nil {
				t.Fatalf("decode error: %v", el.Error())
			}
			want := []gopacket.LayerType{layers.LayerTypeEthernet, layers.LayerTypeIPv4, layers.LayerTypeUDP, LayerTypeForgive}
			if e.payload != nil {
				want = append(want, gopacket.LayerTypePayload)
			}
			if got := layerTypes(p); !equalTypes(got, want) {
				t.Fatalf("layers %v, want %v", got, want)
			}
			f := p.Layer(LayerTypeForgive).(*Forgive)
			if got, want := fieldsOf(f), fieldsOf(&e.layer); got != want {
				t.Errorf("fields\n got %+v\nwant %+v", got, want)
			}
			if e.payload != nil && !bytes.Equal(p.ApplicationLayer().Payload(), e.payload) {
				t.Errorf("payload differs")
			}
			checkWireBytes(t, p, e)
		})
	}
}

// checkWireBytes checks that the UDP payload is exactly what package wire
// encodes for the same fields: the layer adds no encoding of its own.
func checkWireBytes(t *testing.T, p gopacket.Packet, e example) {
	t.Helper()
	var want []byte
	var err error
	switch l := e.layer; l.Type {
	case wire.TypeData:
		if want, err = wire.AppendDataHeader(nil, l.Data, int(l.PayloadLen)); err == nil {
			want = append(want, e.payload...)
		}
	case wire.TypeAck:
		want = wire.AppendAck(nil, l.Ack)
	case wire.TypeNack:
		want = wire.AppendNack(nil, l.Nack)
	case wire.TypeCNP:
		want = wire.AppendCNPFields(nil, l.CNP)
	case wire.TypeProbe:
		want = wire.AppendProbe(nil, l.Probe)
	case wire.TypePause:
		want = wire.AppendPauseFields(nil, l.Pause)
	case wire.TypeConnect, wire.TypeAccept:
		want = wire.AppendConnect(nil, l.Connect)
	}
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Layer(layers.LayerTypeUDP).LayerPayload(); !bytes.Equal(got, want) {
		t.Errorf("UDP payload\n got % x\nwant % x", got, want)
	}
}

func layerTypes(p gopacket.Packet) []gopacket.LayerType {
	var ts []gopacket.LayerType
	for _, l := range p.Layers() {
		ts = append(ts, l.LayerType())
	}
	return ts
}

func equalTypes(a, b []gopacket.LayerType) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Feedback flows back from port 4793 to the sender's port: gopacket tries
// the destination port first, then the source port.
func TestDecodeFromSourcePort(t *testing.T) {
	e := examples()[2] // ACK
	l := e.layer
	b := frame(t, l.Type, endpoint{9, wire.DefaultPort}, endpoint{3, 50000}, &l)
	p := gopacket.NewPacket(b, layers.LayerTypeEthernet, strict)
	f, ok := p.Layer(LayerTypeForgive).(*Forgive)
	if !ok || fieldsOf(f) != fieldsOf(&e.layer) {
		t.Fatalf("ACK from port %d not decoded: %v", wire.DefaultPort, p)
	}
}

func TestRegisterUDPPort(t *testing.T) {
	const port = 47930
	e := examples()[4] // CNP
	l := e.layer
	b := frame(t, l.Type, endpoint{9, 50000}, endpoint{3, port}, &l)
	if p := gopacket.NewPacket(b, layers.LayerTypeEthernet, strict); p.Layer(LayerTypeForgive) != nil {
		t.Fatalf("port %d decoded as FORGIVE before it was registered", port)
	}
	RegisterUDPPort(port)
	defer layers.RegisterUDPPortLayerType(port, gopacket.LayerTypePayload)
	if p := gopacket.NewPacket(b, layers.LayerTypeEthernet, strict); p.Layer(LayerTypeForgive) == nil {
		t.Fatalf("port %d not decoded as FORGIVE after RegisterUDPPort", port)
	}
}

// A DecodingLayerParser reuses one Forgive for every packet; each decode
// must overwrite the previous packet's fields.
func TestDecodingLayerParser(t *testing.T) {
	var (
		eth     layers.Ethernet
		ip      layers.IPv4
		udp     layers.UDP
		fg      Forgive
		payload gopacket.Payload
		decoded []gopacket.LayerType
	)
	parser := gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet, &eth, &ip, &udp, &fg, &payload)
	for _, e := range examples() {
		if err := parser.DecodeLayers(exampleFrame(t, e), &decoded); err != nil {
			t.Fatalf("%s: DecodeLayers: %v", e.name, err)
		}
		want := 4
		if e.payload != nil {
			want = 5
		}
		if len(decoded) != want || decoded[3] != LayerTypeForgive {
			t.Fatalf("%s: decoded %v", e.name, decoded)
		}
		if got, want := fieldsOf(&fg), fieldsOf(&e.layer); got != want {
			t.Errorf("%s: fields\n got %+v\nwant %+v", e.name, got, want)
		}
		if e.payload != nil && !bytes.Equal(payload, e.payload) {
			t.Errorf("%s: payload differs", e.name)
		}
	}
}

// Decoding into a reused layer allocates nothing, like package wire.
func TestDecodeFromBytesAllocs(t *testing.T) {
	var fg Forgive
	for _, e := range examples() {
		b := datagram(t, e)
		n := testing.AllocsPerRun(100, func() {
			if err := fg.DecodeFromBytes(b, gopacket.NilDecodeFeedback); err != nil {
				panic(err)
			}
		})
		if n != 0 {
			t.Errorf("%s: %v allocations per decode, want 0", e.name, n)
		}
	}
}

// datagram returns the UDP payload of e's frame: the FORGIVE packet alone,
// without the padding Ethernet adds to short frames.
func datagram(t testing.TB, e example) []byte {
	t.Helper()
	p := gopacket.NewPacket(exampleFrame(t, e), layers.LayerTypeEthernet, strict)
	return p.Layer(layers.LayerTypeUDP).LayerPayload()
}

// decodePayload decodes b as the UDP payload of a datagram to the FORGIVE
// port and returns the packet.
func decodePayload(t *testing.T, b []byte) gopacket.Packet {
	t.Helper()
	raw := frame(t, wire.TypeData, endpoint{3, 49152}, endpoint{9, wire.DefaultPort}, gopacket.Payload(b))
	return gopacket.NewPacket(raw, layers.LayerTypeEthernet, strict)
}

// wantFailure checks that p ends in a DecodeFailure wrapping want, without a
// Forgive layer.
func wantFailure(t *testing.T, what string, p gopacket.Packet, want error) {
	t.Helper()
	if p.Layer(LayerTypeForgive) != nil {
		t.Errorf("%s: decoded a Forgive layer from a malformed packet", what)
	}
	fail, ok := p.Layer(gopacket.LayerTypeDecodeFailure).(*gopacket.DecodeFailure)
	if !ok {
		t.Errorf("%s: no DecodeFailure layer: %v", what, p)
		return
	}
	if !errors.Is(fail.Error(), want) {
		t.Errorf("%s: failure %v, want %v", what, fail.Error(), want)
	}
}

// Malformed datagrams become a DecodeFailure layer carrying wire's sentinel
// error, never a panic and never a half-filled Forgive layer.
func TestMalformedBecomesDecodeFailure(t *testing.T) {
	for _, e := range examples() {
		good := datagram(t, e)
		// An empty datagram has no FORGIVE layer at all, as gopacket does
		// not decode past an empty payload.
		if p := decodePayload(t, nil); p.Layer(LayerTypeForgive) != nil || p.ErrorLayer() != nil {
			t.Errorf("empty datagram: %v", p)
		}
		for n := 1; n < len(good); n++ {
			want := wire.ErrTooShort
			if e.layer.Type == wire.TypeData && n >= wire.DataLen {
				want = wire.ErrBadLength
			}
			wantFailure(t, e.name+" truncated", decodePayload(t, good[:n]), want)
		}
		bad := bytes.Clone(good)
		bad[0] = 1<<4 | bad[0]&0x0F
		wantFailure(t, e.name+" version 1", decodePayload(t, bad), wire.ErrBadVersion)
	}
	unknown := []byte{wire.Version<<4 | 9, 0, 0, 0, 0, 0, 0, 0}
	wantFailure(t, "type 9", decodePayload(t, unknown), wire.ErrUnknownType)
	ack := wire.AppendAck(nil, wire.AckFields{Flags: 0})
	ack[1] = 0x40
	wantFailure(t, "ACK flag 0x40", decodePayload(t, ack), wire.ErrBadField)
	// The sealed bit makes a plain ACK a sealed one without its sublayer.
	ack[1] = wire.FlagSealed
	wantFailure(t, "ACK flag 0x80", decodePayload(t, ack), wire.ErrTooShort)
}

// Truncation is reported to gopacket, as its own layers do.
func TestTruncatedFeedback(t *testing.T) {
	p := decodePayload(t, []byte{wire.Version<<4 | uint8(wire.TypeAck), 0, 0})
	if !p.Metadata().Truncated {
		t.Errorf("a datagram shorter than its header must mark the packet truncated")
	}
}

func TestSerializeRefusesBadLayers(t *testing.T) {
	opts := gopacket.SerializeOptions{FixLengths: true}
	ex := examples()
	for _, tc := range []struct {
		name string
		l    Forgive
		next []byte
		want error
	}{
		{"ACK with payload", ex[2].layer, []byte{1}, ErrNoPayload},
		{"trimmed DATA with payload", ex[1].layer, []byte{1}, ErrNoPayload},
		{"unknown type", Forgive{Type: 9}, nil, wire.ErrUnknownType},
		{"zero type", Forgive{}, nil, wire.ErrUnknownType},
		{"DATA beyond its message", Forgive{Type: wire.TypeData, Data: wire.DataFields{MsgLen: 10}}, make([]byte, 11), wire.ErrBadField},
	} {
		buf := gopacket.NewSerializeBuffer()
		if err := gopacket.SerializeLayers(buf, opts, &tc.l, gopacket.Payload(tc.next)); !errors.Is(err, tc.want) {
			t.Errorf("%s: error %v, want %v", tc.name, err, tc.want)
		}
	}
}

// Without FixLengths the layer writes PayloadLen as given, as gopacket's own
// layers write their length fields; the result fails to decode.
func TestSerializeWithoutFixLengths(t *testing.T) {
	l := examples()[0].layer
	l.PayloadLen = 10
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{}, &l, gopacket.Payload(testPayload(11))); err != nil {
		t.Fatal(err)
	}
	if _, err := wire.Validate(buf.Bytes()); !errors.Is(err, wire.ErrBadLength) {
		t.Errorf("payload 11 bytes with PayloadLen 10: Validate error %v, want ErrBadLength", err)
	}
}

func TestAccessorsAndString(t *testing.T) {
	hosts := map[wire.Type][2]uint16{
		wire.TypeData: {3, 9}, wire.TypeAck: {9, 3}, wire.TypeNack: {9, 3},
		wire.TypeCNP: {9, 3}, wire.TypeProbe: {3, 9}, wire.TypePause: {0, 0},
		wire.TypeConnect: {3, 9}, wire.TypeAccept: {9, 3},
	}
	for _, e := range examples() {
		l := e.layer
		if h := hosts[l.Type]; l.Src() != h[0] || l.Dst() != h[1] {
			t.Errorf("%s: hosts %d->%d, want %d->%d", e.name, l.Src(), l.Dst(), h[0], h[1])
		}
		if l.Trimmed() != (e.name == "trimmed DATA") {
			t.Errorf("%s: Trimmed() = %v", e.name, l.Trimmed())
		}
		if (l.Tags().Src == 0) != (l.Type == wire.TypePause) {
			t.Errorf("%s: Tags() = %+v", e.name, l.Tags())
		}
		s := l.String()
		if !strings.HasPrefix(s, l.Type.String()) {
			t.Errorf("%s: String() = %q does not start with the type", e.name, s)
		}
		if l.Trimmed() != strings.Contains(s, "TRIMMED") {
			t.Errorf("%s: String() = %q", e.name, s)
		}
	}
}

func BenchmarkDecodeFromBytes(b *testing.B) {
	var fg Forgive
	pkt := datagram(b, examples()[0])
	b.ReportAllocs()
	for b.Loop() {
		if err := fg.DecodeFromBytes(pkt, gopacket.NilDecodeFeedback); err != nil {
			b.Fatal(err)
		}
	}
}
