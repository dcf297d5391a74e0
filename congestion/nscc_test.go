package congestion

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

// refNSCC is NSCC on the reference network itself: 100 Gb/s, 12 µs,
// 4,096-byte packets. Its scaling factors are a = 1 and b = 0.75, so
// target = 9 µs, ceiling = 1.5 × 150,000 = 225,000 bytes, fair increase
// fi = 5 × 4096 = 20,480, η = 0.15 × 4096 = 614.4 bytes, fast increase
// 0.25 of each acknowledged byte, α = 4 × 4096 × 0.75 / 9,000 ns.
func refNSCC() NSCCConfig { return DefaultNSCC(100*G, 12*us, 4096) }

func newNSCC(t testing.TB, cfg NSCCConfig) *NSCC {
	t.Helper()
	n, err := NewNSCC(cfg)
	if err != nil {
		t.Fatalf("NewNSCC: %v", err)
	}
	return n
}

func wantWindow(t *testing.T, step string, n *NSCC, want float64) {
	t.Helper()
	if math.Abs(n.cwnd-want) > 1e-9*want {
		t.Errorf("%s: window %.6f bytes, want %.6f", step, n.cwnd, want)
	}
}

func ack(acked int, rtt time.Duration, ecn bool) AckSignal {
	return AckSignal{Acked: acked, RTT: rtt, ECN: ecn, InFlight: 0}
}

func TestNSCCDefaultsScaleWithTheNetwork(t *testing.T) {
	n := newNSCC(t, refNSCC())
	if n.Target() != 9*us || n.MaxWindow() != 225000 || n.Window() != 225000 || n.BaseRTT() != 12*us {
		t.Errorf("reference network: target %v, ceiling %d, window %d, base %v; want 9µs, 225000, 225000, 12µs",
			n.Target(), n.MaxWindow(), n.Window(), n.BaseRTT())
	}
	if !approx(n.fair, 20480) || !approx(n.eta, 614.4) || !approx(n.fastScale, 0.25) || !approx(n.alpha, 4*4096*0.75/9000) {
		t.Errorf("reference gains: fi %v, η %v, fast %v, α %v", n.fair, n.eta, n.fastScale, n.alpha)
	}
	// The seed at 1/16 of its rate: 25 Gb/s and 10 µs give a BDP of
	// 31,250 bytes (a = 31250/150000), a ceiling of 46,875 and a target
	// of 7.5 µs (b = 7.5/12).
	s := newNSCC(t, DefaultNSCC(25*G, 10*us, 4096))
	a, b := 31250.0/150000, 7.5/12
	if s.Target() != 7500*time.Nanosecond || s.MaxWindow() != 46875 || s.Rate() != 25*G {
		t.Errorf("seed-25g: target %v, ceiling %d, rate %v", s.Target(), s.MaxWindow(), s.Rate())
	}
	if !approx(s.fair, 5*4096*a) || !approx(s.eta, 0.15*4096*a) || !approx(s.alpha, 4*4096*a*b/7500) {
		t.Errorf("seed-25g gains: fi %v, η %v, α %v", s.fair, s.eta, s.alpha)
	}
}

func TestNSCCValidateNamesTheField(t *testing.T) {
	for _, c := range []struct {
		field string
		mod   func(*NSCCConfig)
	}{
		{"LineRate", func(c *NSCCConfig) { c.LineRate = 0 }},
		{"LineRate", func(c *NSCCConfig) { c.LineRate = -1 }},
		{"BaseRTT", func(c *NSCCConfig) { c.BaseRTT = 0 }},
		{"MTU", func(c *NSCCConfig) { c.MTU = 0 }},
		{"TargetDelay", func(c *NSCCConfig) { c.TargetDelay = -1 }},
		{"Gamma", func(c *NSCCConfig) { c.Gamma = 1.5 }},
		{"MaxWindowBDP", func(c *NSCCConfig) { c.MaxWindowBDP = math.NaN() }},
		{"DelayAlpha", func(c *NSCCConfig) { c.DelayAlpha = -0.1 }},
		{"QAGate", func(c *NSCCConfig) { c.QAGate = 64 }},
		{"FastIncreaseDelay", func(c *NSCCConfig) { c.FastIncreaseDelay = -us }},
	} {
		cfg := refNSCC()
		c.mod(&cfg)
		_, err := NewNSCC(cfg)
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "NSCCConfig."+c.field) {
			t.Errorf("%s: error %v, want ErrConfig naming the field", c.field, err)
		}
	}
}

