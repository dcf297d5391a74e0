package layers

import (
	"bytes"
	"testing"

	"github.com/google/gopacket"

	"github.com/forgive-emu/forgive/wire"
)

// FuzzDecode decodes arbitrary datagrams as FORGIVE packets. The decoder must
// never panic (gopacket's recovery is off), must agree with wire.Validate on
// what is well formed, and must serialize what it decoded back to the same
// bytes.
func FuzzDecode(f *testing.F) {
	for _, e := range examples() {
		if e.payload != nil {
			e.payload = e.payload[:16] // short seeds minimize quickly
		}
		f.Add(datagram(f, e))
	}
	for _, se := range sealedExamples(f) {
		f.Add(se.sealed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p := gopacket.NewPacket(b, LayerTypeForgive, strict)
		l, _ := p.Layer(LayerTypeForgive).(*Forgive)
		if _, err := wire.Validate(b); err != nil {
			if l != nil || p.ErrorLayer() == nil {
				t.Fatalf("wire refuses the packet (%v) but the layer decodes it: %v", err, p)
			}
			return
		}
		if l == nil || p.ErrorLayer() != nil {
			t.Fatalf("wire accepts the packet but the layer does not: %v", p)
		}
		top := []gopacket.SerializableLayer{l}
		if app := p.ApplicationLayer(); app != nil {
			top = append(top, gopacket.Payload(app.Payload()))
		}
		buf := gopacket.NewSerializeBuffer()
		if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true}, top...); err != nil {
			t.Fatalf("serialize a decoded %v: %v", l.Type, err)
		}
		if !bytes.Equal(buf.Bytes(), b) {
			t.Fatalf("re-serialized %v differs\n got % x\nwant % x", l.Type, buf.Bytes(), b)
		}
	})
}
