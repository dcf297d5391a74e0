package congestion

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/forgive-emu/forgive/internal/units"
)

// Sentinel errors, returned wrapped with the details.
var (
	ErrConfig      = errors.New("congestion: invalid config")
	ErrUnknownKind = errors.New("congestion: unknown controller kind")
)

// Controller is a reaction point: the sender half of a rate-based
// congestion control. Every method takes the driver's clock; none reads one.
// A controller never wants to be woken for a deadline it has not reported
// through NextDeadline.
type Controller interface {
	// OnCNP applies one congestion notification packet received at now.
	OnCNP(now time.Duration)
	// OnSent reports bytes put on the wire at now (DCQCN's byte counter).
	OnSent(now time.Duration, bytes int)
	// Advance applies every timer that expired at or before now, in order.
	Advance(now time.Duration)
	// Rate is the current sending rate in bits per second.
	Rate() float64
	// NextDeadline is when Advance next has work, if ever.
	NextDeadline() (time.Duration, bool)
	// Stats returns the controller's counters.
	Stats() Stats
}

// Stats counts what a controller did. Counters only grow.
type Stats struct {
	CNPs             uint64 // CNPs handed to OnCNP
	Cuts             uint64 // rate cuts applied (none for LineRate)
	CNPsCoalesced    uint64 // CNPs within DCQCN's RateReducePeriod of the last cut: no cut (Mellanox variant: CNPs that found a cut already pending)
	MinRateClamps    uint64 // cuts that hit the minimum rate
	FastRecovery     uint64 // increase events in fast recovery
	AdditiveIncrease uint64 // increase events in additive increase
	HyperIncrease    uint64 // increase events in hyper increase
	TimerStages      uint64 // increase events raised by the rate-increase timer
	ByteStages       uint64 // increase events raised by the byte counter
}

// Increases is the total number of rate-increase events.
func (s Stats) Increases() uint64 {
	return s.FastRecovery + s.AdditiveIncrease + s.HyperIncrease
}

// Kind selects a controller by name in configuration files and flags.
type Kind uint8

const (
	// KindDCQCN is DCQCN's reaction point, see [DCQCN].
	KindDCQCN Kind = iota
	// KindNone sends at line rate and ignores congestion notifications:
	// the "congestion control off" fabric of the seed's first paragraph.
	KindNone
	// KindNSCC is Ultra Ethernet's window-based NSCC, see [NSCC].
	KindNSCC
)

var kindNames = [...]string{KindDCQCN: "dcqcn", KindNone: "none", KindNSCC: "nscc"}

// String returns the name ParseKind accepts.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// ParseKind reads "dcqcn", "none" or "nscc", ignoring case and
// surrounding space.
func ParseKind(s string) (Kind, error) {
	name := strings.ToLower(strings.TrimSpace(s))
	for k, n := range kindNames {
		if n == name {
			return Kind(k), nil
		}
	}
	return 0, fmt.Errorf("%w: %q (want %q, %q or %q)", ErrUnknownKind, s, kindNames[KindDCQCN], kindNames[KindNone], kindNames[KindNSCC])
}

// MarshalText lets a Kind appear by name in YAML and flag values.
func (k Kind) MarshalText() ([]byte, error) {
	if int(k) >= len(kindNames) {
		return nil, fmt.Errorf("%w: %d", ErrUnknownKind, uint8(k))
	}
	return []byte(kindNames[k]), nil
}

// UnmarshalText is ParseKind for decoders.
func (k *Kind) UnmarshalText(text []byte) error {
	parsed, err := ParseKind(string(text))
	if err != nil {
		return err
	}
	*k = parsed
	return nil
}

// New returns the controller of the given kind for one flow. KindNone uses
// only cfg.LineRate; KindDCQCN validates the whole config; KindNSCC takes
// DefaultNSCC at cfg.LineRate on the reference network's RTT (a NIC that
// knows its network's RTT calls NewNSCC).
func New(kind Kind, cfg DCQCNConfig) (Controller, error) {
	switch kind {
	case KindDCQCN:
		return NewDCQCN(cfg)
	case KindNone:
		return NewLineRate(cfg.LineRate)
	case KindNSCC:
		return NewNSCC(DefaultNSCC(cfg.LineRate, DefaultNSCCBaseRTT, DefaultNSCCMTU))
	default:
		return nil, fmt.Errorf("%w: %d", ErrUnknownKind, uint8(kind))
	}
}

// LineRate is the "no congestion control" baseline: it always sends at line
// rate. It ignores congestion notifications but counts them, so a run with
// congestion control off still reports how many marks the fabric made.
type LineRate struct {
	rate  float64
	stats Stats
}

// NewLineRate returns a LineRate controller; rate must be positive.
func NewLineRate(rate units.Rate) (*LineRate, error) {
	if rate <= 0 {
		return nil, fmt.Errorf("%w: LineRate %v must be a positive number of bits/s", ErrConfig, rate)
	}
	return &LineRate{rate: float64(rate)}, nil
}

// OnCNP counts the notification and does nothing else.
func (l *LineRate) OnCNP(time.Duration) { l.stats.CNPs++ }

// OnSent does nothing: there is no byte counter.
func (l *LineRate) OnSent(time.Duration, int) {}

// Advance does nothing: there are no timers.
func (l *LineRate) Advance(time.Duration) {}

// Rate is the line rate.
func (l *LineRate) Rate() float64 { return l.rate }

// NextDeadline reports no deadline.
func (l *LineRate) NextDeadline() (time.Duration, bool) { return 0, false }

// Stats returns the counters; only CNPs moves.
func (l *LineRate) Stats() Stats { return l.stats }

func positiveFinite(x float64) bool {
	return x > 0 && !math.IsInf(x, 1)
}
