package congestion

import (
	"errors"
	"math"
	"sort"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/forgive-emu/forgive/internal/units"
)

// ns3DCQCN is the DCQCN of astra-network-ns3's scratch/config/config.txt
// at 400 Gb/s: ALPHA_RESUME_INTERVAL 1 (µs), RATE_DECREASE_INTERVAL 4,
// CLAMP_TARGET_RATE 0, RP_TIMER 900, EWMA_GAIN 0.00390625,
// FAST_RECOVERY_TIMES 1, RATE_AI 50Mb/s, RATE_HAI 100Mb/s, MIN_RATE
// 100Mb/s, and no byte counter.
func ns3DCQCN() DCQCNConfig {
	return DCQCNConfig{
		Variant:  DCQCNMellanox,
		LineRate: 400 * G, MinRate: 100e6, G: 0.00390625,
		AlphaTimer: 1 * us, RateReducePeriod: 4 * us, RateTimer: 900 * us,
		F: 1, RAI: 50e6, RHAI: 100e6, InitialAlpha: 1,
	}
}

// pow255 is (255/256)^n by repeated multiplication, as the simulator
// updates α once per interval.
func pow255(alpha float64, n int) float64 {
	for range n {
		alpha = float64(alpha * (1 - 1.0/256))
	}
	return alpha
}

// The first CNP changes no rate: the simulator sets α to 1, starts the α
// updates (every 1 µs) and the rate-decrease checks (every 4 µs, the first
// 1 ns late so that it follows the α update due at 4 µs), and leaves the
// rate alone (its rate on the first CNP is the whole rate). The cut comes
// at the first check, with the α of four updates without a CNP: the first
// CNP does not count for α. R_T is not clamped to R_C because no rate
// increase has run yet (it equals the line rate anyway). The increase
// timer starts at the cut.
func TestMlxFirstCNPCutsAtTheFirstCheck(t *testing.T) {
	h := newDCQCNHarness(t, ns3DCQCN())
	h.cnp(0)
	h.wantRates("first CNP: no cut yet", 400*G, 400*G)
	h.wantAlpha("first CNP sets α to 1", 1)
	h.wantDeadline("the first check will cut", 4*us+1, true)

	h.advance(4 * us)
	h.wantRates("4 µs: the check is 1 ns away", 400*G, 400*G)
	alpha := pow255(1, 4)
	h.wantAlpha("four α updates without a CNP", alpha)

	h.advance(4*us + 1)
	cut := math.Trunc(400 * G * (1 - alpha/2))
	h.wantRates("the first check cuts with α after four updates", cut, 400*G)
	h.wantDeadline("the rate-increase timer runs from the cut", 4*us+1+900*us, true)
	if st := h.d.Stats(); st.Cuts != 1 || st.CNPs != 1 || st.CNPsCoalesced != 0 {
		t.Errorf("stats %+v: want one CNP, one cut", st)
	}
}

// The rate rises on the 900 µs timer alone, by a stage count that starts
// at 0 after a cut: with FAST_RECOVERY_TIMES 1 one fast-recovery step
// (stage 0), one additive step (stage 1: R_T += 50 Mb/s, capped at the
// line rate) and hyper steps after it (R_T += 100 Mb/s each, a fixed
// step). Halving truncates to whole bits per second. Bytes sent raise
// nothing: the variant has no byte counter.
func TestMlxTimerOnlyIncrease(t *testing.T) {
	h := newDCQCNHarness(t, ns3DCQCN())
	h.cnp(0)
	tc := 4*us + 1
	h.advance(tc)
	rc, rt := h.d.Rate(), 400*G
	half := func(x float64) float64 { return math.Trunc(x / 2) }

	h.sent(tc+100*us, 100_000_000)
	h.wantRates("100 MB sent: no byte counter", rc, rt)

	h.advance(tc + 900*us)
	rc = half(rc) + half(rt)
	h.wantRates("stage 0: fast recovery", rc, rt)
	if timer, bc := h.d.Stages(); timer != 1 || bc != 0 {
		t.Errorf("stages %d, %d; want 1, 0", timer, bc)
	}
	h.advance(tc + 1800*us)
	rc = half(rc) + half(rt) // R_T + 50 Mb/s is capped at the line rate
	h.wantRates("stage 1 = F: additive, R_T capped", rc, rt)
	h.advance(tc + 2700*us)
	rc = half(rc) + half(rt)
	h.wantRates("stage 2: hyper", rc, rt)
	if st := h.d.Stats(); st.FastRecovery != 1 || st.AdditiveIncrease != 1 || st.HyperIncrease != 1 || st.ByteStages != 0 {
		t.Errorf("stats %+v: want one increase of each phase, none from bytes", st)
	}
}

