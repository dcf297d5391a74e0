package tss

import (
	"bytes"
	"encoding/hex"
	"testing"

	"github.com/forgive-emu/forgive/wire"
)

// Known answers for the sealed format (docs/wire.md, "Security
// sublayer"), computed apart from this package, with Python's hmac and
// hashlib and the cryptography package's AESGCM (cryptography 48.0.0):
//
//	import hmac, hashlib, struct
//	from cryptography.hazmat.primitives.ciphers.aead import AESGCM
//	key = bytes(range(1, 33))                       # keyA, domain 7
//	prk = hmac.new(b"FORGIVE TSS v2", key, hashlib.sha256).digest()
//	prefix = bytes.fromhex("0123456789abcdef" "a0a1a2a3a4a5a6a7")
//	def expand(use):                                # HKDF-Expand, one block
//	    info = use + struct.pack(">I", 7) + prefix
//	    return hmac.new(prk, info + b"\x01", hashlib.sha256).digest()
//	hk, pk = expand(b"header tag"), expand(b"payload")
//	plain = bytes.fromhex(katPlain)                 # DATA, host 3 to 9
//	for dst in (9, 3):
//	    p = bytearray(plain); p[7] = dst; ctr = 0
//	    nonce = struct.pack(">HHQ", dst, 0, ctr)     # the AES-GCM nonce
//	    hdr = bytearray(p[:40]); hdr[1] |= 0x80      # FlagSealed
//	    ext = struct.pack(">I", 7) + prefix + struct.pack(">Q", ctr)
//	    ad = bytearray(hdr + ext); ad[1] &= ~0x10 & 0xff  # DataTrimmed cleared
//	    htag = AESGCM(hk).encrypt(nonce, b"", bytes(ad))
//	    body = AESGCM(pk).encrypt(nonce, bytes(p[40:]), bytes(ad))
//	    print((bytes(hdr) + ext + htag + body).hex())
const (
	katEpoch  = 0x0123456789ABCDEF
	katRandom = "a0a1a2a3a4a5a6a7"
	katPlain  = "2109beef00030009010203040badf00da1b2c3d4000003e80000004d0000200000100000001004007369787465656e2062797465206d7367"

	katPRK        = "a9cbaae96072076f2525448e1ea0f1e60b8b5a1c65b5cca1ae6804f06af151ff"
	katHeaderKey  = "8ecb064698fc815321d2145b5a9cdc718b117b3bb37086119118ff04b8c013d5"
	katPayloadKey = "5c7a93c111f6e841e776102fe0569e5038f8ad4746aa52e62250c4066c383872"

	// The plain packet sealed at counter 0 to host 9, then (byte 7, the
	// destination, set to 3) at counter 0 to host 3: header, domain,
	// nonce (epoch, random bits, counter), header tag, payload, payload
	// tag.
	katSealed9 = "2189beef00030009010203040badf00da1b2c3d4000003e80000004d000020000010000000100400" +
		"00000007" + "0123456789abcdefa0a1a2a3a4a5a6a7" + "0000000000000000" +
		"37b0d5ef21b3eb32d924dc4c144fa4b1" + "df04186f990b9fac7241cde50b911cbb" + "369bb678a60ed7f70a0710a77e8a451d"
	katSealed3 = "2189beef00030003010203040badf00da1b2c3d4000003e80000004d000020000010000000100400" +
		"00000007" + "0123456789abcdefa0a1a2a3a4a5a6a7" + "0000000000000000" +
		"2f4fb42cb51b8776fe7712f625a52fda" + "04406e80a4baced66e5e5b5f5735a7ce" + "8240c6a5f0af877053cfc4c0ce67b5d0"
)

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// katSealer is the Sealer of the known answers: domain 7's key, epoch
// katEpoch and random bits katRandom.
func katSealer(t *testing.T) (*Keyring, *Sealer) {
	t.Helper()
	k := ring(t, domA)
	s, err := NewSealer(k, bytes.NewReader(unhex(t, katRandom)), katEpoch)
	if err != nil {
		t.Fatal(err)
	}
	return k, s
}