// Multiplicative decrease: a marked ACK whose delay is at or above the
// target cuts the window by max(1 − γ(avg − target)/avg, 0.5), at most
// once per base RTT, and only while the average delay is above target.
func TestNSCCMultiplicativeDecrease(t *testing.T) {
	cfg := refNSCC()
	cfg.DelayAlpha, cfg.NoQuickAdapt = 1, true // the average is the last sample
	n := newNSCC(t, cfg)

	// t = 20 µs, delay 21 µs: 225000 × (1 − 0.8 × 12/21), then the first
	// adjustment (20 µs since time 0, more than a base RTT) adds η.
	n.OnAck(20*us, ack(4096, 33*us, true))
	w := 225000*(1-0.8*12.0/21) + 614.4
	wantWindow(t, "first mark", n, w)
	// 5 µs later, within a base RTT of the cut: no second cut.
	n.OnAck(25*us, ack(4096, 33*us, true))
	wantWindow(t, "mark within a base RTT", n, w)
	// 13 µs after the cut, delay 100 µs: the factor would be below 0.5,
	// so it is 0.5; 13 µs since the last adjustment adds η again.
	n.OnAck(33*us, ack(4096, 112*us, true))
	w = w*0.5 + 614.4
	wantWindow(t, "deep queue, halved", n, w)
	if st := n.NSCCStats(); st.Decreases != 2 || n.Stats().Cuts != 2 {
		t.Errorf("decreases %d, cuts %d; want 2, 2", st.Decreases, n.Stats().Cuts)
	}

	// A marked ACK below the target changes nothing: NSCC blames the
	// path, not the window.
	n.OnAck(40*us, ack(4096, 15*us, true))
	wantWindow(t, "mark below target", n, w)

	// A mark with the delay above target but the average below it does
	// not cut: the average, not the sample, decides.
	m := refNSCC()
	m.NoQuickAdapt = true // DelayAlpha 0.0125: one 21 µs sample moves the average to 262 ns
	k := newNSCC(t, m)
	k.OnAck(20*us, ack(4096, 33*us, true))
	wantWindow(t, "average below target", k, 225000)
	if k.AvgDelay() != 262*time.Nanosecond {
		t.Errorf("average delay %v, want 0.0125 × 21 µs = 262 ns", k.AvgDelay())
	}
}

// cutTo brings the window below the ceiling with one NACK, quick adapt
// off, at t = 1 µs (before any adjustment is due).
func cutTo(t *testing.T, n *NSCC, w float64) {
	t.Helper()
	n.OnNack(1*us, int(n.cwnd-w), 0)
	wantWindow(t, "cut", n, w)
}

// Fair increase: an unmarked ACK with the delay at or above target adds
// fi × acked to the accumulator; every 8 MTUs acknowledged, or after a
// base RTT, the accumulator is folded in as acc/window, and η is added
// once per base RTT.
func TestNSCCFairIncrease(t *testing.T) {
	cfg := refNSCC()
	cfg.NoQuickAdapt = true
	n := newNSCC(t, cfg)
	cutTo(t, n, 125000)

	// 20 µs since time 0: the fold runs at once.
	n.OnAck(20*us, ack(4096, 22*us, false)) // delay 10 µs ≥ 9 µs
	w := 125000 + 20480*4096/125000.0 + 614.4
	wantWindow(t, "fair, folded at once", n, w)
	// Nine more ACKs 1 µs apart: nothing is folded until the
	// accumulated bytes pass 8 × 4096; the ninth (36,864 bytes) folds
	// the nine increments, with no η (9 µs since the last).
	for i := range 8 {
		n.OnAck(time.Duration(21+i)*us, ack(4096, 22*us, false))
		wantWindow(t, "accumulating", n, w)
	}
	n.OnAck(29*us, ack(4096, 22*us, false))
	w += 9 * 20480 * 4096 / w
	wantWindow(t, "folded after 8 MTUs", n, w)
	if st := n.NSCCStats(); st.FairIncreases != 10 || st.Adjustments != 2 {
		t.Errorf("fair increases %d, adjustments %d; want 10, 2", st.FairIncreases, st.Adjustments)
	}
}

