package lab

import (
	"fmt"
	"sort"
	"strings"

	"github.com/forgive-emu/forgive/budget"
	"github.com/forgive-emu/forgive/congestion"
	"github.com/forgive-emu/forgive/lab/topo"
	"github.com/forgive-emu/forgive/reliability"
)

// Policy is a named preset: how every daemon is configured and whether the
// workload sheds gradient messages at the sender.
type Policy struct {
	Name        string
	Description string
	// HostPolicy is how the policy configures every forgived; its PLow and
	// PHigh are also the shedding probabilities when Shed is set.
	topo.HostPolicy
	// Shed, when set, sheds gradient messages at the sender with PLow on
	// critical steps and PHigh on the others (DBLP's baseline).
	Shed bool
	// Jobs is set on a topology of two jobs: each job's policy, in the
	// topology's job order, nil for a job whose hosts stay idle. The
	// policy's name is the jobs' names joined by "+" ("forgive+dcqcn",
	// "forgive+idle"); HostPolicy and Shed are the first running job's.
	Jobs []*Policy
}

// Idle is the name of a job that runs nothing in a policy pair.
const Idle = "idle"

// Alone reports whether the policy runs one job of two, the other's
// hosts idle: a job's reference alone on the fabric.
func (p Policy) Alone() bool {
	return len(p.Jobs) == 2 && (p.Jobs[0] == nil) != (p.Jobs[1] == nil)
}

// ReplicasIdentical reports whether the policy keeps every rank's
// gradient alike: no finished value is forgiven at one rank only.
func (p Policy) ReplicasIdentical() bool {
	return !p.Shed && (!p.Forgive || p.P == 0 || p.Gather == budget.GatherRepair || p.Gather == budget.GatherOwner)
}

// The catalogue's kinds, in their packages' types.
const (
	dcqcn = congestion.KindDCQCN
	noCC  = congestion.KindNone
	nscc  = congestion.KindNSCC
	sr    = reliability.SelectiveRepeat
	gbn   = reliability.GoBackN
)

