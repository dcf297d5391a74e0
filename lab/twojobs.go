package lab

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/forgive-emu/forgive/hostapi"
	"github.com/forgive-emu/forgive/lab/results"
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

// runJob is one running job of a run: the whole topology's ranks under
// the policy, or one job of a pair.
type runJob struct {
	idx   int    // the topology's job index (0 for a topology of one job)
	name  string // the job's name in a pair; empty for one job
	pol   Policy
	ranks []int
	rec   *recorder
	// start and end are when the job ran, from the start of the run's
	// jobs.
	start, end time.Duration
}

// jobs lists the run's running jobs with a recorder each over its own
// hosts: one job of every rank, or each running job of a pair.
func (p *prepared) jobs(pol Policy, sw placement, readers []hostReader, hosts []hostapi.HostID, bar *progress) []*runJob {
	plan := sw.plan()
	if pol.Jobs == nil {
		ranks := make([]int, len(readers))
		for i := range ranks {
			ranks[i] = i
		}
		return []*runJob{{pol: pol, ranks: ranks, rec: newRecorder(sw, plan, readers, hosts, p.opts.Steps, bar)}}
	}
	var out []*runJob
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
		out = append(out, &runJob{idx: j, name: p.topology.Jobs[j], pol: *pol.Jobs[j], ranks: ranks, rec: newRecorder(sw, plan, rs, hs, p.opts.Steps, b)})
	}
	return out
}

// wrap names the job in a pair's error.
func (j *runJob) wrap(err error) error {
	if j.name == "" {
		return err
	}
	return fmt.Errorf("job %s: %w", j.name, err)
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
func jobRun(name string, pj *runJob, r *results.Run, res *workload.Result) results.JobRun {
	rec := pj.rec
	jr := results.JobRun{Job: name, Policy: pj.pol.Name, Ranks: pj.ranks, TrainingTimeS: r.TrainingTimeS,
		StartS: pj.start.Seconds(), EndS: pj.end.Seconds(),
		TPMedianS: r.TPCompletionMedianS, RTOs: r.RTOs, CNPs: r.CNPs, RateCuts: r.RateCuts, ExemptFlows: r.ExemptFlows,
		DataBytes: r.DataBytes, RetxBytes: r.RetxBytes, ForgivenBytes: r.ForgivenBytes, ShedBytes: r.ShedBytes,
		TrimmedBytes: int64(rec.flows.All.TrimmedBytes), HostTxBytes: rec.txBytes,
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