// Key derivation: the domain's PRK (HKDF-Extract) and a start's header
// and payload subkeys (HKDF-Expand), both the way a Sealer expands them
// (crypto/hkdf) and the way an Opener does (its HMAC keyed once).
func TestKnownAnswerKeys(t *testing.T) {
	k, _ := katSealer(t)
	dk := k.domains[7]
	if got := hex.EncodeToString(dk.prk); got != katPRK {
		t.Errorf("PRK %s, want %s", got, katPRK)
	}
	prefix := unhex(t, "0123456789abcdef"+katRandom)
	o := NewOpener(k)
	for _, c := range []struct{ use, want string }{{infoHeaderTag, katHeaderKey}, {infoPayloadKey, katPayloadKey}} {
		for how, mac := range map[string]bool{"hkdf": false, "hmac": true} {
			m := o.macs[dk.idx]
			if !mac {
				m = nil
			}
			key, err := dk.expand(m, c.use, prefix)
			if err != nil {
				t.Fatal(err)
			}
			if got := hex.EncodeToString(key); got != c.want {
				t.Errorf("%s subkey (%s): %s, want %s", c.use, how, got, c.want)
			}
		}
	}
}

// Nonce layout: the AES-GCM nonce is the destination host, two zero
// bytes and the counter, big-endian.
func TestKnownAnswerGCMNonce(t *testing.T) {
	var n [gcmNonceLen]byte
	putGCMNonce(&n, 0x1234, 0x0102030405060708)
	if got, want := hex.EncodeToString(n[:]), "123400000102030405060708"; got != want {
		t.Errorf("nonce %s, want %s", got, want)
	}
}

// The whole sealed packet, header tag and payload tag included, to two
// destinations; the Opener opens each to the plain packet.
func TestKnownAnswerSealed(t *testing.T) {
	k, s := katSealer(t)
	plain := unhex(t, katPlain)
	to3 := bytes.Clone(plain)
	to3[7] = 3
	for _, c := range []struct {
		name  string
		plain []byte
		want  string
	}{
		{"to host 9", plain, katSealed9},
		{"to host 3", to3, katSealed3},
	} {
		b := mustSeal(t, s, c.plain)
		if got := hex.EncodeToString(b); got != c.want {
			t.Errorf("%s: sealed\n%s, want\n%s", c.name, got, c.want)
		}
		out, _ := mustOpen(t, NewOpener(k), unhex(t, c.want))
		if !bytes.Equal(out, c.plain) {
			t.Errorf("%s: opened %x, want %x", c.name, out, c.plain)
		}
	}
}

// One packet sealed to two hosts of a domain at the same counter is two
// different packets: the destination is in the AES-GCM nonce, so the two
// do not share a keystream (with the destination left out, both payloads
// would be the same bytes, and their XOR the XOR of the plaintexts of any
// two packets sealed to the two hosts at one counter). The payload of each
// opens under the start's payload key with the nonce of its destination
// only.
func TestSameCounterTwoDestinationsDiffer(t *testing.T) {
	_, s := katSealer(t)
	plain := unhex(t, katPlain)
	to3 := bytes.Clone(plain)
	to3[7] = 3
	b9, b3 := mustSeal(t, s, plain), mustSeal(t, s, to3)
	ctr := func(b []byte) []byte { return b[wire.DataLen+extNonce+ctrOff : wire.DataLen+extTag] }
	if !bytes.Equal(ctr(b9), ctr(b3)) {
		t.Fatalf("counters %x and %x: want the same counter to both hosts", ctr(b9), ctr(b3))
	}
	body := func(b []byte) []byte { return b[wire.DataLen+wire.SealExtLen:] }
	tag := func(b []byte) []byte { return b[wire.DataLen+extTag : wire.DataLen+wire.SealExtLen] }
	ct := func(b []byte) []byte { return body(b)[:len(body(b))-wire.SealTagLen] }
	if bytes.Equal(ct(b9), ct(b3)) {
		t.Errorf("the same payload at counter 0 to hosts 9 and 3 is the same ciphertext %x: one keystream for two hosts", ct(b9))
	}
	if bytes.Equal(tag(b9), tag(b3)) {
		t.Errorf("the header tags to hosts 9 and 3 are the same: %x", tag(b9))
	}
	keys := s.keys[0]
	for _, c := range []struct {
		b   []byte
		dst uint16
	}{{b9, 9}, {b3, 3}} {
		ad := bytes.Clone(c.b[:wire.DataLen+adExt])
		for _, dst := range []uint16{c.dst, 0, 12 - c.dst} {
			var n [gcmNonceLen]byte
			putGCMNonce(&n, dst, 0)
			_, err := keys.body.Open(nil, n[:], body(c.b), ad)
			if (err == nil) != (dst == c.dst) {
				t.Errorf("the payload to host %d under the nonce of host %d: %v", c.dst, dst, err)
			}
		}
	}
}
