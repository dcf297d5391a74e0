package layers

import (
	"errors"
	"fmt"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/forgive-emu/forgive/wire"
)

// LayerTypeNumber is the number LayerTypeForgive is registered under, in the
// range gopacket keeps for application layers (1000-1999). A program that
// already uses it can re-register the layer with gopacket.OverrideLayerType.
const LayerTypeNumber = 1793

// LayerTypeForgive is the gopacket layer type of every FORGIVE packet.
var LayerTypeForgive = gopacket.RegisterLayerType(LayerTypeNumber, gopacket.LayerTypeMetadata{
	Name:    "Forgive",
	Decoder: gopacket.DecodeFunc(decodeForgive),
})

func init() {
	RegisterUDPPort(wire.DefaultPort)
}

// RegisterUDPPort makes gopacket decode UDP datagrams to or from port as
// FORGIVE packets. DefaultPort is registered when the package loads.
func RegisterUDPPort(port uint16) {
	layers.RegisterUDPPortLayerType(layers.UDPPort(port), LayerTypeForgive)
}

// Forgive is the layer of one FORGIVE packet of any type. Type says which of
// the per-type field sets is meaningful; the others are zero. The payload of
// an untrimmed DATA packet becomes the next layer, a gopacket.Payload.
//
// Decoding validates the packet with package wire, so a Forgive layer is
// always well formed; a malformed packet becomes a gopacket.DecodeFailure.
// Serializing encodes the field set Type selects, with wire's Append
// functions.
type Forgive struct {
	layers.BaseLayer

	Type wire.Type

	// Data holds a DATA packet's header. DataTrimmed in Data.Flags marks a
	// header a switch trimmed; PayloadLen is the payload length as sent,
	// which a trimmed header keeps although its payload is gone.
	Data       wire.DataFields
	PayloadLen uint16

	Ack   wire.AckFields
	Nack  wire.NackFields
	CNP   wire.CNPFields
	Probe wire.ProbeFields
	Pause wire.PauseFields
	// Connect holds a CONNECT's or an ACCEPT's fields (Type says which).
	Connect wire.ConnectFields
}

// ErrNoPayload is returned by SerializeTo when a payload follows a packet
// that cannot carry one: any type but DATA, or a trimmed DATA header.
var ErrNoPayload = errors.New("forgive: packet type carries no payload")

// LayerType returns LayerTypeForgive.
func (f *Forgive) LayerType() gopacket.LayerType { return LayerTypeForgive }

// CanDecode returns LayerTypeForgive.
func (f *Forgive) CanDecode() gopacket.LayerClass { return LayerTypeForgive }

// NextLayerType returns gopacket.LayerTypePayload when a DATA packet carries
// payload, and gopacket.LayerTypeZero otherwise.
func (f *Forgive) NextLayerType() gopacket.LayerType {
	if len(f.Payload) > 0 {
		return gopacket.LayerTypePayload
	}
	return gopacket.LayerTypeZero
}

// Trimmed reports whether f is a DATA header a switch trimmed.
func (f *Forgive) Trimmed() bool {
	return f.Type == wire.TypeData && f.Data.Flags&wire.DataTrimmed != 0
}

// Src returns the source host id of any packet type.
func (f *Forgive) Src() uint16 { s, _ := f.hosts(); return s }

// Dst returns the destination host id of any packet type.
func (f *Forgive) Dst() uint16 { _, d := f.hosts(); return d }

func (f *Forgive) hosts() (src, dst uint16) {
	switch f.Type {
	case wire.TypeData:
		return f.Data.Src, f.Data.Dst
	case wire.TypeAck:
		return f.Ack.Src, f.Ack.Dst
	case wire.TypeNack:
		return f.Nack.Src, f.Nack.Dst
	case wire.TypeCNP:
		return f.CNP.Src, f.CNP.Dst
	case wire.TypeProbe:
		return f.Probe.Src, f.Probe.Dst
	case wire.TypePause:
		return f.Pause.Src, f.Pause.Dst
	case wire.TypeConnect, wire.TypeAccept:
		return f.Connect.Src, f.Connect.Dst
	}
	return 0, 0
}

