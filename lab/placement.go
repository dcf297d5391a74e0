package lab

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/forgive-emu/forgive/hostapi"
	"github.com/forgive-emu/forgive/lab/fabric"
	"github.com/forgive-emu/forgive/lab/netns"
	"github.com/forgive-emu/forgive/lab/results"
	"github.com/forgive-emu/forgive/lab/simhost"
	"github.com/forgive-emu/forgive/lab/topo"
	"github.com/forgive-emu/forgive/sim"
	"github.com/forgive-emu/forgive/workload"
)

// placement is one run's placed fabric as the run path (runOne) sees it,
// whatever the placement: real processes on loopback or in namespaces
// (realPlacement), or the engines in the simulator (simPlacement). As
// quic-go runs one connection over real UDP or its simulated network,
// the lab runs one job shape over either.
type placement interface {
	switchReader
	// plan is the placed fabric's plan.
	plan() *topo.Plan
	// hosts are what the recorder reads of each rank's host, and the
	// hosts' ids, in rank order.
	hosts() ([]hostReader, []hostapi.HostID)
	// run runs the jobs at once to their ends, their recorders observing
	// (the first one sampling the rate and the queue), and returns each
	// job's result.
	run(ctx context.Context, p *prepared, seed uint64, jobs []*runJob, bar *progress) ([]*workload.Result, error)
	// measure adds what only this placement measures, while the fabric
	// still runs: the kernel's socket drops, the simulator's events.
	measure(run *results.Run, bar *progress) error
	// real is the running fabric of a real placement (for
	// Options.Inspect); nil in the simulator.
	real() *fabric.Fabric
	// stop stops the fabric; safe to call once a run failed.
	stop() error
}

// open places the fabric for one run of pol with seed: run idx of the
// sweep picks a real placement's /24.
func (p *prepared) open(ctx context.Context, pol Policy, seed uint64, idx int) (placement, error) {
	if p.sim {
		return p.openSim(pol, seed)
	}
	return p.openReal(ctx, pol, seed, idx)
}

// PlacementSim is the placement that runs the fabric in the simulator.
const PlacementSim = "sim"

// The simulator is the workload's event loop as it is.
var _ workload.Loop = (*sim.Sim)(nil)

// The sim placement places the topology exactly as for loopback (the same
// YAML for every daemon) in a fixed network and directory, so the
// configurations, and with them the run, depend only on the inputs.
const (
	simNet = "127.0.0."
	simDir = "/forgive-sim"
)

// simSampleRTTs is the sim placement's sampling period of the rate and
// the queue, in the profile's base RTTs: on the loopback profile's 2 ms it
// is the real placements' sampleEvery, and it follows the profile's time
// scale (10 us at seed-400g: a sample every 100 us of virtual time).
const simSampleRTTs = 10

// simStepTimeout bounds a step in virtual time.
const simStepTimeout = 2 * time.Minute

// realPlacement is a started fabric of real processes and one client per
// rank.
type realPlacement struct {
	*fabric.Fabric
	ranks    []workload.Rank
	closeAll func()
}

// openReal places and starts the fabric and connects to every host; each
// rank of a pair of jobs takes its job's policy.
func (p *prepared) openReal(ctx context.Context, pol Policy, seed uint64, idx int) (*realPlacement, error) {
	o := p.opts
	place := topo.PlaceOptions{
		Network: p.network, Net: fmt.Sprintf("127.%d.%d.", o.Net, idx%250), Seed: seed, Capture: o.Capture,
		Host: pol.HostPolicy, RankHost: p.rankHosts(pol),
	}
	if p.network == topo.Namespaces {
		place.RunID = netns.NewRunID()
	}
	fab, err := fabric.Start(ctx, fabric.Config{Topology: p.topology, Profile: p.profile, Place: place, Bins: p.bins, Logs: o.Logs,
		Seal: o.Seal == SealOn})
	if err != nil {
		return nil, err
	}
	ranks, closeAll, err := dialRanks(ctx, fab.Plan)
	if err != nil {
		fab.Stop()
		return nil, err
	}
	return &realPlacement{Fabric: fab, ranks: ranks, closeAll: closeAll}, nil
}

func (r *realPlacement) plan() *topo.Plan { return r.Plan }

func (r *realPlacement) hosts() ([]hostReader, []hostapi.HostID) { return clientReaders(r.ranks) }

