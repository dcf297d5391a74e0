package layers

import (
	"encoding/binary"
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
//
// A packet sealed by the security sublayer (docs/wire.md, "Security
// sublayer") has Sealed set; its header fields decode as for a plain packet
// (the per-type Flags and Kind never carry wire.FlagSealed), and Domain,
// Nonce and HeaderTag hold the sublayer's extension. Only the framing is
// checked, as wire.Validate does: without the domain's key the tags are
// not verified. The payload of an untrimmed sealed DATA packet is its
// ciphertext, PayloadLen bytes, and is the next layer like a plain payload;
// Encrypted reports it. Its PayloadTag follows it on the wire.
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

	// Sealed marks a packet of the security sublayer; the fields below are
	// zero on a plain packet.
	Sealed    bool
	Domain    uint32                  // security domain id
	Nonce     [wire.SealNonceLen]byte // the sender start's prefix and the packet counter
	HeaderTag [wire.SealTagLen]byte   // authenticates the header, domain and nonce
	// PayloadTag authenticates an untrimmed sealed DATA packet's
	// ciphertext; a trimmed header has none.
	PayloadTag [wire.SealTagLen]byte
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

// Encrypted reports whether f's payload is ciphertext: an untrimmed sealed
// DATA packet.
func (f *Forgive) Encrypted() bool {
	return f.Sealed && f.Type == wire.TypeData && !f.Trimmed()
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
	var err error
	if wire.Sealed(data) {
		err = f.decodeSealed(data)
	} else {
		var hdrLen int
		hdrLen, err = f.decodeFields(data)
		if err == nil {
			f.BaseLayer = layers.BaseLayer{Contents: data[:hdrLen], Payload: data[hdrLen:]}
		}
	}
	if err != nil {
		*f = Forgive{}
		if errors.Is(err, wire.ErrTooShort) {
			df.SetTruncated()
		}
		return err
	}
	return nil
}

// decodeSealed decodes a packet that carries wire.FlagSealed: wire.Validate
// checks its framing, then the header decodes as the plain header it was
// before sealing and the sublayer's fields are copied out.
func (f *Forgive) decodeSealed(data []byte) error {
	t, err := wire.Validate(data)
	if err != nil {
		return fmt.Errorf("forgive: %w", err)
	}
	var scratch [wire.DataLen]byte // the longest fixed header
	hl, ok := wire.HeaderLen(t)
	if !ok || hl > len(scratch) {
		return fmt.Errorf("forgive: %w: sealed %v has no known header length", wire.ErrBadField, t)
	}
	hdr := scratch[:hl]
	copy(hdr, data)
	hdr[1] &^= wire.FlagSealed
	trimmed := true
	if t == wire.TypeData && hdr[1]&wire.DataTrimmed == 0 {
		// The header alone parses as the trimmed header it may become;
		// the flag is cleared again below.
		trimmed = false
		hdr[1] |= wire.DataTrimmed
	}
	if _, err := f.decodeFields(hdr); err != nil {
		return fmt.Errorf("forgive: sealed %v header: %w", t, err)
	}
	if !trimmed {
		f.Data.Flags &^= wire.DataTrimmed
	}
	f.Sealed = true
	ext := data[hl : hl+wire.SealExtLen]
	f.Domain = binary.BigEndian.Uint32(ext)
	copy(f.Nonce[:], ext[wire.SealDomainLen:])
	copy(f.HeaderTag[:], ext[wire.SealDomainLen+wire.SealNonceLen:])
	end := hl + wire.SealExtLen
	f.BaseLayer = layers.BaseLayer{Contents: data[:end], Payload: data[end:end]}
	if f.Encrypted() {
		tag := len(data) - wire.SealTagLen
		copy(f.PayloadTag[:], data[tag:])
		f.Payload = data[end:tag]
	}
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
//
// A Sealed layer is serialized with its sublayer fields as they are: the
// header with wire.FlagSealed, the domain, nonce and header tag, the
// payload (the ciphertext, already in b) and, for untrimmed DATA, the
// payload tag. Nothing is sealed or checked against a key; package tss
// seals packets.
func (f *Forgive) SerializeTo(b gopacket.SerializeBuffer, opts gopacket.SerializeOptions) error {
	payload := len(b.Bytes())
	if payload > 0 && (f.Type != wire.TypeData || f.Trimmed()) {
		return fmt.Errorf("%w: %v with %d bytes after it", ErrNoPayload, f.Type, payload)
	}
	if f.Sealed && f.Type == wire.TypePause {
		return fmt.Errorf("forgive: %v cannot be sealed", f.Type)
	}
	var scratch [wire.DataLen + wire.SealExtLen]byte // the longest sealed header
	hdr, err := f.appendHeader(scratch[:0], payload, opts.FixLengths)
	if err != nil {
		return err
	}
	if f.Sealed {
		hdr[1] |= wire.FlagSealed
		hdr = binary.BigEndian.AppendUint32(hdr, f.Domain)
		hdr = append(hdr, f.Nonce[:]...)
		hdr = append(hdr, f.HeaderTag[:]...)
		if f.Encrypted() {
			tag, err := b.AppendBytes(wire.SealTagLen)
			if err != nil {
				return err
			}
			copy(tag, f.PayloadTag[:])
		}
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
// A sealed packet's line ends with its domain and nonce.
func (f *Forgive) String() string {
	s := f.fieldString()
	if f.Sealed {
		s += fmt.Sprintf(" SEALED domain=%d nonce=%x", f.Domain, f.Nonce)
		if f.Encrypted() {
			s += fmt.Sprintf(" ciphertext=%d", len(f.Payload))
		}
	}
	return s
}

func (f *Forgive) fieldString() string {
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
