package layers

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/forgive-emu/forgive/tss"
	"github.com/forgive-emu/forgive/wire"
)

// testDomain is the security domain of the examples' hosts 3 and 9.
const testDomain = 7

var testKey = tss.Key{0x10, 0x21, 0x32, 0x43, 0x54, 0x65, 0x76, 0x87, 0x98, 0xA9, 0xBA, 0xCB, 0xDC, 0xED, 0xFE, 0x0F,
	0x1E, 0x2D, 0x3C, 0x4B, 0x5A, 0x69, 0x78, 0x87, 0x96, 0xA5, 0xB4, 0xC3, 0xD2, 0xE1, 0xF0, 0x01}

func testKeyring(t testing.TB) *tss.Keyring {
	t.Helper()
	ring, err := tss.NewKeyring(tss.Domain{ID: testDomain, Key: testKey, Hosts: []uint16{3, 9}})
	if err != nil {
		t.Fatal(err)
	}
	return ring
}

// sealedExample is one example sealed by package tss.
type sealedExample struct {
	example        // the plain packet, as it reads once opened
	sealed  []byte // the sealed datagram
	plain   []byte // what tss opens it to
}

// sealedExamples seals every example but PAUSE, which stays plain, and adds
// a sealed DATA packet a switch trimmed.
func sealedExamples(t testing.TB) []sealedExample {
	t.Helper()
	ring := testKeyring(t)
	// A fixed nonce prefix makes the packets the same on every run.
	s, err := tss.NewSealer(ring, bytes.NewReader(bytes.Repeat([]byte{0x5A}, wire.SealNonceLen)), 1)
	if err != nil {
		t.Fatal(err)
	}
	var out []sealedExample
	for _, e := range examples() {
		if e.layer.Type == wire.TypePause {
			continue
		}
		plain := datagram(t, e)
		b, err := s.Seal(nil, plain)
		if err != nil {
			t.Fatalf("seal %s: %v", e.name, err)
		}
		out = append(out, sealedExample{e, b, plain})
		if e.name == "DATA" {
			trimmed, err := wire.Trim(bytes.Clone(b))
			if err != nil {
				t.Fatalf("trim sealed DATA: %v", err)
			}
			te := e
			te.name = "DATA trimmed in flight"
			te.layer.Data.Flags |= wire.DataTrimmed
			te.payload = nil
			plainTrimmed, err := wire.Trim(bytes.Clone(plain))
			if err != nil {
				t.Fatalf("trim DATA: %v", err)
			}
			out = append(out, sealedExample{te, trimmed, plainTrimmed})
		}
	}
	return out
}

// checkSealedLayer checks l, decoded from se.sealed, against the plain
// packet and against the sealed bytes cut at the lengths package wire
// exports.
func checkSealedLayer(t *testing.T, se sealedExample, l *Forgive) {
	t.Helper()
	if !l.Sealed {
		t.Fatalf("Sealed is false")
	}
	got, want := fieldsOf(l), fieldsOf(&se.layer)
	if got != want || l.Connect != se.layer.Connect {
		t.Errorf("fields\n got %+v %+v\nwant %+v %+v", got, l.Connect, want, se.layer.Connect)
	}
	hl, _ := wire.HeaderLen(l.Type)
	ext := se.sealed[hl:]
	if l.Domain != testDomain || binary.BigEndian.Uint32(ext) != testDomain {
		t.Errorf("domain %d, want %d", l.Domain, testDomain)
	}
	if !bytes.Equal(l.Nonce[:], ext[wire.SealDomainLen:wire.SealDomainLen+wire.SealNonceLen]) {
		t.Errorf("nonce % x differs from the packet's", l.Nonce)
	}
	if !bytes.Equal(l.HeaderTag[:], ext[wire.SealDomainLen+wire.SealNonceLen:wire.SealExtLen]) {
		t.Errorf("header tag % x differs from the packet's", l.HeaderTag)
	}
	if !bytes.Equal(l.LayerContents(), se.sealed[:hl+wire.SealExtLen]) {
		t.Errorf("contents are %d bytes, want the %d of header and extension", len(l.LayerContents()), hl+wire.SealExtLen)
	}
	if l.Encrypted() {
		ct := se.sealed[hl+wire.SealExtLen : len(se.sealed)-wire.SealTagLen]
		if len(l.Payload) != int(l.PayloadLen) || !bytes.Equal(l.Payload, ct) {
			t.Errorf("payload is %d bytes, want the %d-byte ciphertext", len(l.Payload), l.PayloadLen)
		}
		if bytes.Equal(l.Payload, se.payload) {
			t.Errorf("the ciphertext is the plaintext")
		}
		if !bytes.Equal(l.PayloadTag[:], se.sealed[len(se.sealed)-wire.SealTagLen:]) {
			t.Errorf("payload tag % x differs from the packet's", l.PayloadTag)
		}
		if l.NextLayerType() != gopacket.LayerTypePayload {
			t.Errorf("next layer %v, want the ciphertext as payload", l.NextLayerType())
		}
	} else {
		if len(l.Payload) != 0 || l.PayloadTag != [wire.SealTagLen]byte{} || l.NextLayerType() != gopacket.LayerTypeZero {
			t.Errorf("%v without a body has payload %d bytes, tag % x", l.Type, len(l.Payload), l.PayloadTag)
		}
		if l.Type == wire.TypeData && !l.Trimmed() {
			t.Errorf("untrimmed DATA not encrypted")
		}
	}
	if !strings.Contains(l.String(), "SEALED domain=7") {
		t.Errorf("String() = %q, want it to say sealed", l.String())
	}
}

