package congestion

import (
	"math"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/forgive-emu/forgive/internal/units"
)

// drawDCQCNConfig draws a valid config around the defaults, with short
// timers and a small byte counter so every phase is reached.
func drawDCQCNConfig(t *rapid.T) DCQCNConfig {
	line := units.Rate(rapid.Int64Range(1*G, 800*G).Draw(t, "line"))
	cfg := DefaultDCQCN(line)
	cfg.MinRate = float64(line) * rapid.Float64Range(1e-4, 0.5).Draw(t, "minFrac")
	cfg.G = 1 / rapid.Float64Range(4, 1024).Draw(t, "1/g")
	cfg.AlphaTimer = time.Duration(rapid.Int64Range(1, 100).Draw(t, "K")) * us
	cfg.RateTimer = time.Duration(rapid.Int64Range(1, 100).Draw(t, "rateTimer")) * us
	cfg.ByteCounter = rapid.SampledFrom([]int64{0, 4096, 100_000, 1_000_000}).Draw(t, "B")
	cfg.F = rapid.IntRange(0, 8).Draw(t, "F")
	cfg.RAI = float64(line) * rapid.Float64Range(1e-3, 0.1).Draw(t, "raiFrac")
	cfg.RHAI = float64(line) * rapid.Float64Range(0, 0.2).Draw(t, "rhaiFrac")
	cfg.InitialAlpha = rapid.Float64Range(0, 1).Draw(t, "alpha0")
	if err := cfg.Validate(); err != nil {
		t.Fatalf("drew an invalid config: %v", err)
	}
	return cfg
}

type ccEventKind int

const (
	evCNP ccEventKind = iota
	evSent
	evTick
)

type ccEvent struct {
	at    time.Duration
	kind  ccEventKind
	bytes int
}

// drawEvents draws a time-ordered script of CNPs, sends and bare wake-ups,
// with quiet periods from nothing to a full second.
func drawEvents(t *rapid.T) []ccEvent {
	n := rapid.IntRange(1, 60).Draw(t, "events")
	gaps := rapid.SampledFrom([]time.Duration{0, 1 * us, 20 * us, 55 * us, 300 * us, 2 * time.Millisecond, time.Second})
	var now time.Duration
	events := make([]ccEvent, n)
	for i := range events {
		now += gaps.Draw(t, "gap") + time.Duration(rapid.Int64Range(0, 1000).Draw(t, "jitter"))
		events[i] = ccEvent{
			at:    now,
			kind:  ccEventKind(rapid.IntRange(0, 2).Draw(t, "kind")),
			bytes: rapid.IntRange(0, 3_000_000).Draw(t, "bytes"),
		}
	}
	return events
}

func apply(c Controller, ev ccEvent) {
	switch ev.kind {
	case evCNP:
		c.OnCNP(ev.at)
	case evSent:
		c.OnSent(ev.at, ev.bytes)
	default:
		c.Advance(ev.at)
	}
}

// A driver that wakes late, only when the next packet or CNP arrives, gets
// exactly the trajectory of one that woke at every deadline.
func TestDCQCNLateWakeEqualsStepByStep(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := drawDCQCNConfig(t)
		stepwise, _ := NewDCQCN(cfg)
		late, _ := NewDCQCN(cfg)
		for i, ev := range drawEvents(t) {
			for {
				at, ok := stepwise.NextDeadline()
				if !ok || at > ev.at {
					break
				}
				stepwise.Advance(at)
			}
			apply(stepwise, ev)
			apply(late, ev)
			if *stepwise != *late {
				t.Fatalf("event %d (%+v): stepwise %+v\nlate %+v", i, ev, *stepwise, *late)
			}
		}
	})
}

// Whatever arrives, R_C stays within [MinRate, LineRate], α within [0, 1],
// and a pending deadline lies in the future.
func TestDCQCNRateStaysInBounds(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := drawDCQCNConfig(t)
		d, _ := NewDCQCN(cfg)
		for i, ev := range drawEvents(t) {
			apply(d, ev)
			if r := d.Rate(); !(r >= cfg.MinRate && r <= float64(cfg.LineRate)) {
				t.Fatalf("event %d: R_C = %v outside [%v, %v]", i, r, cfg.MinRate, cfg.LineRate)
			}
			if d.TargetRate() < cfg.MinRate {
				t.Fatalf("event %d: R_T = %v below MinRate", i, d.TargetRate())
			}
			if a := d.Alpha(); !(a >= 0 && a <= 1) {
				t.Fatalf("event %d: α = %v", i, a)
			}
			if at, ok := d.NextDeadline(); ok && at <= ev.at {
				t.Fatalf("event %d at %v: stale deadline %v", i, ev.at, at)
			}
			if ok := func() bool { _, ok := d.NextDeadline(); return ok }(); ok != (d.Rate() < float64(cfg.LineRate)) {
				t.Fatalf("event %d: deadline armed = %v at R_C %v", i, ok, d.Rate())
			}
		}
	})
}

