package congestion

import (
	"fmt"
	"math"
	"time"

	"github.com/forgive-emu/forgive/internal/units"
)

// DCQCN defaults from the DCQCN paper as the seeds and PARAMETERS.md report
// them ("g = 1/256", "K = 55 µs", "the same 55 µs timer or ... a 10 MB
// byte counter", "five steps" of fast recovery, "α starts at 1").
const (
	DefaultG            = 1.0 / 256
	DefaultAlphaTimer   = 55 * time.Microsecond
	DefaultRateTimer    = 55 * time.Microsecond
	DefaultByteCounter  = 10_000_000
	DefaultF            = 5
	DefaultInitialAlpha = 1.0
	// DefaultRateReducePeriod is the shortest time between two rate cuts
	// of one flow, the reaction point's rate_reduce_monitor_period of
	// Mellanox NICs: HPCC's DCQCN ("decrease checked every 4 µs",
	// PARAMETERS.md). It is well below the notification point's CNP
	// interval (at most one CNP per flow per 50 µs), so honest CNPs,
	// which arrive at most that often give or take the fabric's jitter,
	// are never coalesced, and a flood of forged CNPs cuts the rate at
	// most once per period. A period equal to the CNP interval coalesced
	// every honest CNP that arrived a little early: on the seed's 4:1
	// fabric in the simulator DCQCN then reacted to about half of them
	// and the fabric trimmed 9.9 % of its bytes instead of 3.1 %
	// (docs/results/sim-seed-scale).
	DefaultRateReducePeriod = 4 * time.Microsecond
)

// Rate steps as fractions of the line rate, so an emulation profile that
// scales the link keeps DCQCN's proportions.
const (
	// DefaultRAIFraction is the paper's R_AI = 40 Mb/s at 40 Gb/s.
	DefaultRAIFraction = 1.0 / 1000
	// DefaultRHAIFraction is ten times R_AI: the seed chapter's "the
	// hyper-increase step is assumed to be 10 × R_AI", and HPCC's DCQCN
	// settings (R_HAI 50 and R_AI 5 Mb/s per 25 Gb/s) have the same ratio.
	DefaultRHAIFraction = 1.0 / 100
	// DefaultMinRateFraction: the paper sets no floor and HPCC uses 1 Gb/s.
	// One thousandth of the line rate never binds above a 500-to-1 incast
	// yet keeps a flow from stalling after a long train of CNPs.
	DefaultMinRateFraction = 1.0 / 1000
)

// Bounds that keep one call's work and the clock arithmetic bounded.
const (
	// MinRAIFraction bounds R_AI from below: additive increase then reaches
	// line rate from any rate within about a million steps, which bounds
	// the increase events a single Advance or OnSent can run.
	MinRAIFraction = 1e-6
	// MaxTimer bounds AlphaTimer and RateTimer.
	MaxTimer = time.Hour
	// MaxF bounds the fast-recovery stage count.
	MaxF = 1 << 16
)

// DCQCNConfig holds the reaction point's parameters. Rates are bits per
// second: the line rate is the link's, a units.Rate as everywhere; the
// minimum rate and the increase steps are fractions of it, and so float64
// as R_C and R_T are.
type DCQCNConfig struct {
	LineRate units.Rate // R_C and R_T never start above it; R_C never exceeds it
	MinRate  float64    // a cut never takes R_C below it
	G        float64    // α gain g
	// AlphaTimer is K: α decays once per K without a CNP.
	AlphaTimer time.Duration
	// RateTimer is the rate-increase timer period.
	RateTimer time.Duration
	// ByteCounter is B, the bytes sent per byte-counter increase event;
	// 0 disables the byte counter (HPCC's variant has none).
	ByteCounter int64
	// F is the number of fast-recovery stages.
	F            int
	RAI          float64 // additive-increase step R_AI
	RHAI         float64 // hyper-increase step R_HAI
	InitialAlpha float64 // α before the first CNP
	// RateReducePeriod is the shortest time between two cuts: a CNP that
	// arrives sooner after the last cut is counted (Stats.CNPsCoalesced)
	// and changes nothing, neither the rate, nor α, nor the timers.
	// Zero cuts on every CNP, the paper's form. In the Mellanox variant
	// it is the period of the rate-decrease check instead and must be
	// positive (see [DCQCNMellanox]).
	RateReducePeriod time.Duration
	// Variant selects the rules: the zero value is the paper's form,
	// [DCQCNMellanox] the form of HPCC's ns-3 rdma-hw.cc (CC mode 1).
	Variant DCQCNVariant
	// ClampTargetRate is the Mellanox variant's CLAMP_TARGET_RATE: every
	// cut sets R_T = R_C. Off, a cut sets R_T only if a rate increase
	// event ran since the previous cut. The paper's form always clamps
	// and ignores this field.
	ClampTargetRate bool
}

