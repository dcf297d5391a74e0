package congestion

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// DCQCNVariant selects the rules a [DCQCN] runs.
type DCQCNVariant uint8

const (
	// DCQCNPaper is the DCQCN paper's reaction point (SIGCOMM 2015), the
	// form UEC htsim's dcqcn.cpp follows, and the zero value: every
	// profile that names no variant runs it.
	DCQCNPaper DCQCNVariant = iota
	// DCQCNMellanox is the "Mellanox version" of DCQCN in HPCC's ns-3
	// simulator (simulation/src/point-to-point/model/rdma-hw.cc, CC mode
	// 1), which ASTRA-sim's ns-3 backend (astra-sim/astra-network-ns3)
	// ships unchanged. Its rules, all of them per flow and started by the
	// flow's first CNP:
	//
	//   - The first CNP sets α to 1 (InitialAlpha) and starts two
	//     periodic events; it does not count as a CNP for α, and it does
	//     not change the rate at once (the simulator's RateOnFirstCnp is
	//     1).
	//   - α update, every AlphaTimer (ALPHA_RESUME_INTERVAL) from the
	//     first CNP on, for as long as the flow lives: α = (1 − g)·α + g
	//     if a CNP arrived since the previous update, α = (1 − g)·α if
	//     not. α never moves at a CNP itself.
	//   - Rate-decrease check, every RateReducePeriod
	//     (RATE_DECREASE_INTERVAL), the first one a nanosecond after the
	//     period so that it follows the α update due at the same time: if
	//     a CNP arrived since the previous check, cut once, however many
	//     arrived. A cut sets R_T = R_C only if ClampTargetRate is set or
	//     a rate increase ran since the previous cut (otherwise R_T keeps
	//     its value), then R_C = max(MinRate, R_C·(1 − α/2)); it resets
	//     the increase stage to 0 and restarts the rate-increase timer.
	//   - Rate increase, on the timer alone (RP_TIMER; no byte counter),
	//     by the stage count S of increases since the last cut, counted
	//     from 0 and incremented after each: S < F fast recovery, R_C =
	//     (R_T + R_C)/2; S = F additive, R_T += R_AI; S > F hyper, R_T +=
	//     R_HAI (a fixed step, not one that grows with S); R_T is capped
	//     at the line rate and then R_C = (R_T + R_C)/2. The timer is
	//     armed by the first cut and never stops in the simulator; here
	//     it stops once an increase in the additive or hyper stage
	//     changes nothing, since every later one would change nothing
	//     either (the stage count then stops too).
	//
	// Rates are whole bits per second as in ns-3's DataRate: a cut and a
	// halving truncate toward zero, so R_C = ⌊R_C/2⌋ + ⌊R_T/2⌋ and R_C may
	// settle a bit per second below the line rate, as in the simulator.
	//
	// Events due at the same instant run in the simulator's order, which
	// is the order they were scheduled in: the event whose period is the
	// longer runs first, and between events scheduled together, α update
	// before rate-decrease check before rate increase. A CNP at the same
	// instant as an event arrives after it. With periods in whole
	// microseconds, as astra-network-ns3's config.txt writes them, this is
	// the simulator's order exactly.
	DCQCNMellanox
)

var variantNames = [...]string{DCQCNPaper: "paper", DCQCNMellanox: "mellanox"}

// String returns the name ParseDCQCNVariant accepts.
func (v DCQCNVariant) String() string {
	if int(v) < len(variantNames) {
		return variantNames[v]
	}
	return fmt.Sprintf("DCQCNVariant(%d)", uint8(v))
}

// ParseDCQCNVariant reads "paper" or "mellanox", ignoring case and
// surrounding space; the empty string is the paper's form.
func ParseDCQCNVariant(s string) (DCQCNVariant, error) {
	name := strings.ToLower(strings.TrimSpace(s))
	if name == "" {
		return DCQCNPaper, nil
	}
	for v, n := range variantNames {
		if n == name {
			return DCQCNVariant(v), nil
		}
	}
	return 0, fmt.Errorf("%w: DCQCN variant %q (want %q or %q)", ErrConfig, s, variantNames[DCQCNPaper], variantNames[DCQCNMellanox])
}

