package lab

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/forgive-emu/forgive/lab/results"
	"github.com/forgive-emu/forgive/lab/topo"
	"github.com/forgive-emu/forgive/profiles"
	"github.com/forgive-emu/forgive/topologies"
	"github.com/forgive-emu/forgive/workload"
)

// Shard is shard Index of Count of a sweep, 1-based: the runs k (0-based,
// in the sweep's order: each seed, each policy) with k mod Count ==
// Index-1. The zero Shard is the whole sweep.
type Shard struct {
	Index, Count int
}

// Whole reports whether s is the whole sweep.
func (s Shard) Whole() bool { return s == Shard{} }

func (s Shard) String() string { return fmt.Sprintf("%d/%d", s.Index, s.Count) }

// ParseShard reads --shard's "i/n": shard i of n, 1-based (1/3 is the
// first of three).
func ParseShard(s string) (Shard, error) {
	is, ns, ok := strings.Cut(strings.TrimSpace(s), "/")
	i, err1 := strconv.Atoi(is)
	n, err2 := strconv.Atoi(ns)
	if !ok || err1 != nil || err2 != nil {
		return Shard{}, fmt.Errorf("%w: --shard %q: want i/n, shard i of n counted from 1 (1/3 is the first of three)", ErrInput, s)
	}
	sh := Shard{Index: i, Count: n}
	if err := sh.check(); err != nil {
		return Shard{}, err
	}
	return sh, nil
}

func (s Shard) check() error {
	if s.Whole() {
		return nil
	}
	if s.Count < 1 || s.Index < 1 || s.Index > s.Count {
		return fmt.Errorf("%w: --shard %s: want i/n with 1 <= i <= n (1-based: 1/%d is the first of %d)", ErrInput, s, max(s.Count, 1), max(s.Count, 1))
	}
	return nil
}

// DefaultJobs is how many runs --jobs runs at once unless told: one per
// core in the simulator, one on the real placements, whose runs share
// the machine's cores and clock and would perturb each other's timing.
func DefaultJobs(placement string) int {
	if placement == PlacementSim {
		return runtime.NumCPU()
	}
	return 1
}

// checkJobs refuses more than one run at a time on a real placement.
func checkJobs(jobs int, placement string) error {
	switch {
	case jobs < 0:
		return fmt.Errorf("%w: --jobs %d: want >= 1", ErrInput, jobs)
	case jobs > 1 && placement != PlacementSim:
		return fmt.Errorf("%w: --jobs %d: the %s placement runs one run at a time (its runs would share the cores and the real clock and perturb each other's timing); use --shard across machines", ErrInput, jobs, placement)
	}
	return nil
}

// sweepRun is one run of the sweep: its position k in the sweep's order.
type sweepRun struct {
	k      int
	policy Policy
	seed   uint64
}

// sweepRuns lists the runs of the sweep that shard sh holds, in the
// sweep's order.
func (p *prepared) sweepRuns(sh Shard) []sweepRun {
	var out []sweepRun
	k := 0
	for s := 1; s <= p.opts.Seeds; s++ {
		for _, pol := range p.policies {
			if sh.Whole() || k%sh.Count == sh.Index-1 {
				out = append(out, sweepRun{k: k, policy: pol, seed: uint64(s)})
			}
			k++
		}
	}
	return out
}

