package reliability

import (
	"testing"
	"time"

	"github.com/forgive-emu/forgive/wire"
)

// spuriousSender is a selective-repeat sender that detects spurious
// timeouts, with 8 packets of one message sent at time 0 and its timer
// due.
func spuriousSender(t *testing.T) (*Sender, time.Duration) {
	t.Helper()
	s := newSender(t, func(c *SenderConfig) { c.TailProbe = false; c.DetectSpuriousRTO = true })
	if err := s.Post(1, 8*4096); err != nil {
		t.Fatal(err)
	}
	if n := len(drain(s, 0)); n != 8 {
		t.Fatalf("sent %d packets, want 8", n)
	}
	at, ok := s.NextDeadline()
	if !ok {
		t.Fatal("no timer with 8 packets in flight")
	}
	return s, at
}

func psnsOf(segs []Segment) []wire.PSN {
	var out []wire.PSN
	for _, seg := range segs {
		out = append(out, seg.PSN)
	}
	return out
}

// A timeout resends the oldest PSN alone, and again at the next timeout
// while no ACK comes; the first ACK that acknowledges something, from an
// original (no AckRetx), shows the originals were only late: nothing
// more is resent, and the timeout is counted spurious.
func TestSpuriousRTOResendsTheOldestAloneAndStopsOnAnOriginalsAck(t *testing.T) {
	s, at := spuriousSender(t)
	s.OnTimer(at)
	if got := psnsOf(drain(s, at)); !equalPSNs(got, []wire.PSN{0}) {
		t.Fatalf("the timeout resent %v, want [0] alone", got)
	}
	t.Log("# the receiver is still silent: the next timeout resends the oldest again, not the window")
	at2, _ := s.NextDeadline()
	s.OnTimer(at2)
	if got := psnsOf(drain(s, at2)); !equalPSNs(got, []wire.PSN{0}) {
		t.Fatalf("the second timeout resent %v, want [0] alone", got)
	}
	t.Log("# the receiver wakes: its ACK of the originals arrives first")
	now := at2 + time.Microsecond
	if _, err := s.OnAck(now, ackOf(8, 0, 7)); err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	if st.RTOs != 2 || st.SpuriousRTOs != 1 || st.RetxPackets != 2 || s.InFlight() != 0 || len(drain(s, now)) != 0 {
		t.Fatalf("RTOs %d, spurious %d, resent %d, in flight %d; want 2, 1, 2, 0 and nothing more to send",
			st.RTOs, st.SpuriousRTOs, st.RetxPackets, s.InFlight())
	}
}

// When the first acknowledgement after a timeout is the retransmission's
// (AckRetx), the originals were lost: every unacknowledged PSN is queued,
// as IRN queues them at the timeout, and nothing is counted spurious.
func TestGenuineRTOQueuesTheRestOnTheRetransmissionsAck(t *testing.T) {
	s, at := spuriousSender(t)
	s.OnTimer(at)
	if got := psnsOf(drain(s, at)); !equalPSNs(got, []wire.PSN{0}) {
		t.Fatalf("the timeout resent %v, want [0] alone", got)
	}
	now := at + time.Microsecond
	a := ackOf(1, 0, 0)
	a.Flags = wire.AckRetx
	if _, err := s.OnAck(now, a); err != nil {
		t.Fatal(err)
	}
	if got, want := psnsOf(drain(s, now)), []wire.PSN{1, 2, 3, 4, 5, 6, 7}; !equalPSNs(got, want) {
		t.Fatalf("after the retransmission's ACK the sender resent %v, want %v", got, want)
	}
	if st := s.Stats(); st.SpuriousRTOs != 0 || st.RetxPackets != 8 {
		t.Fatalf("spurious %d, resent %d; want 0 and 8", st.SpuriousRTOs, st.RetxPackets)
	}
}

// Only an ACK that acknowledges something new decides: a stale one, and a
// duplicate from before the timeout, leave the sender waiting.
func TestSpuriousRTOWaitsForANewAcknowledgement(t *testing.T) {
	s, at := spuriousSender(t)
	if _, err := s.OnAck(at-1, ackOf(2, 0, 1)); err != nil { // 0 and 1 arrived in time
		t.Fatal(err)
	}
	at, _ = s.NextDeadline()
	s.OnTimer(at)
	if got := psnsOf(drain(s, at)); !equalPSNs(got, []wire.PSN{2}) {
		t.Fatalf("the timeout resent %v, want [2] alone", got)
	}
	if _, err := s.OnAck(at, ackOf(2, 0, 1)); err != nil { // the same ACK again
		t.Fatal(err)
	}
	if st := s.Stats(); st.SpuriousRTOs != 0 || len(drain(s, at)) != 0 {
		t.Fatalf("an ACK with nothing new decided: spurious %d", st.SpuriousRTOs)
	}
	a := ackOf(3, 0, 2)
	a.Flags = wire.AckRetx
	if _, err := s.OnAck(at, a); err != nil {
		t.Fatal(err)
	}
	if got, want := psnsOf(drain(s, at)), []wire.PSN{3, 4, 5, 6, 7}; !equalPSNs(got, want) {
		t.Fatalf("resent %v, want %v", got, want)
	}
}

// Through a real Receiver: a receiver stalled past the timeout takes the
// originals late and then the retransmission, and its ACKs tell the sender
// the timeout was spurious; the whole window would have gone again under
// IRN's rule. With the originals lost, its ACK of the retransmission makes
// the sender resend the rest, and the message completes either way.
func TestSpuriousRTOThroughTheReceiver(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		detect, lost           bool
		wantRetx, wantSpurious uint64
	}{
		{"stalled receiver, detected", true, false, 1, 1},
		{"stalled receiver, IRN's rule", false, false, 8, 0},
		{"lost window, detected", true, true, 8, 0},
		{"lost window, IRN's rule", false, true, 8, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSender(t, func(c *SenderConfig) { c.TailProbe = false; c.DetectSpuriousRTO = tc.detect })
			r := newReceiver(t, NoForgiveness{}, nil)
			if err := s.Post(1, 8*4096); err != nil {
				t.Fatal(err)
			}
			var wire1 []Segment // what reaches the receiver, in order
			if orig := drain(s, 0); !tc.lost {
				wire1 = append(wire1, orig...)
			}
			at, _ := s.NextDeadline()
			s.OnTimer(at)
			wire1 = append(wire1, drain(s, at)...)
			now := at
			for round := 0; len(wire1) > 0 && round < 10; round++ {
				now += time.Microsecond
				for _, seg := range wire1 {
					h := DataHeader{PSN: seg.PSN, Msg: seg.Msg, Offset: seg.Offset, PayloadLen: seg.Len, MsgLen: seg.MsgLen, Flags: seg.Flags}
					if _, err := r.OnData(now, h); err != nil {
						t.Fatal(err)
					}
				}
				wire1 = nil
				for _, a := range takeAcks(r) {
					if _, err := s.OnAck(now, a); err != nil {
						t.Fatal(err)
					}
				}
				wire1 = drain(s, now)
			}
			st := s.Stats()
			if len(s.Out.Completions) != 1 || st.RetxPackets != tc.wantRetx || st.SpuriousRTOs != tc.wantSpurious {
				t.Fatalf("completions %d, resent %d, spurious %d; want 1, %d, %d",
					len(s.Out.Completions), st.RetxPackets, st.SpuriousRTOs, tc.wantRetx, tc.wantSpurious)
			}
		})
	}
}
