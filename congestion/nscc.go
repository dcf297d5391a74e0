package congestion

import (
	"fmt"
	"math"
	"time"

	"github.com/forgive-emu/forgive/internal/units"
)

// NSCC defaults: Ultra Ethernet 1.0's Network Signal-based Congestion
// Control as PARAMETERS.md lists it and as the public uet-htsim model
// (htsim/sim/uec.cpp, initNsccParams) sets it.
const (
	// DefaultNSCCGamma is γ, the multiplicative decrease's gain.
	DefaultNSCCGamma = 0.8
	// DefaultNSCCMaxWindowBDP: the window never exceeds 1.5 BDP.
	DefaultNSCCMaxWindowBDP = 1.5
	// DefaultNSCCTargetFraction: the target queueing delay is 0.75 of the
	// network's base RTT on a fabric that trims (the whole RTT without
	// trimming, which this emulator's switches always have).
	DefaultNSCCTargetFraction = 0.75
	// DefaultNSCCDelayAlpha is the gain of the average queueing delay's
	// moving average.
	DefaultNSCCDelayAlpha = 0.0125
	// DefaultNSCCQAGate: quick adapt runs only when the bytes acknowledged
	// in its period are below the maximum window / 2^gate.
	DefaultNSCCQAGate = 3
	// DefaultNSCCFastIncreaseDelay: ACKs whose queueing delay is below
	// this count toward fast increase.
	DefaultNSCCFastIncreaseDelay = time.Microsecond
	// DefaultNSCCBaseRTT is the reference network's RTT, 12 µs.
	DefaultNSCCBaseRTT = 12 * time.Microsecond
	// DefaultNSCCMTU is the MTU DefaultNSCC assumes: the NIC's packet size.
	DefaultNSCCMTU = 4096
)

// The reference network NSCC's gains are written for: 100 Gb/s and a
// 12 µs RTT. A network with another BDP or target scales them
// (scaling factors a and b of the specification and of uet-htsim).
const (
	nsccRefRate = 100e9
	nsccRefRTT  = 12 * time.Microsecond
)

// Gain constants of the increase rules, in MTUs at the reference network
// (uet-htsim's initNsccParams): proportional increase 4·MTU·a·b/target,
// fair increase 5·MTU·a, the additive η = 0.15·MTU·a per adjustment
// period, fast increase 0.25·a of each acknowledged byte.
const (
	nsccAlphaMTUs  = 4.0
	nsccFairMTUs   = 5.0
	nsccEtaMTUs    = 0.15
	nsccFastScale  = 0.25
	nsccAdjustMTUs = 8 // bytes acknowledged between two adjustments
	nsccQAFactor   = 4 // quick adapt on a delay above 4 × target
	nsccMinMDScale = 0.5
)

// NSCCConfig holds NSCC's parameters. Zero TargetDelay, Gamma,
// MaxWindowBDP, DelayAlpha and FastIncreaseDelay take the defaults; every
// gain is derived from LineRate, BaseRTT, MTU and TargetDelay.
type NSCCConfig struct {
	LineRate units.Rate // bits/s: the BDP is LineRate·BaseRTT
	// BaseRTT is the network's base RTT, the first base RTT of every
	// flow (a lower RTT sample lowers a flow's own), the adjustment period
	// and the delay a trim stands for.
	BaseRTT time.Duration
	MTU     int // payload bytes of a full packet: the minimum window
	// TargetDelay is the target queueing delay; 0 takes
	// DefaultNSCCTargetFraction of BaseRTT.
	TargetDelay  time.Duration
	Gamma        float64 // multiplicative decrease γ; 0: DefaultNSCCGamma
	MaxWindowBDP float64 // the window's ceiling in BDPs; 0: 1.5
	DelayAlpha   float64 // average delay's gain; 0: DefaultNSCCDelayAlpha
	// QAGate: quick adapt needs the bytes acknowledged in its period below
	// the ceiling / 2^QAGate. Negative takes DefaultNSCCQAGate (0 is a
	// gate of one ceiling).
	QAGate int
	// NoQuickAdapt turns quick adapt off (uet-htsim's disable_quick_adapt).
	NoQuickAdapt bool
	// FastIncreaseDelay: 0 takes DefaultNSCCFastIncreaseDelay.
	FastIncreaseDelay time.Duration
}

