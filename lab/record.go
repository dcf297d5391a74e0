package lab

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/forgive-emu/forgive/hostapi"
	"github.com/forgive-emu/forgive/lab/results"
	"github.com/forgive-emu/forgive/lab/topo"
	"github.com/forgive-emu/forgive/workload"
)

// sampleEvery is the period of the rate and queue samples behind the plots.
const sampleEvery = 20 * time.Millisecond

// hostReader is what the recorder reads of a rank's host: a daemon's
// client, or the simulator's in-process client.
type hostReader interface {
	Counters(ctx context.Context) (hostapi.Counters, error)
	Steps(ctx context.Context, limit int) ([]hostapi.StepRecord, error)
}

// switchReader is what the recorder reads of the switches: their metrics,
// or the simulator's engines.
type switchReader interface {
	// QueueBytes is a port's data-queue occupancy now.
	QueueBytes(ctx context.Context, sw, port string) (float64, error)
	// TrimmedBytes is the payload bytes the switches trimmed so far, by
	// the role of the egress port that trimmed them (a leaf's host port,
	// its uplink, a spine's downlink).
	TrimmedBytes(ctx context.Context) (map[topo.Role]int64, error)
}

// recorder watches one run: it is the workload's observer, samples a
// sender's rate and the bottleneck queue, and reads every host's counters
// and ledger once the last step is done (before the workload tears its
// flows down).
type recorder struct {
	sw    switchReader
	plan  *topo.Plan
	ranks []hostReader
	hosts []hostapi.HostID
	steps int
	bar   *progress

	start time.Time
	mu    sync.Mutex
	rate  []results.RatePoint
	occ   []results.QueuePoint
	sig   []results.SignalPoint
	// signals are the ranks' readers of their flows' CNPs and rate cuts,
	// when every rank has one (the simulator): then each sample adds a
	// SignalPoint.
	signals []signalReader
	// rateID and ratePeer are the sampled sender flow once chosen
	// (rateFlow).
	rateID   hostapi.FlowID
	ratePeer hostapi.HostID
	switchOf map[hostapi.HostID]string // each host's switch, for rateFlow
	stop     context.CancelFunc
	wg       sync.WaitGroup
	// flows sums every flow's counters, read after the last step: those
	// still open and those destroyed before it (a flow per message).
	flows hostapi.FlowSums
	// sealed and sealRefused sum the hosts' sealed packets and sealed
	// packets refused, read with flows.
	sealed, sealRefused uint64
	ledgers             [][]hostapi.StepRecord
	// unbudgeted sums the ranks' unbudgeted_bytes counters.
	unbudgeted int64
	// txBytes sums the hosts' tx_bytes: with the flows' trimmed_bytes
	// (trimmed on the way to these ranks), a job's own figures in a run
	// of two jobs.
	txBytes int64
	readErr error
}

// signalReader is a rank's cheap total of its flows' congestion signals:
// the CNPs they received and the rate cuts they applied (the simulator's
// hosts, nic.Engine.Signals).
type signalReader interface {
	Signals() (cnps, cuts uint64)
}

func newRecorder(sw switchReader, plan *topo.Plan, ranks []hostReader, hosts []hostapi.HostID, steps int, bar *progress) *recorder {
	r := &recorder{sw: sw, plan: plan, ranks: ranks, hosts: hosts, steps: steps, bar: bar}
	for _, rk := range ranks {
		s, ok := rk.(signalReader)
		if !ok {
			r.signals = nil
			break
		}
		r.signals = append(r.signals, s)
	}
	return r
}

// clientReaders are the real placements' readers: the ranks' clients.
func clientReaders(ranks []workload.Rank) ([]hostReader, []hostapi.HostID) {
	var rs []hostReader
	var hs []hostapi.HostID
	for _, r := range ranks {
		rs, hs = append(rs, r.Client), append(hs, r.Host)
	}
	return rs, hs
}

// StepStarted implements workload.Observer.
func (r *recorder) StepStarted(step int, critical bool) { r.bar.step(step) }