// Below the line rate the additive and hyper steps are visible. With
// g = 1, α is 1 after an update that saw a CNP and 0 after one that did
// not, so a cut halves R_C or leaves it. With the clamp on, two cuts take
// R_C to 100 Gb/s and R_T to 200 Gb/s; then R_T grows by 50 Mb/s at
// stage 1 and by 100 Mb/s at every later stage.
func TestMlxAdditiveAndHyperSteps(t *testing.T) {
	cfg := ns3DCQCN()
	cfg.ClampTargetRate = true
	cfg.G = 1
	h := newDCQCNHarness(t, cfg)
	h.cnp(0)
	h.advance(4*us + 1) // four updates without a CNP: α = 0, the cut changes nothing
	h.wantRates("α = 0 cuts nothing", 400*G, 400*G)
	h.cnp(7*us + 500) // the update at 8 µs sets α = 1; the check at 8 µs + 1 ns halves
	h.advance(8*us + 1)
	h.wantRates("clamped cut with α = 1", 200*G, 400*G)
	h.cnp(11*us + 500)
	h.advance(12*us + 1)
	h.wantRates("second clamped cut", 100*G, 200*G)
	tc := 12*us + 1
	rc, rt := 100*G, 200*G
	for i, step := range []float64{0, 50e6, 100e6, 100e6} {
		h.advance(tc + time.Duration(i+1)*900*us)
		rt += step
		rc = math.Trunc(rc/2) + math.Trunc(rt/2)
		h.wantRates("increase", rc, rt)
	}
}

// CLAMP_TARGET_RATE 0: a cut sets R_T = R_C only if a rate increase ran
// since the previous cut. Two cuts in a row leave R_T where the first
// left it; with the clamp on, the second cut moves R_T down to R_C.
func TestMlxTargetClampOnlyAfterAnIncrease(t *testing.T) {
	for _, clamp := range []bool{false, true} {
		cfg := ns3DCQCN()
		cfg.ClampTargetRate = clamp
		h := newDCQCNHarness(t, cfg)
		h.cnp(0)
		h.advance(4*us + 1)
		first := h.d.Rate()
		h.cnp(5 * us) // seen by the check at 8 µs + 1 ns
		h.advance(8*us + 1)
		wantRT := 400 * G
		if clamp {
			wantRT = first
		}
		if h.d.TargetRate() != wantRT || h.d.Rate() >= first {
			t.Errorf("clamp %v: R_T = %v after two cuts, want %v; R_C %v must fall below %v",
				clamp, h.d.TargetRate(), wantRT, h.d.Rate(), first)
		}
	}
}

