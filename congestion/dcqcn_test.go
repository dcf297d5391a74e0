package congestion

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/internal/units"
)

const (
	us = time.Microsecond
	G  = 1e9 // one gigabit per second, to write rates as 37.5*G
)

// approx reports whether got is within a relative 1e-12 of want. The
// trajectories below are dyadic fractions of whole gigabits and come out
// exact; the tolerance only absorbs the last bit of math.Pow in α.
func approx(got, want float64) bool {
	return math.Abs(got-want) <= 1e-12*math.Abs(want)
}

// dcqcnHarness drives one DCQCN reaction point through a scripted story
// and checks R_C, R_T and α at each step.
type dcqcnHarness struct {
	t *testing.T
	d *DCQCN
}

func newDCQCNHarness(t *testing.T, cfg DCQCNConfig) *dcqcnHarness {
	t.Helper()
	d, err := NewDCQCN(cfg)
	if err != nil {
		t.Fatalf("NewDCQCN: %v", err)
	}
	return &dcqcnHarness{t: t, d: d}
}

func (h *dcqcnHarness) cnp(now time.Duration)             { h.d.OnCNP(now) }
func (h *dcqcnHarness) advance(now time.Duration)         { h.d.Advance(now) }
func (h *dcqcnHarness) sent(now time.Duration, bytes int) { h.d.OnSent(now, bytes) }

func (h *dcqcnHarness) wantRates(step string, rc, rt float64) {
	h.t.Helper()
	if !approx(h.d.Rate(), rc) || !approx(h.d.TargetRate(), rt) {
		h.t.Errorf("%s: R_C = %.6f G, R_T = %.6f G; want R_C = %.6f G, R_T = %.6f G",
			step, h.d.Rate()/G, h.d.TargetRate()/G, rc/G, rt/G)
	}
}

func (h *dcqcnHarness) wantAlpha(step string, alpha float64) {
	h.t.Helper()
	if !approx(h.d.Alpha(), alpha) {
		h.t.Errorf("%s: α = %.16g, want %.16g", step, h.d.Alpha(), alpha)
	}
}

func (h *dcqcnHarness) wantDeadline(step string, at time.Duration, armed bool) {
	h.t.Helper()
	got, ok := h.d.NextDeadline()
	if ok != armed || (armed && got != at) {
		h.t.Errorf("%s: NextDeadline = %v, %v; want %v, %v", step, got, ok, at, armed)
	}
}

// paperDCQCN is DefaultDCQCN in the paper's form, which cuts on every
// CNP: the trajectory tests below send CNPs closer together than the
// rate-reduce period to reach each phase quickly.
func paperDCQCN(line units.Rate) DCQCNConfig {
	c := DefaultDCQCN(line)
	c.RateReducePeriod = 0
	return c
}

// DefaultDCQCN at 100 Gb/s: R_AI = 100 Gb/s / 1000 = 0.1 G,
// R_HAI = 100 Gb/s / 100 = 1 G, MinRate = 0.1 G.
func TestDefaultDCQCNScalesWithLineRate(t *testing.T) {
	cfg := DefaultDCQCN(100 * G)
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	want := DCQCNConfig{
		LineRate: 100 * G, MinRate: 0.1 * G, G: 1.0 / 256,
		AlphaTimer: 55 * us, RateTimer: 55 * us, ByteCounter: 10_000_000,
		F: 5, RAI: 0.1 * G, RHAI: 1 * G, InitialAlpha: 1,
		RateReducePeriod: 4 * us,
	}
	if cfg != want {
		t.Errorf("DefaultDCQCN(100G) = %+v\nwant %+v", cfg, want)
	}
	// The paper's point: "R_AI = 40 Mb/s" at 40 Gb/s.
	if got := DefaultDCQCN(40 * G).RAI; !approx(got, 40e6) {
		t.Errorf("R_AI at 40 Gb/s = %v, want 40 Mb/s", got)
	}
}

