package workload

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/forgive-emu/forgive/budget"
	"github.com/forgive-emu/forgive/hostapi"
)

// Result is what a run measured and verified.
type Result struct {
	Steps        []StepResult
	TrainingTime time.Duration // the sum of the step durations
	// GradientBytesExpected is what the all-reduce delivers to the ranks
	// without loss: 2(N-1) chunks per rank and step. ForgivenBytes were
	// zero-filled by FORGIVE; ShedBytes were never sent (DBLP).
	GradientBytesExpected, ForgivenBytes, ShedBytes int64
	// ElementsTested counts (rank, element) pairs compared with the exact
	// sum: every element no forgiven range or shed message touched.
	ElementsTested, Mismatches int64
	// ReplicaMismatches counts, over the steps, the gradient elements the
	// ranks do not all hold bit for bit alike at the step's end, tainted
	// or not: 0 when the replicas stay identical (with DataChecked only).
	ReplicaMismatches int64
	// NonGradientExact: every tensor, pipeline and burst message arrived
	// whole and none of its bytes was forgiven; with DataChecked, every
	// byte also arrived as sent.
	NonGradientExact bool
	// DataChecked: the payload bytes were checked (the gradient sums and
	// the non-gradient bytes); false in a payload-free run
	// (Config.PayloadFree), which checks lengths and forgiveness only.
	DataChecked bool
	// GradientMessagesWhole: every gradient receive completed with its
	// chunk's length, received or forgiven.
	GradientMessagesWhole bool
	TPDurations           []time.Duration
	// Pattern is the loss pattern: every range FORGIVE forgave in a ring
	// receive, in step order, then rank order, then the order the rank's
	// completions reported them.
	Pattern Pattern
}

// Pattern is where in the gradient a run's forgiveness fell.
type Pattern struct {
	Ranks      int // the ring's ranks
	ChunkBytes int // bytes of one ring message: GradientBytes / Ranks
	Ranges     []ForgivenRange
}

// ForgivenRange is one forgiven range of a ring receive.
type ForgivenRange struct {
	Step     int
	Receiver int // the rank that received (and forgave)
	Sender   int // its ring predecessor
	Flow     hostapi.FlowID
	// Gather: received in the all-gather (a finished value), not the
	// reduce-scatter (a partial sum); Round is the phase's round, from 0.
	Gather bool
	Round  int
	// Offset is the range's byte offset in the receiver's flat gradient
	// tensor: the chunk's offset plus the range's offset in the message.
	Offset, Length int64
	// Time is when the receive completed, on the run's clock (the
	// virtual time in the simulator).
	Time time.Duration
}

// StepResult is one step.
type StepResult struct {
	Step     int
	Critical bool
	// Start is when the step began (before BeginStep), End when the last
	// rank finished its work, on the driver's clock (since the run began
	// for real daemons, the virtual time in the simulator); Duration =
	// End - Start, the compute phase and the communication.
	Start, End time.Duration
	Duration   time.Duration
	// ComputeEnd is when the compute phase ended (Start + Config.Compute);
	// AllReduceFirst and AllReduceLast are when the first and the last
	// rank began its all-reduce (after the compute phase and, with
	// WithCompute, after its own model-parallel exchanges): the phases of
	// the step, on the same clock.
	ComputeEnd                    time.Duration
	AllReduceFirst, AllReduceLast time.Duration
	// AllReduce is each rank's all-reduce time: from the step's
	// communication start to its last gradient receive.
	AllReduce []time.Duration
	// TP is each tensor-parallel message's time from the communication
	// start, when its send is posted, to its receive completion.
	TP                       []time.Duration
	Forgiven, Shed, Expected int64
	ElementsTested           int64
	Mismatches               int64
	ReplicaMismatches        int64 // elements the ranks do not all hold alike
}