// Many CNPs within one 4 µs check period make one cut, and within one
// 1 µs α period one α increase: the simulator keeps a flag per period,
// not a count.
func TestMlxCNPsWithinAPeriodCoalesce(t *testing.T) {
	h := newDCQCNHarness(t, ns3DCQCN())
	h.cnp(0)
	h.advance(4*us + 1)
	afterFirst := h.d.Rate()
	for i := range 10 {
		h.cnp(4*us + 100 + time.Duration(i)*50) // all before the α update at 5 µs
	}
	h.advance(8*us + 1)
	st := h.d.Stats()
	if st.Cuts != 2 || st.CNPs != 11 || st.CNPsCoalesced != 9 {
		t.Errorf("stats %+v: want 11 CNPs, 2 cuts, 9 coalesced", st)
	}
	// α at the second cut: four updates, then one with a CNP, then three
	// without (at 5 µs with the flag, at 6, 7 and 8 µs without).
	alpha := pow255(1, 4)
	alpha = float64(alpha*(1-1.0/256)) + 1.0/256
	alpha = pow255(alpha, 3)
	h.wantAlpha("one α increase for ten CNPs", alpha)
	want := math.Trunc(afterFirst * (1 - alpha/2))
	h.wantRates("one cut for ten CNPs", want, 400*G)
}

// α keeps updating every microsecond for as long as the flow lives, with
// or without a rate to recover: after the first CNP and no other, α after
// 1 ms is (255/256)^1000, about 0.02.
func TestMlxAlphaDecaysEveryInterval(t *testing.T) {
	h := newDCQCNHarness(t, ns3DCQCN())
	h.cnp(0)
	h.advance(time.Millisecond)
	h.wantAlpha("1 ms after the first CNP", pow255(1, 1000))
	// Long after, α reaches a value that (1 − g) no longer moves and stays.
	h.advance(10 * time.Second)
	if a := h.d.Alpha(); a > 1e-300 {
		t.Errorf("α after 10 s = %g, want a subnormal or zero", a)
	}
}

// A cut never takes R_C below MIN_RATE (100 Mb/s).
func TestMlxMinRate(t *testing.T) {
	h := newDCQCNHarness(t, ns3DCQCN())
	for i := range 2000 {
		h.cnp(time.Duration(i) * 2 * us)
	}
	h.advance(4 * time.Millisecond)
	if h.d.Rate() != 100e6 || h.d.Stats().MinRateClamps == 0 {
		t.Errorf("R_C = %v after 2000 CNPs (clamps %d), want the 100 Mb/s floor", h.d.Rate(), h.d.Stats().MinRateClamps)
	}
}

// RP_TIMER 900 µs is 225 periods of the 4 µs check, so every increase is
// due at the same instant as a check. The simulator scheduled the
// increase 900 µs before and the check only 4 µs before, so the increase
// runs first: here a fast-recovery step, then the cut, which clamps R_T to
// the recovered R_C since an increase has now run.
func TestMlxIncreaseRunsBeforeTheCheckDueWithIt(t *testing.T) {
	h := newDCQCNHarness(t, ns3DCQCN())
	h.cnp(0)
	tc := 4*us + 1
	h.advance(tc)
	rc := h.d.Rate()
	h.cnp(tc + 898*us) // for the check at tc + 900 µs
	h.advance(tc + 900*us)
	recovered := math.Trunc(rc/2) + math.Trunc(400*G/2)
	// α: 898 updates without a CNP since the cut's, then one with, then one without.
	alpha := pow255(1, 4)
	alpha = pow255(alpha, 898)
	alpha = float64(alpha*(1-1.0/256)) + 1.0/256
	alpha = pow255(alpha, 1)
	h.wantAlpha("α at the second cut", alpha)
	h.wantRates("increase, then the cut", math.Trunc(recovered*(1-alpha/2)), recovered)
}

// Once R_C stops moving the timer stops too, and an uncongested flow asks
// for no wake-up; α's updates never ask for one.
func TestMlxSettlesAndSleeps(t *testing.T) {
	h := newDCQCNHarness(t, ns3DCQCN())
	h.cnp(0)
	h.advance(time.Second)
	if at, ok := h.d.NextDeadline(); ok {
		t.Errorf("NextDeadline = %v after 1 s without a CNP, want none", at)
	}
	if rc := h.d.Rate(); rc < 400*G-1 || h.d.TargetRate() != 400*G {
		t.Errorf("R_C = %v, R_T = %v: want within 1 b/s of the line rate", rc, h.d.TargetRate())
	}
}