// DefaultNSCC returns NSCC for a link of lineRate bits/s on a network
// whose base RTT is baseRTT, with mtu-byte packets.
func DefaultNSCC(lineRate units.Rate, baseRTT time.Duration, mtu int) NSCCConfig {
	return NSCCConfig{LineRate: lineRate, BaseRTT: baseRTT, MTU: mtu, QAGate: DefaultNSCCQAGate}
}

// withDefaults fills the zero fields.
func (c NSCCConfig) withDefaults() NSCCConfig {
	if c.TargetDelay == 0 {
		c.TargetDelay = time.Duration(math.Round(DefaultNSCCTargetFraction * float64(c.BaseRTT)))
	}
	if c.Gamma == 0 {
		c.Gamma = DefaultNSCCGamma
	}
	if c.MaxWindowBDP == 0 {
		c.MaxWindowBDP = DefaultNSCCMaxWindowBDP
	}
	if c.DelayAlpha == 0 {
		c.DelayAlpha = DefaultNSCCDelayAlpha
	}
	if c.QAGate < 0 {
		c.QAGate = DefaultNSCCQAGate
	}
	if c.FastIncreaseDelay == 0 {
		c.FastIncreaseDelay = DefaultNSCCFastIncreaseDelay
	}
	return c
}

// MaxNSCCQAGate bounds NSCCConfig.QAGate.
const MaxNSCCQAGate = 30

// Validate reports the first field out of range, after the defaults.
func (c NSCCConfig) Validate() error {
	d := c.withDefaults()
	bad := func(field string, v any, want string) error {
		return fmt.Errorf("%w: NSCCConfig.%s = %v, want %s", ErrConfig, field, v, want)
	}
	switch {
	case d.LineRate <= 0:
		return bad("LineRate", c.LineRate, "> 0 bits/s")
	case d.BaseRTT <= 0 || d.BaseRTT > MaxTimer:
		return bad("BaseRTT", c.BaseRTT, "in (0, 1h]")
	case d.MTU < 1 || d.MTU > 1<<20:
		return bad("MTU", c.MTU, "in [1, 1MiB]")
	case d.TargetDelay <= 0 || d.TargetDelay > MaxTimer:
		return bad("TargetDelay", c.TargetDelay, "in (0, 1h] (0: 0.75 × BaseRTT)")
	case !(d.Gamma > 0 && d.Gamma <= 1):
		return bad("Gamma", c.Gamma, "in (0, 1]")
	case !(d.MaxWindowBDP > 0) || math.IsInf(d.MaxWindowBDP, 1) || d.MaxWindowBDP > 1e6:
		return bad("MaxWindowBDP", c.MaxWindowBDP, "in (0, 1e6]")
	case !(d.DelayAlpha > 0 && d.DelayAlpha <= 1):
		return bad("DelayAlpha", c.DelayAlpha, "in (0, 1]")
	case d.QAGate > MaxNSCCQAGate:
		return bad("QAGate", c.QAGate, fmt.Sprintf("at most %d", MaxNSCCQAGate))
	case d.FastIncreaseDelay < 0 || d.FastIncreaseDelay > MaxTimer:
		return bad("FastIncreaseDelay", c.FastIncreaseDelay, "in [0, 1h]")
	}
	return nil
}

// AckSignal is what one acknowledgement tells a window controller.
type AckSignal struct {
	Acked int           // payload bytes the ACK newly acknowledged
	RTT   time.Duration // a round-trip sample; 0 when the ACK gave none
	ECN   bool          // the ACK echoes a CE mark
	// InFlight is the flow's bytes sent and not acknowledged after the
	// ACK: what quick adapt waits to see acknowledged before it reacts
	// to marks again.
	InFlight int
}

