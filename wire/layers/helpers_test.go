package layers

import (
	"net"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/forgive-emu/forgive/wire"
)

// example is one packet of a given type, as a Forgive layer and its payload.
type example struct {
	name    string
	layer   Forgive
	payload []byte // DATA only
}

func testPayload(n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(i*13 + 5)
	}
	return p
}

// examples returns one packet of every type, trimmed DATA included.
func examples() []example {
	data := wire.DataFields{
		Flags: wire.DataFirst | wire.DataRetx, Entropy: 0x1234, Src: 3, Dst: 9,
		Flow: 42, Tags: wire.Tags{Dst: 0x99990001, Src: 0x33330002}, PSN: 0xFFFFFFFE, Msg: 7, Offset: 4096, MsgLen: 65536, Subflows: 2,
	}
	trimmed := data
	trimmed.Flags |= wire.DataTrimmed
	trimmed.PSN = 0xFFFFFFFF
	return []example{
		{"DATA", Forgive{Type: wire.TypeData, Data: data, PayloadLen: 1200}, testPayload(1200)},
		{"trimmed DATA", Forgive{Type: wire.TypeData, Data: trimmed, PayloadLen: 4096}, nil},
		{"ACK", Forgive{Type: wire.TypeAck, Ack: wire.AckFields{
			Flags: wire.FlagEligible | wire.FlagECNEcho, Src: 9, Dst: 3, Flow: 42, Tags: wire.Tags{Dst: 0x33330002, Src: 0x99990001},
			CumPSN: 100, SackBase: 102, Sack: 1<<0 | 1<<3, EchoPSN: 105}}, nil},
		{"NACK", Forgive{Type: wire.TypeNack, Nack: wire.NackFields{
			Flags: wire.FlagEligible | wire.FlagExhausted, Reason: wire.NackTrimmed, Priority: wire.PriorityHigh,
			Src: 9, Dst: 3, Flow: 42, Tags: wire.Tags{Dst: 0x33330002, Src: 0x99990001}, PSN: 0xFFFFFFFF, Count: 1, Msg: 7, Offset: 8192, Length: 4096}}, nil},
		{"CNP", Forgive{Type: wire.TypeCNP, CNP: wire.CNPFields{Src: 9, Dst: 3, Flow: 42, Tags: wire.Tags{Dst: 0x33330002, Src: 0x99990001}, PSN: 77}}, nil},
		{"PROBE", Forgive{Type: wire.TypeProbe, Probe: wire.ProbeFields{
			Kind: wire.ProbeRetx, Entropy: 0xABCD, Src: 3, Dst: 9, Flow: 42, Tags: wire.Tags{Dst: 0x99990001, Src: 0x33330002}, PSN: 78, Subflow: 1, Subflows: 2}}, nil},
		{"PAUSE", Forgive{Type: wire.TypePause, Pause: wire.PauseFields{ClassMask: 0b0000_0101, Micros: 300}}, nil},
		{"CONNECT", Forgive{Type: wire.TypeConnect, Connect: wire.ConnectFields{
			Src: 3, Dst: 9, Flow: 42, Tags: wire.Tags{Src: 0x33330002}}}, nil},
		{"ACCEPT", Forgive{Type: wire.TypeAccept, Connect: wire.ConnectFields{
			Accept: true, Src: 9, Dst: 3, Flow: 42, Tags: wire.Tags{Dst: 0x33330002, Src: 0x99990001}}}, nil},
	}
}

// endpoint is one end of a datagram: a host id, which becomes the address
// 10.0.x.y, and a UDP port.
type endpoint struct {
	host, port uint16
}

func (e endpoint) ip() net.IP { return net.IP{10, 0, byte(e.host >> 8), byte(e.host)} }

// frame serializes Ethernet/IPv4/UDP around the given FORGIVE layers, with
// the DSCP and ECN package wire suggests for the packet's type.
func frame(t testing.TB, typ wire.Type, src, dst endpoint, top ...gopacket.SerializableLayer) []byte {
	t.Helper()
	eth := &layers.Ethernet{
		SrcMAC:       net.HardwareAddr{0x02, 0, 0, 0, 0, 3},
		DstMAC:       net.HardwareAddr{0x02, 0, 0, 0, 0, 9},
		EthernetType: layers.EthernetTypeIPv4,
	}
	ip := &layers.IPv4{
		Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP,
		TOS:   wire.DefaultDSCP(typ)<<2 | wire.DefaultECN(typ),
		SrcIP: src.ip(), DstIP: dst.ip(),
	}
	udp := &layers.UDP{SrcPort: layers.UDPPort(src.port), DstPort: layers.UDPPort(dst.port)}
	if err := udp.SetNetworkLayerForChecksum(ip); err != nil {
		t.Fatal(err)
	}
	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
	all := append([]gopacket.SerializableLayer{eth, ip, udp}, top...)
	if err := gopacket.SerializeLayers(buf, opts, all...); err != nil {
		t.Fatalf("SerializeLayers: %v", err)
	}
	return buf.Bytes()
}

// exampleFrame serializes e as a datagram to the FORGIVE port.
func exampleFrame(t testing.TB, e example) []byte {
	t.Helper()
	l := e.layer // SerializeTo may fix lengths in its receiver
	top := []gopacket.SerializableLayer{&l}
	if e.payload != nil {
		top = append(top, gopacket.Payload(e.payload))
	}
	return frame(t, l.Type, endpoint{l.Src(), 49152}, endpoint{l.Dst(), wire.DefaultPort}, top...)
}

// strict decodes without gopacket's panic recovery, so a panic in a decoder
// fails the test instead of turning into a DecodeFailure layer.
var strict = gopacket.DecodeOptions{SkipDecodeRecovery: true}
