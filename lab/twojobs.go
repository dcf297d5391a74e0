package lab

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/forgive-emu/forgive/hostapi"
	"github.com/forgive-emu/forgive/lab/report"
	"github.com/forgive-emu/forgive/lab/results"
	"github.com/forgive-emu/forgive/lab/simhost"
	"github.com/forgive-emu/forgive/lab/topo"
	"github.com/forgive-emu/forgive/workload"
)

// Two jobs on one fabric (docs/lab.md, "Two jobs"): a topology with jobs
// splits its ranks between two jobs, and a policy pair runs each job
// under its own policy at once, or one job alone with the other's hosts
// idle.

// rankHosts is each rank's host policy for a policy pair: its job's, or,
// for an idle job's hosts, the pair's (they run nothing).
func (p *prepared) rankHosts(pol Policy) []topo.HostPolicy {
	if pol.Jobs == nil {
		return nil
	}
	out := make([]topo.HostPolicy, p.topology.Ranks())
	for j, ranks := range p.topology.JobRanks() {
		hp := pol.HostPolicy
		if pol.Jobs[j] != nil {
			hp = pol.Jobs[j].HostPolicy
		}
		for _, r := range ranks {
			out[r] = hp
		}
	}
	return out
}

// pairJob is one running job of a pair's run.
type pairJob struct {
	idx   int // the topology's job index
	pol   Policy
	ranks []int
	rec   *recorder
	// start and end are when the job ran, from the start of the run's
	// jobs.
	start, end time.Duration
}

// pairJobs lists the pair's running jobs with a recorder each over its
// own hosts.
func (p *prepared) pairJobs(pol Policy, sw switchReader, plan *topo.Plan, readers []hostReader, hosts []hostapi.HostID, bar *progress) []*pairJob {
	var out []*pairJob
	for j, ranks := range p.topology.JobRanks() {
		if pol.Jobs[j] == nil {
			continue
		}
		var rs []hostReader
		var hs []hostapi.HostID
		for _, r := range ranks {
			rs, hs = append(rs, readers[r]), append(hs, hosts[r])
		}
		// Only the first job's recorder drives the progress bar.
		b := bar
		if len(out) > 0 {
			b = nil
		}
		out = append(out, &pairJob{idx: j, pol: *pol.Jobs[j], ranks: ranks, rec: newRecorder(sw, plan, rs, hs, p.opts.Steps, b)})
	}
	return out
}

// assemblePair builds a pair's run: the first running job's run as the
// run's own fields, every job's figures in Jobs, the fabric's switch
// counters and the first job's loss pattern.
func (p *prepared) assemblePair(ctx context.Context, pol Policy, seed uint64, jobs []*pairJob, res []*workload.Result,
	readers []hostReader, sw switchReader) (results.Run, error) {
	o := p.opts
	var run results.Run
	byJob := map[int]results.JobRun{}
	for i, pj := range jobs {
		jr := pj.rec.build(ctx, pj.pol, seed, res[i])
		jr.Profile, jr.Topology = o.Profile, o.Topology
		byJob[pj.idx] = jobRun(p.topology.Jobs[pj.idx], pj, &jr, res[i])
		if i == 0 {
			run = jr
			run.Policy, run.Gather = pol.Name, pj.pol.Gather
		}
	}
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
	sp := p.profile.Params().Switch
	run.QueueMarkBytes, run.QueueLimitBytes = float64(sp.ECN.KMin), float64(sp.DataQueue)
	rec := jobs[0].rec
	rec.sw = sw
	if err := rec.scrapeSwitches(ctx, &run); err != nil {
		return run, err
	}
	if err := p.attachPattern(&run, pol, seed, res[0]); err != nil {
		return run, err
	}
	report.FillFractions(&run)
	return run, nil
}

// idleJob is the figures of a job whose hosts ran nothing: what its
// ranks' hosts sent anyway (their tx_bytes, and the data bytes of any flow
// they hold), read from readers, which the results show and the tests hold
// to zero.
func idleJob(ctx context.Context, name string, ranks []int, readers []hostReader) (results.JobRun, error) {
	idle := results.JobRun{Job: name, Policy: Idle, Ranks: ranks, BudgetInvariantHeld: true, ChecksHeld: true}
	for _, r := range ranks {
		ct, err := readers[r].Counters(ctx)
		if err != nil {
			return idle, fmt.Errorf("counters of idle rank %d: %w", r, err)
		}
		idle.HostTxBytes += int64(ct.Host.TxBytes)
		for _, f := range ct.Flows {
			idle.DataBytes += int64(f.Values.DataBytes)
		}
	}
	return idle, nil
}

// jobRun is one running job's figures.
func jobRun(name string, pj *pairJob, r *results.Run, res *workload.Result) results.JobRun {
	rec := pj.rec
	jr := results.JobRun{Job: name, Policy: pj.pol.Name, Ranks: pj.ranks, TrainingTimeS: r.TrainingTimeS,
		StartS: pj.start.Seconds(), EndS: pj.end.Seconds(),
		TPMedianS: r.TPCompletionMedianS, RTOs: r.RTOs, CNPs: r.CNPs, RateCuts: r.RateCuts, ExemptFlows: r.ExemptFlows,
		DataBytes: r.DataBytes, RetxBytes: r.RetxBytes, ForgivenBytes: r.ForgivenBytes, ShedBytes: r.ShedBytes,
		TrimmedBytes: rec.trimmedRecv, HostTxBytes: rec.txBytes,
		BudgetInvariantHeld: r.BudgetInvariantHeld, ChecksHeld: r.ChecksHeld()}
	var ar []float64
	for _, s := range res.Steps {
		jr.StepTimesS = append(jr.StepTimesS, s.Duration.Seconds())
		for _, d := range s.AllReduce {
			ar = append(ar, d.Seconds())
		}
	}
	jr.AllReduceMedianS, jr.AllReduceP99S = median(ar), quantile(ar, 0.99)
	return jr
}