// StepDone implements workload.Observer. After the last step it reads the
// daemons, while the flows still exist.
func (r *recorder) StepDone(step int, _ workload.StepResult) {
	if step != r.steps {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i, rk := range r.ranks {
		ct, err := rk.Counters(ctx)
		if err != nil {
			r.readErr = fmt.Errorf("counters of host %d: %w", r.hosts[i], err)
			return
		}
		for _, f := range ct.Flows {
			r.flows.AddFlow(f.Values)
		}
		r.flows.Merge(ct.Retired)
		h := ct.Host
		r.txBytes += int64(h.TxBytes)
		r.sealed += h.Sealed
		r.sealRefused += h.RefusedUnsealed + h.RefusedUnknownDomain + h.RefusedWrongDomain + h.RefusedHeaderTag +
			h.RefusedPayloadTag + h.RefusedMalformedSeal + h.RefusedReplayed
		r.unbudgeted += int64(ct.Host.UnbudgetedBytes)
		recs, err := rk.Steps(ctx, hostapi.MaxStepRecords)
		if err != nil {
			r.readErr = fmt.Errorf("step records of host %d: %w", r.hosts[i], err)
			return
		}
		r.ledgers = append(r.ledgers, recs)
	}
}

// rateRank is the rank whose sender flow the rate samples follow.
func (r *recorder) rateRank() int { return min(1, len(r.ranks)-1) }

// rateFlow picks the sampled sender among the rank's flows: its ring flow
// to the next rank (1000 + rank), which crosses the spine in an
// interleaved leaf-spine placement, when it has one; otherwise (a compiled
// collective's flows) the lowest-numbered gradient flow that has sent data
// to a host on another switch, or to any host on a fabric of one switch.
// The choice stands while the flow exists; a flow per message is replaced
// by the next.
func (r *recorder) rateFlow(flows []hostapi.FlowCounters) (hostapi.FlowCounters, bool) {
	ring := workload.RingFlow(0, len(r.ranks), r.rateRank())
	var chosen, far, near *hostapi.FlowCounters
	for i := range flows {
		f := &flows[i]
		switch {
		case r.rateID != 0 && f.Flow == r.rateID && f.Peer == r.ratePeer:
			chosen = f
		case f.Flow == ring && r.rateID == 0:
			chosen = f
		case f.Values.DataBytes == 0 || !workload.GradientFlow(f.Flow, 0, len(r.ranks)):
		case r.crossesSpine(f.Peer):
			if far == nil || f.Flow < far.Flow {
				far = f
			}
		case len(r.plan.Switches) < 2 && (near == nil || f.Flow < near.Flow):
			near = f
		}
		if chosen != nil {
			break
		}
	}
	if chosen == nil {
		chosen = cmpOr(far, near)
	}
	if chosen == nil {
		return hostapi.FlowCounters{}, false
	}
	r.rateID, r.ratePeer = chosen.Flow, chosen.Peer
	return *chosen, true
}

// crossesSpine reports whether the rate rank's host and peer are cabled
// to different switches.
func (r *recorder) crossesSpine(peer hostapi.HostID) bool {
	if r.switchOf == nil {
		r.switchOf = map[hostapi.HostID]string{}
		for _, h := range r.plan.Hosts {
			r.switchOf[hostapi.HostID(h.ID)] = h.Switch
		}
	}
	me, ok1 := r.switchOf[r.hosts[r.rateRank()]]
	other, ok2 := r.switchOf[peer]
	return ok1 && ok2 && me != other
}

// cmpOr is the first non-nil of its arguments.
func cmpOr[T any](xs ...*T) *T {
	for _, x := range xs {
		if x != nil {
			return x
		}
	}
	return nil
}

// startSampling samples on a goroutine every sampleEvery of real time.
func (r *recorder) startSampling(ctx context.Context) {
	ctx, r.stop = context.WithCancel(ctx)
	r.start = time.Now()
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		tick := time.NewTicker(sampleEvery)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			r.sample(ctx, time.Since(r.start).Seconds())
		}
	}()
}

// sample takes one sample of the rate and the queue at t seconds, and
// of the signals where the ranks give them.
func (r *recorder) sample(ctx context.Context, t float64) {
	bn := r.plan.Bottleneck
	if ct, err := r.ranks[r.rateRank()].Counters(ctx); err == nil {
		if f, ok := r.rateFlow(ct.Flows); ok {
			r.mu.Lock()
			r.rate = append(r.rate, results.RatePoint{TS: t, BPS: float64(f.Values.RateBPS), Exempt: f.Values.Exempt == 1})
			r.mu.Unlock()
		}
	}
	if q, err := r.sw.QueueBytes(ctx, bn.Switch, bn.Port); err == nil {
		r.mu.Lock()
		r.occ = append(r.occ, results.QueuePoint{TS: t, Bytes: q})
		r.mu.Unlock()
	}
	if r.signals != nil {
		r.sampleSignals(ctx, t)
	}
}