var policies = []Policy{
	{Name: "dcqcn", Description: "DCQCN with no loss tolerance: the baseline every figure is measured against",
		HostPolicy: topo.HostPolicy{CC: dcqcn, Mode: sr}},
	{Name: "shed-tight", Description: "sender-side shedding, p = 0.005 on every step (the tight baseline)",
		HostPolicy: topo.HostPolicy{CC: dcqcn, Mode: sr, PLow: budget.DefaultPLow, PHigh: budget.DefaultPLow}, Shed: true},
	{Name: "shed-loose", Description: "sender-side shedding, p = 0.1 on every step (the loose baseline)",
		HostPolicy: topo.HostPolicy{CC: dcqcn, Mode: sr, PLow: budget.DefaultPHigh, PHigh: budget.DefaultPHigh}, Shed: true},
	{Name: "shed-schedule", Description: "sender-side shedding with P_low on critical steps and P_high on the rest (DBLP)",
		HostPolicy: topo.HostPolicy{CC: dcqcn, Mode: sr, PLow: budget.DefaultPLow, PHigh: budget.DefaultPHigh}, Shed: true},
	{Name: "forgive", Description: "receiver forgiveness with vesting and exemption, P = 1",
		HostPolicy: topo.HostPolicy{CC: dcqcn, Mode: sr, Forgive: true, PLow: budget.DefaultPLow, PHigh: budget.DefaultPHigh, P: 1}},
	{Name: "forgive-p0.25", Description: "FORGIVE drawing each forgiveness with P = 0.25",
		HostPolicy: topo.HostPolicy{CC: dcqcn, Mode: sr, Forgive: true, PLow: budget.DefaultPLow, PHigh: budget.DefaultPHigh, P: 0.25}},
	{Name: "forgive-p0", Description: "FORGIVE with P = 0: exemption only, nothing forgiven",
		HostPolicy: topo.HostPolicy{CC: dcqcn, Mode: sr, Forgive: true, PLow: budget.DefaultPLow, PHigh: budget.DefaultPHigh, P: 0}},
	{Name: "forgive-novest", Description: "FORGIVE with the whole budget available at step start",
		HostPolicy: topo.HostPolicy{CC: dcqcn, Mode: sr, Forgive: true, PLow: budget.DefaultPLow, PHigh: budget.DefaultPHigh, P: 1, NoVesting: true}},
	{Name: "forgive-noexempt", Description: "FORGIVE's forgiveness without the congestion-control exemption",
		HostPolicy: topo.HostPolicy{CC: dcqcn, Mode: sr, Forgive: true, PLow: budget.DefaultPLow, PHigh: budget.DefaultPHigh, P: 1, NoExemption: true}},
	{Name: "forgive-linerate", Description: "forgive whose exempt sender restarts DCQCN at line rate when the exemption begins (the counterfactual to keeping the cut rate)",
		HostPolicy: topo.HostPolicy{CC: dcqcn, Mode: sr, Forgive: true, PLow: budget.DefaultPLow, PHigh: budget.DefaultPHigh, P: 1, Exemption: congestion.ExemptionLineRate}},
	{Name: "forgive-phase", Description: "FORGIVE that never forgives a finished value: all-gather trims are repaired, the exemption kept (gather: repair)",
		HostPolicy: topo.HostPolicy{CC: dcqcn, Mode: sr, Forgive: true, PLow: budget.DefaultPLow, PHigh: budget.DefaultPHigh, P: 1, Gather: budget.GatherRepair}},
	{Name: "forgive-owner", Description: "FORGIVE that forgives a finished value only in its owner's message, and the owner zeroes it too (gather: owner)",
		HostPolicy: topo.HostPolicy{CC: dcqcn, Mode: sr, Forgive: true, PLow: budget.DefaultPLow, PHigh: budget.DefaultPHigh, P: 1, Gather: budget.GatherOwner}},
	{Name: "trim-nocc", Description: "trimming on, congestion control off, no loss tolerance",
		HostPolicy: topo.HostPolicy{CC: noCC, Mode: sr}},
	{Name: "gbn", Description: "go-back-N transport under DCQCN (the seed's amplification control)",
		HostPolicy: topo.HostPolicy{CC: dcqcn, Mode: gbn}},
	{Name: "nscc", Description: "Ultra Ethernet's NSCC (a window) with no loss tolerance: the NSCC baseline",
		HostPolicy: topo.HostPolicy{CC: nscc, Mode: sr}},
	{Name: "shed-tight-nscc", Description: "shed-tight under NSCC: the tight baseline",
		HostPolicy: topo.HostPolicy{CC: nscc, Mode: sr, PLow: budget.DefaultPLow, PHigh: budget.DefaultPLow}, Shed: true},
	{Name: "forgive-nscc", Description: "forgive under NSCC: exempt, the window stands at its ceiling",
		HostPolicy: topo.HostPolicy{CC: nscc, Mode: sr, Forgive: true, PLow: budget.DefaultPLow, PHigh: budget.DefaultPHigh, P: 1}},
	{Name: "forgive-nocut-nscc", Description: "forgive under NSCC whose exemption only stops the window from being cut (the counterfactual to the ceiling)",
		HostPolicy: topo.HostPolicy{CC: nscc, Mode: sr, Forgive: true, PLow: budget.DefaultPLow, PHigh: budget.DefaultPHigh, P: 1, Exemption: congestion.ExemptionNoCut}},
	{Name: "forgive-p0-nscc", Description: "forgive-p0 under NSCC: exemption only, nothing forgiven",
		HostPolicy: topo.HostPolicy{CC: nscc, Mode: sr, Forgive: true, PLow: budget.DefaultPLow, PHigh: budget.DefaultPHigh, P: 0}},
	{Name: "forgive-noexempt-nscc", Description: "forgive-noexempt under NSCC: forgiveness without the exemption",
		HostPolicy: topo.HostPolicy{CC: nscc, Mode: sr, Forgive: true, PLow: budget.DefaultPLow, PHigh: budget.DefaultPHigh, P: 1, NoExemption: true}},
}

