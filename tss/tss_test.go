package tss

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/forgive-emu/forgive/wire"
)

// Opening a sealed packet gives back the plain packet, byte for byte, for
// every type; the switch validates the sealed packet without the key; the
// payload does not travel in the clear.
func TestRoundTripEveryType(t *testing.T) {
	k := ring(t, domA, domB)
	s, o := sealer(t, k), NewOpener(k)
	for name, p := range plainPackets(t, 1400) {
		b := mustSeal(t, s, p)
		typ, err := wire.Validate(b)
		if err != nil {
			t.Fatalf("%s: the switch refuses the sealed packet: %v", name, err)
		}
		if !wire.Sealed(b) || wire.Sealed(p) {
			t.Errorf("%s: Sealed(sealed)=%v Sealed(plain)=%v", name, wire.Sealed(b), wire.Sealed(p))
		}
		hl, _ := wire.HeaderLen(typ)
		want := len(p) + wire.SealExtLen
		if name == "DATA" {
			want += wire.SealTagLen
			if bytes.Contains(b, p[hl:hl+64]) {
				t.Errorf("%s: the sealed packet carries its payload in the clear", name)
			}
		}
		if len(b) != want {
			t.Errorf("%s: sealed length %d, want %d", name, len(b), want)
		}
		if !bytes.Equal(b[:hl], flagged(p[:hl], wire.FlagSealed)) {
			t.Errorf("%s: the header is not plaintext with the sealed flag", name)
		}
		got, info := mustOpen(t, o, b)
		if !bytes.Equal(got, p) {
			t.Errorf("%s: opened\n%x\nwant\n%x", name, got, p)
		}
		if info.Domain != domA.ID || info.Trimmed != (name == "trimmed DATA") {
			t.Errorf("%s: opened %+v, want domain %d", name, info, domA.ID)
		}
		if _, err := wire.Validate(got); err != nil {
			t.Errorf("%s: the opened packet does not parse: %v", name, err)
		}
	}
}

func flagged(h []byte, f uint8) []byte {
	c := bytes.Clone(h)
	c[1] |= f
	return c
}

// "a trimmed header still has to be authenticated, since the switch
// removes the payload": a switch trims a sealed packet with wire.Trim,
// without the key, to the header and the sublayer's extension; the
// receiver authenticates it and gets the plain trimmed header.
func TestTrimmedSealedPacketAuthenticates(t *testing.T) {
	k := ring(t, domA)
	s, o := sealer(t, k), NewOpener(k)
	p := plainPackets(t, 1400)["DATA"]
	b := mustSeal(t, s, p)
	n, err := wire.TrimmedLen(b)
	if err != nil || n != wire.DataLen+wire.SealExtLen {
		t.Fatalf("TrimmedLen = %d, %v; want %d", n, err, wire.DataLen+wire.SealExtLen)
	}
	tr := trim(t, b)
	if len(tr) != n {
		t.Fatalf("trimmed to %d bytes, want %d", len(tr), n)
	}
	if _, err := wire.Validate(tr); err != nil {
		t.Fatalf("the switch refuses the trimmed sealed header: %v", err)
	}
	got, info := mustOpen(t, o, tr)
	if want := trim(t, p); !bytes.Equal(got, want) {
		t.Errorf("opened trimmed\n%x\nwant the plain trimmed header\n%x", got, want)
	}
	if !info.Trimmed {
		t.Error("Opened.Trimmed is false for a trimmed header")
	}
	if d, err := wire.ParseData(got); err != nil || !d.Trimmed() || d.PayloadLen() != 1400 {
		t.Errorf("the opened header: %v, trimmed %v", err, err == nil && d.Trimmed())
	}
}

