package lab

import (
	"fmt"
	"sort"
	"strings"

	"github.com/forgive-emu/forgive/budget"
	"github.com/forgive-emu/forgive/lab/topo"
)

// Policy is a named preset: how every daemon is configured and whether the
// workload sheds gradient messages at the sender.
type Policy struct {
	Name        string
	Description string
	CC          string // dcqcn or none
	Mode        string // selective-repeat or go-back-n
	Forgive     bool
	PLow, PHigh float64
	P           float64
	NoVesting   bool
	NoExemption bool
	// Gather is the daemons' gather policy: "" (forgive), repair or owner.
	// Under owner the workload sends the owner notices.
	Gather string
	// Shed, when set, sheds gradient messages at the sender with PLow on
	// critical steps and PHigh on the others (DBLP's baseline).
	Shed bool
}

// HostPolicy is how the policy configures every forgived.
func (p Policy) HostPolicy() topo.HostPolicy {
	return topo.HostPolicy{CC: p.CC, Mode: p.Mode, Forgive: p.Forgive, PLow: p.PLow, PHigh: p.PHigh,
		P: p.P, NoVesting: p.NoVesting, NoExemption: p.NoExemption, Gather: p.Gather}
}

// ReplicasIdentical reports whether the policy keeps every rank's
// gradient alike: no finished value is forgiven at one rank only.
func (p Policy) ReplicasIdentical() bool {
	return !p.Shed && (!p.Forgive || p.P == 0 || p.Gather == "repair" || p.Gather == "owner")
}

// The seed's schedule: package budget's defaults.
const (
	seedPLow  = budget.DefaultPLow
	seedPHigh = budget.DefaultPHigh
)

var policies = []Policy{
	{Name: "dcqcn", Description: "DCQCN with no loss tolerance: the baseline every figure is measured against",
		CC: "dcqcn", Mode: "selective-repeat"},
	{Name: "shed-tight", Description: "sender-side shedding, p = 0.005 on every step (the tight baseline)",
		CC: "dcqcn", Mode: "selective-repeat", Shed: true, PLow: seedPLow, PHigh: seedPLow},
	{Name: "shed-loose", Description: "sender-side shedding, p = 0.1 on every step (the loose baseline)",
		CC: "dcqcn", Mode: "selective-repeat", Shed: true, PLow: seedPHigh, PHigh: seedPHigh},
	{Name: "shed-schedule", Description: "sender-side shedding with P_low on critical steps and P_high on the rest (DBLP)",
		CC: "dcqcn", Mode: "selective-repeat", Shed: true, PLow: seedPLow, PHigh: seedPHigh},
	{Name: "forgive", Description: "receiver forgiveness with vesting and exemption, P = 1",
		CC: "dcqcn", Mode: "selective-repeat", Forgive: true, PLow: seedPLow, PHigh: seedPHigh, P: 1},
	{Name: "forgive-p0.25", Description: "FORGIVE drawing each forgiveness with P = 0.25",
		CC: "dcqcn", Mode: "selective-repeat", Forgive: true, PLow: seedPLow, PHigh: seedPHigh, P: 0.25},
	{Name: "forgive-p0", Description: "FORGIVE with P = 0: exemption only, nothing forgiven",
		CC: "dcqcn", Mode: "selective-repeat", Forgive: true, PLow: seedPLow, PHigh: seedPHigh, P: 0},
	{Name: "forgive-novest", Description: "FORGIVE with the whole budget available at step start",
		CC: "dcqcn", Mode: "selective-repeat", Forgive: true, PLow: seedPLow, PHigh: seedPHigh, P: 1, NoVesting: true},
	{Name: "forgive-noexempt", Description: "FORGIVE's forgiveness without the congestion-control exemption",
		CC: "dcqcn", Mode: "selective-repeat", Forgive: true, PLow: seedPLow, PHigh: seedPHigh, P: 1, NoExemption: true},
	{Name: "forgive-phase", Description: "FORGIVE that never forgives a finished value: all-gather trims are repaired, the exemption kept (gather: repair)",
		CC: "dcqcn", Mode: "selective-repeat", Forgive: true, PLow: seedPLow, PHigh: seedPHigh, P: 1, Gather: "repair"},
	{Name: "forgive-owner", Description: "FORGIVE that forgives a finished value only in its owner's message, and the owner zeroes it too (gather: owner)",
		CC: "dcqcn", Mode: "selective-repeat", Forgive: true, PLow: seedPLow, PHigh: seedPHigh, P: 1, Gather: "owner"},
	{Name: "trim-nocc", Description: "trimming on, congestion control off, no loss tolerance",
		CC: "none", Mode: "selective-repeat"},
	{Name: "gbn", Description: "go-back-N transport under DCQCN (the seed's amplification control)",
		CC: "dcqcn", Mode: "go-back-n"},
}

// DefaultPolicies are what `forgivectl lab` runs with no --policies.
var DefaultPolicies = []string{"dcqcn", "shed-tight", "forgive"}

// Policies returns every preset, in the order of the seed's discussion.
func Policies() []Policy { return append([]Policy(nil), policies...) }

// LookupPolicies resolves names; "all" names every preset.
func LookupPolicies(names []string) ([]Policy, error) {
	if len(names) == 1 && names[0] == "all" {
		return Policies(), nil
	}
	byName := map[string]Policy{}
	for _, p := range policies {
		byName[p.Name] = p
	}
	var out []Policy
	seen := map[string]bool{}
	for _, n := range names {
		p, ok := byName[n]
		if !ok {
			known := make([]string, 0, len(byName))
			for k := range byName {
				known = append(known, k)
			}
			sort.Strings(known)
			return nil, fmt.Errorf("%w: unknown policy %q (known: %s, or all)", ErrInput, n, strings.Join(known, ", "))
		}
		if seen[n] {
			return nil, fmt.Errorf("%w: policy %q listed twice", ErrInput, n)
		}
		seen[n] = true
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no policies", ErrInput)
	}
	return out, nil
}