// sampleSignals adds a SignalPoint: the switches' trimmed bytes by role
// and the ranks' CNPs and rate cuts, cumulative.
func (r *recorder) sampleSignals(ctx context.Context, t float64) {
	byRole, err := r.sw.TrimmedBytes(ctx)
	if err != nil {
		return
	}
	p := results.SignalPoint{TS: t, TrimmedHost: byRole[topo.RoleHost], TrimmedUplink: byRole[topo.RoleUplink], TrimmedDownlink: byRole[topo.RoleDownlink]}
	for _, s := range r.signals {
		cnps, cuts := s.Signals()
		p.CNPs += cnps
		p.RateCuts += cuts
	}
	r.mu.Lock()
	r.sig = append(r.sig, p)
	r.mu.Unlock()
}

func (r *recorder) stopSampling() {
	if r.stop != nil {
		r.stop()
	}
	r.wg.Wait()
}

// build turns the workload's result and the daemons' counters into a run.
func (r *recorder) build(ctx context.Context, pol Policy, seed uint64, res *workload.Result) results.Run {
	run := results.Run{Policy: pol.Name, Seed: seed,
		TrainingTimeS: res.TrainingTime.Seconds(), GradientBytes: res.GradientBytesExpected,
		ForgivenBytes: res.ForgivenBytes, ShedBytes: res.ShedBytes, ElementsTested: res.ElementsTested,
		BudgetInvariantHeld: r.readErr == nil, Gather: topo.GatherKey(pol.Gather)}
	checks(&run, pol, res, !res.DataChecked)
	run.UnbudgetedBytes = r.unbudgeted
	var crit, nonCrit []float64
	for _, s := range res.Steps {
		st := results.Step{Step: s.Step, Critical: s.Critical, TimeS: s.Duration.Seconds(), Shed: s.Shed, Forgiven: s.Forgiven, Invariant: true,
			StartS: s.Start.Seconds(), ComputeEndS: s.ComputeEnd.Seconds(), AllReduceFirstS: s.AllReduceFirst.Seconds(),
			AllReduceLastS: s.AllReduceLast.Seconds(), EndS: s.End.Seconds()}
		for _, d := range s.AllReduce {
			st.AllReduceS = append(st.AllReduceS, d.Seconds())
			if s.Critical {
				crit = append(crit, d.Seconds())
			} else {
				nonCrit = append(nonCrit, d.Seconds())
			}
		}
		for _, d := range s.TP {
			st.TPS = append(st.TPS, d.Seconds())
		}
		run.Steps = append(run.Steps, st)
	}
	run.AllReduceMedianCriticalS, run.AllReduceMedianNonCriticalS = median(crit), median(nonCrit)
	var tp []float64
	for _, d := range res.TPDurations {
		tp = append(tp, d.Seconds())
	}
	run.TPCompletionMedianS = median(tp)
	r.ledger(&run)
	r.flowCounters(&run)
	run.SealedPackets, run.SealRefusals = r.sealed, r.sealRefused
	r.mu.Lock()
	run.Rate, run.Occupancy, run.Signals = r.rate, r.occ, r.sig
	r.mu.Unlock()
	if r.rateID != 0 {
		run.RateFlow = fmt.Sprintf("flow %d (rank %d to rank %d)", r.rateID, r.rateRank(), slices.Index(r.hosts, r.ratePeer))
	}
	run.OccupancyPort = r.plan.Bottleneck.Switch + "/" + r.plan.Bottleneck.Port
	return run
}