// Proportional increase: below the target, α × acked × (target − delay).
func TestNSCCProportionalIncrease(t *testing.T) {
	cfg := refNSCC()
	cfg.NoQuickAdapt = true
	n := newNSCC(t, cfg)
	cutTo(t, n, 100000)
	// Delay 3 µs: 4 × 4096 × 0.75/9000 × 4096 × 6000 = 2 × 4096²
	// = 33,554,432, folded at once (20 µs since time 0) with η.
	n.OnAck(20*us, ack(4096, 15*us, false))
	wantWindow(t, "proportional", n, 100000+33554432/100000.0+614.4)
	// The closer to the target, the less: delay 8 µs gives a sixth.
	w := n.cwnd
	n.OnAck(33*us, ack(4096, 20*us, false))
	wantWindow(t, "near target", n, w+33554432/6.0/w+614.4)
	if st := n.NSCCStats(); st.PropIncreases != 2 {
		t.Errorf("proportional increases %d, want 2", st.PropIncreases)
	}
}

// Fast increase: once a window's worth of ACKs saw a delay under 1 µs,
// each such ACK grows the window by 0.25 of its bytes at once, until an
// ACK with more delay ends it.
func TestNSCCFastIncrease(t *testing.T) {
	cfg := refNSCC()
	cfg.NoQuickAdapt = true
	n := newNSCC(t, cfg)
	cutTo(t, n, 20000)
	// ACKs at 2..5 µs with no queueing delay: the count reaches 16,384,
	// not above the window; each is a proportional increase into the
	// accumulator, not yet folded (8 MTUs not passed, no base RTT).
	for i := range 4 {
		n.OnAck(time.Duration(2+i)*us, ack(4096, 12*us, false))
	}
	wantWindow(t, "counting", n, 20000)
	// The fifth brings the count to 20,480 > 20,000: fast increase,
	// +1024; the sixth keeps it, +1024.
	n.OnAck(6*us, ack(4096, 12*us, false))
	wantWindow(t, "fast", n, 21024)
	n.OnAck(7*us, ack(4096, 12*us, false))
	wantWindow(t, "still fast", n, 22048)
	// 2 µs of delay ends fast increase: a proportional increase again,
	// into the accumulator.
	n.OnAck(8*us, ack(4096, 14*us, false))
	wantWindow(t, "fast increase over", n, 22048)
	if st := n.NSCCStats(); st.FastIncreases != 2 || st.PropIncreases != 5 {
		t.Errorf("fast %d, proportional %d; want 2, 5", st.FastIncreases, st.PropIncreases)
	}
	// The eighth ACK (32,768 bytes, not above 8 MTUs) folds nothing; the
	// ninth does: four increments at 9 µs of headroom
	// (α × 4096 × 9000 = 2 × 4096² × 1.5) and three at 7 µs
	// (2 × 4096² × 7/6), and no η (10 µs since time 0).
	n.OnAck(9*us, ack(4096, 14*us, false))
	wantWindow(t, "eighth ACK", n, 22048)
	n.OnAck(10*us, ack(4096, 14*us, false))
	inc := 4*2*4096*4096*1.5 + 3*2*4096*4096*7.0/6
	wantWindow(t, "folded", n, 22048+inc/22048)
}

