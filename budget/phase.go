package budget

import "fmt"

// Phase is what a received gradient message holds, as the application
// declares it with the receive: a partial sum still being reduced, or a
// finished value being gathered. In a ring all-reduce the reduce-scatter's
// receives are PhaseReduce and the all-gather's are PhaseGather, except
// its first round's, PhaseGatherOwner: there the sender is the value's
// owner, the rank that finished reducing it.
//
// The phase matters because a forgiven byte means different things in
// the two halves: in the reduce-scatter it is one rank's missing share of
// a partial sum, and every rank ends with the same (smaller) sum; in the
// all-gather it zeroes a finished average at the forgiving rank and at
// every rank after it on the ring, while the ranks before it keep the
// value, so the replicas drift apart (docs/tolerance.md).
type Phase uint8

// Phases. PhaseUnspecified is a receive posted without one; every policy
// treats it as PhaseReduce, which is the seed's behaviour.
const (
	PhaseUnspecified Phase = iota
	PhaseReduce
	PhaseGather
	PhaseGatherOwner
	NumPhases
)

var phaseNames = [...]string{"", "reduce", "gather", "gather-owner"}

func (p Phase) String() string {
	if int(p) < len(phaseNames) {
		return phaseNames[p]
	}
	return fmt.Sprintf("Phase(%d)", uint8(p))
}

// ParsePhase reads a phase by its host-API name; "" is PhaseUnspecified.
func ParsePhase(s string) (Phase, error) {
	for i, n := range phaseNames {
		if s == n {
			return Phase(i), nil
		}
	}
	return 0, fmt.Errorf("%w: phase %q, want reduce, gather or gather-owner", ErrConfig, s)
}

// Gathered reports whether the phase's bytes are a finished value.
func (p Phase) Gathered() bool { return p == PhaseGather || p == PhaseGatherOwner }

// GatherPolicy is what the receiver does with a trimmed range of a
// finished value (a PhaseGather or PhaseGatherOwner receive).
type GatherPolicy uint8

// Gather policies.
const (
	// GatherForgive forgives gathered ranges like any other gradient
	// bytes: the seed's behaviour, and the default.
	GatherForgive GatherPolicy = iota
	// GatherRepair never forgives a finished value: a trimmed range of a
	// gathered message is requested again, as a tensor-parallel range
	// would be, without counting in the step's outstanding bytes, so the
	// flow keeps its sender exemption. Only the reduce phase forgives,
	// and every replica ends the all-reduce with the same values.
	GatherRepair
	// GatherOwner forgives a finished value only where its owner can be
	// told: in a PhaseGatherOwner receive, whose sender reduced the value.
	// The application then tells the owner which ranges were forgiven,
	// and the owner zeroes them in its own copy before its update; every
	// later rank receives the zeros forwarded, so every replica holds the
	// same values (docs/hostapi.md, "Gather policies"). PhaseGather
	// ranges are repaired as under GatherRepair.
	GatherOwner
	NumGatherPolicies
)

var gatherNames = [...]string{"forgive", "repair", "owner"}

func (g GatherPolicy) String() string {
	if int(g) < len(gatherNames) {
		return gatherNames[g]
	}
	return fmt.Sprintf("GatherPolicy(%d)", uint8(g))
}

// ParseGatherPolicy reads a policy by its configuration name; "" is
// GatherForgive.
func ParseGatherPolicy(s string) (GatherPolicy, error) {
	if s == "" {
		return GatherForgive, nil
	}
	for i, n := range gatherNames {
		if s == n {
			return GatherPolicy(i), nil
		}
	}
	return 0, fmt.Errorf("%w: gather %q, want forgive, repair or owner", ErrConfig, s)
}

// MarshalText lets a GatherPolicy appear by name in JSON, YAML and flag
// values.
func (g GatherPolicy) MarshalText() ([]byte, error) {
	if g >= NumGatherPolicies {
		return nil, fmt.Errorf("%w: gather policy %d", ErrConfig, uint8(g))
	}
	return []byte(gatherNames[g]), nil
}

// UnmarshalText is ParseGatherPolicy for decoders.
func (g *GatherPolicy) UnmarshalText(text []byte) error {
	parsed, err := ParseGatherPolicy(string(text))
	if err != nil {
		return err
	}
	*g = parsed
	return nil
}

// Forgivable reports whether the policy lets a trimmed range of a
// message of phase p be forgiven at all (the budget then decides).
func (g GatherPolicy) Forgivable(p Phase) bool {
	switch g {
	case GatherRepair:
		return !p.Gathered()
	case GatherOwner:
		return p != PhaseGather
	}
	return true
}