// "On a CNP it remembers the current rate as the target and cuts ... If no
// CNP arrives within K = 55 µs ..., α decays ... Fast recovery: five steps
// of R_C ← (R_T + R_C)/2. Additive increase: R_T ← R_T + R_AI".
func TestDCQCNCutFastRecoveryAdditive(t *testing.T) {
	h := newDCQCNHarness(t, paperDCQCN(100*G))
	h.wantRates("start: line rate, no slow start", 100*G, 100*G)
	h.wantDeadline("start: nothing to wake for", 0, false)

	h.cnp(0)
	// R_T = 100; R_C = 100·(1 − 1/2) = 50; α = (255/256)·1 + 1/256 = 1.
	h.wantRates("CNP at 0", 50*G, 100*G)
	h.wantAlpha("CNP at 0", 1)
	h.wantDeadline("CNP at 0 arms the rate timer", 55*us, true)

	h.cnp(10 * us)
	// 10 µs < K: no decay, α = 1. R_T = 50; R_C = 50·(1 − 1/2) = 25.
	h.wantRates("CNP at 10us", 25*G, 50*G)
	h.wantAlpha("CNP at 10us", 1)
	h.wantDeadline("the second CNP restarts the timer", 65*us, true)

	h.advance(65*us - 1)
	h.wantRates("just before the timer", 25*G, 50*G)
	h.wantAlpha("just before K", 1)

	h.advance(65 * us)
	// T=1, fast recovery: R_C = (50 + 25)/2 = 37.5. α = 255/256.
	h.wantRates("T=1 fast recovery", 37.5*G, 50*G)
	h.wantAlpha("one K without a CNP", 0.99609375)

	h.advance(120 * us)
	// T=2: R_C = (50 + 37.5)/2 = 43.75. α = (255/256)² = 0.9922027587890625.
	h.wantRates("T=2 fast recovery", 43.75*G, 50*G)
	h.wantAlpha("two K without a CNP", 0.9922027587890625)

	h.advance(285 * us)
	// T=3: (50+43.75)/2 = 46.875; T=4: 48.4375; T=5: (50+48.4375)/2 = 49.21875.
	h.wantRates("T=5, the fifth and last fast recovery", 49.21875*G, 50*G)

	h.advance(340 * us)
	// T=6 > F, BC=0 ≤ F: additive. R_T = 50 + 0.1 = 50.1;
	// R_C = (50.1 + 49.21875)/2 = 49.659375.
	h.wantRates("T=6 additive", 49.659375*G, 50.1*G)

	h.advance(395 * us)
	// T=7: R_T = 50.2; R_C = (50.2 + 49.659375)/2 = 49.9296875.
	h.wantRates("T=7 additive", 49.9296875*G, 50.2*G)

	want := Stats{CNPs: 2, Cuts: 2, FastRecovery: 5, AdditiveIncrease: 2, TimerStages: 7}
	if got := h.d.Stats(); got != want {
		t.Errorf("Stats = %+v, want %+v", got, want)
	}
}

