package workload

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/forgive-emu/forgive/budget"
	"github.com/forgive-emu/forgive/hostapi"
)

// rank is one training rank for the whole run: its daemon, its memory and
// its flows. It is a state machine driven by its completions: begin the
// step, compute, post the receives, and after every rank has, start the
// sends and advance on each completion. The driver decides who runs it
// when (a goroutine per rank for real daemons, the event loop in the
// simulator); at any moment one goroutine owns it.
type rank struct {
	idx     int
	host    hostapi.HostID
	api     HostAPI
	now     func() time.Duration // the driver's clock
	p       *plan
	tag     uint64
	lay     layout
	mem     Memory
	buf     []byte
	created []hostapi.FlowID
	taint   taint // this step's tainted gradient elements
	st      *rankStep
	// sched runs a compiled schedule's all-reduce (schedule.go); nil: the
	// flat ring of this file. tpSched runs the tensor-parallel group's
	// compiled exchange; nil: the pairs.
	sched, tpSched *schedRank
}

// rankStep is a rank's progress through one step.
type rankStep struct {
	step      int
	critical  bool
	begin     time.Duration // when the rank began the step
	commStart time.Duration // when every rank had posted its receives
	// The all-reduce starts at ringStart, once the compute phase is over
	// and, with the WithCompute schedule, once the rank's own
	// model-parallel work (mpLeft sends and receives) has completed.
	started     bool // start ran: every rank has posted its receives
	computeDone bool
	ringStarted bool
	ringStart   time.Duration
	mpLeft      int

	outstanding map[uint64]string // posted work, by wr id: what it is, for errors

	// Reduce-scatter and all-gather progress, per round. ready: the
	// receive completed, or it was shed and needs no receive. rsSettled:
	// this rank's reduce-scatter send of the round completed or was shed,
	// so its chunk may be overwritten.
	rsReady, rsShed, rsSettled, agReady []bool
	rsNext, agNext                      int   // the next round to process
	copies                              []int // all-gather rounds waiting to be copied into the accumulator

	arDone   bool
	arTime   time.Duration // ringStart to the last gradient receive
	done     bool          // every piece of work of the step is done
	doneTime time.Duration

	// The owner notice (Config.OwnerNotices): ownSent, this rank's send of
	// the chunk it owns (the all-gather's first message) completed;
	// noticeIn, its successor's notice arrived, with zero, the ranges of
	// the chunk to zero; zeroed, they were zeroed.
	ownSent, noticeIn, zeroed bool
	zero                      []hostapi.Range

	forgiven, shed int64
	pattern        []ForgivenRange // this step's forgiven ranges, as received
	tp             []time.Duration
	failures       []string // non-gradient payloads that were not exact
	short          []string // gradient receives that completed with other than their chunk's length
}

// shedDraw is DBLP's draw for the sender's ring message msg of step: p is
// P_low on a critical step and P_high on the others.
func (r *rank) shedDraw(step int, critical bool, sender int, msg uint64) bool {
	s := r.p.cfg.Shed
	if s == nil {
		return false
	}
	p := s.PHigh
	if critical {
		p = s.PLow
	}
	return budget.Shed(s.Seed, budget.StepID(step), uint64(sender), msg, p)
}

// daemonStep is the step id the daemon sees.
func (r *rank) daemonStep(step int) uint64 { return r.p.cfg.StepBase + uint64(step) }

func (r *rank) chunkOff(c int) int   { return r.lay.acc + c*r.p.chunk }
func (r *rank) rsSlot(round int) int { return r.lay.rsStage + round*r.p.chunk }
func (r *rank) agSlot(round int) int { return r.lay.agStage + round*r.p.chunk }

func (r *rank) bytesAt(off, n int) []byte { return r.buf[off : off+n] }

// data reports whether the rank's region holds bytes: false in a
// payload-free run, where nothing writes, adds or copies payloads.
func (r *rank) data() bool { return !r.p.cfg.PayloadFree }

// --- phase 1: begin the step, compute, post every receive ------------------