// Tags returns the flow tags of any packet type but PAUSE (zero for a
// PAUSE).
func (f *Forgive) Tags() wire.Tags {
	switch f.Type {
	case wire.TypeData:
		return f.Data.Tags
	case wire.TypeAck:
		return f.Ack.Tags
	case wire.TypeNack:
		return f.Nack.Tags
	case wire.TypeCNP:
		return f.CNP.Tags
	case wire.TypeProbe:
		return f.Probe.Tags
	case wire.TypeConnect, wire.TypeAccept:
		return f.Connect.Tags
	}
	return wire.Tags{}
}

// DecodeFromBytes decodes data as a FORGIVE packet, validating it with
// package wire. It implements gopacket.DecodingLayer; f is overwritten, so a
// parser can reuse one Forgive for every packet.
func (f *Forgive) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	*f = Forgive{}
	hdrLen, err := f.decodeFields(data)
	if err != nil {
		if errors.Is(err, wire.ErrTooShort) {
			df.SetTruncated()
		}
		return err
	}
	f.BaseLayer = layers.BaseLayer{Contents: data[:hdrLen], Payload: data[hdrLen:]}
	return nil
}

// decodeFields fills the field set of data's type and returns the header
// length.
func (f *Forgive) decodeFields(data []byte) (int, error) {
	t, err := wire.Peek(data)
	if err != nil {
		return 0, err
	}
	f.Type = t
	switch t {
	case wire.TypeData:
		d, err := wire.ParseData(data)
		if err != nil {
			return 0, err
		}
		f.Data, f.PayloadLen = d.Fields(), d.PayloadLen()
		return wire.DataLen, nil
	case wire.TypeAck:
		a, err := wire.ParseAck(data)
		if err != nil {
			return 0, err
		}
		f.Ack = a.Fields()
	case wire.TypeNack:
		n, err := wire.ParseNack(data)
		if err != nil {
			return 0, err
		}
		f.Nack = n.Fields()
	case wire.TypeCNP:
		c, err := wire.ParseCNP(data)
		if err != nil {
			return 0, err
		}
		f.CNP = c.Fields()
	case wire.TypeProbe:
		p, err := wire.ParseProbe(data)
		if err != nil {
			return 0, err
		}
		f.Probe = p.Fields()
	case wire.TypePause:
		p, err := wire.ParsePause(data)
		if err != nil {
			return 0, err
		}
		f.Pause = p.Fields()
	case wire.TypeConnect, wire.TypeAccept:
		c, err := wire.ParseConnect(data)
		if err != nil {
			return 0, err
		}
		f.Connect = c.Fields()
	}
	// Every type but DATA is a fixed-length header the parser checked.
	return len(data), nil
}

func decodeForgive(data []byte, p gopacket.PacketBuilder) error {
	f := &Forgive{}
	if err := f.DecodeFromBytes(data, p); err != nil {
		return err
	}
	p.AddLayer(f)
	return p.NextDecoder(f.NextLayerType())
}

// SerializeTo prepends the packet's header to b, which holds the payload
// already serialized (for DATA). With opts.FixLengths a DATA header's
// PayloadLen is set to the payload's length; a trimmed header keeps its own.
// It implements gopacket.SerializableLayer.
func (f *Forgive) SerializeTo(b gopacket.SerializeBuffer, opts gopacket.SerializeOptions) error {
	payload := len(b.Bytes())
	if payload > 0 && (f.Type != wire.TypeData || f.Trimmed()) {
		return fmt.Errorf("%w: %v with %d bytes after it", ErrNoPayload, f.Type, payload)
	}
	var scratch [wire.DataLen]byte // the longest fixed header
	hdr, err := f.appendHeader(scratch[:0], payload, opts.FixLengths)
	if err != nil {
		return err
	}
	out, err := b.PrependBytes(len(hdr))
	if err != nil {
		return err
	}
	copy(out, hdr)
	return nil
}