// "Hyper increase: after several more quiet rounds, larger and growing
// steps": both stage counts past F, R_T += R_HAI·(min(T, BC) − F).
func TestDCQCNHyperIncreaseNeedsBothStages(t *testing.T) {
	h := newDCQCNHarness(t, paperDCQCN(100*G))
	h.cnp(0) // R_C 50, R_T 100
	h.cnp(0) // R_C 25, R_T 50, α = 1
	h.wantRates("two CNPs at 0", 25*G, 50*G)

	for i, want := range []float64{37.5, 43.75, 46.875, 48.4375, 49.21875} {
		h.sent(time.Duration(i+1)*us, 10_000_000) // one B each: BC = i+1
		h.wantRates("byte counter fast recovery", want*G, 50*G)
	}
	h.advance(275 * us)
	// T = 1..5 at 55..275 µs, still max(T, BC) = 5 ≤ F: five more halvings
	// toward 50: 49.609375, 49.8046875, 49.90234375, 49.951171875,
	// 49.9755859375.
	h.wantRates("timer fast recovery", 49.9755859375*G, 50*G)

	h.sent(280*us, 10_000_000)
	// BC = 6, T = 5: additive. R_T = 50.1; R_C = (50.1 + 49.9755859375)/2
	// = 50.03779296875.
	h.wantRates("BC=6, T=5: additive", 50.03779296875*G, 50.1*G)

	h.advance(330 * us)
	// T = 6, BC = 6: hyper by min − F = 1. R_T = 50.1 + 1 = 51.1;
	// R_C = (51.1 + 50.03779296875)/2 = 50.568896484375.
	h.wantRates("T=6, BC=6: hyper ×1", 50.568896484375*G, 51.1*G)

	h.sent(331*us, 10_000_000)
	// BC = 7, T = 6: min − F = 1. R_T = 52.1; R_C = (52.1 + 50.568896484375)/2
	// = 51.3344482421875.
	h.wantRates("T=6, BC=7: hyper ×1", 51.3344482421875*G, 52.1*G)

	h.advance(385 * us)
	// T = 7, BC = 7: min − F = 2. R_T = 52.1 + 2 = 54.1;
	// R_C = (54.1 + 51.3344482421875)/2 = 52.71722412109375.
	h.wantRates("T=7, BC=7: hyper ×2", 52.71722412109375*G, 54.1*G)

	h.cnp(400 * us)
	// Seven K since the CNP at 0 (55, ..., 385 µs): α = (255/256)⁷
	// = 0.9729746065377434. R_T = 52.71722412109375;
	// R_C = 52.71722412109375·(1 − 0.9729746065377434/2) = 27.07096392260214;
	// α = (255/256)·0.9729746065377434 + 1/256 = 0.9730801744809553.
	h.wantRates("CNP after the hyper increase", 27.07096392260214*G, 52.71722412109375*G)
	h.wantAlpha("CNP after seven quiet K", 0.9730801744809553)
	if tStage, bStage := h.d.Stages(); tStage != 0 || bStage != 0 {
		t.Errorf("stages after CNP = T %d, BC %d; want 0, 0", tStage, bStage)
	}
	h.wantDeadline("CNP restarts the timer", 455*us, true)

	want := Stats{CNPs: 3, Cuts: 3, FastRecovery: 10, AdditiveIncrease: 1,
		HyperIncrease: 3, TimerStages: 7, ByteStages: 7}
	if got := h.d.Stats(); got != want {
		t.Errorf("Stats = %+v, want %+v", got, want)
	}
}

// "then R_C = (R_T + R_C)/2, capped at line rate": back at line rate the
// increase side stops and the flow asks for no more wake-ups.
func TestDCQCNRecoveryStopsAtLineRate(t *testing.T) {
	h := newDCQCNHarness(t, paperDCQCN(100*G))
	h.cnp(0)
	h.advance(275 * us)
	// 75, 87.5, 93.75, 96.875, 98.4375.
	h.wantRates("after fast recovery", 98.4375*G, 100*G)
	h.advance(385 * us)
	// T=6: R_T 100.1, R_C (100.1 + 98.4375)/2 = 99.26875;
	// T=7: R_T 100.2, R_C (100.2 + 99.26875)/2 = 99.734375.
	h.wantRates("two additive steps", 99.734375*G, 100.2*G)
	h.advance(440 * us)
	// T=8: R_T 100.3, (100.3 + 99.734375)/2 = 100.0171875 > 100: capped.
	h.wantRates("capped at line rate", 100*G, 100.3*G)
	h.wantDeadline("at line rate", 0, false)

	before := h.d.Stats()
	h.sent(500*us, 50_000_000)
	h.advance(10 * time.Millisecond)
	if got := h.d.Stats(); got != before {
		t.Errorf("increase events at line rate: %+v -> %+v", before, got)
	}
}

// "α tracks the fraction of windows that carried a mark: a flow marked in
// every window halves on each CNP, while a flow marked once after a quiet
// period is cut only slightly."
func TestDCQCNQuietFlowIsCutSlightly(t *testing.T) {
	h := newDCQCNHarness(t, paperDCQCN(100*G))
	h.cnp(0)
	h.advance(time.Second)
	h.wantRates("a second later", 100*G, 100.3*G)
	// ⌊1 s / 55 µs⌋ = 18181 decays: α = (255/256)^18181 ≈ e^-71.2 ≈ 1e-31.
	if a := h.d.Alpha(); !(a > 0 && a < 1e-30) {
		t.Fatalf("α after 1 s quiet = %g, want about 1e-31", a)
	}
	h.cnp(time.Second)
	// R_C = 100·(1 − 1e-31/2) = 100 in float64; α = 1/256 + ~1e-31.
	h.wantRates("CNP after a long quiet", 100*G, 100*G)
	h.wantAlpha("CNP after a long quiet", 1.0/256)
}

