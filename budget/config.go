package budget

import (
	"errors"
	"fmt"
)

// Defaults from the seed: "P_low: float. The loss probability for the
// eligible gradient bytes a rank expects on a critical step. 0.005 here.",
// "P_high: ... 0.1 here.", "P: ... 1 by default." and "one packet is 4,096
// bytes, the largest range the next trim can report".
const (
	DefaultPLow        = 0.005
	DefaultPHigh       = 0.1
	DefaultP           = 1.0
	DefaultPacketBytes = 4096
)

// Limits that keep the ledger's memory and arithmetic bounded.
const (
	// HistorySteps is how many closed steps keep their record. A step's
	// record is readable until HistorySteps later steps have closed.
	HistorySteps = 64
	// MaxOpenSteps bounds the steps open at once. Training overlaps at most
	// a few steps; more means a caller forgot OnAllReduceComplete.
	MaxOpenSteps = 64
	// MaxStepBytes bounds a step's expected bytes and the distinct bytes
	// (received + forgiven + outstanding) it may count, so that no sum of
	// counters overflows an int64 and every exact product fits 128 bits.
	MaxStepBytes = 1 << 60
	// MaxPacketBytes bounds Config.PacketBytes.
	MaxPacketBytes = 1 << 30
)

// Sentinel errors, returned wrapped with the details.
var (
	ErrConfig      = errors.New("budget: invalid config")
	ErrStepOpen    = errors.New("budget: step already open")
	ErrStepClosed  = errors.New("budget: step closed")
	ErrStepTooOld  = errors.New("budget: step older than the kept history")
	ErrTooManyOpen = errors.New("budget: too many open steps")
	ErrUnknownStep = errors.New("budget: unknown step")
	ErrBadCount    = errors.New("budget: invalid or inconsistent byte count")
	ErrInvariant   = errors.New("budget: loss-budget invariant violated")
)

// Config holds the protocol's three parameters, the packet size the
// budget-exhausted flag reserves, and the ablations of the seed's results.
type Config struct {
	PLow  float64 // loss probability on a critical step
	PHigh float64 // loss probability on every other step
	// P is the probability of forgiving a range that passed the vesting
	// rule. P = 0 is the "exemption only" ablation: the receiver never
	// forgives, and eligible steps keep their exemption.
	P float64
	// PacketBytes is "one packet" of the budget-exhausted flag.
	PacketBytes int64
	// NoVesting is the ablation "with the loss budget available in full at
	// step start": a range may be forgiven while forgiven+len <= budget.
	NoVesting bool
	// NoExemption is the ablation "forgiveness without exemption": no step
	// is exemption-eligible, so senders always obey congestion control.
	NoExemption bool
	// Gather is what the receiver does with a trimmed range of a finished
	// value (phase.go). The zero value, GatherForgive, is the seed's.
	Gather GatherPolicy
}

// DefaultConfig returns the seed's parameters: P_low 0.005, P_high 0.1,
// P 1, 4,096-byte packets, vesting and exemption on.
func DefaultConfig() Config {
	return Config{PLow: DefaultPLow, PHigh: DefaultPHigh, P: DefaultP, PacketBytes: DefaultPacketBytes}
}

// Validate names the first field that is out of range.
func (c Config) Validate() error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"PLow", c.PLow}, {"PHigh", c.PHigh}, {"P", c.P}} {
		if err := checkProbability(f.name, f.v); err != nil {
			return err
		}
	}
	if c.Gather >= NumGatherPolicies {
		return fmt.Errorf("%w: Gather = %d, want forgive, repair or owner", ErrConfig, c.Gather)
	}
	if c.PacketBytes <= 0 || c.PacketBytes > MaxPacketBytes {
		return fmt.Errorf("%w: PacketBytes = %d, want 1..%d", ErrConfig, c.PacketBytes, MaxPacketBytes)
	}
	return nil
}

func checkProbability(name string, v float64) error {
	// "with 0 <= P <= 1"; the same range holds for a loss probability.
	// The negated form also rejects NaN.
	if !(v >= 0 && v <= 1) {
		return fmt.Errorf("%w: %s = %v, want 0 <= %s <= 1", ErrConfig, name, v, name)
	}
	return nil
}