// begin starts a step at this rank: BeginStep with the step's facts and
// the gradients. The compute phase follows (the driver's), then
// postReceives: every receive of the step is posted before any peer sends.
func (r *rank) begin(ctx context.Context, step int, critical bool) error {
	rounds := r.p.n - 1
	st := &rankStep{step: step, critical: critical, begin: r.now(), outstanding: map[uint64]string{},
		rsReady: make([]bool, rounds), rsShed: make([]bool, rounds), rsSettled: make([]bool, rounds),
		agReady: make([]bool, rounds)}
	r.st = st
	if r.data() {
		r.taint.reset()
	}
	if r.sched != nil {
		return r.beginSched(ctx, step, critical)
	}
	expected := r.planShedReceives()
	if err := r.api.BeginStep(ctx, r.stepReq(step, critical, expected)); err != nil {
		return r.fail("begin step: %w", err)
	}
	r.fill(step)
	return nil
}

// beginSched begins a step of a compiled schedule: its shedding draws,
// BeginStep, then the step's per-message flows, if any.
func (r *rank) beginSched(ctx context.Context, step int, critical bool) error {
	expected := r.sched.begin()
	if r.tpSched != nil {
		r.tpSched.begin()
	}
	if err := r.api.BeginStep(ctx, r.stepReq(step, critical, expected)); err != nil {
		return r.fail("begin step: %w", err)
	}
	if err := r.sched.createMessageFlows(ctx); err != nil {
		return r.fail("%w", err)
	}
	r.fill(step)
	return nil
}

// planShedReceives marks the ring messages the predecessor will shed this
// step: the receiver computes the same draw, posts no receive, and counts
// a shed contribution as zero (a shed all-gather chunk is zero-filled). It
// returns the gradient bytes the step still brings this rank.
func (r *rank) planShedReceives() uint64 {
	st, p := r.st, r.p
	pred := p.mod(r.idx - 1)
	var expected uint64
	for round := range p.n - 1 {
		if r.shedDraw(st.step, st.critical, pred, p.messageIndex(reduceScatter, round)) {
			st.rsReady[round], st.rsShed[round] = true, true
			if r.data() {
				r.taint.addBytes(p.rsRecvChunk(r.idx, round)*p.chunk, p.chunk)
			}
		} else {
			expected += uint64(p.chunk)
		}
		if r.shedDraw(st.step, st.critical, pred, p.messageIndex(allGather, round)) {
			st.agReady[round] = true
			if r.data() {
				clear(r.bytesAt(r.agSlot(round), p.chunk))
				r.taint.addBytes(p.agRecvChunk(r.idx, round)*p.chunk, p.chunk)
			}
		} else {
			expected += uint64(p.chunk)
		}
	}
	return expected
}

func (r *rank) stepReq(step int, critical bool, expected uint64) hostapi.StepReq {
	req := hostapi.StepReq{Step: r.daemonStep(step), ExpectedGradientBytes: expected}
	if r.p.cfg.Norms != nil {
		req.Norms = r.p.cfg.Norms[step-1]
	} else {
		req.Critical = &critical
	}
	return req
}

// fill writes this step's gradient and the non-gradient payloads the rank
// sends.
func (r *rank) fill(step int) {
	if !r.data() {
		return
	}
	cfg, lay := &r.p.cfg, r.lay
	fillGradient(r.bytesAt(lay.acc, cfg.GradientBytes), cfg.Seed, step, r.idx)
	if _, ok := r.p.tensorPeer(r.idx); ok {
		r.p.payloads.fill(r.bytesAt(lay.tpSend, cfg.TPBytes), step, payloadTensor, r.idx)
	}
	if r.tpSched != nil {
		r.fillTensor(step)
	}
	if r.p.pipeOn() {
		r.p.payloads.fill(r.bytesAt(lay.ppSend, cfg.PPBytes), step, payloadPipeline, r.idx)
	}
	if r.p.burstSender(r.idx) && cfg.burstOn(step) {
		r.p.payloads.fill(r.bytesAt(lay.burstSend, cfg.Burst.Bytes), step, payloadBurst, r.idx)
	}
}

// postReceives posts the step's receives: the ring's in message order
// (reduce-scatter rounds, then all-gather rounds, skipping shed messages),
// then the tensor, pipeline and burst receives.
func (r *rank) postReceives(ctx context.Context) error {
	if err := r.postAll(ctx); err != nil {
		return r.fail("%w", err)
	}
	return nil
}