// Run runs the job on ranks (rank i on ranks[i].Host) through their
// daemons, one step after the other, and verifies every step. A mismatch
// or a non-gradient payload that was not exact is reported in the Result
// and makes Run return an error after the last step; a failed step (an
// error completion, a lost daemon, a step past its timeout) stops the run
// at once. Either way every flow and region is released before Run
// returns, and no goroutine outlives it.
//
// Each rank waits for its completions on a goroutine of its own, on the
// real clock. While it runs, Run owns the clients' completions: it polls
// them and ignores any that are not its own work.
func Run(ctx context.Context, cfg Config, ranks []Rank, obs Observer) (*Result, error) {
	apis := make([]HostAPI, len(ranks))
	hosts := make([]hostapi.HostID, len(ranks))
	for i, r := range ranks {
		if r.Client == nil {
			return nil, fmt.Errorf("%w: rank %d has no client", ErrConfig, i)
		}
		apis[i], hosts[i] = clientAPI{r.Client}, r.Host
	}
	return run(ctx, cfg, apis, hosts, obs, newPollDriver())
}

// EventRank is one rank of a run on an event loop.
type EventRank struct {
	API  EventHostAPI
	Host hostapi.HostID
}

// RunEvents runs the same job as [Run] on an event loop in virtual time:
// every rank reacts to its completions as the loop delivers them, a
// compute phase is a timer on the loop, and a step's timeout is virtual.
// Nothing depends on goroutine timing, so a deterministic loop gives a
// deterministic run. RunEvents must be called on the loop's goroutine,
// with the loop not running.
func RunEvents(ctx context.Context, cfg Config, ranks []EventRank, loop Loop, obs Observer) (*Result, error) {
	if loop == nil {
		return nil, fmt.Errorf("%w: no event loop", ErrConfig)
	}
	apis := make([]HostAPI, len(ranks))
	hosts := make([]hostapi.HostID, len(ranks))
	for i, r := range ranks {
		if r.API == nil {
			return nil, fmt.Errorf("%w: rank %d has no port", ErrConfig, i)
		}
		apis[i], hosts[i] = r.API, r.Host
	}
	return run(ctx, cfg, apis, hosts, obs, &loopDriver{loop: loop})
}

// job is one run.
type job struct {
	drv   driver
	p     *plan
	ranks []*rank
	obs   Observer
	det   *budget.Detector
	res   *Result

	firstMismatch string
	failures      []string
	short         []string // gradient receives not of their chunk's length
}