// sweepOptions are the prepared options as results.json records them.
func (p *prepared) sweepOptions() (results.SweepOptions, error) {
	o, w := p.opts, p.opts.Workload
	so := results.SweepOptions{
		Topology: o.Topology, Profile: o.Profile, Ranks: p.topology.Ranks(), Steps: o.Steps,
		Policies: policyNames(p.policies), Seeds: o.Seeds, Placement: o.Placement, Scale: o.Scale,
		Capture: o.Capture, GradientBytes: w.GradientBytes, ComputeNS: int64(w.Compute),
		TPBytes: w.TPBytes, PPBytes: w.PPBytes, BurstBytes: w.BurstBytes,
		BurstSteps: append([]int{}, w.BurstSteps...), Critical: append([]int{}, w.Critical...),
		Norms: w.NormsFile, Entropy: w.Entropy, Subflows: w.Subflows,
		ModelParallel: string(w.ModelParallel),
		// The collective's options are left out when unset, so the sweeps
		// run before them keep their ids.
		Collective: w.Collective, Dims: slices.Clone(w.Dims), TP: w.TP, TPCollective: w.TPCollective, Splits: w.Splits, Window: w.Window,
		FlowPerMessage: w.Flows == FlowsMessage, RankPlacement: o.RankPlacement,
	}
	if w.SeedSizes == SeedSizesRing {
		so.SeedSizes = w.SeedSizes
	}
	if w.TensorParallel == workload.TPLocal {
		// The default, network, is left out, so the sweeps run before the
		// option keep their ids.
		so.TensorParallel = string(w.TensorParallel)
	}
	var err error
	if so.TopologySHA256, err = topologySHA256(o.Topology); err != nil {
		return so, fmt.Errorf("%w: --topology: %w", ErrInput, err)
	}
	if so.ProfileSHA256, err = inputSHA256(o.Profile, profiles.Files); err != nil {
		return so, fmt.Errorf("%w: --profile: %w", ErrInput, err)
	}
	if w.NormsFile != "" {
		if so.NormsSHA256, err = inputSHA256(w.NormsFile, nil); err != nil {
			return so, fmt.Errorf("%w: --norms: %w", ErrInput, err)
		}
	}
	return so, nil
}

// topologySHA256 hashes a topology's file, shipped file, or the text a
// topology by parameter stands for.
func topologySHA256(name string) (string, error) {
	if topo.IsPath(name) {
		return inputSHA256(name, nil)
	}
	data, _, err := topo.TopologyData(topologies.Files, name)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}

// inputSHA256 hashes the contents of a file, or of the shipped file a
// name stands for (fsys nil: always a file).
func inputSHA256(name string, fsys fs.FS) (string, error) {
	var data []byte
	var err error
	if fsys == nil || topo.IsPath(name) {
		data, err = os.ReadFile(name)
	} else {
		data, err = fs.ReadFile(fsys, strings.TrimSuffix(name, ".yaml")+".yaml")
	}
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}

// optionsFrom are the lab options that reproduce a sweep's runs: the
// recorded sizes are used as they are, not derived and scaled again.
func optionsFrom(so results.SweepOptions) (Options, error) {
	o := Options{Topology: so.Topology, Profile: so.Profile, Ranks: so.Ranks, Steps: so.Steps,
		Policies: so.Policies, Seeds: so.Seeds, Placement: so.Placement, Scale: so.Scale, Capture: so.Capture,
		Workload: WorkloadOptions{GradientBytes: so.GradientBytes, Compute: time.Duration(so.ComputeNS),
			TPBytes: so.TPBytes, PPBytes: so.PPBytes, BurstBytes: so.BurstBytes,
			BurstSteps: append([]int{}, so.BurstSteps...), Critical: append([]int{}, so.Critical...),
			NormsFile: so.Norms, Subflows: so.Subflows,
			Collective: so.Collective, Dims: slices.Clone(so.Dims), TP: so.TP, TPCollective: so.TPCollective, Splits: so.Splits, Window: so.Window,
			Flows: FlowsPersistent, SeedSizes: so.SeedSizes},
		RankPlacement: so.RankPlacement,
		sized:         true}
	o.Workload.ModelParallel = workload.ModelParallel(so.ModelParallel)
	o.Workload.TensorParallel = workload.TensorParallel(so.TensorParallel)
	o.Workload.Entropy = so.Entropy
	if so.FlowPerMessage {
		o.Workload.Flows = FlowsMessage
	}
	return o, nil
}