// run runs each job's workload.Run on its own goroutine over the daemons,
// and stops them all when a process of the fabric dies.
func (r *realPlacement) run(ctx context.Context, p *prepared, seed uint64, jobs []*runJob, _ *progress) ([]*workload.Result, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	jobs[0].rec.startSampling(ctx)
	defer jobs[0].rec.stopSampling()
	type outcome struct {
		res *workload.Result
		err error
	}
	done := make(chan int, len(jobs))
	outs := make([]outcome, len(jobs))
	t0 := time.Now()
	for i, j := range jobs {
		var jr []workload.Rank
		for _, rk := range j.ranks {
			jr = append(jr, r.ranks[rk])
		}
		go func() {
			j.start = time.Since(t0)
			res, err := workload.Run(ctx, p.workloadConfig(j.pol, seed), jr, j.rec)
			j.end = time.Since(t0)
			outs[i] = outcome{res, err}
			done <- i
		}()
	}
	for got := 0; got < len(jobs); {
		select {
		case <-done:
			got++
		case died := <-r.Died():
			cancel()
			for ; got < len(jobs); got++ {
				<-done
			}
			return nil, fmt.Errorf("%w: %w", errChildDied, died)
		}
	}
	res := make([]*workload.Result, len(jobs))
	for i, out := range outs {
		if out.err != nil {
			return nil, jobs[i].wrap(out.err)
		}
		res[i] = out.res
	}
	return res, nil
}

// measure reads the kernel's drops at the fabric's sockets.
func (r *realPlacement) measure(run *results.Run, _ *progress) error {
	var err error
	run.SocketDrops, err = fabric.SocketDrops(r.Plan)
	return err
}

func (r *realPlacement) real() *fabric.Fabric { return r.Fabric }

// stop closes the clients, then stops the fabric.
func (r *realPlacement) stop() error {
	r.closeAll()
	return r.Stop()
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

// openSim places the topology exactly as for loopback, in a fixed network
// and directory, and builds its engines in process; each rank of a pair
// of jobs takes its job's policy.
// simPlacement is a fabric built in the simulator.
type simPlacement struct {
	*fabric.Sim
	every time.Duration // the recorder's sampling period
}

func (p *prepared) openSim(pol Policy, seed uint64) (*simPlacement, error) {
	plan, err := topo.Place(p.topology, p.profile, topo.PlaceOptions{
		Network: topo.Simulated, Net: simNet, Dir: simDir, Seed: seed, Host: pol.HostPolicy, RankHost: p.rankHosts(pol),
	})
	if err != nil {
		return nil, err
	}
	f, err := fabric.BuildSim(plan, p.payloadFree)
	if err != nil {
		return nil, err
	}
	f.Loop.SetWorkers(p.opts.Workers)
	return &simPlacement{Sim: f, every: simSampleRTTs * p.profile.Params().BaseRTT.Std()}, nil
}

// The simulator's clients are its readers.
var _ hostReader = (*simhost.Client)(nil)

func (f *simPlacement) plan() *topo.Plan { return f.Plan }

func (f *simPlacement) hosts() ([]hostReader, []hostapi.HostID) {
	readers := make([]hostReader, len(f.Clients))
	hosts := make([]hostapi.HostID, len(f.Clients))
	for i, port := range f.Clients {
		readers[i], hosts[i] = port, port.Host()
	}
	return readers, hosts
}

// run runs the jobs on the simulator's clock: one job on the event loop
// itself (workload.RunEvents), a pair's jobs on one loop at once
// (workload.RunEventsJobs), every job starting at once and running its
// steps back to back.
func (f *simPlacement) run(ctx context.Context, p *prepared, seed uint64, jobs []*runJob, bar *progress) ([]*workload.Result, error) {
	rec := jobs[0].rec
	var sample func()
	sample = func() {
		now := f.Loop.Now()
		rec.sample(ctx, now.Seconds())
		bar.simTime(now, f.Loop.Stats().Events)
		f.Loop.AtGlobal(now+f.every, sample)
	}
	// it reads a switch's queue: on several workers, every one stops first
	f.Loop.AtGlobal(0, sample)
	ej := make([]workload.EventJob, len(jobs))
	for i, j := range jobs {
		cfg := p.workloadConfig(j.pol, seed)
		cfg.StepTimeout = simStepTimeout
		ej[i] = workload.EventJob{Config: cfg, Observer: j.rec}
		for _, r := range j.ranks {
			port := f.Clients[r]
			ej[i].Ranks = append(ej[i].Ranks, workload.EventRank{API: port, Host: port.Host()})
		}
	}
	if len(jobs) == 1 && jobs[0].name == "" {
		res, err := workload.RunEvents(ctx, ej[0].Config, ej[0].Ranks, f.Loop, rec)
		return []*workload.Result{res}, err
	}
	start := f.Loop.Now()
	res, err := workload.RunEventsJobs(ctx, ej, f.Loop)
	if err != nil {
		return nil, err
	}
	for i, j := range jobs {
		j.start, j.end = start, start+res[i].TrainingTime
	}
	return res, nil
}

// measure adds the simulator's events and packet hops.
func (f *simPlacement) measure(run *results.Run, bar *progress) error {
	st := f.Loop.Stats()
	run.SimEvents, run.SimPacketHops = st.Events, st.PacketHops
	bar.simTime(f.Loop.Now(), st.Events)
	return nil
}

func (f *simPlacement) real() *fabric.Fabric { return nil }

func (f *simPlacement) stop() error { return nil }