// α starts at InitialAlpha and nothing decays it before the first CNP, so
// the first CNP of a flow halves it: "α starts at 1, a flow marked in
// every window, so each cut halves the rate."
func TestDCQCNAlphaHoldsUntilFirstCNP(t *testing.T) {
	h := newDCQCNHarness(t, paperDCQCN(100*G))
	h.advance(time.Second)
	h.wantAlpha("1 s without any CNP", 1)
	h.cnp(time.Second)
	h.wantRates("first CNP", 50*G, 100*G)
}

func TestDCQCNMinRateClamp(t *testing.T) {
	cfg := paperDCQCN(100 * G)
	cfg.MinRate = 10 * G
	h := newDCQCNHarness(t, cfg)
	for range 3 {
		h.cnp(0) // 50, 25, 12.5
	}
	h.wantRates("three CNPs", 12.5*G, 25*G)
	h.cnp(0) // 6.25 < 10: clamped
	h.wantRates("fourth CNP clamps", 10*G, 12.5*G)
	if got := h.d.Stats().MinRateClamps; got != 1 {
		t.Errorf("MinRateClamps = %d, want 1", got)
	}
}

// One OnSent that covers several B raises one event per B, in order.
func TestDCQCNOnSentManyStages(t *testing.T) {
	h := newDCQCNHarness(t, paperDCQCN(100*G))
	h.cnp(0)
	h.cnp(0) // R_C 25, R_T 50
	h.sent(1*us, 25_000_000)
	// Two events (37.5, 43.75); 5 MB carried toward the third.
	h.wantRates("2.5 B in one call", 43.75*G, 50*G)
	h.sent(2*us, 5_000_000)
	h.wantRates("the carried 5 MB completes a third B", 46.875*G, 50*G)
	if _, bc := h.d.Stages(); bc != 3 {
		t.Errorf("BC = %d, want 3", bc)
	}
}

func TestDCQCNTimeNeverRunsBackwards(t *testing.T) {
	h := newDCQCNHarness(t, paperDCQCN(100*G))
	h.cnp(100 * us)
	h.cnp(0) // earlier than already seen: treated as 100 µs, no decay
	h.wantRates("CNP in the past", 25*G, 50*G)
	h.wantDeadline("deadline from 100 µs", 155*us, true)
}

func TestDCQCNValidateNamesTheField(t *testing.T) {
	cases := []struct {
		field  string
		mutate func(*DCQCNConfig)
	}{
		{"LineRate", func(c *DCQCNConfig) { c.LineRate = 0 }},
		{"LineRate", func(c *DCQCNConfig) { c.LineRate = -1 }},
		{"MinRate", func(c *DCQCNConfig) { c.MinRate = math.NaN() }},
		{"MinRate", func(c *DCQCNConfig) { c.MinRate = 2 * float64(c.LineRate) }},
		{"G", func(c *DCQCNConfig) { c.G = 0 }},
		{"G", func(c *DCQCNConfig) { c.G = 1.5 }},
		{"AlphaTimer", func(c *DCQCNConfig) { c.AlphaTimer = 0 }},
		{"RateTimer", func(c *DCQCNConfig) { c.RateTimer = -us }},
		{"RateTimer", func(c *DCQCNConfig) { c.RateTimer = 2 * time.Hour }},
		{"ByteCounter", func(c *DCQCNConfig) { c.ByteCounter = -1 }},
		{"F", func(c *DCQCNConfig) { c.F = -1 }},
		{"RAI", func(c *DCQCNConfig) { c.RAI = 0 }},
		{"RAI", func(c *DCQCNConfig) { c.RAI = math.NaN() }},
		{"RHAI", func(c *DCQCNConfig) { c.RHAI = math.Inf(1) }},
		{"InitialAlpha", func(c *DCQCNConfig) { c.InitialAlpha = 1.01 }},
		{"RateReducePeriod", func(c *DCQCNConfig) { c.RateReducePeriod = -1 }},
		{"RateReducePeriod", func(c *DCQCNConfig) { c.RateReducePeriod = 2 * time.Hour }},
	}
	for _, tc := range cases {
		cfg := DefaultDCQCN(100 * G)
		tc.mutate(&cfg)
		err := cfg.Validate()
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "DCQCNConfig."+tc.field+" ") {
			t.Errorf("%s: Validate() = %v, want ErrConfig naming the field", tc.field, err)
		}
		if _, err := NewDCQCN(cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: NewDCQCN accepted an invalid config", tc.field)
		}
	}
	cfg := DefaultDCQCN(100 * G)
	cfg.ByteCounter = 0 // disables the byte counter
	if err := cfg.Validate(); err != nil {
		t.Errorf("ByteCounter 0: %v", err)
	}
}