// Every bit of a sealed packet matters: flipping any one bit of the
// header, the domain, the nonce, the header tag, the payload or the
// payload tag is refused, untrimmed and trimmed. The one bit a switch may
// change, the trimmed flag, makes an untrimmed packet a trimmed header
// with bytes after it (and a trimmed one a data packet with no payload
// tag): refused as malformed.
func TestTamperEveryBitRefused(t *testing.T) {
	k := ring(t, domA, domB)
	s, o := sealer(t, k), NewOpener(k)
	packets := plainPackets(t, 300)
	packets["trimmed by the switch"] = nil
	for name, p := range packets {
		var b []byte
		if p == nil {
			b = trim(t, mustSeal(t, s, packets["DATA"]))
		} else {
			b = mustSeal(t, s, p)
		}
		if _, _, err := o.Open(nil, b); err != nil {
			t.Fatalf("%s: the untouched packet is refused: %v", name, err)
		}
		typ, _ := wire.Peek(b)
		hl, _ := wire.HeaderLen(typ)
		for i := range b {
			for bit := range 8 {
				c := bytes.Clone(b)
				c[i] ^= 1 << bit
				if out, _, err := o.Open(nil, c); err == nil {
					t.Fatalf("%s: byte %d (%s) bit %d flipped: opened %x", name, i, part(i, hl, len(b)), bit, out)
				} else if Reason(err) == "" {
					t.Fatalf("%s: byte %d: refusal %v has no reason", name, i, err)
				}
			}
		}
		// Cut short or extended: refused too.
		for _, c := range [][]byte{b[:len(b)-1], append(bytes.Clone(b), 0)} {
			if _, _, err := o.Open(nil, c); err == nil {
				t.Errorf("%s: a packet of %d bytes (sealed %d) opened", name, len(c), len(b))
			}
		}
	}
}

// part names the field of a sealed packet that byte i belongs to.
func part(i, hl, n int) string {
	switch {
	case i < hl:
		return "header"
	case i < hl+extNonce:
		return "domain"
	case i < hl+extTag:
		return "nonce"
	case i < hl+wire.SealExtLen:
		return "header tag"
	case i < n-wire.SealTagLen:
		return "payload"
	}
	return "payload tag"
}

// Which part a refusal names: the header tag is checked first, so a
// tampered header, nonce or header tag is "header_tag", a tampered payload
// or payload tag "payload_tag".
func TestRefusalReasons(t *testing.T) {
	k := ring(t, domA, domB)
	s, o := sealer(t, k), NewOpener(k)
	p := plainPackets(t, 300)["DATA"]
	b := mustSeal(t, s, p)
	hl := wire.DataLen
	cases := []struct {
		name string
		i    int
		want error
	}{
		{"PSN", 13, ErrHeaderTag},
		{"nonce", hl + extNonce + 3, ErrHeaderTag},
		{"header tag", hl + extTag, ErrHeaderTag},
		{"payload", hl + wire.SealExtLen + 10, ErrPayloadTag},
		{"payload tag", len(b) - 1, ErrPayloadTag},
		{"domain", hl + extDomain + 3, ErrUnknownDomain},
	}
	for _, c := range cases {
		m := bytes.Clone(b)
		m[c.i] ^= 0x01
		if _, _, err := o.Open(nil, m); !errors.Is(err, c.want) {
			t.Errorf("%s tampered: %v, want %v", c.name, err, c.want)
		}
	}
	if _, _, err := o.Open(nil, p); !errors.Is(err, ErrUnsealed) || Reason(err) != "unsealed" {
		t.Errorf("plain packet: %v (reason %q), want ErrUnsealed", err, Reason(err))
	}
	if _, _, err := o.Open(nil, b[:wire.DataLen+5]); !errors.Is(err, ErrMalformed) {
		t.Errorf("sealed packet cut in the extension: %v, want ErrMalformed", err)
	}
	if _, err := s.Seal(nil, wire.AppendPause(nil, 1, 10)); !errors.Is(err, ErrNotSealable) {
		t.Errorf("Seal(PAUSE): %v, want ErrNotSealable", err)
	}
	if _, err := s.Seal(nil, b); !errors.Is(err, ErrNotSealable) {
		t.Errorf("Seal(sealed): %v, want ErrNotSealable", err)
	}
}