// MarshalText lets a variant appear by name in YAML.
func (v DCQCNVariant) MarshalText() ([]byte, error) {
	if int(v) >= len(variantNames) {
		return nil, fmt.Errorf("%w: DCQCN variant %d", ErrConfig, uint8(v))
	}
	return []byte(variantNames[v]), nil
}

// UnmarshalText is ParseDCQCNVariant for decoders.
func (v *DCQCNVariant) UnmarshalText(text []byte) error {
	parsed, err := ParseDCQCNVariant(string(text))
	if err != nil {
		return err
	}
	*v = parsed
	return nil
}

// mlxEvent is one of the Mellanox variant's periodic events: when it is
// due and when it was scheduled, which orders events due at one instant.
type mlxEvent struct {
	at, sched time.Duration
	kind      int // mlxAlpha, mlxCheck or mlxTimer: the order among events scheduled together
}

const (
	mlxAlpha = iota
	mlxCheck
	mlxTimer
)

// before reports whether e runs before o.
func (e mlxEvent) before(o mlxEvent) bool {
	if e.at != o.at {
		return e.at < o.at
	}
	if e.sched != o.sched {
		return e.sched < o.sched
	}
	return e.kind < o.kind
}

// mlxState is the Mellanox variant's state beyond R_C, R_T, α
// (alphaBase) and the stage count (timerStage).
type mlxState struct {
	armed    bool // the first CNP has arrived: α updates and checks run
	alphaCNP bool // a CNP arrived since the last α update
	decCNP   bool // a CNP arrived since the last rate-decrease check
	alpha    mlxEvent
	check    mlxEvent
	timer    mlxEvent
	timerOn  bool // the rate-increase timer is armed
}

// mlxOnCNP is cnp_received_mlx: it raises the two flags; the first CNP
// also starts the α updates and the rate-decrease checks.
func (d *DCQCN) mlxOnCNP(now time.Duration) {
	d.Advance(now)
	d.stats.CNPs++
	m := &d.mlx
	if m.decCNP {
		d.stats.CNPsCoalesced++ // the pending cut covers it
	}
	m.alphaCNP, m.decCNP = true, true
	if m.armed {
		return
	}
	m.armed = true
	d.alphaBase = d.cfg.InitialAlpha
	m.alphaCNP = false // the first CNP does not count for α
	m.alpha = mlxEvent{at: d.now + d.cfg.AlphaTimer, sched: d.now, kind: mlxAlpha}
	m.check = mlxEvent{at: d.now + d.cfg.RateReducePeriod + 1, sched: d.now, kind: mlxCheck}
}

// mlxAdvance runs every event due at or before d.now in the simulator's
// order. α updates and rate increases do not read each other's state, and
// a check reads α only when it cuts, which it does at most once per call
// (no CNP arrives within one): so the α updates and the increases before
// that cut run first, then the cut, then the rest of each. Checks with no
// CNP to act on only reschedule themselves and are skipped in one step.
func (d *DCQCN) mlxAdvance() {
	m := &d.mlx
	if !m.armed {
		return
	}
	if m.decCNP && m.check.at <= d.now {
		d.mlxAlphaBefore(m.check)
		d.mlxTimerBefore(m.check)
		d.mlxCut()
	}
	if m.check.at <= d.now {
		p := d.cfg.RateReducePeriod
		n := (d.now-m.check.at)/p + 1
		m.check.at += n * p
		m.check.sched = m.check.at - p
	}
	end := mlxEvent{at: d.now, sched: math.MaxInt64, kind: math.MaxInt}
	d.mlxAlphaBefore(end)
	d.mlxTimerBefore(end)
}