func run(ctx context.Context, cfg Config, apis []HostAPI, hosts []hostapi.HostID, obs Observer, drv driver) (res *Result, err error) {
	cfg, err = cfg.withDefaults(hosts)
	if err != nil {
		return nil, err
	}
	j := &job{drv: drv, p: newPlan(cfg, hosts), obs: obs, res: &Result{NonGradientExact: true, GradientMessagesWhole: true, DataChecked: !cfg.PayloadFree}}
	j.res.Pattern.Ranks, j.res.Pattern.ChunkBytes = j.p.n, j.p.chunk
	if cfg.Norms != nil {
		if j.det, err = budget.NewDetector(cfg.Eta); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
	}
	tag := nextRunTag()
	for i := range apis {
		r := &rank{idx: i, host: hosts[i], api: apis[i], p: j.p, tag: tag, lay: j.p.layout(i), now: drv.now}
		if !cfg.PayloadFree {
			r.taint = newTaint(cfg.GradientBytes / 4)
		}
		if g := j.p.groups; g != nil {
			r.sched = newSchedRank(r, g.plan(i), j.p.gradientExchange(i, r.lay))
			if j.p.tensorGroups() {
				r.tpSched = newSchedRank(r, j.p.tensorPlan(i), j.p.tensorExchange(i, r.lay))
			}
		}
		j.ranks = append(j.ranks, r)
	}
	if err := drv.check(apis); err != nil {
		return nil, err
	}
	drv.attach(j)
	defer func() {
		// The host APIs queue again what the teardown fails, for it to drain.
		drv.detach(j)
		if cerr := j.teardown(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	if err := j.setup(ctx); err != nil {
		return j.res, err
	}
	for s := 1; s <= cfg.Steps; s++ {
		if err := j.step(ctx, s); err != nil {
			return j.res, err
		}
	}
	return j.res, j.verdict()
}

// setup registers every rank's memory and creates its flows.
func (j *job) setup(ctx context.Context) error {
	cfg := &j.p.cfg
	for _, r := range j.ranks {
		mem, err := r.api.RegisterMemory(ctx, r.lay.size)
		if err != nil {
			return fmt.Errorf("%w: rank %d (host %d): register %d bytes: %w", ErrStep, r.idx, r.host, r.lay.size, err)
		}
		r.mem, r.buf = mem, mem.Bytes()
		if !cfg.PayloadFree && len(r.buf) != r.lay.size {
			return fmt.Errorf("%w: rank %d (host %d): a region of %d bytes has %d bytes of memory (a payload-free port needs Config.PayloadFree)",
				ErrConfig, r.idx, r.host, r.lay.size, len(r.buf))
		}
		for _, f := range j.p.flows(r.idx) {
			spec := hostapi.FlowSpec{Flow: f.id, Peer: j.p.hosts[f.peer], Class: f.class, Entropy: cfg.Entropy, Subflows: cfg.Subflows}
			if err := r.api.CreateFlow(ctx, spec); err != nil {
				return fmt.Errorf("%w: rank %d (host %d): create %v flow %d to rank %d: %w", ErrStep, r.idx, r.host, f.class, f.id, f.peer, err)
			}
			r.created = append(r.created, f.id)
		}
	}
	return nil
}

// teardown destroys every flow (failing work still posted) and closes every
// region, so the daemons can serve another run. It runs on its own
// deadline: the caller's context may be what stopped the run.
func (j *job) teardown() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var errs []error
	for _, r := range j.ranks {
		if r.sched != nil {
			errs = append(errs, r.sched.teardown(ctx)...)
		}
		if r.tpSched != nil {
			errs = append(errs, r.tpSched.teardown(ctx)...)
		}
		for _, f := range r.created {
			if err := r.api.DestroyFlow(ctx, f); err != nil {
				errs = append(errs, fmt.Errorf("rank %d: destroy flow %d: %w", r.idx, f, err))
			}
		}
		drain(r.api)
		if r.mem != nil {
			if err := r.mem.Close(); err != nil {
				errs = append(errs, fmt.Errorf("rank %d: close region: %w", r.idx, err))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("workload: teardown: %w", errors.Join(errs...))
	}
	return nil
}

// drain discards the completions that destroying the flows produced, so
// they do not reach the next user of the connection; any that arrive later
// carry this run's tag, which a later run ignores.
func drain(p HostAPI) {
	for range 1 << 16 {
		if _, ok := p.TryPoll(); !ok {
			return
		}
	}
}

// classify is the step's classification: the detector's verdict over the
// step's gradient norms, or the fixed schedule.
func (j *job) classify(step int) (bool, error) {
	if j.det == nil {
		return j.p.cfg.Critical(step), nil
	}
	c, err := j.det.Classify(j.p.cfg.Norms[step-1], false)
	if err != nil {
		return false, fmt.Errorf("%w: step %d: %w", ErrConfig, step, err)
	}
	return c, nil
}

// step runs one step at every rank and verifies it.
func (j *job) step(ctx context.Context, s int) error {
	critical, err := j.classify(s)
	if err != nil {
		return err
	}
	if j.obs != nil {
		j.obs.StepStarted(s, critical)
	}
	start := j.drv.now()
	// Every rank begins the step, computes, and posts its receives before
	// any rank sends: data for a receive not yet posted is dropped and
	// only comes back after a retransmission timeout.
	if err := j.drv.step(ctx, j, s, critical); err != nil {
		return err
	}
	sr := j.collect(s, critical, start)
	j.verify(&sr)
	j.record(sr)
	if j.obs != nil {
		j.obs.StepDone(s, sr)
	}
	return nil
}

// collect gathers the ranks' measurements of step s.
func (j *job) collect(s int, critical bool, start time.Duration) StepResult {
	p := j.p
	sr := StepResult{Step: s, Critical: critical, Start: start, Expected: p.expectedBytes(), ComputeEnd: start + p.cfg.Compute}
	for k, r := range j.ranks {
		st := r.st
		sr.End = max(sr.End, st.doneTime)
		if k == 0 || st.ringStart < sr.AllReduceFirst {
			sr.AllReduceFirst = st.ringStart
		}
		sr.AllReduceLast = max(sr.AllReduceLast, st.ringStart)
		sr.AllReduce = append(sr.AllReduce, st.arTime)
		sr.TP = append(sr.TP, st.tp...)
		sr.Forgiven += st.forgiven
		sr.Shed += st.shed
		j.res.Pattern.Ranges = append(j.res.Pattern.Ranges, st.pattern...)
		for _, f := range st.short {
			j.short = append(j.short, fmt.Sprintf("step %d: rank %d: %s", s, r.idx, f))
		}
		for _, f := range st.failures {
			j.failures = append(j.failures, fmt.Sprintf("step %d: rank %d: %s", s, r.idx, f))
		}
	}
	sr.Duration = sr.End - sr.Start
	return sr
}

// dataParallelGroups lists the ranks that all-reduce together: every
// rank in one group for the flat ring.
func (p *plan) dataParallelGroups() [][]int {
	tp := 1
	if p.groups != nil {
		tp = p.groups.tp
	}
	out := make([][]int, tp)
	for i := range p.n {
		out[i%tp] = append(out[i%tp], i)
	}
	return out
}

// expectedBytes is what the all-reduce delivers to the ranks in a step
// without loss: 2(N-1) chunks per rank on the ring, and what the plans
// receive otherwise.
func (p *plan) expectedBytes() int64 {
	if p.groups == nil {
		return int64(p.n) * int64(2*(p.n-1)) * int64(p.chunk)
	}
	var n int64
	for i := range p.n {
		n += int64(p.groups.sched.ReceivedBytes(p.groups.local(i)))
	}
	return n
}

// verify checks every untainted element of every rank against the exact
// sum. Taint is global: a forgiven or shed contribution to a partial sum
// travels on with it.
func (j *job) verify(sr *StepResult) {
	p := j.p
	if p.cfg.PayloadFree {
		return // no bytes to check
	}
	for _, group := range p.dataParallelGroups() {
		j.verifyGroup(sr, group)
	}
}

// verifyGroup checks one data-parallel group: its ranks hold the sum of
// their own gradients, and taint is global within the group.
func (j *job) verifyGroup(sr *StepResult, group []int) {
	p := j.p
	ranks := make([]*rank, len(group))
	all := newTaint(p.cfg.GradientBytes / 4)
	prefixes := make([]uint64, len(group))
	for k, i := range group {
		ranks[k] = j.ranks[i]
		all.merge(ranks[k].taint)
		prefixes[k] = gradientPrefix(p.cfg.Seed, sr.Step, i)
	}
	for e := range p.cfg.GradientBytes / 4 {
		first := getFloat(ranks[0].buf[ranks[0].lay.acc:], e)
		for _, r := range ranks[1:] {
			if math.Float32bits(getFloat(r.buf[r.lay.acc:], e)) != math.Float32bits(first) {
				sr.ReplicaMismatches++
				break
			}
		}
		if all.has(e) {
			continue
		}
		want := exactSum(prefixes, e)
		for _, r := range ranks {
			got := getFloat(r.buf[r.lay.acc:], e)
			sr.ElementsTested++
			if got != want {
				sr.Mismatches++
				if j.firstMismatch == "" {
					j.firstMismatch = fmt.Sprintf("step %d: rank %d element %d is %v, want %v", sr.Step, r.idx, e, got, want)
				}
			}
		}
	}
}

func (j *job) record(sr StepResult) {
	res := j.res
	res.Steps = append(res.Steps, sr)
	res.TrainingTime += sr.Duration
	res.GradientBytesExpected += sr.Expected
	res.ForgivenBytes += sr.Forgiven
	res.ShedBytes += sr.Shed
	res.ElementsTested += sr.ElementsTested
	res.Mismatches += sr.Mismatches
	res.ReplicaMismatches += sr.ReplicaMismatches
	res.TPDurations = append(res.TPDurations, sr.TP...)
	res.NonGradientExact = len(j.failures) == 0
	res.GradientMessagesWhole = len(j.short) == 0
}

// verdict turns the verification failures into Run's error.
func (j *job) verdict() error {
	var errs []error
	if j.res.Mismatches > 0 {
		errs = append(errs, fmt.Errorf("%w: %d of %d elements tested differ; first: %s",
			ErrMismatch, j.res.Mismatches, j.res.ElementsTested, j.firstMismatch))
	}
	if len(j.short) > 0 {
		errs = append(errs, fmt.Errorf("%w: %s", ErrMismatch, strings.Join(j.short, "; ")))
	}
	if len(j.failures) > 0 {
		errs = append(errs, fmt.Errorf("%w: %s", ErrNonGradient, strings.Join(j.failures, "; ")))
	}
	return errors.Join(errs...)
}