// DefaultDCQCN returns the paper's parameters for a link of lineRate
// bits/s, with R_AI, R_HAI and the minimum rate scaled by the Default*
// fractions. At 100 Gb/s: R_AI 100 Mb/s, R_HAI 1 Gb/s, minimum 100 Mb/s.
func DefaultDCQCN(lineRate units.Rate) DCQCNConfig {
	line := float64(lineRate)
	return DCQCNConfig{
		LineRate:     lineRate,
		MinRate:      line * DefaultMinRateFraction,
		G:            DefaultG,
		AlphaTimer:   DefaultAlphaTimer,
		RateTimer:    DefaultRateTimer,
		ByteCounter:  DefaultByteCounter,
		F:            DefaultF,
		RAI:          line * DefaultRAIFraction,
		RHAI:         line * DefaultRHAIFraction,
		InitialAlpha: DefaultInitialAlpha,

		RateReducePeriod: DefaultRateReducePeriod,
	}
}

// Validate reports the first field that is out of range.
func (c DCQCNConfig) Validate() error {
	bad := func(field string, v any, want string) error {
		return fmt.Errorf("%w: DCQCNConfig.%s = %v, want %s", ErrConfig, field, v, want)
	}
	line := float64(c.LineRate)
	switch {
	case c.LineRate <= 0:
		return bad("LineRate", c.LineRate, "a positive bits/s")
	case !positiveFinite(c.MinRate) || c.MinRate > line:
		return bad("MinRate", c.MinRate, "in (0, LineRate]")
	case !(c.G > 0 && c.G <= 1):
		return bad("G", c.G, "in (0, 1]")
	case c.AlphaTimer <= 0 || c.AlphaTimer > MaxTimer:
		return bad("AlphaTimer", c.AlphaTimer, "in (0, 1h]")
	case c.RateTimer <= 0 || c.RateTimer > MaxTimer:
		return bad("RateTimer", c.RateTimer, "in (0, 1h]")
	case c.ByteCounter < 0:
		return bad("ByteCounter", c.ByteCounter, ">= 0 (0 disables)")
	case c.F < 0 || c.F > MaxF:
		return bad("F", c.F, fmt.Sprintf("in [0, %d]", MaxF))
	case !(c.RAI >= line*MinRAIFraction) || math.IsInf(c.RAI, 1):
		return bad("RAI", c.RAI, "finite and >= LineRate*MinRAIFraction")
	case !(c.RHAI >= 0) || math.IsInf(c.RHAI, 1):
		return bad("RHAI", c.RHAI, "finite and >= 0")
	case !(c.InitialAlpha >= 0 && c.InitialAlpha <= 1):
		return bad("InitialAlpha", c.InitialAlpha, "in [0, 1]")
	case c.RateReducePeriod < 0 || c.RateReducePeriod > MaxTimer:
		return bad("RateReducePeriod", c.RateReducePeriod, "in [0, 1h] (0: cut on every CNP)")
	case c.Variant > DCQCNMellanox:
		return bad("Variant", c.Variant, "paper or mellanox")
	case c.Variant == DCQCNMellanox && c.RateReducePeriod == 0:
		return bad("RateReducePeriod", c.RateReducePeriod, "positive in the mellanox variant (the rate-decrease check's period)")
	case c.Variant == DCQCNMellanox && c.ByteCounter != 0:
		return bad("ByteCounter", c.ByteCounter, "0 in the mellanox variant (it has no byte counter)")
	}
	return nil
}