// WindowController is a controller that also limits the bytes in flight:
// the NIC lets a flow send new data only while its unacknowledged bytes
// plus the next packet fit in Window (one packet may always go when
// nothing is unacknowledged). Its Rate paces the flow as well.
type WindowController interface {
	Controller
	// OnAck applies one acknowledgement received at now.
	OnAck(now time.Duration, a AckSignal)
	// OnNack applies a retransmission request for bytes (a trim).
	OnNack(now time.Duration, bytes, inFlight int)
	// SetExempt tells the controller that FORGIVE's exemption began
	// (true) or ended (false) at now.
	SetExempt(now time.Duration, exempt bool)
	// Window is the congestion window in bytes.
	Window() int
}

// NSCCStats counts NSCC's rules. Counters only grow.
type NSCCStats struct {
	Acks          uint64 // ACKs applied
	ECNEchoes     uint64 // of them echoing a CE mark
	Nacks         uint64 // retransmission requests applied
	FairIncreases uint64 // ACKs with delay at or above target, unmarked
	PropIncreases uint64 // ACKs below target, unmarked, not in fast increase
	FastIncreases uint64 // ACKs in fast increase
	Decreases     uint64 // multiplicative decreases applied
	QuickAdapts   uint64 // quick adapts applied
	NackDecreases uint64 // windows cut by a NACK's bytes
	Adjustments   uint64 // accumulated increases folded into the window
	ExemptAcks    uint64 // ACKs measured but not acted on while exempt
	ExemptNacks   uint64 // NACKs ignored while exempt
}

// NSCC is Ultra Ethernet's Network Signal-based Congestion Control at the
// sender, in the form of the public uet-htsim model (updateCwndOnAck_NSCC
// and updateCwndOnNack_NSCC): a window in bytes between one MTU and
// MaxWindowBDP BDPs that reacts to each ACK's ECN echo and queueing delay
// (the RTT sample minus the base RTT) and to trims. Per ACK, after quick
// adapt had its say:
//
//   - unmarked, delay ≥ target: fair increase, fi·acked into the
//     accumulator;
//   - unmarked, delay < target: fast increase (the window grows by
//     0.25·a of each acknowledged byte) once a window of ACKs saw delay
//     below FastIncreaseDelay, else proportional increase,
//     α·acked·(target − delay) into the accumulator;
//   - marked, delay ≥ target: multiplicative decrease, at most once per
//     base RTT and only while the average delay exceeds the target:
//     window ·= max(1 − γ·(avg − target)/avg, 0.5);
//   - marked, delay < target: nothing (the path, not the window, is
//     blamed).
//
// Every 8 MTUs acknowledged, or after a base RTT, the accumulator is
// folded in (window += acc/window) and, once per base RTT, η is added.
// Quick adapt: once per period of base RTT + target, if a trim arrived, or
// the delay exceeded 4 × target, and the period acknowledged less than
// ceiling/2^QAGate bytes, the window drops to the bytes the period
// acknowledged and marked ACKs are ignored until the bytes then in flight
// are acknowledged. A trim also moves the average delay toward one base
// RTT and, unless quick adapt acted, takes its bytes off the window.
//
// The base RTT starts at the network's (BaseRTT) and follows the lowest
// RTT sample of an unmarked ACK, and the ceiling with it, as in uet-htsim,
// where a path shorter than the network's longest has a smaller BDP. A
// marked ACK never lowers it: its packet crossed a queue past the marking
// threshold, and the ACK of a range FORGIVE forgave after a trim (always
// marked: the receiver echoes the trim) timed a header on the
// strict-priority queue, not data. A sample below the base RTT gives no
// delay; the average stands in for it, as for an ACK without a sample.
//
// The flow starts at the ceiling, as uet-htsim's does. Rate is always the
// line rate: the window, not a pace, is the congestion control; the pacer
// keeps the flow at or below its link.
//
// Where this departs from uet-htsim: the bytes in flight are the bytes
// sent and not acknowledged (the NIC's count), a trimmed packet among them
// until its retransmission is acknowledged, and retransmissions are not
// held back by the window (uet-htsim takes a NACKed packet out of flight
// and charges its retransmission again, which comes to the same room once
// it is resent); every retransmission request is treated as a trim, as
// uet-htsim's does; a retransmission timeout does not touch the window
// (uet-htsim takes a packet off it for each packet marked for
// retransmission); there is no receiver-window penalty and no SLEEK loss
// recovery; a marked ACK never lowers the base RTT (above).
//
// Exempt (SetExempt): the window is held at the ceiling; ACKs still update
// the base RTT and the average delay, and nothing else. When the exemption
// ends the window resumes from the ceiling with empty accumulators and a
// new quick-adapt period, as a new flow starts. docs/architecture.md says
// why. Under ExemptionNoCut (the counterfactual) the exempt window keeps
// its increase rules and is never cut, and nothing changes when the
// exemption begins or ends.
type NSCC struct {
	cfg NSCCConfig

	// Derived once.
	target, qaThreshold                  time.Duration
	alpha, fair, eta, fastScale, minWnd  float64
	adjustBytes                          float64
	bdpPerSecond                         float64 // bytes of BDP per second of RTT: LineRate/8
	cwnd, maxWnd                         float64
	base, avgDelay                       time.Duration
	inc, fiCount                         float64
	received, achieved, ignored, ignoreN float64
	increasing, triggerQA, exempt        bool
	// noCut is ExemptionNoCut (set by NewSender): exempt, the window
	// keeps its increase rules and is never cut; the ceiling and the
	// resume do not apply.
	noCut                           bool
	qaEnd, lastAdjust, lastDec, now time.Duration

	stats  Stats
	nstats NSCCStats
}