func (r *rank) postAll(ctx context.Context) error {
	if r.sched != nil {
		if err := r.sched.postReceives(ctx); err != nil {
			return err
		}
		return r.postOthers(ctx)
	}
	st, p := r.st, r.p
	pred := p.mod(r.idx - 1)
	for _, ph := range []phase{reduceScatter, allGather} {
		for round := range p.n - 1 {
			slot, ready := r.rsSlot(round), st.rsShed[round]
			if ph == allGather {
				slot, ready = r.agSlot(round), st.agReady[round]
			}
			if ready { // shed: nothing will arrive
				continue
			}
			msg := int(p.messageIndex(ph, round))
			desc := fmt.Sprintf("receive of %v round %d on flow %d from rank %d", ph, round, p.ringIn(r.idx), pred)
			if err := r.postRecv(ctx, span{p.ringIn(r.idx), slot, p.chunk}, r.daemonStep(st.step), ph.declared(round), work{wrRingRecv, msg, desc}); err != nil {
				return err
			}
		}
	}
	return r.postOthers(ctx)
}

// postOthers posts the receives beside the all-reduce: the owner notice,
// then the tensor, pipeline and burst receives.
func (r *rank) postOthers(ctx context.Context) error {
	st, p, cfg := r.st, r.p, &r.p.cfg
	if p.notices() {
		j := p.mod(r.idx + 1)
		desc := fmt.Sprintf("owner notice receive on flow %d from rank %d", p.noticeIn(r.idx), j)
		if err := r.postRecv(ctx, span{p.noticeIn(r.idx), r.lay.noticeRecv, noticeBytes(p.noticeRanges())}, 0, hostapi.PhaseUnspecified, work{wrNoticeRecv, j, desc}); err != nil {
			return err
		}
	}
	if r.tpSched != nil {
		if err := r.tpSched.postReceives(ctx); err != nil {
			return err
		}
	}
	if j, ok := p.tensorPeer(r.idx); ok {
		desc := fmt.Sprintf("tensor receive on flow %d from rank %d", p.tensorFlow(r.idx), j)
		if err := r.postRecv(ctx, span{p.tensorFlow(r.idx), r.lay.tpRecv, cfg.TPBytes}, 0, hostapi.PhaseUnspecified, work{wrTensorRecv, j, desc}); err != nil {
			return err
		}
	}
	if p.pipeOn() {
		j := p.pipeIn(r.idx)
		flow := p.flowID(pipelineIDs, j)
		desc := fmt.Sprintf("pipeline receive on flow %d from rank %d", flow, j)
		if err := r.postRecv(ctx, span{flow, r.lay.ppRecv, cfg.PPBytes}, 0, hostapi.PhaseUnspecified, work{wrPipeRecv, j, desc}); err != nil {
			return err
		}
	}
	if p.burstReceiver(r.idx) && cfg.burstOn(st.step) {
		for j := 1; j <= cfg.Burst.Senders; j++ {
			flow := p.flowID(burstIDs, j)
			off := r.lay.burstRecv + (j-1)*cfg.Burst.Bytes
			desc := fmt.Sprintf("burst receive on flow %d from rank %d", flow, j)
			if err := r.postRecv(ctx, span{flow, off, cfg.Burst.Bytes}, 0, hostapi.PhaseUnspecified, work{wrBurstRecv, j, desc}); err != nil {
				return err
			}
		}
	}
	return nil
}

// span is where a message goes: its flow, and the bytes of the rank's
// region it reads or fills.
type span struct {
	flow   hostapi.FlowID
	off, n int
}

// work is a work request's identity: its kind and index (its wr id), and
// what it is, for errors.
type work struct {
	kind  wrKind
	index int
	desc  string
}

// postRecv posts a receive into at; step and ph are a gradient message's
// (0 and PhaseUnspecified for the others).
func (r *rank) postRecv(ctx context.Context, at span, step uint64, ph hostapi.Phase, w work) error {
	id := wrID(r.tag, r.st.step, w.kind, w.index)
	req := hostapi.RecvReq{Flow: at.flow, Region: r.mem.ID(), Offset: uint64(at.off), Length: uint64(at.n), Step: step, Phase: ph, WRID: id}
	if err := r.api.PostRecv(ctx, req); err != nil {
		return fmt.Errorf("post %s: %w", w.desc, err)
	}
	r.posted(id, w)
	return nil
}

// postSend posts a send of at.
func (r *rank) postSend(ctx context.Context, at span, w work) error {
	id := wrID(r.tag, r.st.step, w.kind, w.index)
	req := hostapi.SendReq{Flow: at.flow, Region: r.mem.ID(), Offset: uint64(at.off), Length: uint64(at.n), WRID: id}
	if err := r.api.PostSend(ctx, req); err != nil {
		return fmt.Errorf("post %s: %w", w.desc, err)
	}
	r.posted(id, w)
	return nil
}