// DCQCN is DCQCN's reaction point in the form of the DCQCN paper, which
// is also the form of UEC htsim's dcqcn.cpp: α moves on a CNP and decays
// on its own K timer, the rate-increase timer and the byte counter each
// raise increase events, and the phase of an event is chosen from both
// stage counts. Config.Variant = [DCQCNMellanox] runs HPCC's "Mellanox"
// variant instead, which checks for CNPs on a periodic decrease timer and
// uses the timer stage alone; its rules are documented there. The rest
// of this comment is the paper's form.
//
// The flow starts at line rate with no slow start, α at InitialAlpha, and
// no timer armed: the first CNP arms them. Once R_C is back at line rate
// the increase timer and byte counter stop (further increases could not
// change R_C), so an uncongested flow never asks to be woken. α needs no
// wake-up either: it only matters at the next CNP, so its decay is
// computed then from the time since the last CNP.
type DCQCN struct {
	cfg   DCQCNConfig
	decay float64 // 1 - g

	rc, rt float64 // current and target rate

	// α after the last CNP, before any decay; α now is
	// alphaBase·(1-g)^⌊(now-lastCNP)/K⌋ once a CNP has armed the timer.
	// In the Mellanox variant: α after the last α update.
	alphaBase  float64
	alphaArmed bool
	lastCNP    time.Duration // time of the last cut

	now time.Duration // the latest time seen; time never runs backwards here

	// The increase side runs while recovering (R_C below line rate).
	recovering   bool
	nextIncrease time.Duration // next rate-timer expiry
	timerStage   int           // T; the Mellanox variant's stage count
	byteStage    int           // BC
	bytes        int64         // bytes toward the next byte-counter event

	stats Stats

	mlx mlxState // the Mellanox variant's events; unused in the paper's form
}

// NewDCQCN validates cfg and returns a reaction point at line rate.
func NewDCQCN(cfg DCQCNConfig) (*DCQCN, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &DCQCN{
		cfg:       cfg,
		decay:     1 - cfg.G,
		rc:        float64(cfg.LineRate),
		rt:        float64(cfg.LineRate),
		alphaBase: cfg.InitialAlpha,
	}, nil
}

// Restart puts the reaction point back where NewDCQCN starts it, at line
// rate with α at its initial value and no timer armed, keeping its
// counters and the latest time seen: FORGIVE's line-rate exemption
// (ExemptionLineRate), as a new queue pair of the seed's simulator starts.
func (d *DCQCN) Restart(now time.Duration) {
	*d = DCQCN{
		cfg: d.cfg, decay: d.decay,
		rc: float64(d.cfg.LineRate), rt: float64(d.cfg.LineRate),
		alphaBase: d.cfg.InitialAlpha,
		now:       max(now, d.now),
		stats:     d.stats,
	}
}

// OnCNP cuts the rate: R_T = R_C, R_C = R_C·(1 − α/2) (never below
// MinRate), α = (1 − g)·α + g, and restarts the α timer, the rate timer
// and both stage counts. Timers that expired at or before now run first.
// A CNP less than RateReducePeriod after the last cut is only counted.
func (d *DCQCN) OnCNP(now time.Duration) {
	if d.cfg.Variant == DCQCNMellanox {
		d.mlxOnCNP(now)
		return
	}
	d.Advance(now)
	d.stats.CNPs++
	if d.alphaArmed && d.now-d.lastCNP < d.cfg.RateReducePeriod {
		d.stats.CNPsCoalesced++
		return
	}
	alpha := d.alphaAt(d.now)
	d.stats.Cuts++

	d.rt = d.rc
	d.rc *= 1 - alpha/2
	if d.rc < d.cfg.MinRate {
		d.rc = d.cfg.MinRate
		d.stats.MinRateClamps++
	}
	d.alphaBase = d.decay*alpha + d.cfg.G
	d.alphaArmed = true
	d.lastCNP = d.now

	d.timerStage, d.byteStage, d.bytes = 0, 0, 0
	d.nextIncrease = d.now + d.cfg.RateTimer
	d.recovering = d.rc < float64(d.cfg.LineRate)
}