// Quick adapt: a trim in a period (base RTT + target) that acknowledged
// less than ceiling/8 drops the window to the bytes acknowledged; marked
// ACKs are then ignored until the bytes in flight at that moment are
// acknowledged.
func TestNSCCQuickAdapt(t *testing.T) {
	cfg := refNSCC()
	cfg.DelayAlpha = 1
	n := newNSCC(t, cfg)
	// The first ACK opens the first period: [1 µs, 22 µs).
	n.OnAck(1*us, ack(4096, 12*us, false))
	// Within it, a trim: the window loses the trim's bytes.
	n.OnNack(10*us, 4096, 50000)
	wantWindow(t, "trim within the period", n, 225000-4096)
	n.OnAck(15*us, ack(8192, 13*us, false))
	// After the period, a trim with only 8,192 bytes acknowledged in it
	// (< 225,000/8): quick adapt sets the window to 8,192.
	n.OnNack(23*us, 4096, 40000)
	wantWindow(t, "quick adapt", n, 8192)
	if st := n.NSCCStats(); st.QuickAdapts != 1 || st.NackDecreases != 1 {
		t.Errorf("quick adapts %d, NACK decreases %d; want 1, 1", st.QuickAdapts, st.NackDecreases)
	}
	// Marked ACKs with a deep queue are ignored until 40,000 bytes are
	// acknowledged: nine of 4,096 (36,864) are ignored.
	for i := range 9 {
		n.OnAck(time.Duration(24+i)*us, ack(4096, 30*us, true))
	}
	wantWindow(t, "marks ignored after quick adapt", n, 8192)
	// The tenth passes 40,000: multiplicative decrease applies again
	// (average delay 18 µs: factor 1 − 0.8 × 9/18 = 0.6), and the fold
	// adds η (18 µs since the fold at 15 µs).
	n.OnAck(33*us, ack(4096, 30*us, true))
	wantWindow(t, "marks count again", n, 8192*0.6+614.4)
	if st := n.NSCCStats(); st.Decreases != 1 {
		t.Errorf("decreases %d, want 1", st.Decreases)
	}

	// A period that acknowledged at least ceiling/8 does not quick-adapt
	// on a trim: the window only loses the trim's bytes.
	k := newNSCC(t, cfg)
	k.OnAck(1*us, ack(4096, 12*us, false))
	k.OnAck(10*us, ack(30000, 12*us, false))
	k.OnNack(23*us, 4096, 40000)
	wantWindow(t, "busy period, no quick adapt", k, 225000-4096)
	if k.NSCCStats().QuickAdapts != 0 {
		t.Errorf("quick adapt ran on a period that acknowledged 30,000 bytes")
	}
}

// A trim takes its bytes off the window, never below one MTU, and moves
// the average delay toward one base RTT.
func TestNSCCNackTakesItsBytes(t *testing.T) {
	cfg := refNSCC()
	cfg.NoQuickAdapt = true
	n := newNSCC(t, cfg)
	n.OnNack(1*us, 100000, 0)
	wantWindow(t, "trim", n, 125000)
	if n.AvgDelay() != 150*time.Nanosecond { // 0.0125 × 12 µs
		t.Errorf("average delay %v, want 150ns", n.AvgDelay())
	}
	n.OnNack(2*us, 1<<30, 0)
	wantWindow(t, "floor", n, 4096)
	n.OnNack(3*us, -5, 0) // nonsense from a caller: no change
	wantWindow(t, "negative bytes", n, 4096)
}

// A sample below the base RTT lowers it, and the ceiling with it.
func TestNSCCBaseRTTFollowsTheLowestSample(t *testing.T) {
	n := newNSCC(t, refNSCC())
	n.OnAck(1*us, ack(4096, 8*us, false))
	if n.BaseRTT() != 8*us || n.MaxWindow() != 150000 || n.Window() != 150000 {
		t.Errorf("base %v, ceiling %d, window %d; want 8µs, 150000, 150000", n.BaseRTT(), n.MaxWindow(), n.Window())
	}
	n.OnAck(2*us, ack(4096, 20*us, false))
	if n.BaseRTT() != 8*us {
		t.Errorf("a higher sample moved the base to %v", n.BaseRTT())
	}
	// A marked sample, even a short one (a forgiven trim's ACK), does
	// not: its delay is the average's.
	n.OnAck(3*us, ack(4096, 2*us, true))
	if n.BaseRTT() != 8*us || n.MaxWindow() != 150000 {
		t.Errorf("a marked 2 µs sample moved the base to %v, the ceiling to %d", n.BaseRTT(), n.MaxWindow())
	}
}