// quantile is the q-quantile of xs, the nearest rank: the smallest value
// with at least q of the values at or below it; 0 for none.
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	k := int(math.Ceil(q*float64(len(s)))) - 1
	return s[min(max(k, 0), len(s)-1)]
}

// runPairSim runs a policy pair in the simulator: both jobs on one event
// loop (workload.RunEventsJobs), on the placed fabric with each rank's
// host under its job's policy.
func (p *prepared) runPairSim(ctx context.Context, pol Policy, seed uint64, bar *progress) (results.Run, results.WallRun, error) {
	wallStart := time.Now()
	plan, f, err := p.placeSim(pol, seed)
	if err != nil {
		return results.Run{}, results.WallRun{}, err
	}
	readers := make([]hostReader, len(f.ports))
	hosts := make([]hostapi.HostID, len(f.ports))
	for i, port := range f.ports {
		readers[i], hosts[i] = port, port.Host()
	}
	jobs := p.pairJobs(pol, f, plan, readers, hosts, bar)
	every := simSampleRTTs * p.profile.Params().BaseRTT.Std()
	var sample func()
	sample = func() {
		now := f.sim.Now()
		jobs[0].rec.sample(ctx, now.Seconds())
		bar.simTime(now, f.sim.Stats().Events)
		f.sim.At(now+every, sample)
	}
	f.sim.At(0, sample)
	ej := make([]workload.EventJob, len(jobs))
	for i, pj := range jobs {
		cfg := p.workloadConfig(pj.pol, seed)
		cfg.StepTimeout = simStepTimeout
		ej[i] = workload.EventJob{Config: cfg, Observer: pj.rec}
		for _, r := range pj.ranks {
			port := f.ports[r]
			ej[i].Ranks = append(ej[i].Ranks, workload.EventRank{API: port, Host: port.Host()})
		}
	}
	start := f.sim.Now()
	res, err := workload.RunEventsJobs(ctx, ej, f.sim)
	if err != nil {
		return results.Run{}, results.WallRun{}, err
	}
	// On one event loop every job starts at once and runs its steps back
	// to back.
	for i, pj := range jobs {
		pj.start, pj.end = start, start+res[i].TrainingTime
	}
	run, err := p.assemblePair(ctx, pol, seed, jobs, res, readers, f)
	if err != nil {
		return results.Run{}, results.WallRun{}, err
	}
	st := f.sim.Stats()
	run.SimEvents, run.SimPacketHops = st.Events, st.PacketHops
	wall := time.Since(wallStart).Seconds()
	wr := results.WallRun{Policy: pol.Name, Seed: seed, Seconds: wall}
	if wall > 0 {
		wr.EventsPerS, wr.PacketHopsPer = float64(st.Events)/wall, float64(st.PacketHops)/wall
	}
	bar.simTime(f.sim.Now(), st.Events)
	return run, wr, nil
}

// The simulator's clients are the sim pair's readers.
var _ hostReader = (*simhost.Client)(nil)

// runPairReal runs a policy pair on the started fabric fab: each job's
// workload.Run on its own goroutine, at once, over the daemons.
func (p *prepared) runPairReal(ctx context.Context, pol Policy, seed uint64, fab *Fabric, ranks []workload.Rank, bar *progress) (results.Run, error) {
	readers, hosts := clientReaders(ranks)
	jobs := p.pairJobs(pol, fab, fab.Plan, readers, hosts, bar)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	jobs[0].rec.startSampling(ctx)
	type outcome struct {
		res *workload.Result
		err error
	}
	done := make(chan int, len(jobs))
	outs := make([]outcome, len(jobs))
	t0 := time.Now()
	for i, pj := range jobs {
		var jr []workload.Rank
		for _, r := range pj.ranks {
			jr = append(jr, ranks[r])
		}
		go func() {
			pj.start = time.Since(t0)
			res, err := workload.Run(ctx, p.workloadConfig(pj.pol, seed), jr, pj.rec)
			pj.end = time.Since(t0)
			outs[i] = outcome{res, err}
			done <- i
		}()
	}
	for got := 0; got < len(jobs); {
		select {
		case <-done:
			got++
		case died := <-fab.Died():
			cancel()
			for ; got < len(jobs); got++ {
				<-done
			}
			jobs[0].rec.stopSampling()
			return results.Run{}, fmt.Errorf("%w: %w", errChildDied, died)
		}
	}
	jobs[0].rec.stopSampling()
	res := make([]*workload.Result, len(jobs))
	for i, out := range outs {
		if out.err != nil {
			return results.Run{}, fmt.Errorf("job %s: %w", p.topology.Jobs[jobs[i].idx], out.err)
		}
		res[i] = out.res
	}
	return p.assemblePair(ctx, pol, seed, jobs, res, readers, fab)
}