// posted records posted work until its completion.
func (r *rank) posted(id uint64, w work) {
	r.st.outstanding[id] = w.desc
	if w.kind.modelParallel() {
		r.st.mpLeft++
	}
}

// --- phase 2: communicate ---------------------------------------------------

// start begins the second half of a step at this rank, once every rank
// has posted its receives (commStart). After the compute phase it starts
// the ring and the other traffic; with the WithCompute schedule, during
// the compute phase, it starts the tensor- and pipeline-parallel
// exchanges, and the ring waits for computeFinished and for those
// exchanges. From then on, handle advances it on each completion until
// finished.
func (r *rank) start(ctx context.Context, commStart time.Duration) error {
	st := r.st
	st.started, st.commStart = true, commStart
	if r.p.cfg.ModelParallel == WithCompute {
		if err := r.sendModelParallel(ctx); err != nil {
			return r.fail("%w", err)
		}
		return r.maybeStartRing(ctx)
	}
	st.computeDone, st.ringStarted, st.ringStart = true, true, commStart
	if err := r.startAllReduce(ctx); err != nil {
		return r.fail("%w", err)
	}
	if err := r.sendModelParallel(ctx); err != nil {
		return r.fail("%w", err)
	}
	if err := r.sendBurst(ctx); err != nil {
		return r.fail("%w", err)
	}
	if err := r.advance(ctx); err != nil { // rounds shed entirely are ready already
		return r.fail("%w", err)
	}
	r.settle()
	return nil
}

// computeFinished ends the compute phase of a WithCompute step.
func (r *rank) computeFinished(ctx context.Context) error {
	r.st.computeDone = true
	return r.maybeStartRing(ctx)
}

// maybeStartRing starts the ring once the compute phase and the rank's
// model-parallel work are done.
func (r *rank) maybeStartRing(ctx context.Context) error {
	if st := r.st; !st.started || st.ringStarted || !st.computeDone || st.mpLeft > 0 || r.tpSched != nil && !r.tpSched.done {
		return nil
	}
	if err := r.startRing(ctx); err != nil {
		return r.fail("%w", err)
	}
	r.settle()
	return nil
}

// startRing starts a WithCompute step's ring: the first reduce-scatter
// message and the step's burst, then the rounds whose receives are ready
// (shed, or already in).
func (r *rank) startRing(ctx context.Context) error {
	st := r.st
	st.ringStarted, st.ringStart = true, r.now()
	if err := r.startAllReduce(ctx); err != nil {
		return err
	}
	if err := r.sendBurst(ctx); err != nil {
		return err
	}
	return r.advance(ctx)
}

// startAllReduce sends the all-reduce's first messages: the ring's first
// reduce-scatter message, or every send of a compiled schedule that waits
// for nothing.
func (r *rank) startAllReduce(ctx context.Context) error {
	if r.sched != nil {
		r.sched.start()
		return nil
	}
	return r.sendRing(ctx, reduceScatter, 0, r.chunkOff(r.p.rsSendChunk(r.idx, 0)))
}

// complete applies one completion; an error is the rank's failure, with
// its step and outstanding work.
func (r *rank) complete(ctx context.Context, comp hostapi.Completion) error {
	if err := r.handle(ctx, comp); err != nil {
		return r.fail("%w", err)
	}
	r.settle()
	return nil
}

// settle notes when the rank has finished all its work of the step.
func (r *rank) settle() {
	if st := r.st; !st.done && st.finished() {
		st.done, st.doneTime = true, r.now()
	}
}

// idle reports whether the rank has no step in progress: between steps,
// completions can only be an earlier run's.
func (r *rank) idle() bool { return r.st == nil || r.st.done }

func (st *rankStep) finished() bool {
	return st.arDone && len(st.outstanding) == 0 && len(st.copies) == 0
}

