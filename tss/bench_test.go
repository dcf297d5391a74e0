package tss

import (
	"crypto/aes"
	"crypto/cipher"
	"fmt"
	"testing"

	"github.com/forgive-emu/forgive/wire"
)

// The per-packet cost of the sublayer on a full data packet (the default
// MTU's 4,096-byte payload, and a 1,024-byte one), beside a plain copy of
// the same packet, the floor a daemon pays anyway to move it.
func benchSizes() []int { return []int{1024, 4096} }

func BenchmarkCopy(b *testing.B) {
	for _, n := range benchSizes() {
		p := plainPackets(b, n)["DATA"]
		dst := make([]byte, 0, len(p)+wire.SealOverhead)
		b.Run(size(n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(p)))
			for b.Loop() {
				dst = append(dst[:0], p...)
			}
		})
	}
}

// BenchmarkAESGCM is the cipher alone, the floor of BenchmarkSeal: one
// AES-256-GCM seal of the payload with the standard library, no header
// tag, no framing.
func BenchmarkAESGCM(b *testing.B) {
	blk, err := aes.NewCipher(make([]byte, 32))
	if err != nil {
		b.Fatal(err)
	}
	aead, err := cipher.NewGCM(blk)
	if err != nil {
		b.Fatal(err)
	}
	nonce := make([]byte, aead.NonceSize())
	for _, n := range benchSizes() {
		buf := make([]byte, n, n+aead.Overhead())
		b.Run(size(n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(n))
			for b.Loop() {
				aead.Seal(buf[:0], nonce, buf, nil)
			}
		})
	}
}

// BenchmarkSeal seals in place, as the daemon does: each op writes the
// plain packet where the engine would (a copy, BenchmarkCopy's cost) and
// seals it there.
func BenchmarkSeal(b *testing.B) {
	k := ring(b, domA)
	s := sealer(b, k)
	for _, n := range benchSizes() {
		p := plainPackets(b, n)["DATA"]
		buf := make([]byte, Headroom+len(p), len(p)+wire.SealOverhead)
		b.Run(size(n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(p)))
			for b.Loop() {
				copy(buf[Headroom:], p)
				if _, err := s.SealInPlace(buf, len(p)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// The Open benchmarks open in place, as the daemon does: each op copies
// the sealed packet into the buffer (as the socket's read would) and opens
// it there. openBatch is how many distinct sealed packets they cycle
// through: a packet opened twice is a replay, so each round through the
// batch opens them with a fresh Opener, whose first packet derives the
// sender's keys (once per batch).
const openBatch = 4096

func BenchmarkOpen(b *testing.B) {
	k := ring(b, domA)
	s := sealer(b, k)
	for _, n := range benchSizes() {
		p := plainPackets(b, n)["DATA"]
		batch := make([][]byte, openBatch)
		for i := range batch {
			batch[i] = mustSeal(b, s, p)
		}
		buf := make([]byte, len(batch[0]))
		b.Run(size(n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(batch[0])))
			o, i := NewOpener(k), 0
			for b.Loop() {
				if i == len(batch) {
					o, i = NewOpener(k), 0
				}
				copy(buf, batch[i]) // the packet as the socket read it
				if _, _, err := o.OpenInPlace(buf); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// A trimmed header: only the header tag to check.
func BenchmarkOpenTrimmed(b *testing.B) {
	k := ring(b, domA)
	s := sealer(b, k)
	p := plainPackets(b, 1400)["DATA"]
	batch := make([][]byte, openBatch)
	for i := range batch {
		batch[i] = trim(b, mustSeal(b, s, p))
	}
	buf := make([]byte, len(batch[0]))
	b.ReportAllocs()
	o, i := NewOpener(k), 0
	for b.Loop() {
		if i == len(batch) {
			o, i = NewOpener(k), 0
		}
		copy(buf, batch[i])
		if _, _, err := o.OpenInPlace(buf); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

func size(n int) string { return fmt.Sprintf("%dB", n) }

// BenchmarkDeriveStart is what a packet naming a sender start that is not
// its sender's current one costs in key derivation before its header tag
// can be checked: both subkeys with crypto/hkdf, as the Opener derived
// them before it checked the header tag (and as a Sealer still does, once
// per start), beside the header subkey alone with the Opener's kept HMAC.
func BenchmarkDeriveStart(b *testing.B) {
	k := ring(b, domA)
	dk := k.domains[domA.ID]
	o := NewOpener(k)
	prefix := make([]byte, prefixLen)
	b.Run("both_subkeys_hkdf", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			prefix[15] = byte(i)
			if _, err := dk.derive(prefix); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("header_subkey_hmac", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			prefix[15] = byte(i)
			if _, err := dk.subkey(o.macs[dk.idx], infoHeaderTag, prefix); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("header_expand_hmac", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			prefix[15] = byte(i)
			if _, err := dk.expand(o.macs[dk.idx], infoHeaderTag, prefix); err != nil {
				b.Fatal(err)
			}
		}
	})
}