// mlxAlphaBefore runs the α updates that come before e (UpdateAlphaMlx).
func (d *DCQCN) mlxAlphaBefore(e mlxEvent) {
	m, k := &d.mlx, d.cfg.AlphaTimer
	for m.alpha.before(e) {
		if m.alphaCNP {
			d.alphaBase = float64(d.decay*d.alphaBase) + d.cfg.G
			m.alphaCNP = false
		} else if next := float64(d.decay * d.alphaBase); next != d.alphaBase {
			d.alphaBase = next
		} else {
			// α no longer moves (it is 0 or a subnormal that (1 − g)
			// rounds back to itself): skip the remaining updates.
			n := max((e.at-m.alpha.at)/k, 0)
			if n > 0 {
				m.alpha.at += n * k
				m.alpha.sched = m.alpha.at - k
				continue
			}
		}
		m.alpha.sched = m.alpha.at
		m.alpha.at += k
	}
}

// mlxTimerBefore runs the rate increases that come before e
// (RateIncEventTimerMlx).
func (d *DCQCN) mlxTimerBefore(e mlxEvent) {
	m := &d.mlx
	for m.timerOn && m.timer.before(e) {
		m.timer.sched = m.timer.at
		m.timer.at += d.cfg.RateTimer
		d.mlxIncrease()
	}
}

// mlxCut is CheckRateDecreaseMlx finding a CNP: one cut, the stage reset
// and the rate-increase timer restarted; the next check is due a period
// later.
func (d *DCQCN) mlxCut() {
	m := &d.mlx
	now := m.check.at
	m.check = mlxEvent{at: now + d.cfg.RateReducePeriod, sched: now, kind: mlxCheck}
	if d.cfg.ClampTargetRate || d.timerStage != 0 {
		d.rt = d.rc
	}
	d.rc = math.Trunc(float64(d.rc * (1 - d.alphaBase/2)))
	if d.rc < d.cfg.MinRate {
		d.rc = d.cfg.MinRate
		d.stats.MinRateClamps++
	}
	d.stats.Cuts++
	d.timerStage = 0
	m.decCNP = false
	m.timer = mlxEvent{at: now + d.cfg.RateTimer, sched: now, kind: mlxTimer}
	m.timerOn = true
}

// mlxIncrease is RateIncEventMlx: fast recovery, additive or hyper
// increase by the stage count, which counts from 0 and grows after the
// event.
func (d *DCQCN) mlxIncrease() {
	rc, rt := d.rc, d.rt
	line := float64(d.cfg.LineRate)
	stage := d.timerStage
	switch {
	case stage < d.cfg.F:
		d.stats.FastRecovery++
	case stage == d.cfg.F:
		d.rt = min(d.rt+d.cfg.RAI, line)
		d.stats.AdditiveIncrease++
	default:
		d.rt = min(d.rt+d.cfg.RHAI, line)
		d.stats.HyperIncrease++
	}
	d.rc = math.Trunc(d.rc/2) + math.Trunc(d.rt/2)
	d.timerStage++
	d.stats.TimerStages++
	if stage >= d.cfg.F && d.rc == rc && d.rt == rt {
		// Settled: every later increase is a hyper increase that leaves
		// R_T (at the line rate, or R_HAI = 0) and so R_C unchanged.
		d.mlx.timerOn = false
	}
}

// mlxNextDeadline is the next event that changes the rate: a check with a
// CNP to act on, or the rate-increase timer. α updates change nothing
// until a cut reads α, and mlxAdvance runs them then.
func (d *DCQCN) mlxNextDeadline() (time.Duration, bool) {
	m := &d.mlx
	switch {
	case m.decCNP && m.timerOn:
		return min(m.check.at, m.timer.at), true
	case m.decCNP:
		return m.check.at, true
	case m.timerOn:
		return m.timer.at, true
	}
	return 0, false
}
