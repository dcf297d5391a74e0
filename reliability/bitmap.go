package reliability

import (
	"math/bits"

	"github.com/forgive-emu/forgive/wire"
)

// psnBitmap is the receiver's sliding window of PSNs, in the manner of
// RFC 6479 as wireguard-go's replay filter does it: a ring of 64-bit words
// indexed by the absolute PSN, so sliding the window costs nothing but
// clearing the words it leaves behind.
//
// cum is the cumulative PSN: the lowest PSN not settled, so every PSN
// before it is settled (received, or trimmed and forgiven). Two bit planes
// cover [cum, cum+size): settled, and nacked (a retransmission of the PSN
// was already requested, so gap and probe inference do not ask again).
// A bit is cleared when cum moves past it, which keeps every word a PSN
// can map to clean: with W words, the PSNs of [cum, cum+(W-1)*64) fall in
// W distinct words.
type psnBitmap struct {
	cum     wire.PSN
	size    uint32
	mask    uint32
	settled []uint64
	nacked  []uint64
}

func newPSNBitmap(initial wire.PSN, psns int) psnBitmap {
	// W is a power of two so that slot = (psn/64) mod W stays continuous
	// when the PSN wraps around 2^32 (2^26 words is a multiple of W).
	w := 2
	for (w-1)*64 < psns {
		w *= 2
	}
	return psnBitmap{
		cum:     initial,
		size:    uint32(w-1) * 64,
		mask:    uint32(w - 1),
		settled: make([]uint64, w),
		nacked:  make([]uint64, w),
	}
}

func (b *psnBitmap) loc(p wire.PSN) (slot uint32, bit uint) {
	return (uint32(p) >> 6) & b.mask, uint(p) & 63
}

// inWindow reports whether p lies in [cum, cum+size).
func (b *psnBitmap) inWindow(p wire.PSN) bool { return p.InWindow(b.cum, b.size) }

// isSettled reports whether p is settled. PSNs beyond the window are not.
func (b *psnBitmap) isSettled(p wire.PSN) bool {
	if p.Before(b.cum) {
		return true
	}
	if !b.inWindow(p) {
		return false
	}
	slot, bit := b.loc(p)
	return b.settled[slot]&(1<<bit) != 0
}

// isNacked reports whether a retransmission of p was requested. p must be
// in the window.
func (b *psnBitmap) isNacked(p wire.PSN) bool {
	slot, bit := b.loc(p)
	return b.nacked[slot]&(1<<bit) != 0
}

func (b *psnBitmap) setNacked(p wire.PSN) {
	if b.inWindow(p) {
		slot, bit := b.loc(p)
		b.nacked[slot] |= 1 << bit
	}
}

// settle records p as settled and slides the window when p == cum. It
// returns false when p lies beyond the window and cannot be recorded.
func (b *psnBitmap) settle(p wire.PSN) bool {
	if p.Before(b.cum) {
		return true
	}
	if !b.inWindow(p) {
		return false
	}
	slot, bit := b.loc(p)
	b.settled[slot] |= 1 << bit
	if p == b.cum {
		b.advance()
	}
	return true
}

// advance moves cum over the run of settled PSNs that starts at it, a word
// at a time, clearing both planes behind it.
func (b *psnBitmap) advance() {
	for {
		slot, off := b.loc(b.cum)
		run := bits.TrailingZeros64(^(b.settled[slot] >> off)) // <= 64-off
		if run == 0 {
			return
		}
		clear := ^uint64(0)
		if run < 64 {
			clear = (uint64(1)<<run - 1) << off
		}
		b.settled[slot] &^= clear
		b.nacked[slot] &^= clear
		b.cum = b.cum.Add(uint32(run))
		if int(off)+run < 64 {
			return
		}
	}
}

// sack64 returns the 64-bit SACK bitmap with base cum: bit i says PSN
// cum+i is settled. Bit 0 is always clear, since cum is by definition the
// lowest PSN not settled.
func (b *psnBitmap) sack64() uint64 {
	slot, off := b.loc(b.cum)
	v := b.settled[slot] >> off
	if off > 0 {
		v |= b.settled[(slot+1)&b.mask] << (64 - off)
	}
	return v
}
