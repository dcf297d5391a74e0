package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/forgive-emu/forgive/budget"
	"github.com/forgive-emu/forgive/hostapi"
	"github.com/forgive-emu/forgive/lab/launch"
	"github.com/forgive-emu/forgive/lab/netns"
	"github.com/forgive-emu/forgive/lab/report"
	"github.com/forgive-emu/forgive/lab/results"
	"github.com/forgive-emu/forgive/lab/topo"
	"github.com/forgive-emu/forgive/profiles"
	"github.com/forgive-emu/forgive/reliability"
	"github.com/forgive-emu/forgive/topologies"
	"github.com/forgive-emu/forgive/workload"
)

// Options are the lab's inputs; zero values take the defaults.
type Options struct {
	Topology string   // a shipped name or a YAML file; default leaf-spine-2x4
	Profile  string   // a shipped name or a YAML file; default loopback
	Ranks    int      // default: the topology's
	Steps    int      // default 20
	Policies []string // default DefaultPolicies; the first is the baseline
	Seeds    int      // runs per policy, seeds 1..Seeds; default 1
	Out      string   // results directory; empty: no files
	BinDir   string   // where forgived and trimswitch are; empty: found or built
	Net      int      // second octet of the runs' 127.N.x.0/24 networks; 0: derived from the pid
	Capture  bool     // every switch writes a pcap into the run directory
	// Placement is "loopback" (default), "netns": every switch and host
	// in its own network namespace, cabled by veth pairs (needs root;
	// docs/topologies.md, "Namespaces"), or "sim": the same engines, built
	// from the same configurations, in this process on a virtual clock.
	Placement string
	// PayloadFree is whether the sim placement's packets carry payload
	// bytes: "auto" (or empty: payload-free when the registered memory
	// would exceed half the machine's), "on" (payload-free: packets keep
	// their lengths, no region holds data, and the checks that need bytes
	// give way to those that do not; Run.Checks lists what ran) or "off".
	// The real placements always carry bytes.
	PayloadFree string
	// Scale multiplies the workload's bytes per step and its compute
	// phase, for quick runs: (0, 1]; 0 means 1. Every result records it.
	Scale float64

	// Inspect, when set, is called after each run's workload, before its
	// fabric stops, with the running fabric (to read its switches'
	// counters); an error fails the run. Real placements only: the sim
	// placement has no processes to inspect, and refuses it.
	Inspect func(ctx context.Context, policy string, seed uint64, f *Fabric) error

	Workload WorkloadOptions

	// Jobs is how many runs run at once. Above 1 (the sim placement only)
	// each run is a worker process: the running executable started with
	// WorkerArg, which must then call ServeWorker. 0 or 1: one run at a
	// time, in this process. DefaultJobs is forgivectl's default.
	Jobs int
	// Shard, when set, runs only that slice of the sweep (Shard).
	Shard Shard

	// Progress receives the progress line; nil: none.
	Progress io.Writer
	// Logs receives the children's logs; nil: they are kept in the run
	// directory only while the run lasts and quoted in errors.
	Logs io.Writer

	// sized: the workload's sizes are as a run used them (a worker's
	// options, from results.SweepOptions), not to be derived and scaled.
	sized bool
}

// WorkloadOptions size the training job; zero values take the defaults:
// the lab's (below) on a scaled-down profile, and the seed's, derived from
// its figures (docs/profiles.md, "The seed's workload"), on a profile at
// the reference's scale such as seed-400g.
type WorkloadOptions struct {
	GradientBytes int           // per rank per step; default 2 MiB (seed: 60.8 MB)
	Compute       time.Duration // default 20 ms (seed: 40.4 ms)
	TPBytes       int           // default 256 KiB (seed: 284 MB)
	PPBytes       int           // default 256 KiB (seed: 94.7 MB)
	BurstBytes    int           // per sender; default 512 KiB (seed: 15.2 MB)
	BurstSteps    []int         // default {10}
	Critical      []int         // default the seed's {1, 2, 3, last}
	// NormsFile, when set, classifies steps with the daemons' detector
	// over a gradient-norm trace instead of the fixed schedule (ReadNorms).
	NormsFile string
	// Entropy is every flow's path policy: single (one path per flow,
	// like RoCE's ECMP), spray (a fresh path per packet) or subflows.
	// Empty is the profile's default (SeedDefaults): spray on the seed's
	// profiles, whose fabric sprays, single on the others.
	Entropy  string
	Subflows uint8 // with hostapi.EntropySubflows
	// ModelParallel is when the tensor- and pipeline-parallel exchanges
	// run: after the compute phase, beside the all-reduce, or during it,
	// the all-reduce following (workload.ModelParallel). Empty is the
	// profile's default: with-compute on the seed's profiles, whose step
	// waits on the all-reduce, after-compute on the others.
	ModelParallel workload.ModelParallel
}

