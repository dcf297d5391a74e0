package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/forgive-emu/forgive/budget"
	"github.com/forgive-emu/forgive/lab/launch"
	"github.com/forgive-emu/forgive/lab/netns"
	"github.com/forgive-emu/forgive/lab/pattern"
	"github.com/forgive-emu/forgive/lab/report"
	"github.com/forgive-emu/forgive/lab/results"
	"github.com/forgive-emu/forgive/lab/topo"
	"github.com/forgive-emu/forgive/workload"
)

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
	id := results.SweepID(so)
	runs := p.sweepRuns(o.Shard)
	wallStart := time.Now()
	f := &results.File{Version: report.Version, Created: wallStart.UTC(), Topology: o.Topology,
		Sweep:     results.Sweep{ID: id, Options: so},
		Placement: o.Placement, Seal: sealOf(o), Scale: o.Scale, ModelParallel: string(o.Workload.ModelParallel),
		TensorParallel: so.TensorParallel,
		Entropy:        o.Workload.Entropy, Subflows: o.Workload.Subflows,
		Ranks: p.topology.Ranks(), Steps: o.Steps, Policies: policyNames(p.policies),
		Profile: results.Profile{Name: o.Profile, Derived: p.profile.Derived()}}
	if !o.Shard.Whole() {
		f.Sweep.Shard = &results.Shard{Index: o.Shard.Index, Count: o.Shard.Count}
	}
	if !p.collective.Flat() {
		if f.Collective, err = p.collectiveShape(); err != nil {
			return nil, err
		}
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
			r, wall, err := p.runOne(ctx, pol, seed, sr.k, bar)
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
		if err := report.WriteResults(o.Out, f); err != nil {
			return f, err
		}
	}
	return f, nil
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

// sealOf is the file's seal: the option on the real placements, nothing
// on sim.
func sealOf(o Options) string {
	if o.Placement == PlacementSim {
		return ""
	}
	return o.Seal
}

// errChildDied wraps the launcher's report of a child that died mid-run.
var errChildDied = errors.New("a fabric process died")

// runOne is the lab's one run path, for every placement and job shape:
// it places the fabric for one policy and seed (open: real processes on
// loopback or in namespaces, or the engines in the simulator), runs the
// policy's jobs on it (one, or a pair on one fabric), and collects what
// they measured: the recorder's build, the checks, the loss pattern, the
// switches' counters, the seal's check and what only the placement
// measures (the kernel's socket drops, the simulator's events). Every
// process is stopped, and the namespaces and run directory removed,
// before it returns.
func (p *prepared) runOne(ctx context.Context, pol Policy, seed uint64, idx int, bar *progress) (run results.Run, wall results.WallRun, err error) {
	o := p.opts
	wallStart := time.Now()
	fab, err := p.open(ctx, pol, seed, idx)
	if err != nil {
		return results.Run{}, results.WallRun{}, err
	}
	defer func() {
		if serr := fab.stop(); serr != nil && err == nil {
			err = fmt.Errorf("stopping the fabric: %w", serr)
		}
	}()
	readers, hosts := fab.hosts()
	jobs := p.jobs(pol, fab, readers, hosts, bar)
	res, err := fab.run(ctx, p, seed, jobs, bar)
	if err != nil {
		return results.Run{}, results.WallRun{}, err
	}
	if run, err = p.assemble(ctx, pol, seed, jobs, res, readers, fab); err != nil {
		return results.Run{}, results.WallRun{}, err
	}
	// A sealed run seals every packet and, untouched by an attacker,
	// refuses none; a plain one seals nothing. The simulator seals
	// nothing and is not asked.
	if seal := sealOf(o); seal != "" && ((seal == SealOn) != (run.SealedPackets > 0) || run.SealRefusals != 0) {
		return results.Run{}, results.WallRun{}, fmt.Errorf("lab: --seal %s, but the hosts sealed %d packets and refused %d sealed ones",
			o.Seal, run.SealedPackets, run.SealRefusals)
	}
	// While the fabric still runs: a closed socket leaves the kernel's
	// table.
	if err := fab.measure(&run, bar); err != nil {
		return results.Run{}, results.WallRun{}, err
	}
	if f := fab.real(); o.Inspect != nil && f != nil {
		if err := o.Inspect(ctx, pol.Name, seed, f); err != nil {
			return results.Run{}, results.WallRun{}, fmt.Errorf("inspect: %w", err)
		}
	}
	secs := time.Since(wallStart).Seconds()
	wall = results.WallRun{Policy: pol.Name, Seed: seed, Seconds: secs}
	if secs > 0 && run.SimEvents > 0 {
		wall.EventsPerS, wall.PacketHopsPer = float64(run.SimEvents)/secs, float64(run.SimPacketHops)/secs
	}
	return run, wall, nil
}