// ledger folds every rank's FORGIVE records into the run's steps: "The
// loss-budget invariant held on every step" is checked at every rank.
func (r *recorder) ledger(run *results.Run) {
	byStep := map[int]*results.Step{}
	for i := range run.Steps {
		byStep[run.Steps[i].Step] = &run.Steps[i]
	}
	for _, recs := range r.ledgers {
		for _, rec := range recs {
			st := byStep[int(rec.Step)]
			if !rec.InvariantHeld || !invariantsHold(rec) {
				run.BudgetInvariantHeld = false
				if st != nil {
					st.Invariant = false
				}
			}
			if st != nil {
				st.Budget += rec.Budget
				st.FirstFifthTrimmed += rec.FirstFifthTrimmed
				st.FirstFifthForgiven += rec.FirstFifthForgiven
				st.LastFifthTrimmed += rec.LastFifthTrimmed
				st.LastFifthForgiven += rec.LastFifthForgiven
				st.TrafficFirstFifthTrimmed += rec.TrafficFirstFifthTrimmed
				st.TrafficFirstFifthForgiven += rec.TrafficFirstFifthForgiven
				st.TrafficLastFifthTrimmed += rec.TrafficLastFifthTrimmed
				st.TrafficLastFifthForgiven += rec.TrafficLastFifthForgiven
			}
			addDecisions(&run.Decisions, rec)
			run.GatheredForgivenBytes += rec.GatheredForgiven
			run.GatherRepairs += rec.GatherRepairs
			run.GatherRepairBytes += rec.GatherRepairBytes
			run.TrafficFirstFifthTrimmedBytes += rec.TrafficFirstFifthTrimmed
			run.TrafficFirstFifthForgivenBytes += rec.TrafficFirstFifthForgiven
			run.TrafficLastFifthTrimmedBytes += rec.TrafficLastFifthTrimmed
			run.TrafficLastFifthForgivenBytes += rec.TrafficLastFifthForgiven
			run.FirstFifthTrimmedBytes += rec.FirstFifthTrimmed
			run.FirstFifthForgivenBytes += rec.FirstFifthForgiven
			run.LastFifthTrimmedBytes += rec.LastFifthTrimmed
			run.LastFifthForgivenBytes += rec.LastFifthForgiven
		}
	}
	run.FirstFifthForgivenFrac = share(run.FirstFifthForgivenBytes, run.FirstFifthTrimmedBytes)
	run.LastFifthForgivenFrac = share(run.LastFifthForgivenBytes, run.LastFifthTrimmedBytes)
	run.TrafficFirstFifthForgivenFrac = share(run.TrafficFirstFifthForgivenBytes, run.TrafficFirstFifthTrimmedBytes)
	run.TrafficLastFifthForgivenFrac = share(run.TrafficLastFifthForgivenBytes, run.TrafficLastFifthTrimmedBytes)
	if len(r.ledgers) != len(r.ranks) {
		run.BudgetInvariantHeld = false // a rank's ledger could not be read
	}
}

// invariantsHold rechecks a step record's FORGIVE invariants apart from the
// ledger's own verdict (InvariantHeld): forgiven <= budget; forgiven <=
// p/(1-p) x received, as forgiven <= p x (received + forgiven), with one
// byte of slack for the float product (the ledger's check is exact); and
// no range charged twice: received + forgiven, distinct bytes each,
// never exceed the step's expected bytes once it closed, nor ever go
// below zero.
func invariantsHold(rec hostapi.StepRecord) bool {
	switch {
	case rec.Forgiven < 0 || rec.Received < 0 || rec.Outstanding < 0 || rec.UnbudgetedBytes < 0:
		return false
	case rec.Forgiven > rec.Budget:
		return false
	case float64(rec.Forgiven) > rec.P*float64(rec.Received+rec.Forgiven)+1:
		return false
	case !rec.Open && rec.Received+rec.Forgiven > rec.Expected:
		return false
	}
	return true
}

// share is part/whole, 0 for an empty whole.
func share(part, whole int64) float64 {
	if whole == 0 {
		return 0
	}
	return float64(part) / float64(whole)
}

// flowCounters copies the senders' summed counters into run.
func (r *recorder) flowCounters(run *results.Run) {
	all, ex := r.flows.All, r.flows.Exempt
	run.DataBytes += int64(all.DataBytes)
	run.RetxBytes += int64(all.RetxBytes)
	run.CNPs += all.CNPsRecv
	run.RateCuts += all.RateCuts
	run.RTOs += all.RTOs
	exempt, reobeyed := int(ex.EverExempt), int(r.flows.ReObeyedFlows)
	flagChanges, reobeyNS, reobeyPeriods := ex.ExhaustedChanges, ex.ReObeyNS, ex.ReObeyed
	run.ExemptFlows = exempt
	if exempt > 0 {
		run.FlagChangesPerExemptFlow = float64(flagChanges) / float64(exempt)
		run.ReObeyedFrac = float64(reobeyed) / float64(exempt)
	}
	if reobeyPeriods > 0 {
		run.ReObeyMeanS = float64(reobeyNS) / float64(reobeyPeriods) / 1e9
	}
}

// scrapeSwitches adds the switches' trimmed payload bytes and the
// bottleneck's thresholds.
func (r *recorder) scrapeSwitches(ctx context.Context, run *results.Run) error {
	byRole, err := r.sw.TrimmedBytes(ctx)
	for role, n := range byRole {
		run.TrimmedBytes += n
		if n > 0 {
			if run.TrimmedBytesByRole == nil {
				run.TrimmedBytesByRole = map[string]int64{}
			}
			run.TrimmedBytesByRole[string(role)] += n
		}
	}
	return err
}

// addDecisions adds one rank's step record to the run's verdicts.
func addDecisions(d *results.Decisions, rec hostapi.StepRecord) {
	d.Trims += rec.Trims
	d.Forgives += rec.Forgives
	d.VestingRefusals += rec.VestingRefusals
	d.BudgetRefusals += rec.BudgetRefusals
	d.DrawRefusals += rec.DrawRefusals
	d.LateTrims += rec.LateTrims
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