// sendModelParallel posts the step's tensor- and pipeline-parallel sends.
func (r *rank) sendModelParallel(ctx context.Context) error {
	p, cfg, lay := r.p, &r.p.cfg, r.lay
	if r.tpSched != nil {
		r.tpSched.start()
		if err := r.tpSched.run(ctx); err != nil {
			return err
		}
	}
	if j, ok := p.tensorPeer(r.idx); ok {
		desc := fmt.Sprintf("tensor send on flow %d to rank %d", p.tensorFlow(r.idx), j)
		if err := r.postSend(ctx, span{p.tensorFlow(r.idx), lay.tpSend, cfg.TPBytes}, work{wrTensorSend, j, desc}); err != nil {
			return err
		}
	}
	if p.pipeOn() {
		flow, j := p.flowID(pipelineIDs, r.idx), p.pipeOut(r.idx)
		desc := fmt.Sprintf("pipeline send on flow %d to rank %d", flow, j)
		if err := r.postSend(ctx, span{flow, lay.ppSend, cfg.PPBytes}, work{wrPipeSend, j, desc}); err != nil {
			return err
		}
	}
	return nil
}

// sendBurst posts the rank's background burst send, on its steps.
func (r *rank) sendBurst(ctx context.Context) error {
	p, cfg, lay := r.p, &r.p.cfg, r.lay
	if p.burstSender(r.idx) && cfg.burstOn(r.st.step) {
		flow := p.flowID(burstIDs, r.idx)
		desc := fmt.Sprintf("burst send on flow %d to rank 0", flow)
		if err := r.postSend(ctx, span{flow, lay.burstSend, cfg.Burst.Bytes}, work{wrBurstSend, 0, desc}); err != nil {
			return err
		}
	}
	return nil
}

// sendRing sends one ring message from off, unless the shedding draw sheds
// it.
func (r *rank) sendRing(ctx context.Context, ph phase, round, off int) error {
	st, p := r.st, r.p
	msg := p.messageIndex(ph, round)
	if r.shedDraw(st.step, st.critical, r.idx, msg) {
		st.shed += int64(p.chunk)
		if ph == reduceScatter {
			st.rsSettled[round] = true
		}
		return nil
	}
	desc := fmt.Sprintf("send of %v round %d on flow %d to rank %d", ph, round, p.ringOut(r.idx), p.mod(r.idx+1))
	return r.postSend(ctx, span{p.ringOut(r.idx), off, p.chunk}, work{wrRingSend, int(msg), desc})
}

// handle applies one completion.
func (r *rank) handle(ctx context.Context, comp hostapi.Completion) error {
	tag, step, kind, index := splitWR(comp.WRID)
	if tag != r.tag {
		return nil // an earlier run's work, failed when its flow was destroyed
	}
	st := r.st
	desc, ok := st.outstanding[comp.WRID]
	if !ok || step != st.step {
		return fmt.Errorf("completion for work this step did not post: %+v", comp)
	}
	delete(st.outstanding, comp.WRID)
	if comp.Status != hostapi.StatusOK {
		return fmt.Errorf("%s failed: %s", desc, comp.Err)
	}
	if kind.modelParallel() {
		st.mpLeft--
	}
	switch kind {
	case wrRingSend:
		if ph, round := r.ringRound(index); ph == reduceScatter {
			st.rsSettled[round] = true
		} else if round == 0 {
			st.ownSent = true
			r.applyNotice()
		}
	case wrRingRecv:
		r.ringReceived(comp, index)
		if ph, round := r.ringRound(index); r.p.notices() && ph == allGather && round == 0 {
			if err := r.sendNotice(ctx, comp); err != nil {
				return err
			}
		}
	case wrSchedSend, wrSchedRecv:
		if err := r.sched.complete(ctx, comp, kind, index); err != nil {
			return err
		}
	case wrTensorSchedSend, wrTensorSchedRecv:
		if err := r.tpSched.complete(ctx, comp, kind, index); err != nil {
			return err
		}
		if err := r.tpSched.run(ctx); err != nil {
			return err
		}
	case wrNoticeSend:
	case wrNoticeRecv:
		r.noticeReceived(comp, desc)
	case wrTensorRecv:
		st.tp = append(st.tp, r.now()-st.commStart)
		r.checkPayload(comp, desc, r.lay.tpRecv, r.p.cfg.TPBytes, payloadTensor, index)
	case wrPipeRecv:
		r.checkPayload(comp, desc, r.lay.ppRecv, r.p.cfg.PPBytes, payloadPipeline, index)
	case wrBurstRecv:
		n := r.p.cfg.Burst.Bytes
		r.checkPayload(comp, desc, r.lay.burstRecv+(index-1)*n, n, payloadBurst, index)
	}
	if !st.ringStarted {
		return r.maybeStartRing(ctx)
	}
	return r.advance(ctx)
}

