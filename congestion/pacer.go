package congestion

import (
	"fmt"
	"math"
	"time"
)

// DefaultPacerBurst is four 4,096-byte packets: enough to absorb a driver
// that wakes a few packet times late without giving up rate.
const DefaultPacerBurst = 4 * 4096

// MaxPacerGap bounds the gap one packet opens, whatever the rate. A rate
// that is not a positive number counts as the slowest rate, so one bad
// rate holds the flow for at most this long.
const MaxPacerGap = time.Second

// MaxPacerBurst bounds PacerConfig.Burst.
const MaxPacerBurst = 1 << 30

// PacerConfig configures a Pacer.
type PacerConfig struct {
	// Burst is how many bytes, at the current rate, the departure schedule
	// may fall behind the clock: after an idle period, or after a late
	// wake-up, up to Burst bytes may leave back-to-back on top of the
	// packet the schedule releases anyway. 0 paces strictly.
	Burst int
}

// DefaultPacerConfig is a pacer with the default burst allowance.
func DefaultPacerConfig() PacerConfig { return PacerConfig{Burst: DefaultPacerBurst} }

// Validate reports a burst out of range.
func (c PacerConfig) Validate() error {
	if c.Burst < 0 || c.Burst > MaxPacerBurst {
		return fmt.Errorf("%w: PacerConfig.Burst = %d, want in [0, %d]", ErrConfig, c.Burst, MaxPacerBurst)
	}
	return nil
}

// Pacer turns a rate into departure times, in the style of Linux fq's
// time_next_packet: each packet pushes the next departure back by its
// transmission time at the current rate. Departure times are integer
// nanoseconds, and the fraction of a nanosecond each gap leaves over is
// carried to the next one, so rounding never accumulates into rate drift.
//
// The zero Pacer paces strictly and is ready from time 0.
type Pacer struct {
	burst int
	next  time.Duration // earliest departure of the next packet
	frac  float64       // nanoseconds owed to next, in [0, 1)
	// The last rate, and transmitNanos of the burst and of the last
	// packet size at it: a flow's packets are mostly one size at one
	// rate, and the memo saves two divisions a packet. transmitNanos is
	// a function of its arguments alone, so the memo gives its values.
	memo         bool
	memoRate     float64
	memoBurst    float64
	memoBytes    int
	memoTransmit float64
}

// NewPacer returns a pacer ready at once. A burst out of range is clamped;
// call cfg.Validate when loading a configuration to reject it.
func NewPacer(cfg PacerConfig) Pacer {
	return Pacer{burst: min(max(cfg.Burst, 0), MaxPacerBurst)}
}

// Ready reports whether a packet may leave at now.
func (p *Pacer) Ready(now time.Duration) bool { return now >= p.next }

// NextSend is the earliest time the next packet may leave.
func (p *Pacer) NextSend() time.Duration { return p.next }

// OnSend records a packet of the given bytes leaving at now while the flow
// runs at rate bits/s.
func (p *Pacer) OnSend(now time.Duration, bytes int, rate float64) {
	if !p.memo || rate != p.memoRate { // a NaN rate never equals itself: no memo
		p.memo, p.memoRate, p.memoBurst = true, rate, transmitNanos(p.burst, rate)
		p.memoBytes, p.memoTransmit = bytes, transmitNanos(bytes, rate)
	} else if bytes != p.memoBytes {
		p.memoBytes, p.memoTransmit = bytes, transmitNanos(bytes, rate)
	}
	base, frac := p.next, p.frac
	// A schedule that fell further behind than the burst allowance (the
	// flow was idle, or the driver woke very late) restarts at the edge of
	// the allowance: the time it lost is not owed to it.
	if earliest := now - time.Duration(p.memoBurst); earliest > base {
		base, frac = earliest, 0
	}
	gap := p.memoTransmit + frac
	whole := math.Floor(gap)
	p.next = base + time.Duration(whole)
	p.frac = gap - whole
}

// transmitNanos is the time, in nanoseconds, bytes take at rate bits/s.
func transmitNanos(bytes int, rate float64) float64 {
	const maxGap = float64(MaxPacerGap)
	if bytes <= 0 {
		return 0
	}
	if !(rate > 0) {
		return maxGap
	}
	return min(float64(bytes)*8e9/rate, maxGap)
}