// The trajectory of one flow through every rule on the reference
// network, with the default average gain (0.0125) and quick adapt on.
// Each expected value was worked out by hand from the rules; the
// average delay is truncated to whole nanoseconds at each update.
func TestNSCCTrajectory(t *testing.T) {
	n := newNSCC(t, refNSCC())
	type step struct {
		name   string
		do     func()
		window float64
		avg    time.Duration
	}
	steps := []step{
		// Delay 0: proportional increase into the accumulator; the first
		// quick-adapt period opens, [1, 22) µs.
		{"1µs ack", func() { n.OnAck(1*us, ack(4096, 12*us, false)) }, 225000, 0},
		// A trim inside the period: 225,000 − 40,960; average 0.0125 × 12 µs.
		{"14µs trim", func() { n.OnNack(14*us, 40960, 100000) }, 184040, 150},
		// After the period, with the trim pending and 8,192 bytes
		// acknowledged in it: quick adapt to 8,192; 12,000 bytes in
		// flight to acknowledge before marks count. Average:
		// 0.0125 × 18,000 + 0.9875 × 150 = 373.125.
		{"23µs marked ack", func() { n.OnAck(23*us, AckSignal{Acked: 8192, RTT: 30 * us, ECN: true, InFlight: 12000}) }, 8192, 373},
		// A marked ACK within the 12,000 bytes: ignored.
		// 225 + 0.9875 × 373 = 593.3375.
		{"24µs marked ack", func() { n.OnAck(24*us, ack(4096, 30*us, true)) }, 8192, 593},
		// Delay 4 µs: proportional, α × 4096 × 5000 = 27,962,026.67, folded
		// at once (30 µs since time 0): + 3,413.33 + η 614.4.
		// 50 + 0.9875 × 593 = 635.5875.
		{"30µs ack", func() { n.OnAck(30*us, ack(4096, 16*us, false)) }, 12219.733333333333, 635},
		// Delay 10 µs, unmarked: fair increase, 20,480 × 4096 into the
		// accumulator, not folded (1 µs since the fold). The average
		// takes a quarter base RTT, 3 µs: 37.5 + 0.9875 × 635 = 664.5625.
		{"31µs ack", func() { n.OnAck(31*us, ack(4096, 22*us, false)) }, 12219.733333333333, 664},
		// Marked, delay 28 µs (below 4 × target: no quick adapt), but the
		// average, 350 + 0.9875 × 664 = 1005.7, is below target: no cut.
		// 15 µs since the fold: 83,886,080/12,219.73 = 6,864.80, + η.
		{"45µs marked ack", func() { n.OnAck(45*us, ack(4096, 40*us, true)) }, 19698.937802607077, 1005},
	}
	for _, s := range steps {
		s.do()
		wantWindow(t, s.name, n, s.window)
		if n.AvgDelay() != s.avg*time.Nanosecond {
			t.Errorf("%s: average delay %v, want %v", s.name, n.AvgDelay(), s.avg*time.Nanosecond)
		}
	}
	st := n.NSCCStats()
	if st.QuickAdapts != 1 || st.NackDecreases != 1 || st.Decreases != 0 || st.FairIncreases != 1 || st.PropIncreases != 2 {
		t.Errorf("stats %+v", st)
	}
	if n.Stats().Cuts != 2 {
		t.Errorf("cuts %d, want 2 (the trim and quick adapt)", n.Stats().Cuts)
	}
}

// Exempt: the window stands at the ceiling whatever the marks, delays and
// trims; the base RTT and the average delay are still measured; when the
// exemption ends the window resumes from the ceiling and obeys at once.
func TestNSCCExemptHoldsTheCeiling(t *testing.T) {
	cfg := refNSCC()
	cfg.DelayAlpha = 1
	n := newNSCC(t, cfg)
	s, err := NewSender(0, n, DefaultSenderConfig())
	if err != nil {
		t.Fatal(err)
	}
	// Obeying, a trim cuts.
	s.OnReport(1*us, false, false)
	s.OnRetransmissionRequest(1*us, 100000, 0)
	if w, ok := s.Window(); !ok || w != 125000 {
		t.Fatalf("obeying trim: window %d, %v; want 125000", w, ok)
	}
	// Eligible and not exhausted: exempt, the window at the ceiling.
	s.OnReport(2*us, true, false)
	if s.Mode() != Exempt || n.Window() != 225000 || !n.Exempt() {
		t.Fatalf("exempt: mode %v, window %d", s.Mode(), n.Window())
	}
	for i := range 50 {
		now := time.Duration(3+i) * us
		s.OnAck(now, AckSignal{Acked: 4096, RTT: 30 * us, ECN: true, InFlight: 100000})
		s.OnRetransmissionRequest(now, 4096, 100000)
		s.OnCongestionNotification(now)
	}
	s.OnAck(60*us, ack(4096, 10*us, false)) // a lower base RTT: the ceiling follows
	if n.Window() != n.MaxWindow() || n.MaxWindow() != 187500 {
		t.Errorf("exempt through marks and trims: window %d, ceiling %d; want both 187500", n.Window(), n.MaxWindow())
	}
	if n.BaseRTT() != 10*us || n.AvgDelay() != 0 {
		t.Errorf("exempt flow stopped measuring: base %v, average %v", n.BaseRTT(), n.AvgDelay())
	}
	st := n.NSCCStats()
	if st.Decreases+st.QuickAdapts != 0 || st.NackDecreases != 1 || st.ExemptAcks != 51 || st.ExemptNacks != 50 {
		t.Errorf("exempt stats %+v", st)
	}
	// Exhausted: obeying again, from the ceiling, and the next marked ACK
	// above target cuts it: average 20 µs, target still 9 µs (the
	// configured base RTT's), factor 1 − 0.8 × 11/20 = 0.56; no fold, the
	// resume at 61 µs restarted the adjustment clock.
	s.OnReport(61*us, true, true)
	if s.Mode() != Obeying || n.Window() != 187500 || n.Exempt() {
		t.Fatalf("after exemption: mode %v, window %d, want obeying at 187500", s.Mode(), n.Window())
	}
	s.OnAck(62*us, ack(4096, 30*us, true))
	wantWindow(t, "obeying again", n, 187500*0.56)
}

