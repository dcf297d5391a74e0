package tss

import (
	"bytes"
	"errors"
	"testing"

	"github.com/forgive-emu/forgive/wire"
)

// SealGather makes of a header and a payload that lies elsewhere the
// packet SealInPlace makes of the two laid out together: two sealers of
// one start, one sealing each way, emit the same bytes, and it allocates
// nothing.
func TestSealGatherIsSealInPlace(t *testing.T) {
	k := ring(t, domA)
	prefix := bytes.Repeat([]byte{7}, 64)
	a, err := NewSealer(k, bytes.NewReader(prefix), 5)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewSealer(k, bytes.NewReader(prefix), 5)
	if err != nil {
		t.Fatal(err)
	}
	o := NewOpener(k)
	for name, p := range plainPackets(t, 1400) {
		if wire.Header(p).Type() == wire.TypePause {
			continue
		}
		hl := len(p)
		if typ := wire.Header(p).Type(); typ == wire.TypeData && p[1]&wire.DataTrimmed == 0 {
			hl = wire.DataLen
		}
		whole := make([]byte, Headroom+len(p), len(p)+wire.SealOverhead)
		copy(whole[Headroom:], p)
		want, err := a.SealInPlace(whole, len(p))
		if err != nil {
			t.Fatal(err)
		}
		tail := append([]byte(nil), p[hl:]...) // elsewhere than the buffer
		buf := make([]byte, Headroom+hl, len(p)+wire.SealOverhead)
		copy(buf[Headroom:], p[:hl])
		got, err := b.SealGather(buf, hl, tail)
		if err != nil || !bytes.Equal(got, want) || &got[0] != &buf[0] {
			t.Fatalf("%s: SealGather = %d bytes, %v; SealInPlace %d bytes (equal: %v)", name, len(got), err, len(want), bytes.Equal(got, want))
		}
		if opened, _, err := o.OpenInPlace(got); err != nil || !bytes.Equal(opened, p) {
			t.Fatalf("%s: opened %v: the packet differs", name, err)
		}
	}
	// A payload behind a header that carries none is refused, the counter
	// untouched.
	ack := plainPackets(t, 1400)["ACK"]
	buf := make([]byte, Headroom+len(ack), 4096)
	copy(buf[Headroom:], ack)
	if _, err := b.SealGather(buf, len(ack), []byte("x")); !errors.Is(err, ErrNotSealable) {
		t.Fatalf("a payload behind an ACK: %v, want ErrNotSealable", err)
	}
	p := plainPackets(t, 4096)["DATA"]
	tail := append([]byte(nil), p[wire.DataLen:]...)
	buf = make([]byte, Headroom+wire.DataLen, len(p)+wire.SealOverhead)
	allocs := testing.AllocsPerRun(200, func() {
		copy(buf[Headroom:], p[:wire.DataLen])
		if _, err := b.SealGather(buf, wire.DataLen, tail); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("SealGather allocates %.1f times per packet, want 0", allocs)
	}
}