// A host with another key for the same domain id, or without the domain,
// or in another domain, opens nothing.
func TestWrongKeyOrDomainRefused(t *testing.T) {
	s := sealer(t, ring(t, domA, domB))
	packets := plainPackets(t, 500)
	otherKey := domA
	otherKey.Key[0] ^= 1
	cases := []struct {
		name string
		ring *Keyring
		want error
	}{
		{"same domain id, another key", ring(t, otherKey, domB), ErrHeaderTag},
		{"domain unknown to the receiver", ring(t, domB), ErrUnknownDomain},
	}
	for _, c := range cases {
		o := NewOpener(c.ring)
		for name, p := range packets {
			if _, _, err := o.Open(nil, mustSeal(t, s, p)); !errors.Is(err, c.want) {
				t.Errorf("%s, %s: %v, want %v", c.name, name, err, c.want)
			}
		}
	}
	// Host 5 (domain 8) holds domain 7's key too, and forges a packet
	// from host 5 sealed in domain 7: the receiver knows host 5 is in
	// domain 8 and refuses it.
	both := ring(t, domA, domB)
	forger := sealer(t, ring(t, Domain{ID: 7, Key: keyA}))
	p := bytes.Clone(packets["CNP"])
	p[4], p[5] = 0, 5 // src host 5
	b := mustSeal(t, forger, p)
	if _, _, err := NewOpener(both).Open(nil, b); !errors.Is(err, ErrWrongDomain) || Reason(err) != "wrong_domain" {
		t.Errorf("host 5 sealed for domain 7: %v, want ErrWrongDomain", err)
	}
	// And a packet to a host in no domain is not sealed at all.
	toNobody := bytes.Clone(packets["CNP"])
	toNobody[7] = 42
	if _, err := s.Seal(nil, toNobody); !errors.Is(err, ErrNoDomain) {
		t.Errorf("Seal to a host in no domain: %v, want ErrNoDomain", err)
	}
}

// Nonces never repeat under one key. A key belongs to one sender start
// (its nonce prefix) and one use, and under it the AES-GCM nonce is the
// destination host and the counter: across many seals of the same packet
// (a retransmission included: other flags, new nonce) to two hosts, and
// across Sealers (two hosts, or one host before and after a restart), no
// prefix, destination and counter repeat; two starts, and the header tag
// and the payload, never share a key, so one nonce under two subkeys gives
// unrelated tags.
func TestNoncesUnique(t *testing.T) {
	k := ring(t, domA)
	const n = 100_000
	type use struct {
		nonce [wire.SealNonceLen]byte
		dst   uint16
	}
	seen := make(map[use]string, 2*n+2)
	p := plainPackets(t, 64)["DATA"]
	retx := bytes.Clone(p)
	retx[1] |= wire.DataRetx
	var sealers []*Sealer
	for h := range 2 { // two Sealers: two hosts, or one host restarted
		s := sealer(t, k)
		sealers = append(sealers, s)
		for i := range n {
			pkt := bytes.Clone(p)
			if i%2 == 1 {
				pkt = bytes.Clone(retx)
			}
			if i%3 == 0 { // to host 3 rather than 9
				pkt[7] = 3
			}
			b, err := s.Seal(nil, pkt)
			if err != nil {
				t.Fatal(err)
			}
			u := use{dst: wire.Header(b).Dst()}
			copy(u.nonce[:], b[wire.DataLen+extNonce:])
			who := fmt.Sprintf("sealer %d packet %d", h, i)
			if prev, dup := seen[u]; dup {
				t.Fatalf("nonce %x to host %d used by %s and %s", u.nonce, u.dst, prev, who)
			}
			seen[u] = who
		}
		if s.Sealed() != n {
			t.Errorf("Sealed() = %d, want %d", s.Sealed(), n)
		}
	}
	nonce, ad := make([]byte, gcmNonceLen), []byte("same associated data")
	k0, k1 := sealers[0].keys[0], sealers[1].keys[0]
	tags := map[string][]byte{
		"start 0 header": k0.header.Seal(nil, nonce, nil, ad), "start 0 payload": k0.body.Seal(nil, nonce, nil, ad),
		"start 1 header": k1.header.Seal(nil, nonce, nil, ad), "start 1 payload": k1.body.Seal(nil, nonce, nil, ad),
	}
	for a, ta := range tags {
		for b, tb := range tags {
			if a < b && bytes.Equal(ta, tb) {
				t.Errorf("the %s key and the %s key are the same key", a, b)
			}
		}
	}
}