// NewNSCC returns one flow's NSCC.
func NewNSCC(cfg NSCCConfig) (*NSCC, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := cfg.withDefaults()
	n := &NSCC{cfg: c, target: c.TargetDelay, bdpPerSecond: float64(c.LineRate) / 8}
	refBDP := nsccRefRate / 8 * nsccRefRTT.Seconds()
	bdp := n.bdpPerSecond * c.BaseRTT.Seconds()
	a := bdp / refBDP
	b := float64(c.TargetDelay) / float64(nsccRefRTT)
	mtu := float64(c.MTU)
	n.alpha = nsccAlphaMTUs * mtu * a * b / float64(c.TargetDelay) // bytes per ns
	n.fair = nsccFairMTUs * mtu * a
	n.eta = nsccEtaMTUs * mtu * a
	n.fastScale = nsccFastScale * a
	n.minWnd = mtu
	n.adjustBytes = nsccAdjustMTUs * mtu
	n.qaThreshold = nsccQAFactor * c.TargetDelay
	n.base = c.BaseRTT
	n.setCeiling()
	n.cwnd = n.maxWnd
	return n, nil
}

// setCeiling sets the ceiling from the current base RTT; a lower ceiling
// takes the window down with it.
func (n *NSCC) setCeiling() {
	n.maxWnd = max(n.cfg.MaxWindowBDP*n.bdpPerSecond*n.base.Seconds(), n.minWnd)
	n.cwnd = min(n.cwnd, n.maxWnd)
}

func (n *NSCC) tick(now time.Duration) {
	if now > n.now {
		n.now = now
	}
}

// OnCNP counts a congestion notification: NSCC reads the same mark from
// the ACK's ECN echo, not from CNPs.
func (n *NSCC) OnCNP(now time.Duration) {
	n.tick(now)
	n.stats.CNPs++
}

// OnSent does nothing: the NIC counts the bytes in flight.
func (n *NSCC) OnSent(now time.Duration, _ int) { n.tick(now) }

// Advance does nothing: NSCC has no timer.
func (n *NSCC) Advance(now time.Duration) { n.tick(now) }