func (o *Options) defaults() {
	if o.Topology == "" {
		o.Topology = topo.DefaultTopology
	}
	if o.Profile == "" {
		o.Profile = topo.DefaultProfile
	}
	if o.Steps == 0 {
		o.Steps = 20
	}
	if len(o.Policies) == 0 {
		o.Policies = DefaultPolicies
	}
	if o.Seeds == 0 {
		o.Seeds = 1
	}
	if o.Net == 0 {
		o.Net = 10 + os.Getpid()%50
	}
	if o.Placement == "" {
		o.Placement = string(topo.Loopback)
	}
	if o.Scale == 0 {
		o.Scale = 1
	}
	w := &o.Workload
	if w.BurstSteps == nil {
		w.BurstSteps = []int{min(10, o.Steps)}
	}
	if w.Critical == nil {
		w.Critical = []int{1, 2, 3, o.Steps}
	}
}

// sizes fills the workload's sizes and applies the scale. On a profile
// with the reference's timers (scale.time 1: seed-400g and the
// rate-scaled seed-100g, seed-50g, seed-25g, seed-6.25g) the defaults are the
// seed's, with every size times the profile's byte scale (seedBytes), so
// a message spans as many BDPs and communication takes as long as in the
// seed, and the compute phase is the seed's; on the other profiles they
// are the lab's.
func (w *WorkloadOptions) sizes(seedBytes, scale float64) {
	def := WorkloadOptions{GradientBytes: 2 << 20, Compute: 20 * time.Millisecond,
		TPBytes: 256 << 10, PPBytes: 256 << 10, BurstBytes: 512 << 10}
	if seedBytes > 0 {
		def = seedWorkload()
		def.GradientBytes = scaleBytes(def.GradientBytes, seedBytes)
		def.TPBytes = scaleBytes(def.TPBytes, seedBytes)
		def.PPBytes = scaleBytes(def.PPBytes, seedBytes)
		def.BurstBytes = scaleBytes(def.BurstBytes, seedBytes)
	}
	pick := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
		*v = scaleBytes(*v, scale)
	}
	pick(&w.GradientBytes, def.GradientBytes)
	pick(&w.TPBytes, def.TPBytes)
	pick(&w.PPBytes, def.PPBytes)
	pick(&w.BurstBytes, def.BurstBytes)
	if w.Compute == 0 {
		w.Compute = def.Compute
	}
	w.Compute = time.Duration(math.Round(float64(w.Compute) * scale))
}

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
	// payloadFree: the simulator runs without payload bytes
	// (Options.PayloadFree); registered is what the job would register.
	payloadFree bool
	registered  int64
}

