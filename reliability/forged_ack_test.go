package reliability

import (
	"errors"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/forgive-emu/forgive/wire"
)

// Attack: "with 2 % fabric loss, forged SACKs for a stale cumulative PSN
// made the sender fail and the receiver hang". Property: whatever
// sequence of forged ACKs and SACKs reaches the sender, interleaved with
// the real receiver's ACKs, losses, deliveries and timeouts, the sender
// never reports a message complete whose bytes the receiver does not
// have, and never settles a PSN the receiver lacks. A forged cumulative
// PSN is any value but a correct guess of one the receiver has reached
// (which only a sender that knows the flow's PSNs makes; a random initial
// PSN makes that a 1 in 2^32 guess); its SACK bits are anything. An ACK
// that names a PSN never sent is refused with nothing changed.
func TestForgedAcksNeverCompleteMissingBytes(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		cfg := DefaultSenderConfig()
		cfg.TailProbe = false
		initial := wire.PSN(rapid.Uint32().Draw(rt, "initial"))
		s, err := NewSender(FlowInfo{Flow: testFlow, Local: 1, Peer: 2, InitialPSN: initial}, cfg)
		if err != nil {
			rt.Fatal(err)
		}
		msgOf := map[wire.PSN]uint32{}    // each sent PSN's message
		psnsOf := map[uint32][]wire.PSN{} // each message's PSNs
		nmsg := rapid.IntRange(1, 4).Draw(rt, "messages")
		for m := range nmsg {
			if err := s.Post(uint32(m), uint32(rapid.IntRange(1, 5*4096).Draw(rt, "len"))); err != nil {
				rt.Fatal(err)
			}
		}
		var now time.Duration
		var flying []wire.PSN // sent, not yet delivered or lost
		send := func() {
			for {
				seg, ok := s.Next(now)
				if !ok {
					return
				}
				if _, seen := msgOf[seg.PSN]; !seen {
					msgOf[seg.PSN] = seg.Msg
					psnsOf[seg.Msg] = append(psnsOf[seg.Msg], seg.PSN)
				}
				flying = append(flying, seg.PSN)
			}
		}
		send()
		received := map[wire.PSN]bool{}
		truthCum := func() wire.PSN {
			p := initial
			for received[p] {
				p = p.Add(1)
			}
			return p
		}
		completed := map[uint32]bool{}
		check := func(step string) {
			for _, c := range s.Out.Completions {
				for _, p := range psnsOf[c.Msg] {
					if !received[p] {
						rt.Fatalf("%s: message %d reported complete, PSN %d never reached the receiver", step, c.Msg, p)
					}
				}
				completed[c.Msg] = true
			}
			s.Out.Reset()
			if cum := truthCum(); s.Una().After(cum) {
				rt.Fatalf("%s: sender settled up to %d, the receiver has up to %d", step, s.Una(), cum)
			}
		}
		steps := rapid.IntRange(1, 80).Draw(rt, "steps")
		for range steps {
			now += time.Duration(rapid.IntRange(0, 500).Draw(rt, "dt")) * time.Microsecond
			switch op := rapid.IntRange(0, 4).Draw(rt, "op"); op {
			case 0: // a packet in flight arrives, or is lost
				if len(flying) == 0 {
					continue
				}
				i := rapid.IntRange(0, len(flying)-1).Draw(rt, "packet")
				if rapid.Bool().Draw(rt, "delivered") {
					received[flying[i]] = true
				}
				flying = append(flying[:i], flying[i+1:]...)
			case 1: // the receiver's real ACK
				cum := truthCum()
				var sack uint64
				for i := range 64 {
					if received[cum.Add(uint32(i))] {
						sack |= 1 << i
					}
				}
				if _, err := s.OnAck(now, wire.AckFields{Flow: testFlow, CumPSN: cum, SackBase: cum, Sack: sack}); err != nil {
					rt.Fatalf("the real ACK was refused: %v", err)
				}
			case 2, 3: // a forged ACK
				a := wire.AckFields{Flow: testFlow,
					CumPSN:   wire.PSN(rapid.Uint32().Draw(rt, "cum")),
					SackBase: wire.PSN(rapid.Uint32().Draw(rt, "base")),
					Sack:     rapid.Uint64().Draw(rt, "sack")}
				if op == 3 { // aimed near the flow's PSNs: stale cumulative, SACK in the window
					a.CumPSN = s.Una().Add(-uint32(rapid.IntRange(0, 64).Draw(rt, "stale")))
					a.SackBase = s.Una().Add(uint32(rapid.IntRange(-8, 8).Draw(rt, "off")))
				}
				if cum := truthCum(); a.CumPSN.After(cum) && !a.CumPSN.After(s.NextPSN()) {
					a.CumPSN = cum // a correct guess: not an attack this property covers
				}
				una, inflight, acks := s.Una(), s.InFlight(), s.Stats().Acks
				_, err := s.OnAck(now, a)
				if err != nil {
					if !errors.Is(err, ErrBadAck) && !errors.Is(err, ErrWrongFlow) {
						rt.Fatalf("forged ACK refused with %v", err)
					}
					if s.Una() != una || s.InFlight() != inflight || s.Stats().Acks != acks {
						rt.Fatalf("a refused ACK changed the sender: una %d->%d, in flight %d->%d", una, s.Una(), inflight, s.InFlight())
					}
				}
			case 4: // the retransmission timer
				if at, ok := s.NextDeadline(); ok {
					now = max(now, at)
					s.OnTimer(now)
				}
			}
			send()
			check("after a step")
		}
		// The attack ends; the real receiver keeps acknowledging what
		// arrives and no packet is lost: every message completes.
		for range 1000 {
			for _, p := range flying {
				received[p] = true
			}
			flying = flying[:0]
			cum := truthCum()
			if _, err := s.OnAck(now, wire.AckFields{Flow: testFlow, CumPSN: cum, SackBase: cum}); err != nil {
				rt.Fatalf("the real ACK was refused: %v", err)
			}
			check("recovery")
			if s.Idle() {
				break
			}
			if at, ok := s.NextDeadline(); ok {
				now = max(now, at)
				s.OnTimer(now)
			}
			send()
		}
		if !s.Idle() || len(completed) != nmsg {
			rt.Fatalf("after the attack: %d of %d messages completed, idle %v, una %d next %d",
				len(completed), nmsg, s.Idle(), s.Una(), s.NextPSN())
		}
	})
}