func (f *Forgive) appendHeader(dst []byte, payload int, fixLengths bool) ([]byte, error) {
	switch f.Type {
	case wire.TypeData:
		if fixLengths && !f.Trimmed() {
			f.PayloadLen = uint16(payload)
		}
		return wire.AppendDataHeader(dst, f.Data, int(f.PayloadLen))
	case wire.TypeAck:
		return wire.AppendAck(dst, f.Ack), nil
	case wire.TypeNack:
		return wire.AppendNack(dst, f.Nack), nil
	case wire.TypeCNP:
		return wire.AppendCNPFields(dst, f.CNP), nil
	case wire.TypeProbe:
		return wire.AppendProbe(dst, f.Probe), nil
	case wire.TypePause:
		return wire.AppendPauseFields(dst, f.Pause), nil
	case wire.TypeConnect, wire.TypeAccept:
		c := f.Connect
		c.Accept = f.Type == wire.TypeAccept
		return wire.AppendConnect(dst, c), nil
	}
	return dst, fmt.Errorf("%w: %d", wire.ErrUnknownType, uint8(f.Type))
}

// String describes the packet on one line; gopacket's Packet.String uses it.
func (f *Forgive) String() string {
	switch f.Type {
	case wire.TypeData:
		d := f.Data
		trimmed := ""
		if f.Trimmed() {
			trimmed = " TRIMMED"
		}
		return fmt.Sprintf("DATA%s %d->%d flow=%d tags=%#08x/%#08x psn=%d msg=%d bytes=[%d,%d) of %d flags=%#x entropy=%#04x subflows=%d",
			trimmed, d.Src, d.Dst, d.Flow, d.Tags.Dst, d.Tags.Src, d.PSN, d.Msg, d.Offset, uint64(d.Offset)+uint64(f.PayloadLen),
			d.MsgLen, d.Flags, d.Entropy, d.Subflows)
	case wire.TypeAck:
		a := f.Ack
		return fmt.Sprintf("ACK %d->%d flow=%d tags=%#08x/%#08x cum=%d sack=%d+%#016x echo=%d flags=%#x",
			a.Src, a.Dst, a.Flow, a.Tags.Dst, a.Tags.Src, a.CumPSN, a.SackBase, a.Sack, a.EchoPSN, a.Flags)
	case wire.TypeNack:
		n := f.Nack
		return fmt.Sprintf("NACK %d->%d flow=%d tags=%#08x/%#08x reason=%v priority=%d psn=%d count=%d msg=%d bytes=[%d,%d) flags=%#x",
			n.Src, n.Dst, n.Flow, n.Tags.Dst, n.Tags.Src, n.Reason, n.Priority, n.PSN, n.Count, n.Msg, n.Offset,
			uint64(n.Offset)+uint64(n.Length), n.Flags)
	case wire.TypeCNP:
		c := f.CNP
		return fmt.Sprintf("CNP %d->%d flow=%d tags=%#08x/%#08x psn=%d", c.Src, c.Dst, c.Flow, c.Tags.Dst, c.Tags.Src, c.PSN)
	case wire.TypeProbe:
		p := f.Probe
		return fmt.Sprintf("PROBE %d->%d flow=%d tags=%#08x/%#08x kind=%v psn=%d subflow=%d/%d entropy=%#04x",
			p.Src, p.Dst, p.Flow, p.Tags.Dst, p.Tags.Src, p.Kind, p.PSN, p.Subflow, p.Subflows, p.Entropy)
	case wire.TypePause:
		p := f.Pause
		return fmt.Sprintf("PAUSE %d->%d classes=%#02x micros=%d", p.Src, p.Dst, p.ClassMask, p.Micros)
	case wire.TypeConnect, wire.TypeAccept:
		c := f.Connect
		return fmt.Sprintf("%v %d->%d flow=%d tags=%#08x/%#08x", f.Type, c.Src, c.Dst, c.Flow, c.Tags.Dst, c.Tags.Src)
	}
	return f.Type.String()
}