func TestDCQCNByteCounterDisabled(t *testing.T) {
	cfg := DefaultDCQCN(100 * G)
	cfg.ByteCounter = 0
	h := newDCQCNHarness(t, cfg)
	h.cnp(0)
	h.sent(1*us, 1<<40)
	h.wantRates("bytes with no byte counter", 50*G, 100*G)
}

// The reaction point cuts at most once per RateReducePeriod (4 µs, the
// rate_reduce_monitor_period of HPCC's DCQCN). A flood of CNPs inside a
// period after a cut changes neither the rate, nor α, nor the timers; the
// first CNP at or after the period's end cuts again.
func TestDCQCNRateReducePeriod(t *testing.T) {
	h := newDCQCNHarness(t, DefaultDCQCN(100*G))
	h.cnp(0)
	h.wantRates("first CNP", 50*G, 100*G)
	alpha := h.d.Alpha()
	period := DefaultRateReducePeriod
	for i := range 1000 {
		h.cnp(time.Duration(i) * (period - 1) / 1000) // all inside the period
	}
	h.wantRates("1000 CNPs within the period of the cut", 50*G, 100*G)
	if got := h.d.Alpha(); got != alpha {
		t.Errorf("α moved from %v to %v on coalesced CNPs", alpha, got)
	}
	h.wantDeadline("the rate timer from the first cut", 55*us, true)
	st := h.d.Stats()
	if st.CNPs != 1001 || st.Cuts != 1 || st.CNPsCoalesced != 1000 {
		t.Errorf("Stats = %+v, want 1001 CNPs, 1 cut, 1000 coalesced", st)
	}
	h.cnp(period)
	if st := h.d.Stats(); st.Cuts != 2 || st.CNPsCoalesced != 1000 {
		t.Errorf("CNP at the period's end: Stats = %+v, want a second cut", st)
	}
	if h.d.Rate() >= 50*G {
		t.Errorf("CNP at the period's end left R_C at %v", h.d.Rate())
	}
}

// Under any sequence of CNPs, cuts never come closer than the period, and
// every CNP is either a cut or coalesced.
func TestDCQCNRateReducePeriodBoundsCuts(t *testing.T) {
	cfg := DefaultDCQCN(100 * G)
	d, err := NewDCQCN(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var now, lastCut time.Duration
	cuts := uint64(0)
	for i := range 20000 {
		now += time.Duration(i%7) * time.Microsecond
		d.OnCNP(now)
		if st := d.Stats(); st.Cuts != cuts {
			if cuts > 0 && now-lastCut < cfg.RateReducePeriod {
				t.Fatalf("cut at %v, %v after the last", now, now-lastCut)
			}
			cuts, lastCut = st.Cuts, now
		}
	}
	st := d.Stats()
	if st.Cuts+st.CNPsCoalesced != st.CNPs || st.Cuts > uint64(now/cfg.RateReducePeriod)+1 {
		t.Errorf("Stats = %+v over %v", st, now)
	}
}