func (r *rank) ringRound(msg int) (phase, int) {
	if msg >= r.p.n-1 {
		return allGather, msg - (r.p.n - 1)
	}
	return reduceScatter, msg
}

// sendNotice tells the ring predecessor, the owner of the chunk comp
// received in the all-gather's first round, which ranges of it were
// forgiven: "send those ranges (relative to the chunk) to the sender,
// the chunk's owner, before the step's update" (docs/hostapi.md).
func (r *rank) sendNotice(ctx context.Context, comp hostapi.Completion) error {
	p := r.p
	k := len(comp.Forgiven)
	if k > p.noticeRanges() {
		return fmt.Errorf("%d forgiven ranges in one chunk, more than a notice's %d", k, p.noticeRanges())
	}
	if r.data() {
		b := r.bytesAt(r.lay.noticeSend, noticeBytes(k))
		binary.LittleEndian.PutUint64(b, uint64(k))
		for i, f := range comp.Forgiven {
			binary.LittleEndian.PutUint64(b[8+16*i:], f.Start)
			binary.LittleEndian.PutUint64(b[16+16*i:], f.End)
		}
	}
	j := p.mod(r.idx - 1)
	desc := fmt.Sprintf("owner notice send on flow %d to rank %d", p.noticeOut(r.idx), j)
	return r.postSend(ctx, span{p.noticeOut(r.idx), r.lay.noticeSend, noticeBytes(k)}, work{wrNoticeSend, j, desc})
}

// noticeReceived reads the successor's notice: the ranges of this rank's
// own chunk it forgave. A notice that does not decode is a failure of the
// step, never a panic.
func (r *rank) noticeReceived(comp hostapi.Completion, desc string) {
	st, p := r.st, r.p
	n := int(comp.Len)
	if len(comp.Forgiven) > 0 || n < 8 || (n-8)%16 != 0 {
		st.failures = append(st.failures, fmt.Sprintf("%s: %d bytes, %d forgiven: not a notice", desc, n, comp.ForgivenBytes()))
		return
	}
	st.noticeIn = true
	if r.data() {
		b := r.bytesAt(r.lay.noticeRecv, n)
		k := binary.LittleEndian.Uint64(b)
		if k != uint64((n-8)/16) {
			st.failures = append(st.failures, fmt.Sprintf("%s: %d ranges in %d bytes", desc, k, n))
			return
		}
		for i := range int(k) {
			f := hostapi.Range{Start: binary.LittleEndian.Uint64(b[8+16*i:]), End: binary.LittleEndian.Uint64(b[16+16*i:])}
			if f.Start >= f.End || f.End > uint64(p.chunk) {
				st.failures = append(st.failures, fmt.Sprintf("%s: range [%d, %d) outside the %d-byte chunk", desc, f.Start, f.End, p.chunk))
				return
			}
			st.zero = append(st.zero, f)
		}
	}
	r.applyNotice()
}

// applyNotice zeroes the forgiven ranges of this rank's own chunk once
// both its send of the chunk has completed and the notice is in: then
// every rank holds the chunk as the forgiving rank forwarded it.
func (r *rank) applyNotice() {
	st, p := r.st, r.p
	if !st.ownSent || !st.noticeIn || st.zeroed {
		return
	}
	st.zeroed = true
	c := p.rsRecvChunk(r.idx, p.n-2) // the chunk fully reduced here
	for _, f := range st.zero {
		clear(r.bytesAt(r.chunkOff(c)+int(f.Start), int(f.Len())))
		r.taint.addBytes(c*p.chunk+int(f.Start), int(f.Len()))
	}
}

// ringReceived records a ring receive: its forgiven ranges taint their
// elements ("the sums are checked for every byte that was not forgiven").
func (r *rank) ringReceived(comp hostapi.Completion, msg int) {
	st, p := r.st, r.p
	ph, round := r.ringRound(msg)
	chunk := p.rsRecvChunk(r.idx, round)
	if ph == allGather {
		chunk = p.agRecvChunk(r.idx, round)
	}
	if int(comp.Len) != p.chunk {
		st.short = append(st.short, fmt.Sprintf("%v round %d: %d bytes completed, not the chunk's %d", ph, round, comp.Len, p.chunk))
	}
	if r.data() {
		for _, f := range comp.Forgiven {
			r.taint.addBytes(chunk*p.chunk+int(f.Start), int(f.Len()))
		}
	}
	st.forgiven += forgivenBytes(comp)
	now := r.now()
	for _, f := range comp.Forgiven {
		st.pattern = append(st.pattern, ForgivenRange{Step: st.step, Receiver: r.idx, Sender: p.mod(r.idx - 1), Flow: p.ringIn(r.idx),
			Gather: ph == allGather, Round: round, Offset: int64(chunk*p.chunk) + int64(f.Start), Length: int64(f.Len()), Time: now})
	}
	if ph == allGather {
		st.agReady[round] = true
	} else {
		st.rsReady[round] = true
	}
}