// OnSent feeds the byte counter: every ByteCounter bytes sent while
// recovering raise one increase event at now, after the timers that
// expired at or before now. Bytes sent at line rate do not count.
func (d *DCQCN) OnSent(now time.Duration, bytes int) {
	d.Advance(now)
	if d.cfg.Variant == DCQCNMellanox {
		return // no byte counter
	}
	if !d.recovering || d.cfg.ByteCounter == 0 || bytes <= 0 {
		return
	}
	d.bytes = saturatingAdd(d.bytes, int64(bytes))
	for d.recovering && d.bytes >= d.cfg.ByteCounter {
		d.bytes -= d.cfg.ByteCounter
		d.byteStage++
		d.stats.ByteStages++
		d.increase()
	}
}

// Advance runs every rate-timer expiry at or before now, one at a time and
// in order, so a driver that wakes late gets the same trajectory as one
// that woke at every deadline.
func (d *DCQCN) Advance(now time.Duration) {
	if now > d.now {
		d.now = now
	}
	if d.cfg.Variant == DCQCNMellanox {
		d.mlxAdvance()
		return
	}
	for d.recovering && d.nextIncrease <= d.now {
		d.nextIncrease += d.cfg.RateTimer
		d.timerStage++
		d.stats.TimerStages++
		d.increase()
	}
}

// increase is one increase event. The stage count that raised it has
// already been incremented, so the first F events of a recovery are fast
// recovery: "Fast recovery: five steps of R_C ← (R_T + R_C)/2" with F = 5.
// Hyper increase needs both counts past F; additive covers the rest.
func (d *DCQCN) increase() {
	f := d.cfg.F
	switch {
	case max(d.timerStage, d.byteStage) <= f:
		d.stats.FastRecovery++
	case min(d.timerStage, d.byteStage) > f:
		d.rt += d.cfg.RHAI * float64(min(d.timerStage, d.byteStage)-f)
		d.stats.HyperIncrease++
	default:
		d.rt += d.cfg.RAI
		d.stats.AdditiveIncrease++
	}
	d.rc = (d.rt + d.rc) / 2
	if line := float64(d.cfg.LineRate); d.rc >= line {
		d.rc = line
		d.stopRecovery()
	}
}

// stopRecovery disarms the increase side once R_C is back at line rate.
func (d *DCQCN) stopRecovery() {
	d.recovering = false
	d.bytes = 0
}

// saturatingAdd adds two non-negative counts without wrapping.
func saturatingAdd(a, b int64) int64 {
	if b > math.MaxInt64-a {
		return math.MaxInt64
	}
	return a + b
}

// alphaAt is α at time t ≥ lastCNP.
func (d *DCQCN) alphaAt(t time.Duration) float64 {
	if d.cfg.Variant == DCQCNMellanox {
		return d.alphaBase // every α update up to d.now has run
	}
	if !d.alphaArmed {
		return d.alphaBase
	}
	periods := (t - d.lastCNP) / d.cfg.AlphaTimer
	if periods == 0 {
		return d.alphaBase
	}
	return d.alphaBase * math.Pow(d.decay, float64(periods))
}

// Rate is R_C in bits/s.
func (d *DCQCN) Rate() float64 { return d.rc }

// TargetRate is R_T in bits/s. It may exceed the line rate once additive
// or hyper increase has pushed past it; R_C never does.
func (d *DCQCN) TargetRate() float64 { return d.rt }

// Alpha is α as of the latest time the controller has seen.
func (d *DCQCN) Alpha() float64 { return d.alphaAt(d.now) }

// Stages returns the rate-timer and byte-counter stage counts T and BC.
func (d *DCQCN) Stages() (timer, byteCounter int) { return d.timerStage, d.byteStage }

// NextDeadline is the next rate-timer expiry while the rate is recovering.
func (d *DCQCN) NextDeadline() (time.Duration, bool) {
	if d.cfg.Variant == DCQCNMellanox {
		return d.mlxNextDeadline()
	}
	return d.nextIncrease, d.recovering
}

// Stats returns the counters.
func (d *DCQCN) Stats() Stats { return d.stats }

// Config returns the parameters the controller runs with.
func (d *DCQCN) Config() DCQCNConfig { return d.cfg }
