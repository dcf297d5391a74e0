package reliability

import (
	"testing"

	"github.com/forgive-emu/forgive/wire"
)

// BenchmarkReceiverOnData: in-order 4 KiB packets of 1 MiB messages, the
// receiver's common case. Every iteration is one packet; the outbox is
// drained as a NIC would.
func BenchmarkReceiverOnData(b *testing.B) {
	r := newReceiver(b, NoForgiveness{}, nil)
	const pkt, msgLen = 4096, 1 << 20
	var psn wire.PSN
	var msg, off uint32
	b.ReportAllocs()
	b.SetBytes(pkt)
	for b.Loop() {
		h := DataHeader{PSN: psn, Msg: msg, Offset: off, PayloadLen: pkt, MsgLen: msgLen}
		if off+pkt == msgLen {
			h.Flags = wire.DataLast | wire.DataAckReq
		}
		res, err := r.OnData(0, h)
		if err != nil || res.Verdict != Placed {
			b.Fatalf("PSN %d: %v %v", psn, res.Verdict, err)
		}
		psn++
		if off += pkt; off == msgLen {
			off, msg = 0, msg+1
		}
		r.Out.Reset()
	}
}

// BenchmarkBitmap settles PSNs with every pair swapped (1, 0, 3, 2, ...),
// so half the settles slide the window and half set a bit ahead of it.
func BenchmarkBitmap(b *testing.B) {
	bm := newPSNBitmap(0, DefaultBitmapPSNs)
	var p wire.PSN
	var sack uint64
	b.ReportAllocs()
	for b.Loop() {
		bm.settle(p ^ 1)
		sack |= bm.sack64()
		p++
	}
	if bm.cum.Sub(p) > 1 || bm.cum.Sub(p) < -1 {
		b.Fatalf("cumulative %d after %d settles", bm.cum, p)
	}
	_ = sack
}

// BenchmarkScoreboard marks a 1 MiB message received in 4 KiB pieces with
// every pair of pieces swapped, so every other mark goes through the span
// list.
func BenchmarkScoreboard(b *testing.B) {
	var sb Scoreboard
	const piece, msgLen = 4096, 1 << 20
	sb.Reset(msgLen)
	var placed []ByteRange
	i := uint32(0)
	b.ReportAllocs()
	b.SetBytes(piece)
	for b.Loop() {
		off := (i ^ 1) * piece
		placed, _ = sb.MarkReceived(ByteRange{off, off + piece}, placed[:0])
		if i++; i*piece == msgLen {
			if !sb.Complete() {
				b.Fatal("message incomplete")
			}
			sb.Reset(msgLen)
			i = 0
		}
	}
}

// BenchmarkSenderNextAck: one new 4 KiB segment out and its ACK in per
// iteration, as on a loss-free path.
func BenchmarkSenderNextAck(b *testing.B) {
	s := newSender(b, nil)
	var msg uint32
	b.ReportAllocs()
	b.SetBytes(DefaultMTU)
	for b.Loop() {
		seg, ok := s.Next(0)
		if !ok {
			msg++
			if err := s.Post(msg, 1<<20); err != nil {
				b.Fatal(err)
			}
			seg, _ = s.Next(0)
		}
		a := wire.AckFields{Flow: testFlow, CumPSN: seg.PSN.Add(1), SackBase: seg.PSN.Add(1), EchoPSN: seg.PSN}
		if _, err := s.OnAck(0, a); err != nil {
			b.Fatal(err)
		}
		s.Out.Reset()
	}
}