// Seal and Open append to their destination and allocate nothing once it
// has room, and SealInPlace and OpenInPlace, which the daemon runs on
// every packet, allocate nothing and copy nothing but the header: the
// packet they seal is the one in the buffer.
func TestSealOpenNoAllocs(t *testing.T) {
	k := ring(t, domA)
	s, o := sealer(t, k), NewOpener(k)
	p := plainPackets(t, 1400)["DATA"]
	sb := make([]byte, 0, len(p)+wire.SealOverhead)
	ob := make([]byte, 0, len(p))
	allocs := testing.AllocsPerRun(200, func() {
		b, err := s.Seal(sb[:0], p)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := o.Open(ob[:0], b); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("Seal+Open allocate %.1f times per packet, want 0", allocs)
	}
	buf := make([]byte, Headroom+len(p), len(p)+wire.SealOverhead)
	var opened []byte
	allocs = testing.AllocsPerRun(200, func() {
		copy(buf[Headroom:], p) // the engine's Transmit writes the packet there
		b, err := s.SealInPlace(buf, len(p))
		if err != nil {
			t.Fatal(err)
		}
		if &b[0] != &buf[0] || len(b) != len(p)+wire.SealOverhead {
			t.Fatalf("SealInPlace returned %d bytes elsewhere than its buffer", len(b))
		}
		if opened, _, err = o.OpenInPlace(b); err != nil {
			t.Fatal(err)
		}
		if &opened[0] != &buf[Headroom] {
			t.Fatal("OpenInPlace returned the packet elsewhere than its buffer")
		}
	})
	if allocs != 0 {
		t.Errorf("SealInPlace+OpenInPlace allocate %.1f times per packet, want 0", allocs)
	}
	if !bytes.Equal(opened, p) {
		t.Error("sealed and opened in place, the packet differs")
	}
}

// SealInPlace refuses a buffer without room, and leaves the plain packet
// as it was when it refuses.
func TestSealInPlaceRefusals(t *testing.T) {
	s := sealer(t, ring(t, domA))
	p := plainPackets(t, 100)["DATA"]
	short := make([]byte, Headroom+len(p)) // no room for the payload tag
	copy(short[Headroom:], p)
	if _, err := s.SealInPlace(short, len(p)); !errors.Is(err, ErrNotSealable) {
		t.Errorf("no room for the tag: %v, want ErrNotSealable", err)
	}
	if _, err := s.SealInPlace(short, len(p)+1); !errors.Is(err, ErrNotSealable) {
		t.Errorf("a length beyond the buffer: %v, want ErrNotSealable", err)
	}
	if !bytes.Equal(short[Headroom:], p) {
		t.Error("a refused SealInPlace changed the packet")
	}
}

func TestKeyringConfig(t *testing.T) {
	dflt := Domain{ID: 1, Key: keyA}
	cases := []struct {
		name string
		ds   []Domain
	}{
		{"no domain", nil},
		{"duplicate id", []Domain{domA, {ID: 7, Key: keyB, Hosts: []uint16{1}}}},
		{"zero key", []Domain{{ID: 1}}},
		{"host in two domains", []Domain{domA, {ID: 2, Key: keyB, Hosts: []uint16{9}}}},
		{"two defaults", []Domain{dflt, {ID: 2, Key: keyB}}},
	}
	for _, c := range cases {
		if _, err := NewKeyring(c.ds...); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", c.name, err)
		}
	}
	k := ring(t, dflt, domB)
	for h, want := range map[uint16]uint32{5: 8, 3: 1, 1000: 1} {
		if got, ok := k.DomainOf(h); !ok || got != want {
			t.Errorf("DomainOf(%d) = %d, %v; want %d", h, got, ok, want)
		}
	}
	if got := k.Domains(); len(got) != 2 || got[0] != 1 || got[1] != 8 {
		t.Errorf("Domains() = %v", got)
	}
}

// A key file reads back as the key it was written with; anything else in
// it is refused with the line that is wrong.
func TestKeyFile(t *testing.T) {
	b := FormatKeyFile(keyA)
	k, err := ParseKeyFile(b)
	if err != nil || k != keyA {
		t.Fatalf("ParseKeyFile(FormatKeyFile(k)) = %x, %v; want %x", k, err, keyA)
	}
	good := string(b)
	for name, doc := range map[string]string{
		"empty":     "",
		"comments":  "# nothing\n\n",
		"short":     "0123abcd\n",
		"not hex":   strings.Repeat("zz", KeyLen) + "\n",
		"two keys":  good + strings.Repeat("ab", KeyLen) + "\n",
		"all zero":  strings.Repeat("00", KeyLen) + "\n",
		"long line": strings.Repeat("ab", KeyLen) + "00\n",
	} {
		if _, err := ParseKeyFile([]byte(doc)); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
	}
}