// Run runs every policy with every seed (the sweep, or the shard of it
// Options.Shard names) and returns the results; with Options.Out it also
// writes results.json, results.csv and the plots. A bad input is reported
// before anything starts (errors.Is(err, ErrInput)).
func Run(ctx context.Context, opts Options) (*results.File, error) {
	p, err := prepare(ctx, opts)
	if err != nil {
		return nil, err
	}
	o := p.opts
	so, err := p.sweepOptions()
	if err != nil {
		return nil, err
	}
	id := SweepID(so)
	runs := p.sweepRuns(o.Shard)
	wallStart := time.Now()
	f := &results.File{Version: report.Version, Created: wallStart.UTC(), Topology: o.Topology,
		Sweep:     results.Sweep{ID: id, Options: so},
		Placement: o.Placement, Scale: o.Scale, ModelParallel: string(o.Workload.ModelParallel),
		Entropy: o.Workload.Entropy, Subflows: o.Workload.Subflows,
		Ranks: p.topology.Ranks(), Steps: o.Steps, Policies: policyNames(p.policies),
		Profile: results.Profile{Name: o.Profile, Derived: p.profile.Derived()}}
	if !o.Shard.Whole() {
		f.Sweep.Shard = &results.Shard{Index: o.Shard.Index, Count: o.Shard.Count}
	}
	for _, sr := range runs {
		if !slices.Contains(f.Seeds, sr.seed) {
			f.Seeds = append(f.Seeds, sr.seed)
		}
	}
	bar := newProgress(o.Progress, len(runs), o.Steps)
	defer bar.done()
	if jobs := min(o.Jobs, len(runs)); jobs > 1 {
		f.Runs, f.Wall.Runs, err = p.runParallel(ctx, id, so, runs, jobs, bar)
		if err != nil {
			return f, err
		}
		for i := range f.Runs {
			f.Runs[i].Placement, f.Runs[i].Scale = o.Placement, o.Scale
		}
	} else {
		for _, sr := range runs {
			pol, seed := sr.policy, sr.seed
			bar.setRun(pol.Name, seed)
			runStart := time.Now()
			var r results.Run
			var wall results.WallRun
			if p.sim {
				r, wall, err = p.runOneSim(ctx, pol, seed, bar)
			} else {
				r, err = p.runOne(ctx, pol, seed, sr.k, bar)
				wall = results.WallRun{Policy: pol.Name, Seed: seed, Seconds: time.Since(runStart).Seconds()}
			}
			if err != nil {
				return f, fmt.Errorf("lab: policy %s, seed %d: %w", pol.Name, seed, err)
			}
			r.Placement, r.Scale = o.Placement, o.Scale
			f.Runs = append(f.Runs, r)
			f.Wall.Runs = append(f.Wall.Runs, wall)
		}
	}
	f.Wall.Seconds = time.Since(wallStart).Seconds()
	report.Summarize(f)
	if o.Out != "" {
		if err := WriteResults(o.Out, f); err != nil {
			return f, err
		}
	}
	return f, nil
}

func policyNames(ps []Policy) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Name
	}
	return out
}