func TestMlxValidate(t *testing.T) {
	for name, mutate := range map[string]func(*DCQCNConfig){
		"RateReducePeriod": func(c *DCQCNConfig) { c.RateReducePeriod = 0 },
		"ByteCounter":      func(c *DCQCNConfig) { c.ByteCounter = 10_000_000 },
		"Variant":          func(c *DCQCNConfig) { c.Variant = 7 },
	} {
		cfg := ns3DCQCN()
		mutate(&cfg)
		err := cfg.Validate()
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: Validate = %v, want an ErrConfig naming it", name, err)
		}
	}
	for _, s := range []string{"", "paper", " Mellanox "} {
		if _, err := ParseDCQCNVariant(s); err != nil {
			t.Errorf("ParseDCQCNVariant(%q): %v", s, err)
		}
	}
	if _, err := ParseDCQCNVariant("hpcc"); !errors.Is(err, ErrConfig) {
		t.Errorf("ParseDCQCNVariant(hpcc) = %v, want ErrConfig", err)
	}
}

// ---- An independent model of rdma-hw.cc's Mellanox rate machine ----

// mlxModel is the simulator's per-queue-pair DCQCN written the simulator's
// way: a queue of scheduled events ordered by time and then by the order
// they were scheduled in, rates as whole bits per second (ns-3's DataRate,
// whose products and quotients truncate), and timers that run for as long
// as the flow lives. It shares no code with the engine.
type mlxModel struct {
	line, minRate, rai, rhai uint64
	g                        float64
	f                        int
	alphaIv, decIv, rpTimer  time.Duration
	clamp                    bool

	rate, target uint64
	alpha        float64
	alphaCNP     bool
	decCNP       bool
	firstCNP     bool
	stage        int

	queue    []modelEv
	seq      int
	rpTimer0 int // seq of the armed rate-increase timer event; -1: none
}

type modelEv struct {
	at   time.Duration
	seq  int
	kind int // 0 α update, 1 decrease check, 2 rate-increase timer
}

func newMlxModel(c DCQCNConfig) *mlxModel {
	return &mlxModel{
		line: uint64(c.LineRate), minRate: uint64(c.MinRate), rai: uint64(c.RAI), rhai: uint64(c.RHAI),
		g: c.G, f: c.F, alphaIv: c.AlphaTimer, decIv: c.RateReducePeriod, rpTimer: c.RateTimer,
		clamp: c.ClampTargetRate,
		rate:  uint64(c.LineRate), target: uint64(c.LineRate), alpha: 1, firstCNP: true,
		rpTimer0: -1,
	}
}

func (m *mlxModel) schedule(at time.Duration, kind int) int {
	m.seq++
	m.queue = append(m.queue, modelEv{at, m.seq, kind})
	return m.seq
}

// next removes and returns the earliest event due at or before t.
func (m *mlxModel) next(t time.Duration) (modelEv, bool) {
	sort.Slice(m.queue, func(i, j int) bool {
		a, b := m.queue[i], m.queue[j]
		return a.at < b.at || (a.at == b.at && a.seq < b.seq)
	})
	if len(m.queue) == 0 || m.queue[0].at > t {
		return modelEv{}, false
	}
	e := m.queue[0]
	m.queue = m.queue[1:]
	return e, true
}

func (m *mlxModel) cancelTimer() {
	for i, e := range m.queue {
		if e.seq == m.rpTimer0 {
			m.queue = append(m.queue[:i], m.queue[i+1:]...)
			return
		}
	}
}

func (m *mlxModel) half(x uint64) uint64 { return uint64(float64(x) / 2) }