// Sealed packets of every type decode from Ethernet with their header
// fields and sublayer fields, serialize back to the same bytes, and those
// bytes still open with the domain's key to the plain packet.
func TestSealedRoundTrip(t *testing.T) {
	ring := testKeyring(t)
	for _, se := range sealedExamples(t) {
		t.Run(se.name, func(t *testing.T) {
			// Its own Opener: a trimmed example has its untrimmed
			// original's nonce, and would be refused as a replay.
			opener := tss.NewOpener(ring)
			p := decodePayload(t, se.sealed)
			if el := p.ErrorLayer(); el != nil {
				t.Fatalf("decode error: %v", el.Error())
			}
			l, ok := p.Layer(LayerTypeForgive).(*Forgive)
			if !ok {
				t.Fatalf("no Forgive layer: %v", p)
			}
			checkSealedLayer(t, se, l)
			top := []gopacket.SerializableLayer{l}
			if app := p.ApplicationLayer(); app != nil {
				if !l.Encrypted() {
					t.Fatalf("application layer after a %v without ciphertext", l.Type)
				}
				top = append(top, gopacket.Payload(app.Payload()))
			} else if l.Encrypted() && l.PayloadLen > 0 {
				t.Fatalf("no application layer for the ciphertext")
			}
			buf := gopacket.NewSerializeBuffer()
			if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true}, top...); err != nil {
				t.Fatalf("serialize: %v", err)
			}
			if !bytes.Equal(buf.Bytes(), se.sealed) {
				t.Fatalf("re-serialized differs\n got % x\nwant % x", buf.Bytes(), se.sealed)
			}
			opened, info, err := opener.Open(nil, buf.Bytes())
			if err != nil {
				t.Fatalf("open the re-serialized packet: %v", err)
			}
			if !bytes.Equal(opened, se.plain) || info.Domain != testDomain || info.Trimmed != l.Trimmed() {
				t.Errorf("opened to % x (%+v), want % x", opened, info, se.plain)
			}
			var fg Forgive
			if n := testing.AllocsPerRun(50, func() {
				if err := fg.DecodeFromBytes(se.sealed, gopacket.NilDecodeFeedback); err != nil {
					panic(err)
				}
			}); n != 0 {
				t.Errorf("%v allocations per decode, want 0", n)
			}
		})
	}
}

// A layer built by hand serializes to what package tss seals: the sublayer
// fields land where tss put them.
func TestSerializeSealedAck(t *testing.T) {
	var se sealedExample
	for _, e := range sealedExamples(t) {
		if e.layer.Type == wire.TypeAck {
			se = e
		}
	}
	got, ok := decodePayload(t, se.sealed).Layer(LayerTypeForgive).(*Forgive)
	if !ok {
		t.Fatalf("sealed ACK does not decode")
	}
	l := Forgive{Type: wire.TypeAck, Ack: se.layer.Ack, Sealed: true, Domain: got.Domain, Nonce: got.Nonce, HeaderTag: got.HeaderTag}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{}, &l); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), se.sealed) {
		t.Fatalf("sealed ACK\n got % x\nwant % x", buf.Bytes(), se.sealed)
	}
	if len(buf.Bytes()) != wire.AckLen+wire.SealExtLen {
		t.Errorf("sealed ACK is %d bytes", len(buf.Bytes()))
	}
	l.Type = wire.TypePause
	if err := l.SerializeTo(gopacket.NewSerializeBuffer(), gopacket.SerializeOptions{}); err == nil {
		t.Errorf("serialized a sealed PAUSE")
	}
}

