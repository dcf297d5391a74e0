package lab

import (
	"context"
	"fmt"
	"slices"

	"github.com/forgive-emu/forgive/budget"
	"github.com/forgive-emu/forgive/lab/launch"
	"github.com/forgive-emu/forgive/lab/netns"
	"github.com/forgive-emu/forgive/lab/results"
	"github.com/forgive-emu/forgive/lab/topo"
)

// Preview is what a run would do, as Check derived it: the inputs with
// their defaults filled in, the derived emulation profile and the dry
// placement of the topology.
type Preview struct {
	Options  Options
	Topology *topo.Topology
	Profile  *topo.Profile
	Policies []Policy
	// Plan is the placement of the first run (its addresses are an
	// example: every run gets a network of its own).
	Plan *topo.Plan
	// Critical lists the steps the fixed schedule classifies critical;
	// with a norms trace, the steps Accordion's detector classifies
	// critical over it (the daemons run the same detector).
	Critical []int
	// Norms is the trace's per-step norms, when classifying by a trace.
	Norms [][]float64
	// Notes are conditions that do not stop a dry run but would matter
	// for a real one (root for namespaces, the placement's warnings).
	Notes []string
	// SweepID is the id results.json will carry; Runs the runs this
	// shard (or the whole sweep) holds, as "policy seed N", of SweepRuns.
	SweepID   string
	Runs      []string
	SweepRuns int
	// Registered is the memory the job registers over all ranks, and
	// PayloadFree whether the runs go without it (Options.PayloadFree).
	Registered  int64
	PayloadFree bool
	// Collective is the gradient all-reduce's schedule and its shape;
	// ProfileCollective says it is the profile's default
	// (topo.ProfileWorkload), the user having named none.
	Collective        *results.CollectiveShape
	ProfileCollective bool
	// SeedSizes says how a seed profile's sizes were derived; nil on the
	// other profiles and for a run that carries a sweep's sizes.
	SeedSizes *SeedSizes
}

// Check validates opts as Run does before it starts anything, and
// describes the run, without looking for binaries, touching namespaces or
// starting a process: `forgivectl lab --dry-run`.
func Check(opts Options) (*Preview, error) {
	p, err := check(opts)
	if err != nil {
		return nil, err
	}
	if p.opts.BinDir != "" {
		// Given a directory, a run only looks in it (nothing is built).
		if _, err := launch.Binaries(context.Background(), p.opts.BinDir, "forgived", "trimswitch"); err != nil {
			return nil, fmt.Errorf("%w: --bin-dir: %w", ErrInput, err)
		}
	}
	so, err := p.sweepOptions()
	if err != nil {
		return nil, err
	}
	pv := &Preview{Options: p.opts, Topology: p.topology, Profile: p.profile, Policies: p.policies,
		Plan: p.dry, Norms: p.norms, Notes: slices.Clone(p.dry.Warnings),
		Registered: p.registered, PayloadFree: p.payloadFree, SeedSizes: p.seedSizes, ProfileCollective: p.profileCollective,
		SweepID: results.SweepID(so), SweepRuns: len(p.policies) * p.opts.Seeds}
	if pv.Collective, err = p.collectiveShape(); err != nil {
		return nil, err
	}
	for _, sr := range p.sweepRuns(p.opts.Shard) {
		pv.Runs = append(pv.Runs, fmt.Sprintf("%s seed %d", sr.policy.Name, sr.seed))
	}
	if p.norms != nil {
		det, err := budget.NewDetector(budget.DefaultEta)
		if err != nil {
			return nil, err
		}
		for s, norms := range p.norms {
			c, err := det.Classify(norms, false)
			if err != nil {
				return nil, fmt.Errorf("%w: --norms step %d: %w", ErrInput, s+1, err)
			}
			if c {
				pv.Critical = append(pv.Critical, s+1)
			}
		}
	} else {
		for s := 1; s <= p.opts.Steps; s++ {
			if p.schedule.Critical(budget.StepID(s)) {
				pv.Critical = append(pv.Critical, s)
			}
		}
	}
	if p.network == topo.Namespaces {
		if err := netns.NeedRoot(); err != nil {
			pv.Notes = append(pv.Notes, fmt.Sprintf("--placement netns: %v (a run would stop here)", err))
		}
	}
	return pv, nil
}