// Rate is the line rate: the window limits the flow.
func (n *NSCC) Rate() float64 { return float64(n.cfg.LineRate) }

// NextDeadline reports no deadline.
func (n *NSCC) NextDeadline() (time.Duration, bool) { return 0, false }

// Stats returns the counters common to every controller: Cuts counts
// the window decreases (multiplicative, quick adapt, NACK).
func (n *NSCC) Stats() Stats { return n.stats }

// NSCCStats returns NSCC's own counters.
func (n *NSCC) NSCCStats() NSCCStats { return n.nstats }

// Window is the congestion window in whole bytes.
func (n *NSCC) Window() int { return int(n.cwnd) }

// MaxWindow is the window's ceiling in whole bytes.
func (n *NSCC) MaxWindow() int { return int(n.maxWnd) }

// BaseRTT is the flow's base RTT: the configured one, or a lower sample.
func (n *NSCC) BaseRTT() time.Duration { return n.base }

// AvgDelay is the average queueing delay.
func (n *NSCC) AvgDelay() time.Duration { return n.avgDelay }

// Target is the target queueing delay.
func (n *NSCC) Target() time.Duration { return n.target }

// Exempt reports whether the exemption holds the window.
func (n *NSCC) Exempt() bool { return n.exempt }

// Config returns the parameters with the defaults filled in.
func (n *NSCC) Config() NSCCConfig { return n.cfg }

// SetExempt holds the window at the ceiling while exempt and resumes it
// from there when the exemption ends; under ExemptionNoCut it only
// records the mode (OnAck and OnNack then skip every cut).
func (n *NSCC) SetExempt(now time.Duration, exempt bool) {
	n.tick(now)
	if exempt == n.exempt {
		return
	}
	n.exempt = exempt
	if n.noCut {
		return
	}
	n.cwnd = n.maxWnd
	if exempt {
		return
	}
	// Resume as a flow starts: nothing accumulated during the exemption
	// counts, and quick adapt judges a fresh period.
	n.inc, n.fiCount, n.increasing = 0, 0, false
	n.received, n.achieved, n.ignored, n.ignoreN = 0, 0, 0, 0
	n.triggerQA = false
	n.qaEnd = n.now + n.base + n.target
	n.lastAdjust = n.now
}

// OnAck applies one acknowledgement.
func (n *NSCC) OnAck(now time.Duration, a AckSignal) {
	n.tick(now)
	now = n.now
	acked := float64(max(a.Acked, 0))
	n.nstats.Acks++
	if a.ECN {
		n.nstats.ECNEchoes++
	}
	n.achieved += acked
	n.received += acked
	n.ignored += acked

	delay := n.avgDelay
	if a.RTT > 0 && a.RTT < n.base && !a.ECN {
		n.base = a.RTT
		n.setCeiling()
	}
	if a.RTT > 0 && a.RTT >= n.base {
		delay = a.RTT - n.base
		n.updateDelay(delay, a.ECN)
	}
	if n.exempt {
		n.nstats.ExemptAcks++
		if !n.noCut {
			n.cwnd = n.maxWnd
			return
		}
	}
	// Exempt under no-cut, quick adapt is not consulted: it only cuts
	// or ignores marked ACKs, which cut nothing while exempt.
	if !n.exempt && n.quickAdapt(now, false, a.ECN, delay, a.InFlight) {
		return
	}
	switch {
	case !a.ECN && delay >= n.target:
		n.inc += n.fair * acked
		n.nstats.FairIncreases++
	case !a.ECN:
		if n.fastIncrease(acked, delay) {
			break
		}
		n.inc += n.alpha * acked * float64(n.target-delay)
		n.nstats.PropIncreases++
	case delay >= n.target && !n.exempt:
		n.multiplicativeDecrease(now)
	}
	n.clamp()
	if n.received > n.adjustBytes || now-n.lastAdjust > n.cfg.BaseRTT {
		n.adjust(now)
	}
	n.clamp()
}