// Malformed sealed packets become a DecodeFailure with wire's sentinel
// error and a message that names the sealed packet, never a panic.
func TestSealedMalformed(t *testing.T) {
	for _, se := range sealedExamples(t) {
		b := se.sealed
		for n := wire.CommonLen; n < len(b); n++ {
			_, verr := wire.Validate(b[:n])
			if verr == nil {
				t.Fatalf("%s cut to %d: package wire accepts it", se.name, n)
			}
			want := wire.ErrTooShort
			if errors.Is(verr, wire.ErrBadLength) {
				want = wire.ErrBadLength
			}
			p := decodePayload(t, b[:n])
			wantFailure(t, se.name+" truncated", p, want)
			if want == wire.ErrTooShort && !p.Metadata().Truncated {
				t.Errorf("%s cut to %d: not marked truncated", se.name, n)
			}
		}
		long := append(bytes.Clone(b), 0)
		wantFailure(t, se.name+" with a byte more", decodePayload(t, long), wire.ErrBadLength)
	}
	exs := sealedExamples(t)
	set := func(b []byte, i int, v byte) []byte { c := bytes.Clone(b); c[i] = v; return c }
	var data, trimmed, ack, cnp []byte
	for _, se := range exs {
		switch se.name {
		case "DATA":
			data = se.sealed
		case "DATA trimmed in flight":
			trimmed = se.sealed
		case "ACK":
			ack = se.sealed
		case "CNP":
			cnp = se.sealed
		}
	}
	for _, c := range []struct {
		name string
		b    []byte
		want error
		msg  string
	}{
		{"trimmed header with T cleared", set(trimmed, 1, trimmed[1]&^wire.DataTrimmed), wire.ErrBadLength, "sealed DATA"},
		{"untrimmed with T set", set(data, 1, data[1]|wire.DataTrimmed), wire.ErrBadLength, "sealed DATA"},
		{"undefined ACK flag", set(ack, 1, ack[1]|0x40), wire.ErrBadField, "sealed ACK header"},
		{"CNP reserved byte", set(cnp, 2, 1), wire.ErrBadField, "sealed CNP header"},
	} {
		p := decodePayload(t, c.b)
		wantFailure(t, c.name, p, c.want)
		if fail, ok := p.Layer(gopacket.LayerTypeDecodeFailure).(*gopacket.DecodeFailure); ok &&
			!strings.Contains(fail.Error().Error(), c.msg) {
			t.Errorf("%s: error %q does not mention %q", c.name, fail.Error(), c.msg)
		}
	}
}

// A DecodingLayerParser, reusing one Forgive, decodes plain and sealed
// packets alike and clears the sublayer fields of a plain one.
func TestDecodingLayerParserSealed(t *testing.T) {
	var eth layers.Ethernet
	var ip layers.IPv4
	var udp layers.UDP
	var fg Forgive
	var pl gopacket.Payload
	parser := gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet, &eth, &ip, &udp, &fg, &pl)
	parser.IgnoreUnsupported = true
	var decoded []gopacket.LayerType
	for _, se := range sealedExamples(t) {
		raw := frame(t, se.layer.Type, endpoint{3, 49152}, endpoint{9, wire.DefaultPort}, gopacket.Payload(se.sealed))
		if err := parser.DecodeLayers(raw, &decoded); err != nil {
			t.Fatalf("%s: %v", se.name, err)
		}
		if !fg.Sealed || fg.Domain != testDomain {
			t.Errorf("%s: Sealed %v domain %d", se.name, fg.Sealed, fg.Domain)
		}
		if fg.Encrypted() && !bytes.Equal(pl, fg.Payload) {
			t.Errorf("%s: payload layer is not the ciphertext", se.name)
		}
		plain := frame(t, se.layer.Type, endpoint{3, 49152}, endpoint{9, wire.DefaultPort}, gopacket.Payload(se.plain))
		if err := parser.DecodeLayers(plain, &decoded); err != nil {
			t.Fatalf("%s plain: %v", se.name, err)
		}
		if fg.Sealed || fg.Domain != 0 || fg.Nonce != [wire.SealNonceLen]byte{} || fg.Encrypted() {
			t.Errorf("%s plain: sublayer fields left over: %+v", se.name, fg)
		}
	}
}

// BenchmarkDecodeSealed decodes a sealed DATA packet and, as the reference
// in the same run, the plain packet it seals.
func BenchmarkDecodeSealed(b *testing.B) {
	se := sealedExamples(b)[0]
	for _, c := range []struct {
		name string
		pkt  []byte
	}{{"plain", se.plain}, {"sealed", se.sealed}} {
		b.Run(c.name, func(b *testing.B) {
			var fg Forgive
			b.ReportAllocs()
			for b.Loop() {
				if err := fg.DecodeFromBytes(c.pkt, gopacket.NilDecodeFeedback); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
