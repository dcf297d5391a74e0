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
	"github.com/forgive-emu/forgive/hostapi"
	"github.com/forgive-emu/forgive/lab/launch"
	"github.com/forgive-emu/forgive/lab/netns"
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
	id := SweepID(so)
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

// runOne places the fabric for one policy and seed, starts it, runs the
// workload, and collects what it measured. Every process is stopped, and
// the namespaces and run directory removed, before it returns.
func (p *prepared) runOne(ctx context.Context, pol Policy, seed uint64, idx int, bar *progress) (run results.Run, err error) {
	o := p.opts
	place := topo.PlaceOptions{
		Network: p.network, Net: fmt.Sprintf("127.%d.%d.", o.Net, idx%250), Seed: seed, Capture: o.Capture,
		Host: pol.HostPolicy, RankHost: p.rankHosts(pol),
	}
	if p.network == topo.Namespaces {
		place.RunID = netns.NewRunID()
	}
	fab, err := StartFabric(ctx, FabricConfig{Topology: p.topology, Profile: p.profile, Place: place, Bins: p.bins, Logs: o.Logs,
		Seal: o.Seal == SealOn})
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

	if pol.Jobs != nil {
		if run, err = p.runPairReal(ctx, pol, seed, fab, ranks, bar); err != nil {
			return results.Run{}, err
		}
		return p.finishReal(ctx, run, pol, seed, fab)
	}

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
	// A sealed run seals every packet and, untouched by an attacker,
	// refuses none; a plain one seals nothing.
	if sealed := o.Seal == SealOn; sealed != (run.SealedPackets > 0) || run.SealRefusals != 0 {
		return results.Run{}, fmt.Errorf("lab: --seal %s, but the hosts sealed %d packets and refused %d sealed ones",
			o.Seal, run.SealedPackets, run.SealRefusals)
	}
	sw := p.profile.Params().Switch
	run.QueueMarkBytes, run.QueueLimitBytes = float64(sw.ECN.KMin), float64(sw.DataQueue)
	if err := rec.scrapeSwitches(ctx, &run); err != nil {
		return results.Run{}, err
	}
	// While the fabric still runs: a closed socket leaves the table.
	if run.SocketDrops, err = socketDrops(fab.Plan); err != nil {
		return results.Run{}, err
	}
	if err := p.attachPattern(&run, pol, seed, out.res); err != nil {
		return results.Run{}, err
	}
	report.FillFractions(&run)
	return p.inspect(ctx, run, pol, seed, fab)
}

// finishReal completes a pair's run on a real placement as runOne
// completes its own: the seal's check, the socket drops, Inspect.
func (p *prepared) finishReal(ctx context.Context, run results.Run, pol Policy, seed uint64, fab *Fabric) (results.Run, error) {
	o := p.opts
	run.Profile, run.Topology = o.Profile, o.Topology
	if sealed := o.Seal == SealOn; sealed != (run.SealedPackets > 0) || run.SealRefusals != 0 {
		return results.Run{}, fmt.Errorf("lab: --seal %s, but the hosts sealed %d packets and refused %d sealed ones",
			o.Seal, run.SealedPackets, run.SealRefusals)
	}
	var err error
	if run.SocketDrops, err = socketDrops(fab.Plan); err != nil {
		return results.Run{}, err
	}
	return p.inspect(ctx, run, pol, seed, fab)
}

// inspect calls Options.Inspect on the still-running fabric.
func (p *prepared) inspect(ctx context.Context, run results.Run, pol Policy, seed uint64, fab *Fabric) (results.Run, error) {
	o := p.opts
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
	cfg.OwnerNotices = pol.Gather == "owner"
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