// A rate controller has no window and takes nothing from ACKs.
func TestSenderWindowOnlyForWindowControllers(t *testing.T) {
	s, _ := NewSender(0, mustDCQCN(t), DefaultSenderConfig())
	if _, ok := s.Window(); ok {
		t.Error("DCQCN reported a window")
	}
	s.OnAck(1*us, ack(4096, 30*us, true))
	if s.Rate() != 400*G {
		t.Errorf("an ACK moved DCQCN's rate to %v", s.Rate())
	}
	k, err := New(KindNSCC, DefaultDCQCN(100*G))
	if err != nil {
		t.Fatal(err)
	}
	if w, ok := k.(WindowController); !ok || w.Window() != 225000 {
		t.Errorf("New(KindNSCC): %T, want an NSCC at the 12 µs reference ceiling", k)
	}
}

// The no-cut counterfactual: the exempt window is neither raised to the
// ceiling nor cut by marks, delay or trims, and it still grows.
func TestNSCCExemptNoCutOnlyStopsCuts(t *testing.T) {
	cfg := refNSCC()
	cfg.DelayAlpha = 1
	n := newNSCC(t, cfg)
	sc := DefaultSenderConfig()
	sc.Exemption = ExemptionNoCut
	s, err := NewSender(0, n, sc)
	if err != nil {
		t.Fatal(err)
	}
	s.OnReport(1*us, false, false)
	s.OnRetransmissionRequest(1*us, 100000, 0)
	if w, _ := s.Window(); w != 125000 {
		t.Fatalf("obeying trim: window %d, want 125000", w)
	}
	s.OnReport(2*us, true, false)
	if s.Mode() != Exempt || n.Window() != 125000 || !n.Exempt() {
		t.Fatalf("exempt: mode %v, window %d; want exempt at 125000 (not the ceiling)", s.Mode(), n.Window())
	}
	for i := range 50 {
		now := time.Duration(3+i) * us
		s.OnAck(now, AckSignal{Acked: 4096, RTT: 30 * us, ECN: true, InFlight: 100000})
		s.OnRetransmissionRequest(now, 4096, 100000)
	}
	// η, once per base RTT, is an increase and still applies.
	if n.Window() < 125000 {
		t.Errorf("marks and trims while exempt cut the window to %d", n.Window())
	}
	st := n.NSCCStats()
	if st.Decreases+st.QuickAdapts != 0 || st.NackDecreases != 1 || st.ExemptNacks != 50 {
		t.Errorf("exempt stats %+v", st)
	}
	marked := n.Window()
	// Unmarked ACKs above the target: fair increase still applies.
	for i := range 20 {
		s.OnAck(time.Duration(60+i)*us, ack(4096, 30*us, false))
	}
	if n.Window() <= marked {
		t.Errorf("unmarked ACKs while exempt left the window at %d; increases should apply", n.Window())
	}
	grown := n.Window()
	s.OnReport(90*us, true, true)
	if s.Mode() != Obeying || n.Window() != grown {
		t.Errorf("exemption ended: mode %v, window %d; want obeying at %d", s.Mode(), n.Window(), grown)
	}
	s.OnRetransmissionRequest(91*us, 4096, 0)
	if n.Window() >= grown {
		t.Errorf("obeying again, a trim did not cut: %d", n.Window())
	}
}