// run runs one event at its time.
func (m *mlxModel) run(e modelEv) {
	switch e.kind {
	case 0: // UpdateAlphaMlx
		if m.alphaCNP {
			m.alpha = float64((1-m.g)*m.alpha) + m.g
		} else {
			m.alpha = float64((1 - m.g) * m.alpha)
		}
		m.alphaCNP = false
		m.schedule(e.at+m.alphaIv, 0)
	case 1: // CheckRateDecreaseMlx
		m.schedule(e.at+m.decIv, 1)
		if m.decCNP {
			if m.clamp || m.stage != 0 {
				m.target = m.rate
			}
			m.rate = max(m.minRate, uint64(float64(m.rate)*(1-m.alpha/2)))
			m.stage = 0
			m.decCNP = false
			m.cancelTimer()
			m.rpTimer0 = m.schedule(e.at+m.rpTimer, 2)
		}
	case 2: // RateIncEventTimerMlx
		m.rpTimer0 = m.schedule(e.at+m.rpTimer, 2)
		switch {
		case m.stage < m.f:
		case m.stage == m.f:
			m.target = min(m.target+m.rai, m.line)
		default:
			m.target = min(m.target+m.rhai, m.line)
		}
		m.rate = m.half(m.rate) + m.half(m.target)
		m.stage++
	}
}

// cnp is cnp_received_mlx.
func (m *mlxModel) cnp(now time.Duration) {
	m.alphaCNP, m.decCNP = true, true
	if m.firstCNP {
		m.alpha = 1
		m.alphaCNP = false
		m.schedule(now+m.alphaIv, 0)
		m.schedule(now+m.decIv+1, 1)
		m.firstCNP = false
	}
}

// drawMlxConfig draws integral rates (DataRate is whole bits per second)
// and periods in whole microseconds, as the simulator's config writes them.
func drawMlxConfig(t *rapid.T) DCQCNConfig {
	line := rapid.Int64Range(1, 800).Draw(t, "lineG") * int64(G)
	cfg := DCQCNConfig{
		Variant:          DCQCNMellanox,
		LineRate:         units.Rate(line),
		MinRate:          float64(rapid.Int64Range(1, line/10).Draw(t, "minRate")),
		G:                rapid.SampledFrom([]float64{1.0 / 256, 1.0 / 16, 0.5, 1}).Draw(t, "g"),
		AlphaTimer:       time.Duration(rapid.Int64Range(1, 20).Draw(t, "alphaIv")) * us,
		RateReducePeriod: time.Duration(rapid.Int64Range(1, 20).Draw(t, "decIv")) * us,
		RateTimer:        time.Duration(rapid.Int64Range(1, 300).Draw(t, "rpTimer")) * us,
		F:                rapid.IntRange(0, 6).Draw(t, "F"),
		RAI:              float64(rapid.Int64Range(line/1e6+1, line/10).Draw(t, "rai")),
		RHAI:             float64(rapid.Int64Range(0, line/5).Draw(t, "rhai")),
		InitialAlpha:     1,
		ClampTargetRate:  rapid.Bool().Draw(t, "clamp"),
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("drew an invalid config: %v", err)
	}
	return cfg
}

// drawCNPTimes draws CNP arrival times: bursts nanoseconds apart, gaps of
// a period or so, and quiet stretches long enough to recover.
func drawCNPTimes(t *rapid.T) []time.Duration {
	n := rapid.IntRange(1, 40).Draw(t, "cnps")
	gap := rapid.SampledFrom([]time.Duration{0, 1, 1 * us, 4 * us, 20 * us, 300 * us, 3 * time.Millisecond})
	var now time.Duration
	times := make([]time.Duration, n)
	for i := range times {
		now += gap.Draw(t, "gap") + time.Duration(rapid.Int64Range(0, 3000).Draw(t, "jitter"))
		times[i] = now
	}
	return times
}