// OnNack applies a trim's retransmission request.
func (n *NSCC) OnNack(now time.Duration, bytes, inFlight int) {
	n.tick(now)
	if n.exempt {
		n.nstats.ExemptNacks++
		return
	}
	n.nstats.Nacks++
	b := float64(max(bytes, 0))
	n.ignored += b
	// A trim stands for a queue as deep as the network's base RTT.
	n.updateDelay(n.cfg.BaseRTT, true)
	n.triggerQA = true
	if n.quickAdapt(n.now, true, true, 0, inFlight) {
		return
	}
	if b > 0 {
		before := n.cwnd
		n.cwnd -= b
		n.clamp()
		if n.cwnd < before {
			n.stats.Cuts++
			n.nstats.NackDecreases++
		}
	}
}

// updateDelay moves the average queueing delay toward a sample. An
// unmarked sample above the target pulls it toward a quarter of the base
// RTT instead: the delay was not this flow's bottleneck's (uet-htsim's
// update_delay).
func (n *NSCC) updateDelay(delay time.Duration, marked bool) {
	s := float64(delay)
	if !marked && delay > n.target {
		s = float64(n.base) / 4
	}
	g := n.cfg.DelayAlpha
	n.avgDelay = time.Duration(g*s + (1-g)*float64(n.avgDelay))
}

// quickAdapt is uet-htsim's quick_adapt: it reports whether the ACK or
// NACK is consumed (quick adapt acted, or a marked ACK is ignored after
// it), in which case the accumulators are emptied.
func (n *NSCC) quickAdapt(now time.Duration, loss, marked bool, delay time.Duration, inFlight int) bool {
	if n.cfg.NoQuickAdapt {
		return false
	}
	done := false
	switch {
	case marked && n.ignored < n.ignoreN:
		done = true
	case now > n.qaEnd:
		gate := n.maxWnd / float64(uint64(1)<<n.cfg.QAGate)
		if n.qaEnd != 0 && (n.triggerQA || loss || delay > n.qaThreshold) && n.achieved < gate {
			before := n.cwnd
			n.cwnd = max(n.achieved, n.minWnd)
			n.ignoreN, n.ignored = float64(max(inFlight, 0)), 0
			n.triggerQA = false
			n.nstats.QuickAdapts++
			if n.cwnd < before {
				n.stats.Cuts++
			}
			done = true
		}
		n.achieved = 0
		n.qaEnd = now + n.base + n.target
	}
	if done {
		n.inc, n.received = 0, 0
	}
	return done
}

// fastIncrease reports whether the ACK grew the window by fast increase.
func (n *NSCC) fastIncrease(acked float64, delay time.Duration) bool {
	if delay < n.cfg.FastIncreaseDelay {
		n.fiCount += acked
		if n.fiCount > n.cwnd || n.increasing {
			n.cwnd += acked * n.fastScale
			n.increasing = true
			n.nstats.FastIncreases++
			return true
		}
	} else {
		n.fiCount = 0
	}
	n.increasing = false
	return false
}

func (n *NSCC) multiplicativeDecrease(now time.Duration) {
	n.increasing, n.fiCount = false, 0
	avg := n.avgDelay
	if avg <= n.target || now-n.lastDec <= n.base {
		return
	}
	f := max(1-n.cfg.Gamma*float64(avg-n.target)/float64(avg), nsccMinMDScale)
	n.cwnd = max(n.cwnd*f, n.minWnd)
	n.lastDec = now
	n.stats.Cuts++
	n.nstats.Decreases++
}

// adjust folds the accumulated increase into the window and adds η once
// per base RTT.
func (n *NSCC) adjust(now time.Duration) {
	n.cwnd += n.inc / n.cwnd
	if now-n.lastAdjust >= n.cfg.BaseRTT {
		n.cwnd += n.eta
		n.lastAdjust = now
	}
	n.inc, n.received = 0, 0
	n.nstats.Adjustments++
}

func (n *NSCC) clamp() {
	n.cwnd = min(max(n.cwnd, n.minWnd), n.maxWnd)
}