// prepare checks every input and finds the binaries.
func prepare(ctx context.Context, opts Options) (*prepared, error) {
	p, err := check(opts)
	if err != nil {
		return nil, err
	}
	if p.sim {
		return p, nil // no process to start
	}
	if p.network == topo.Namespaces {
		if err := netns.NeedRoot(); err != nil {
			return nil, fmt.Errorf("%w: --placement netns: %w", ErrInput, err)
		}
	}
	if p.bins, err = binaries(ctx, p.opts.BinDir, p.network); err != nil {
		return nil, err
	}
	if p.network == topo.Namespaces {
		// Namespaces of earlier runs whose process died without its
		// teardown (SIGKILL, a crash) go first.
		if _, err := netns.CleanupStale(); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// check validates every input without looking at the environment: no
// binary is looked for, no namespace touched, nothing started. Run and
// Check share it, so a dry run refuses exactly what a run refuses before
// it starts.
func check(opts Options) (*prepared, error) {
	opts.defaults()
	p := &prepared{opts: opts}
	var err error
	if p.profile, err = OpenProfile(opts.Profile); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInput, err)
	}
	if p.topology, err = OpenTopology(opts.Topology); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInput, err)
	}
	if opts.Ranks != 0 {
		if p.topology, err = p.topology.WithRanks(opts.Ranks); err != nil {
			return nil, fmt.Errorf("%w: --ranks %d: %w", ErrInput, opts.Ranks, err)
		}
	}
	if opts.Steps < 1 || opts.Steps > 10000 {
		return nil, fmt.Errorf("%w: --steps %d: want 1..10000", ErrInput, opts.Steps)
	}
	if opts.Seeds < 1 || opts.Seeds > 100 {
		return nil, fmt.Errorf("%w: --seeds %d: want 1..100", ErrInput, opts.Seeds)
	}
	if p.policies, err = LookupPolicies(opts.Policies); err != nil {
		return nil, err
	}
	if err := opts.Shard.check(); err != nil {
		return nil, err
	}
	if n := len(p.policies) * opts.Seeds; opts.Shard.Count > n {
		return nil, fmt.Errorf("%w: --shard %s: the sweep has %d runs (%d policies x %d seeds), so shards %d to %d would run none: want at most %d shards",
			ErrInput, opts.Shard, n, len(p.policies), opts.Seeds, n+1, opts.Shard.Count, n)
	}
	if opts.Scale < 0 || opts.Scale > 1 || math.IsNaN(opts.Scale) {
		return nil, fmt.Errorf("%w: --scale %v: want a scale in (0, 1]", ErrInput, opts.Scale)
	}
	if opts.Placement == PlacementSim {
		p.sim, p.network = true, topo.Loopback
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
	if p.entropy, err = checkEntropy(p.opts.Workload); err != nil {
		return nil, err
	}
	if p.opts.Workload.ModelParallel, err = workload.ParseModelParallel(string(p.opts.Workload.ModelParallel)); err != nil {
		return nil, fmt.Errorf("%w: --model-parallel: %w", ErrInput, err)
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
	if !opts.sized {
		p.opts.Workload.sizes(seedBytes, opts.Scale)
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
	if p.dry, err = topo.Place(p.topology, p.profile, topo.PlaceOptions{Dir: os.TempDir(), Net: "127.0.0.", Host: topo.DefaultHostPolicy()}); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInput, err)
	}
	// The workload checks its own sizes for every policy, as each run will.
	hosts := make([]hostapi.HostID, 0, len(p.dry.Hosts))
	for _, h := range p.dry.Hosts {
		hosts = append(hosts, hostapi.HostID(h.ID))
	}
	for _, pol := range p.policies {
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
		return 0, fmt.Errorf("%w: --entropy %q: want single, spray or subflows", ErrInput, w.Entropy)
	}
	switch e {
	case hostapi.EntropySingle, hostapi.EntropySpray:
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
		SweepID: SweepID(so), SweepRuns: len(p.policies) * p.opts.Seeds}
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

// binaries finds the daemons and, for a netns placement, the forgivectl
// whose netns-exec starts each of them in its namespace: the running
// program itself when it is forgivectl, so the helper always matches it.
func binaries(ctx context.Context, dir string, network topo.Network) (map[string]string, error) {
	names := []string{"forgived", "trimswitch"}
	self, err := os.Executable()
	useSelf := err == nil && filepath.Base(self) == "forgivectl"
	if network == topo.Namespaces && !useSelf {
		names = append(names, "forgivectl")
	}
	bins, err := launch.Binaries(ctx, dir, names...)
	if err == nil && network == topo.Namespaces && useSelf {
		bins["forgivectl"] = self
	}
	return bins, err
}

// OpenProfile takes a shipped name or a path to a YAML file.
func OpenProfile(name string) (*topo.Profile, error) {
	if isPath(name) {
		return topo.LoadProfile(name)
	}
	return topo.OpenProfile(profiles.Files, name)
}

// OpenTopology takes a shipped name or a path to a YAML file.
func OpenTopology(name string) (*topo.Topology, error) {
	if isPath(name) {
		return topo.LoadTopology(name)
	}
	return topo.OpenTopology(topologies.Files, name)
}

func isPath(name string) bool {
	return strings.ContainsRune(name, filepath.Separator) || strings.HasSuffix(name, ".yaml") && fileExists(name)
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// WriteResults writes results.json, results.csv and the plots of f into
// dir, as a run with Options.Out does.
func WriteResults(dir string, f *results.File) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := report.WriteJSON(filepath.Join(dir, "results.json"), f); err != nil {
		return err
	}
	if err := report.WriteCSV(filepath.Join(dir, "results.csv"), f); err != nil {
		return err
	}
	_, err := report.Plots(dir, f)
	return err
}

// errChildDied wraps the launcher's report of a child that died mid-run.
var errChildDied = errors.New("a fabric process died")

// runOne places the fabric for one policy and seed, starts it, runs the
// workload, and collects what it measured. Every process is stopped, and
// the namespaces and run directory removed, before it returns.
func (p *prepared) runOne(ctx context.Context, pol Policy, seed uint64, idx int, bar *progress) (run results.Run, err error) {
	o := p.opts
	place := topo.PlaceOptions{
		Network: p.network, Net: fmt.Sprintf("127.%d.%d.", o.Net, idx%250), Seed: seed, Capture: o.Capture,
		Host: pol.HostPolicy(),
	}
	if p.network == topo.Namespaces {
		place.RunID = netns.NewRunID()
	}
	fab, err := StartFabric(ctx, FabricConfig{Topology: p.topology, Profile: p.profile, Place: place, Bins: p.bins, Logs: o.Logs})
	if err != nil {
		return results.Run{}, err
	}
	defer func() {
		if serr := fab.Stop(); serr != nil && err == nil {
			err = fmt.Errorf("stopping the fabric: %w", serr)
		}
	}()
	plan := fab.Plan

	ranks, closeAll, err := dialRanks(ctx, plan)
	if err != nil {
		return results.Run{}, err
	}
	defer closeAll()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	readers, hosts := clientReaders(ranks)
	rec := newRecorder(fab, fab.Plan, readers, hosts, o.Steps, bar)
	rec.startSampling(ctx)
	type outcome struct {
		res *workload.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := workload.Run(ctx, p.workloadConfig(pol, seed), ranks, rec)
		done <- outcome{res, err}
	}()
	var out outcome
	select {
	case out = <-done:
	case died := <-fab.Died():
		cancel()
		<-done
		rec.stopSampling()
		return results.Run{}, fmt.Errorf("%w: %w", errChildDied, died)
	}
	rec.stopSampling()
	if out.err != nil {
		return results.Run{}, out.err
	}
	run = rec.build(ctx, pol, seed, out.res)
	run.Profile, run.Topology = o.Profile, o.Topology
	sw := p.profile.Params().Switch
	run.QueueMarkBytes, run.QueueLimitBytes = float64(sw.ECN.KMin), float64(sw.DataQueue)
	if err := rec.scrapeSwitches(ctx, &run); err != nil {
		return results.Run{}, err
	}
	report.FillFractions(&run)
	if o.Inspect != nil {
		if err := o.Inspect(ctx, pol.Name, seed, fab); err != nil {
			return run, fmt.Errorf("inspect: %w", err)
		}
	}
	return run, nil
}

func (p *prepared) workloadConfig(pol Policy, seed uint64) workload.Config {
	w := p.opts.Workload
	cfg := workload.Config{
		Steps: p.opts.Steps, GradientBytes: w.GradientBytes, Compute: w.Compute,
		TPBytes: w.TPBytes, PPBytes: w.PPBytes,
		Burst:    workload.BurstConfig{Bytes: w.BurstBytes, Steps: w.BurstSteps},
		Critical: func(step int) bool { return p.schedule.Critical(budget.StepID(step)) },
		Seed:     seed, StepTimeout: 2 * time.Minute,
		Entropy: p.entropy, Subflows: w.Subflows, ModelParallel: w.ModelParallel,
		PayloadFree: p.payloadFree,
	}
	if p.norms != nil {
		cfg.Norms, cfg.Critical = p.norms, nil
	}
	if pol.Shed {
		cfg.Shed = &workload.ShedConfig{PLow: pol.PLow, PHigh: pol.PHigh, Seed: seed}
	}
	return cfg
}

// dialRanks connects one client per host, in rank order.
func dialRanks(ctx context.Context, plan *topo.Plan) ([]workload.Rank, func(), error) {
	hosts := slices.Clone(plan.Hosts)
	slices.SortFunc(hosts, func(a, b topo.HostProc) int { return a.Rank - b.Rank })
	var ranks []workload.Rank
	closeAll := func() {
		for _, r := range ranks {
			r.Client.Close()
		}
	}
	for _, h := range hosts {
		c, err := hostapi.DialContext(ctx, h.Socket)
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("connect to %s: %w", h.Name, err)
		}
		ranks = append(ranks, workload.Rank{Client: c, Host: hostapi.HostID(h.ID)})
	}
	return ranks, closeAll, nil
}