// policyNames are the policies' names, in their order.
func policyNames(ps []Policy) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Name
	}
	return out
}

// DefaultPolicies are what `forgivectl lab` runs with no --policies.
var DefaultPolicies = []string{"dcqcn", "shed-tight", "forgive"}

// Policies returns every preset, in the order of the seed's discussion.
func Policies() []Policy { return append([]Policy(nil), policies...) }

// LookupJobPolicies resolves the names of a sweep on a topology of jobs
// jobs (0 or 1: one job). One job takes LookupPolicies' names. Two jobs
// take pairs "A+B", A job a's policy and B job b's, either of them idle
// (not both); a plain name is refused. The pairs given come first, in
// their order, and every job's reference alone (A+idle, idle+B) follows
// unless listed already, so each job is compared with itself alone on
// the same fabric.
func LookupJobPolicies(names []string, jobs int) ([]Policy, error) {
	if jobs <= 1 {
		for _, n := range names {
			if strings.Contains(n, "+") {
				return nil, fmt.Errorf("%w: --policies: %q is a policy pair, for a topology of two jobs (such as two-jobs-2x4-4to1); this topology has one job", ErrInput, n)
			}
		}
		return LookupPolicies(names)
	}
	var out []Policy
	seen := map[string]bool{}
	var refs []string
	for _, n := range names {
		pol, err := lookupPair(n)
		if err != nil {
			return nil, err
		}
		if seen[n] {
			return nil, fmt.Errorf("%w: --policies: policy %q listed twice", ErrInput, n)
		}
		seen[n] = true
		out = append(out, pol)
		a, b, _ := strings.Cut(n, "+")
		if a != Idle && b != Idle {
			refs = append(refs, a+"+"+Idle, Idle+"+"+b)
		}
	}
	for _, n := range refs {
		if seen[n] {
			continue
		}
		seen[n] = true
		pol, _ := lookupPair(n)
		out = append(out, pol)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: --policies: no policies", ErrInput)
	}
	return out, nil
}

// lookupPair resolves "A+B".
func lookupPair(name string) (Policy, error) {
	a, b, ok := strings.Cut(name, "+")
	if !ok {
		return Policy{}, fmt.Errorf("%w: --policies: %q: the topology places two jobs: name a policy per job, A+B (such as forgive+dcqcn, or forgive+idle for job a alone)", ErrInput, name)
	}
	pair := Policy{Name: name}
	for _, part := range []string{a, b} {
		if part == Idle {
			pair.Jobs = append(pair.Jobs, nil)
			continue
		}
		ps, err := LookupPolicies([]string{part})
		if err != nil || part == "all" {
			return Policy{}, fmt.Errorf("%w: --policies: %q: job policy %q is no policy (a preset, or idle)", ErrInput, name, part)
		}
		pair.Jobs = append(pair.Jobs, &ps[0])
	}
	if pair.Jobs[0] == nil && pair.Jobs[1] == nil {
		return Policy{}, fmt.Errorf("%w: --policies: %q: both jobs idle", ErrInput, name)
	}
	first := pair.Jobs[0]
	if first == nil {
		first = pair.Jobs[1]
	}
	pair.HostPolicy, pair.Shed = first.HostPolicy, first.Shed
	pair.Description = "job a: " + jobDescription(pair.Jobs[0]) + "; job b: " + jobDescription(pair.Jobs[1])
	return pair, nil
}

func jobDescription(p *Policy) string {
	if p == nil {
		return "idle"
	}
	return p.Name
}

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
