package tss

import (
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

func BenchmarkSeal(b *testing.B) {
	k := ring(b, domA)
	s := sealer(b, k)
	for _, n := range benchSizes() {
		p := plainPackets(b, n)["DATA"]
		dst := make([]byte, 0, len(p)+wire.SealOverhead)
		b.Run(size(n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(p)))
			for b.Loop() {
				var err error
				if dst, err = s.Seal(dst[:0], p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkOpen(b *testing.B) {
	k := ring(b, domA)
	s, o := sealer(b, k), NewOpener(k)
	for _, n := range benchSizes() {
		sealed := mustSeal(b, s, plainPackets(b, n)["DATA"])
		dst := make([]byte, 0, len(sealed))
		b.Run(size(n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(sealed)))
			for b.Loop() {
				var err error
				if dst, _, err = o.Open(dst[:0], sealed); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A trimmed header: only the header tag to check.
func BenchmarkOpenTrimmed(b *testing.B) {
	k := ring(b, domA)
	s, o := sealer(b, k), NewOpener(k)
	tr := trim(b, mustSeal(b, s, plainPackets(b, 1400)["DATA"]))
	dst := make([]byte, 0, len(tr))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := o.Open(dst[:0], tr); err != nil {
			b.Fatal(err)
		}
	}
}

func size(n int) string { return fmt.Sprintf("%dB", n) }
