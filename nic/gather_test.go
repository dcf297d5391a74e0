package nic_test

import (
	"bytes"
	"testing"

	"github.com/forgive-emu/forgive/nic"
	"github.com/forgive-emu/forgive/wire"
)

// TransmitGather sends the bytes Transmit sends: two engines in the same
// state, one asked with Transmit and one with TransmitGather, emit the same
// datagrams, a data packet's header in the buffer and its payload a view of
// the registered memory (no copy), every other packet whole in the buffer.
func TestTransmitGatherSendsTransmitsBytes(t *testing.T) {
	const msg = 1 << 18
	copied, gathered := newPair(t, msg), newPair(t, msg)
	for i := range copied.mem[0] {
		copied.mem[0][i], gathered.mem[0][i] = byte(i*7), byte(i*7)
	}
	key, back := nic.FlowKey{Peer: 2, ID: 1}, nic.FlowKey{Peer: 1, ID: 1}
	for _, p := range []*pair{copied, gathered} {
		if err := p.b.PostRecv(nic.RecvReq{Key: back, Region: p.region[1], Length: msg}); err != nil {
			t.Fatal(err)
		}
		if err := p.a.PostSend(p.now, nic.SendReq{Key: key, Region: p.region[0], Length: msg}); err != nil {
			t.Fatal(err)
		}
	}
	gbuf := make([]byte, wire.DataLen+4096)
	views := 0
	for round := 0; round < 100000 && len(copied.a.Completions()) == 0; round++ {
		for {
			want, wtos, wok := copied.a.Transmit(copied.now, copied.buf)
			hdr, payload, tos, ok := gathered.a.TransmitGather(gathered.now, gbuf)
			got := append(append([]byte(nil), hdr...), payload...)
			if ok != wok || tos != wtos || !bytes.Equal(got, want) {
				t.Fatalf("round %d: TransmitGather gave %d+%d bytes, tos %#x, %v; Transmit %d bytes, tos %#x, %v (equal: %v)",
					round, len(hdr), len(payload), tos, ok, len(want), wtos, wok, bytes.Equal(got, want))
			}
			if !ok {
				break
			}
			if len(payload) > 0 {
				views++
				// A view of the region ends where the region does.
				if c := cap(payload); c > msg || &payload[0] != &gathered.mem[0][msg-c] {
					t.Fatal("the payload is not a view of the registered memory")
				}
			}
			copied.b.Receive(copied.now, want, wtos)
			gathered.b.Receive(gathered.now, got, tos)
		}
		for _, p := range []*pair{copied, gathered} {
			for {
				pkt, tos, ok := p.b.Transmit(p.now, p.buf)
				if !ok {
					break
				}
				p.a.Receive(p.now, pkt, tos)
			}
			p.a.Advance(p.now)
			p.b.Advance(p.now)
			p.now += 1000
		}
	}
	if views < msg/4096 || !bytes.Equal(gathered.mem[1], copied.mem[0]) {
		t.Fatalf("%d payloads gathered, message delivered intact: %v", views, bytes.Equal(gathered.mem[1], copied.mem[0]))
	}
}
