package lab

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/forgive-emu/forgive/budget"
	"github.com/forgive-emu/forgive/hostapi"
	"github.com/forgive-emu/forgive/lab/topo"
	"github.com/forgive-emu/forgive/reliability"
	"github.com/forgive-emu/forgive/workload"
)

// prepared is everything checked before any process starts.
type prepared struct {
	opts     Options
	network  topo.Network
	profile  *topo.Profile
	topology *topo.Topology
	policies []Policy
	schedule budget.Schedule
	norms    [][]float64 // the detector's input per step, when classifying by a trace
	dry      *topo.Plan  // the placement check's plan
	bins     map[string]string
	sim      bool // the sim placement
	entropy  hostapi.Entropy
	// collective is the gradient all-reduce's schedule, parsed from the
	// workload's options.
	collective workload.Collective
	// profileCollective: the collective is the profile's default
	// (topo.ProfileWorkload), the user having named none.
	profileCollective bool
	// seedSizes says how a seed profile's sizes were derived; nil on the
	// other profiles.
	seedSizes *SeedSizes
	// payloadFree: the simulator runs without payload bytes
	// (Options.PayloadFree); registered is what the job would register.
	payloadFree bool
	registered  int64
}

// check validates every input without looking at the environment: no
// binary is looked for, no namespace touched, nothing started. Run and
// Check share it, so a dry run refuses exactly what a run refuses before
// it starts.
func check(opts Options) (*prepared, error) {
	opts.defaults()
	p := &prepared{opts: opts}
	var err error
	if p.profile, err = topo.FindProfile(opts.Profile); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInput, err)
	}
	if p.topology, err = topo.FindTopology(opts.Topology); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInput, err)
	}
	if opts.Ranks != 0 {
		if p.topology, err = p.topology.WithRanks(opts.Ranks); err != nil {
			return nil, fmt.Errorf("%w: --ranks %d: %w", ErrInput, opts.Ranks, err)
		}
	}
	if err := p.placeRanks(opts.RankPlacement); err != nil {
		return nil, err
	}
	if opts.Steps < 1 || opts.Steps > 10000 {
		return nil, fmt.Errorf("%w: --steps %d: want 1..10000", ErrInput, opts.Steps)
	}
	if opts.Seeds < 1 || opts.Seeds > 100 {
		return nil, fmt.Errorf("%w: --seeds %d: want 1..100", ErrInput, opts.Seeds)
	}
	if opts.Workers < 0 || opts.Workers > 1024 || opts.Workers > 1 && opts.Placement != PlacementSim {
		return nil, fmt.Errorf("%w: --workers %d: want 1..1024, and above 1 the %s placement", ErrInput, opts.Workers, PlacementSim)
	}
	if p.policies, err = LookupJobPolicies(opts.Policies, len(p.topology.Jobs)); err != nil {
		return nil, err
	}
	if err := opts.Shard.check(); err != nil {
		return nil, err
	}
	if n := len(p.policies) * opts.Seeds; opts.Shard.Count > n {
		return nil, fmt.Errorf("%w: --shard %s: the sweep has %d runs (%d policies x %d seeds), so shards %d to %d would run none: want at most %d shards",
			ErrInput, opts.Shard, n, len(p.policies), opts.Seeds, n+1, opts.Shard.Count, n)
	}
	if opts.Seal != SealOn && opts.Seal != SealOff {
		return nil, fmt.Errorf("%w: --seal %q: want on or off", ErrInput, opts.Seal)
	}
	if opts.Scale < 0 || opts.Scale > 1 || math.IsNaN(opts.Scale) {
		return nil, fmt.Errorf("%w: --scale %v: want a scale in (0, 1]", ErrInput, opts.Scale)
	}
	if opts.Placement == PlacementSim {
		p.sim, p.network = true, topo.Simulated
		if opts.Inspect != nil {
			return nil, fmt.Errorf("%w: Inspect needs a real placement, not %s", ErrInput, PlacementSim)
		}
	} else if p.network, err = topo.ParseNetwork(opts.Placement); err != nil {
		return nil, fmt.Errorf("%w: --placement %w (or %s)", ErrInput, err, PlacementSim)
	}
	if err := checkJobs(opts.Jobs, opts.Placement); err != nil {
		return nil, err
	}
	p.opts.Workload.stepDefaults(p.profile.Params().Scale.Time == 1)
	// A worker's options (sized) are a run's, resolved already: the
	// profile's defaults filled them in the process that planned it.
	if !opts.sized {
		p.profileCollective = p.opts.Workload.profileDefaults(p.profile.Workload)
	}
	if p.profileCollective {
		if err := p.fitProfileCollective(); err != nil {
			return nil, err
		}
	}
	if p.entropy, err = checkEntropy(p.opts.Workload); err != nil {
		return nil, err
	}
	if p.opts.Workload.ModelParallel, err = workload.ParseModelParallel(string(p.opts.Workload.ModelParallel)); err != nil {
		return nil, fmt.Errorf("%w: --model-parallel: %w", ErrInput, err)
	}
	if p.opts.Workload.TensorParallel, err = workload.ParseTensorParallel(string(p.opts.Workload.TensorParallel)); err != nil {
		return nil, fmt.Errorf("%w: --tensor-parallel: %w", ErrInput, err)
	}
	if p.collective, err = parseCollective(p.opts.Workload); err != nil {
		return nil, err
	}
	if s := p.opts.Workload.SeedSizes; s != "" && s != SeedSizesReading && s != SeedSizesRing {
		return nil, fmt.Errorf("%w: --seed-sizes %q: want %s or %s", ErrInput, s, SeedSizesReading, SeedSizesRing)
	}
	if err := checkOut(opts.Out); err != nil {
		return nil, err
	}
	if w := opts.Workload; w.GradientBytes < 0 || w.Compute < 0 || w.TPBytes < 0 || w.PPBytes < 0 || w.BurstBytes < 0 {
		return nil, fmt.Errorf("%w: --gradient-bytes %d, --compute %v, --tp-bytes %d, --pp-bytes %d, --burst-bytes %d: want sizes and durations >= 0 (0: the default)",
			ErrInput, w.GradientBytes, w.Compute, w.TPBytes, w.PPBytes, w.BurstBytes)
	}
	sc := p.profile.Params().Scale
	seedBytes := 0.0
	if sc.Time == 1 {
		seedBytes = sc.Bytes
	}
	var critical []budget.StepID
	for _, s := range opts.Workload.Critical {
		if s >= 1 && s <= opts.Steps {
			critical = append(critical, budget.StepID(s))
		}
	}
	if p.schedule, err = budget.NewSchedule(opts.Steps, critical...); err != nil {
		return nil, fmt.Errorf("%w: critical steps: %w", ErrInput, err)
	}
	if opts.Workload.NormsFile != "" {
		if p.norms, err = ReadNorms(opts.Workload.NormsFile, opts.Steps); err != nil {
			return nil, err
		}
	}
	// A dry placement checks that profile and topology fit together.
	// The simulator's plan is its own; namespaces share loopback's limits.
	dryNet := topo.Loopback
	if p.sim {
		dryNet = topo.Simulated
	}
	if p.dry, err = topo.Place(p.topology, p.profile, topo.PlaceOptions{Network: dryNet, Dir: os.TempDir(), Net: "127.0.0.", Host: topo.DefaultHostPolicy()}); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInput, err)
	}
	// The sizes: on a seed profile the seed's, derived under this run's
	// reading (seedSizesUnder) unless the options already carry a run's.
	if !opts.sized {
		def := labWorkload()
		if seedBytes > 0 {
			if def, p.seedSizes, err = p.seedSizesUnder(); err != nil {
				return nil, err
			}
		}
		p.opts.Workload.sizes(def, seedBytes, opts.Scale)
	}
	// The workload checks its own sizes for every policy, as each run will.
	hosts := make([]hostapi.HostID, 0, len(p.dry.Hosts))
	for _, h := range p.dry.Hosts {
		hosts = append(hosts, hostapi.HostID(h.ID))
	}
	for _, pol := range p.policies {
		if pol.Jobs != nil {
			for j, ranks := range p.topology.JobRanks() {
				if pol.Jobs[j] == nil {
					continue
				}
				jh := make([]hostapi.HostID, 0, len(ranks))
				for _, r := range ranks {
					jh = append(jh, hosts[r])
				}
				if err := p.workloadConfig(*pol.Jobs[j], 1).Validate(jh); err != nil {
					return nil, fmt.Errorf("%w: policy %s, job %s: %w", ErrInput, pol.Name, p.topology.Jobs[j], err)
				}
			}
			continue
		}
		if err := p.workloadConfig(pol, 1).Validate(hosts); err != nil {
			return nil, fmt.Errorf("%w: policy %s: %w", ErrInput, pol.Name, err)
		}
	}
	if err := p.choosePayloads(hosts, machineMemory); err != nil {
		return nil, err
	}
	return p, nil
}

