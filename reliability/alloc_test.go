package reliability

import (
	"testing"

	"github.com/forgive-emu/forgive/internal/race"
	"github.com/forgive-emu/forgive/wire"
)

// TestPerPacketAllocatesNothing is the state machines' allocation gate: a
// receiver placing an in-order DATA packet (and the ACK it owes), and a
// sender sending a segment and taking its ACK, allocate nothing.
func TestPerPacketAllocatesNothing(t *testing.T) {
	r := newReceiver(t, NoForgiveness{}, nil)
	const pkt, msgLen = 4096, 1 << 20
	var psn wire.PSN
	var msg, off uint32
	arrive := func() {
		h := DataHeader{PSN: psn, Msg: msg, Offset: off, PayloadLen: pkt, MsgLen: msgLen}
		if off+pkt == msgLen {
			h.Flags = wire.DataLast | wire.DataAckReq
		}
		res, err := r.OnData(0, h)
		if err != nil || res.Verdict != Placed {
			t.Fatalf("PSN %d: %v %v", psn, res.Verdict, err)
		}
		psn++
		if off += pkt; off == msgLen {
			off, msg = 0, msg+1
		}
		r.Out.Reset()
	}

	s := newSender(t, nil)
	var sent uint32
	var acked int
	ack := func() {
		seg, ok := s.Next(0)
		if !ok {
			sent++
			if err := s.Post(sent, 1<<20); err != nil {
				t.Fatal(err)
			}
			seg, _ = s.Next(0)
		}
		a := wire.AckFields{Flow: testFlow, CumPSN: seg.PSN.Add(1), SackBase: seg.PSN.Add(1), EchoPSN: seg.PSN}
		if _, err := s.OnAck(0, a); err != nil {
			t.Fatal(err)
		}
		acked++
		s.Out.Reset()
	}
	for range 600 { // past the first message: the tables at their steady size
		arrive()
		ack()
	}
	cases := []struct {
		name string
		f    func()
	}{{"receiver OnData", arrive}, {"sender Next and OnAck", ack}}
	for _, c := range cases {
		n := testing.AllocsPerRun(1000, c.f)
		if race.Enabled {
			t.Logf("%s: %v allocations per packet, not asserted under -race", c.name, n)
			continue
		}
		if n != 0 {
			t.Errorf("%s: %v allocations per packet, want 0", c.name, n)
		}
	}
	if psn < 1600 || acked < 1600 {
		t.Fatalf("%d packets placed and %d acked, want 1600 of each", psn, acked)
	}
	if race.Enabled {
		t.Skip("the race detector allocates on its own: this gate holds without -race")
	}
}