// advance runs the ring as far as the completed receives allow, in round
// order: reduce-scatter adds and forwards, then all-gather forwards and
// copies. EndStep goes out when the last gradient receive is in.
func (r *rank) advance(ctx context.Context) error {
	st, p := r.st, r.p
	if !st.ringStarted {
		return nil // receives that arrive early wait for the ring to start
	}
	if r.sched != nil {
		return r.sched.run(ctx)
	}
	last := p.n - 2
	for st.rsNext <= last && st.rsReady[st.rsNext] {
		round := st.rsNext
		st.rsNext++
		c := p.rsRecvChunk(r.idx, round)
		if !st.rsShed[round] && r.data() {
			addFloats(r.bytesAt(r.chunkOff(c), p.chunk), r.bytesAt(r.rsSlot(round), p.chunk))
		}
		// Chunk c is the next round's to send; after the last round it is
		// fully reduced here, and starts the all-gather.
		ph, next := reduceScatter, round+1
		if round == last {
			ph, next = allGather, 0
		}
		if err := r.sendRing(ctx, ph, next, r.chunkOff(c)); err != nil {
			return err
		}
	}
	for st.rsNext > last && st.agNext <= last && st.agReady[st.agNext] {
		round := st.agNext
		st.agNext++
		if round < last { // forward from the staging slot: the accumulator may still be read by a send
			if err := r.sendRing(ctx, allGather, round+1, r.agSlot(round)); err != nil {
				return err
			}
		}
		st.copies = append(st.copies, round)
	}
	r.copyGathered()
	if st.agNext > last && !st.arDone {
		st.arDone = true
		st.arTime = r.now() - st.ringStart
		if err := r.api.EndStep(ctx, r.daemonStep(st.step)); err != nil {
			return fmt.Errorf("end step: %w", err)
		}
	}
	return nil
}

// copyGathered copies received all-gather chunks into the accumulator once
// the rank's reduce-scatter send of the same chunk has completed: until
// then a retransmission may still read it.
func (r *rank) copyGathered() {
	st, p := r.st, r.p
	st.copies = slices.DeleteFunc(st.copies, func(round int) bool {
		if !st.rsSettled[round] { // reduce-scatter round r sent chunk i-r too
			return false
		}
		if !r.data() {
			return true
		}
		copy(r.bytesAt(r.chunkOff(p.agRecvChunk(r.idx, round)), p.chunk), r.bytesAt(r.agSlot(round), p.chunk))
		return true
	})
}

// checkPayload compares a non-gradient receive with the payload its sender
// generated: FORGIVE must never forgive these bytes.
func (r *rank) checkPayload(comp hostapi.Completion, desc string, off, n, kind, sender int) {
	st := r.st
	if len(comp.Forgiven) > 0 {
		st.failures = append(st.failures, fmt.Sprintf("%s: %d bytes forgiven", desc, comp.ForgivenBytes()))
		return
	}
	if int(comp.Len) != n || r.data() && !r.p.payloads.equal(r.bytesAt(off, n), st.step, kind, sender) {
		st.failures = append(st.failures, fmt.Sprintf("%s: %d bytes arrived, not the %d sent", desc, comp.Len, n))
	}
}

// fail wraps a rank's error with the step, the rank and its outstanding
// work.
func (r *rank) fail(format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	step, elapsed := 0, time.Duration(0)
	var waiting []string
	if r.st != nil {
		step, elapsed = r.st.step, (r.now() - r.st.begin).Round(time.Microsecond)
		for _, d := range r.st.outstanding {
			waiting = append(waiting, d)
		}
	}
	slices.Sort(waiting)
	msg := "nothing outstanding"
	if len(waiting) > 0 {
		msg = "outstanding: " + strings.Join(waiting, "; ")
	}
	return fmt.Errorf("%w: step %d: rank %d (host %d), %v into the step: %w; %s", ErrStep, step, r.idx, r.host, elapsed, err, msg)
}