// assemble builds the run from its jobs' results, for every job shape:
// the first running job's figures as the run's own (a pair's run takes
// the pair's name), every job's figures in Jobs when the policy is a
// pair, the fabric's switch counters, the first job's loss pattern and
// the fractions.
func (p *prepared) assemble(ctx context.Context, pol Policy, seed uint64, jobs []*runJob, res []*workload.Result,
	readers []hostReader, sw switchReader) (results.Run, error) {
	o := p.opts
	var run results.Run
	byJob := map[int]results.JobRun{}
	for i, j := range jobs {
		jr := j.rec.build(ctx, j.pol, seed, res[i])
		jr.Profile, jr.Topology = o.Profile, o.Topology
		if pol.Jobs != nil {
			byJob[j.idx] = jobRun(p.topology.Jobs[j.idx], j, &jr, res[i])
		}
		if i == 0 {
			run = jr
			run.Policy, run.Gather = pol.Name, topo.GatherKey(j.pol.Gather)
		}
	}
	if pol.Jobs != nil {
		for j, ranks := range p.topology.JobRanks() {
			if _, ok := byJob[j]; ok {
				run.Jobs = append(run.Jobs, byJob[j])
				continue
			}
			idle, err := idleJob(ctx, p.topology.Jobs[j], ranks, readers)
			if err != nil {
				return run, err
			}
			run.Jobs = append(run.Jobs, idle)
		}
	}
	sp := p.profile.Params().Switch
	run.QueueMarkBytes, run.QueueLimitBytes = float64(sp.ECN.KMin), float64(sp.DataQueue)
	if err := jobs[0].rec.scrapeSwitches(ctx, &run); err != nil {
		return run, err
	}
	if err := p.attachPattern(&run, pol, seed, res[0]); err != nil {
		return run, err
	}
	report.FillFractions(&run)
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
		TensorParallel: w.TensorParallel,
		PayloadFree:    p.payloadFree,
		Collective:     p.collective,
	}
	if p.norms != nil {
		cfg.Norms, cfg.Critical = p.norms, nil
	}
	if pol.Shed {
		cfg.Shed = &workload.ShedConfig{PLow: pol.PLow, PHigh: pol.PHigh, Seed: seed}
	}
	cfg.OwnerNotices = pol.Gather == budget.GatherOwner
	return cfg
}

// attachPattern adds the run's loss pattern: its figures and its file.
//
// The analysis models the flat ring's receives (its uniform control and
// its burstiness count a rank's 2(N-1) ring messages by round), so a run
// of a compiled schedule (--collective and the options beside it) has no
// loss pattern yet; its forgiven ranges still count in every figure.
func (p *prepared) attachPattern(run *results.Run, pol Policy, seed uint64, res *workload.Result) error {
	o := p.opts
	if !p.collective.Flat() {
		return nil
	}
	m := pattern.Meta{Policy: pol.Name, Seed: seed, Profile: o.Profile, Topology: o.Topology,
		Placement: o.Placement, Entropy: o.Workload.Entropy}
	for j, jp := range pol.Jobs {
		if jp != nil {
			m.Job = p.topology.Jobs[j]
			break
		}
	}
	lp, file, err := pattern.Build(m, res)
	if err != nil {
		return err
	}
	run.LossPattern, run.PatternFile = lp, file
	return nil
}
