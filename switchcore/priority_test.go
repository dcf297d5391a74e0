package switchcore

import (
	"testing"
	"time"

	"github.com/forgive-emu/forgive/wire"
)

// PARAMETERS.md: "header queue: strict priority over data"; "control
// priority: CNP, ACK/NACK and PFC frames in the strict-priority queue". And
// the FORGIVE seed: a switch "trims the packet to its header and forwards
// that header on a high-priority queue". Headers and control packets that
// arrive while data is queued leave before all of it; only the packet
// already on the link goes first.
func TestHeadersLeaveBeforeQueuedData(t *testing.T) {
	h := newHarness(t, twoPorts())
	for psn := range 30 {
		h.recv(portA, dataPacket(hostA, hostB, 1, wire.PSN(psn), 0, payload1K), tosData)
	}
	h.advance(100 * time.Nanosecond)
	trimmed, _ := wire.Trim(dataPacket(hostA, hostB, 2, 77, 0, payload1K))
	control := [][]byte{
		ackPacket(hostA, hostB, 3),
		trimmed, // trimmed upstream
		wire.AppendCNP(nil, hostA, hostB, 4, 5),
		wire.AppendNack(nil, wire.NackFields{Reason: wire.NackTrimmed, Src: hostA, Dst: hostB, Flow: 6}),
	}
	for _, b := range control {
		// DSCP 0 is a data class: the packet type alone sends these to the
		// strict-priority queue.
		if r := h.recv(portA, b, 0); r != DropNone {
			t.Fatalf("control packet dropped: %v", r)
		}
	}
	// A data packet on a control DSCP (EF) goes there too.
	h.recv(portA, dataPacket(hostA, hostB, 8, 0, 0, 100), tosAck)
	h.settle()
	out := h.takeOut()
	if len(out) != 35 {
		t.Fatalf("%d outputs, want 35", len(out))
	}
	if d := wire.Data(out[0].Pkt.Buf); d.PSN() != 0 || d.Flow() != 1 {
		t.Fatalf("first out: flow %d PSN %d; want the packet already on the link", d.Flow(), d.PSN())
	}
	for i, o := range out[1:6] {
		if wire.Data(o.Pkt.Buf).Flow() == 1 {
			t.Fatalf("output %d is queued data; the five priority packets must leave first", i+1)
		}
	}
	for i, o := range out[6:] {
		if d := wire.Data(o.Pkt.Buf); d.Flow() != 1 || d.PSN() != wire.PSN(i+1) {
			t.Fatalf("output %d: flow %d PSN %d, want queued data PSN %d in order", i+6, d.Flow(), d.PSN(), i+1)
		}
	}
}

// "capacity 2 × data queue; overflow is dropped": a strict-priority queue
// with room for three ACKs drops the fourth and fifth and counts them.
func TestHeaderQueueOverflowDropped(t *testing.T) {
	cfg := twoPorts()
	cfg.Ports[1].HeaderCap = 3 * wire.AckLen
	h := newHarness(t, cfg)
	h.recv(portA, dataPacket(hostA, hostB, 1, 0, 0, payload1K), tosData) // occupies the link
	var dropped int
	for range 5 {
		if h.recv(portA, ackPacket(hostA, hostB, 1), tosAck) == DropHeaderOverflow {
			dropped++
		}
	}
	st := h.sw.Stats().Ports[portB].Classes[ClassHeader]
	if dropped != 2 || st.Drops[DropHeaderOverflow].Packets != 2 || st.Drops[DropHeaderOverflow].Bytes != 2*wire.AckLen {
		t.Errorf("dropped %d, counted %+v; want 2 ACKs", dropped, st.Drops[DropHeaderOverflow])
	}
	if st.MaxOccupancy != 3*wire.AckLen {
		t.Errorf("MaxOccupancy %d, want %d", st.MaxOccupancy, 3*wire.AckLen)
	}
	h.settle()
	if len(h.out) != 4 {
		t.Errorf("%d delivered, want the data packet and 3 ACKs", len(h.out))
	}
}

// The default header capacity is twice the data capacity.
func TestHeaderCapDefault(t *testing.T) {
	h := newHarness(t, twoPorts())
	if got, want := h.sw.ports[portB].headerCap, 2*64*packet1K; got != want {
		t.Errorf("header capacity %d, want %d", got, want)
	}
}