// checkEntropy refuses a path policy the daemons would refuse when the
// workload creates its flows: subflows only with subflow entropy, and then
// a power of two the sender supports.
func checkEntropy(w WorkloadOptions) (hostapi.Entropy, error) {
	var e hostapi.Entropy
	if err := e.UnmarshalText([]byte(w.Entropy)); err != nil {
		return 0, fmt.Errorf("%w: --entropy %q: want single, spray, subflows or message", ErrInput, w.Entropy)
	}
	switch e {
	case hostapi.EntropySingle, hostapi.EntropySpray, hostapi.EntropyMessage:
		if w.Subflows != 0 {
			return 0, fmt.Errorf("%w: --subflows %d needs --entropy subflows (got --entropy %s)", ErrInput, w.Subflows, w.Entropy)
		}
	case hostapi.EntropySubflows:
		n := int(w.Subflows)
		if n < 2 || n > reliability.MaxSubflows || n&(n-1) != 0 {
			return 0, fmt.Errorf("%w: --subflows %d: want a power of two in 2..%d with --entropy subflows", ErrInput, n, reliability.MaxSubflows)
		}
	}
	return e, nil
}

// checkOut refuses a results directory that cannot be made, before a run
// that would only find out when it writes its results: it must be a
// directory or not exist yet below a directory.
func checkOut(dir string) error {
	if dir == "" {
		return nil
	}
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		switch {
		case err == nil && st.IsDir():
			return nil
		case err == nil:
			return fmt.Errorf("%w: --out %s: %s is not a directory", ErrInput, dir, d)
		case !errors.Is(err, os.ErrNotExist):
			return fmt.Errorf("%w: --out %s: %w", ErrInput, dir, err)
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}