// The engine in the Mellanox variant matches the model event for event:
// after each of the model's events (driven to that event's time with
// Advance) and after each CNP, R_C, R_T and α are equal, bit for bit, and
// so is the stage count as far as the rules read it (0, up to F, or past
// F). A second engine that sleeps until its NextDeadline, waking only for
// that and for CNPs, is awake at every instant the model's rate changes,
// and ends in the same state.
func TestMlxMatchesTheModelEventForEvent(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := drawMlxConfig(t)
		cnps := drawCNPTimes(t)
		end := cnps[len(cnps)-1] + time.Duration(rapid.Int64Range(0, 5000).Draw(t, "tailUs"))*us

		m := newMlxModel(cfg)
		eng, err := NewDCQCN(cfg)
		if err != nil {
			t.Fatal(err)
		}
		lazy, _ := NewDCQCN(cfg)
		wakes := map[time.Duration]bool{}
		// sleepUntil drives the lazy engine to t through its deadlines.
		sleepUntil := func(t time.Duration) {
			for {
				at, ok := lazy.NextDeadline()
				if !ok || at > t {
					return
				}
				wakes[at] = true
				lazy.Advance(at)
			}
		}
		stageClass := func(s int) int { return min(s, cfg.F+1) }
		compare := func(when string, at time.Duration) {
			if eng.Rate() != float64(m.rate) || eng.TargetRate() != float64(m.target) || eng.Alpha() != m.alpha {
				t.Fatalf("%s at %v: engine R_C %v R_T %v α %v; model %v %v %v",
					when, at, eng.Rate(), eng.TargetRate(), eng.Alpha(), m.rate, m.target, m.alpha)
			}
			if s, _ := eng.Stages(); stageClass(s) != stageClass(m.stage) {
				t.Fatalf("%s at %v: engine stage %d, model %d (F %d)", when, at, s, m.stage, cfg.F)
			}
		}
		prevRate := m.rate
		runTo := func(t0 time.Duration) {
			for {
				e, ok := m.next(t0)
				if !ok {
					return
				}
				m.run(e)
				for { // the other events due at the same instant
					e2, ok := m.next(e.at)
					if !ok {
						break
					}
					m.run(e2)
				}
				eng.Advance(e.at)
				compare("event", e.at)
				if m.rate != prevRate {
					sleepUntil(e.at)
					if !wakes[e.at] {
						t.Fatalf("the model's rate changed at %v; the sleeping engine was not awake (deadline %v)",
							e.at, func() time.Duration { at, _ := lazy.NextDeadline(); return at }())
					}
					prevRate = m.rate
				}
			}
		}
		for _, at := range cnps {
			runTo(at)
			m.cnp(at)
			eng.OnCNP(at)
			compare("CNP", at)
			sleepUntil(at)
			lazy.OnCNP(at)
		}
		runTo(end)
		eng.Advance(end)
		sleepUntil(end)
		lazy.Advance(end)
		compare("end", end)
		if lazy.Rate() != eng.Rate() || lazy.TargetRate() != eng.TargetRate() || lazy.Alpha() != eng.Alpha() || lazy.Stats() != eng.Stats() {
			t.Fatalf("the sleeping engine ends at R_C %v R_T %v α %v %+v; the stepped one at %v %v %v %+v",
				lazy.Rate(), lazy.TargetRate(), lazy.Alpha(), lazy.Stats(), eng.Rate(), eng.TargetRate(), eng.Alpha(), eng.Stats())
		}
	})
}

// The paper's form is untouched by the new fields: a config that names
// the paper's variant explicitly runs exactly as one that does not.
func TestPaperVariantIsTheZeroValue(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := drawDCQCNConfig(t)
		named := cfg
		named.Variant = DCQCNPaper
		named.ClampTargetRate = rapid.Bool().Draw(t, "clamp") // ignored by the paper's form
		a, _ := NewDCQCN(cfg)
		b, _ := NewDCQCN(named)
		for _, ev := range drawEvents(t) {
			apply(a, ev)
			apply(b, ev)
			if a.Rate() != b.Rate() || a.TargetRate() != b.TargetRate() || a.Alpha() != b.Alpha() {
				t.Fatalf("at %v: %v %v %v vs %v %v %v", ev.at, a.Rate(), a.TargetRate(), a.Alpha(), b.Rate(), b.TargetRate(), b.Alpha())
			}
		}
	})
}