// The sender's mode is always the function of the latest report, CNPs
// cut only while obeying, and the mode-time accounting adds up.
func TestSenderModeProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ctrl, _ := NewDCQCN(DefaultDCQCN(100 * G))
		s, _ := NewSender(0, ctrl, DefaultSenderConfig())
		want := Obeying
		var now time.Duration
		n := rapid.IntRange(1, 100).Draw(t, "n")
		for range n {
			now += time.Duration(rapid.Int64Range(0, 100).Draw(t, "gap")) * us
			cutsBefore := ctrl.Stats().Cuts
			switch rapid.IntRange(0, 2).Draw(t, "op") {
			case 0:
				eligible := rapid.Bool().Draw(t, "eligible")
				exhausted := rapid.Bool().Draw(t, "exhausted")
				s.OnReport(now, eligible, exhausted)
				want = Obeying
				if eligible && !exhausted {
					want = Exempt
				}
			case 1:
				s.OnCongestionNotification(now)
			default:
				s.OnRetransmissionRequest(now, 4096, 0)
			}
			if s.Mode() != want {
				t.Fatalf("mode %v, latest report says %v", s.Mode(), want)
			}
			if cut := ctrl.Stats().Cuts != cutsBefore; cut && s.Mode() == Exempt {
				t.Fatalf("an exempt sender cut its rate")
			}
		}
		st := s.Stats(now)
		if st.ModeChanges != st.ToExempt+st.ToObeying || st.ReObeyed != st.ToObeying {
			t.Fatalf("inconsistent transition counts %+v", st)
		}
		if st.ReObeyTime+st.ExemptTime > now {
			t.Fatalf("mode times %v + %v exceed the %v elapsed", st.ReObeyTime, st.ExemptTime, now)
		}
		if st.EverExempt != (st.ToExempt > 0) {
			t.Fatalf("EverExempt %v with %d exemptions", st.EverExempt, st.ToExempt)
		}
		if cs := ctrl.Stats(); cs.Cuts+cs.CNPsCoalesced != st.CNPsObeyed+st.RetxCuts {
			t.Fatalf("controller cuts %d + coalesced %d != obeyed CNPs %d + NACK cuts %d", cs.Cuts, cs.CNPsCoalesced, st.CNPsObeyed, st.RetxCuts)
		}
	})
}

// Whatever the ACKs, trims, reports and times, NSCC's window stays
// within one MTU and its ceiling, is the ceiling while exempt, and an
// exempt flow's window shrinks only with its ceiling (an RTT sample below
// the base RTT lowers both).
func TestNSCCWindowProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n, _ := NewNSCC(DefaultNSCC(25*G, 10*us, 4096))
		s, _ := NewSender(0, n, DefaultSenderConfig())
		var now time.Duration
		steps := rapid.IntRange(1, 200).Draw(t, "steps")
		for range steps {
			now += time.Duration(rapid.Int64Range(0, 30_000).Draw(t, "gap_ns"))
			before, ceiling := n.cwnd, n.maxWnd
			switch rapid.IntRange(0, 3).Draw(t, "op") {
			case 0:
				s.OnReport(now, rapid.Bool().Draw(t, "eligible"), rapid.Bool().Draw(t, "exhausted"))
			case 1:
				s.OnRetransmissionRequest(now, rapid.IntRange(-10, 1<<20).Draw(t, "nacked"), rapid.IntRange(0, 1<<20).Draw(t, "inflight"))
			case 2:
				s.OnCongestionNotification(now)
			default:
				s.OnAck(now, AckSignal{
					Acked:    rapid.IntRange(-10, 1<<17).Draw(t, "acked"),
					RTT:      time.Duration(rapid.Int64Range(0, 500_000).Draw(t, "rtt_ns")),
					ECN:      rapid.Bool().Draw(t, "ecn"),
					InFlight: rapid.IntRange(0, 1<<20).Draw(t, "inflight"),
				})
			}
			if n.cwnd < 4096 || n.cwnd > n.maxWnd || math.IsNaN(n.cwnd) {
				t.Fatalf("window %v outside [4096, %v]", n.cwnd, n.maxWnd)
			}
			if s.Mode() == Exempt && (n.cwnd != n.maxWnd || (n.cwnd < before && n.maxWnd == ceiling)) {
				t.Fatalf("exempt window %v (was %v), ceiling %v", n.cwnd, before, n.maxWnd)
			}
			if w, ok := s.Window(); !ok || w != int(n.cwnd) {
				t.Fatalf("sender window %d, %v; controller %v", w, ok, n.cwnd)
			}
		}
	})
}
