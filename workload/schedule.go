package workload

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/forgive-emu/forgive/collective"
	"github.com/forgive-emu/forgive/hostapi"
)

// Flow-id banks of the compiled schedules (the package doc's scheme): a
// persistent flow per ordered pair of ranks, or a flow per message, whose
// ids alternate between two banks on odd and even steps so that a step
// never reuses an id the previous step has just destroyed. Each bank is
// sized from the job: with W = stride(N), the pairs' bank holds W x W
// ids and starts at 2^20, above the flat ring's banks (6W ids); the
// tensor pairs' bank follows it, then the messages'. Each bank is at
// least as wide as it always was (2^20 ids for each pair bank), so a job
// of up to 1000 ranks has the ids it always had: 2^20, 2^21 and 2^22.
const (
	pairIDs  = 1 << 20 // + sender*W + receiver
	pairBank = 1 << 20 // the least width of a pair bank
)

// pairBankWidth is the width of each pair bank for a job of n ranks.
func pairBankWidth(n int) uint64 {
	w := uint64(stride(n))
	return max(pairBank, w*w)
}

// tensorPairIDs is where the tensor-parallel group's pair bank starts.
func tensorPairIDs(n int) uint64 { return pairIDs + pairBankWidth(n) }

// messageIDs is where the per-message bank starts: + ((step&1)*N +
// sender)*maxSends + message.
func messageIDs(n int) uint64 { return tensorPairIDs(n) + max(2*pairBank, pairBankWidth(n)) }

// pairFlow is the persistent gradient flow from rank s to rank d.
func (p *plan) pairFlow(s, d int) hostapi.FlowID {
	return p.cfg.FlowBase + hostapi.FlowID(pairIDs+uint64(s*stride(p.n)+d))
}

// tensorPairFlow is the persistent flow of the tensor-parallel group's
// exchange from rank s to rank d.
func (p *plan) tensorPairFlow(s, d int) hostapi.FlowID {
	return p.cfg.FlowBase + hostapi.FlowID(tensorPairIDs(p.n)+uint64(s*stride(p.n)+d))
}

// exchange is what a compiled schedule moves for a rank: the gradient
// all-reduce of its data-parallel group, or its tensor-parallel group's
// exchange of activations.
type exchange struct {
	// gradient: the step's all-reduce, whose receives declare their phase
	// to the daemon, may be forgiven and shed, and end the step at the
	// daemon; otherwise the tensor-parallel group's exchange, exact and
	// model-parallel work.
	gradient   bool
	class      hostapi.Class
	send, recv wrKind
	// acc is where sends read from the rank's region, out where applies
	// write (the accumulator for an all-reduce, an output buffer for an
	// all-to-all); slots where the staging slots begin.
	acc, out, slots int
	// member is the rank of group-local index l in rank i's group.
	member func(i, l int) int
	// perMessage: a flow per message (gradient only); else pairFlow's.
	perMessage bool
	pairFlow   func(s, d int) hostapi.FlowID
}

// messageFlow is the flow of rank s's message m on step.
func (p *plan) messageFlow(step, s, m int) hostapi.FlowID {
	return p.cfg.FlowBase + hostapi.FlowID(messageIDs(p.n)+uint64(((step&1)*p.n+s)*p.groups.maxSends+m))
}

// schedRank is a rank's part in a compiled collective: every schedule but
// the flat ring of rank.go. Its plan lists the rank's sends and receives
// with their dependencies (package collective); schedRank counts each
// one's unmet dependencies and posts a send, or applies a receive into
// the accumulator, the moment its count reaches zero, in index order, so
// a deterministic clock gives a deterministic run.
//
// Order: a flow matches its k-th send with its k-th receive, so on a
// persistent flow per pair a rank posts its sends to one peer in the
// plan's order (a send whose dependencies are met waits for its turn),
// and its receives from one peer in the order of the peer's sends.
//
// Memory: the accumulator holds the gradient; every receive has its own
// staging slot, so every receive is posted before any send. A send reads
// the accumulator, or forwards a finished value from its receive's slot;
// the plan makes every apply that writes a range wait for the sends that
// read it, since a send may be retransmitted until it completes.
type schedRank struct {
	r    *rank
	x    exchange
	plan *collective.Plan
	slot []int // each receive's staging slot, as an offset into the region

	// The plan's dependencies, reversed: who waits on whom.
	onApplied  [][]int // receive k applied: the sends and receives (^index) waiting
	onReceived [][]int // receive k in: the sends forwarding from its slot
	onSent     [][]int // send k complete: the sends and receives (^index) waiting
	sendNeeds  []int   // unmet dependencies of each send at the step's start
	recvNeeds  []int   // of each receive's apply: its dependencies and its own arrival
	// sendsTo lists the sends to each peer in the plan's order, and
	// recvOrder the receives in the order they are posted: by peer, then
	// by the peer's message index.
	sendsTo   map[int][]int
	recvOrder []int

	// One step's progress.
	sendLeft, recvLeft []int
	shedRecv           []bool
	turn               map[int]int             // per peer, the position in sendsTo of the next send to post
	waiting            []bool                  // sends whose dependencies are met, waiting for their turn
	live               map[hostapi.FlowID]bool // per-message flows not yet destroyed
	arrivedEarly       []bool                  // receives in before the exchange started
	started, done      bool
	applied            int
	ready              []int // sends (index) and applies (^index) whose count reached zero
}

// newSchedRank prepares rank r's part of the schedule for x.
func newSchedRank(r *rank, pl *collective.Plan, x exchange) *schedRank {
	s := &schedRank{r: r, x: x, plan: pl, slot: make([]int, len(pl.Recvs)),
		onApplied: make([][]int, len(pl.Recvs)), onReceived: make([][]int, len(pl.Recvs)), onSent: make([][]int, len(pl.Sends)),
		sendNeeds: make([]int, len(pl.Sends)), recvNeeds: make([]int, len(pl.Recvs))}
	off := x.slots
	for k, rv := range pl.Recvs {
		s.slot[k] = off
		off += rv.Len
		s.recvNeeds[k] = 1 + len(rv.AfterRecvs) + len(rv.AfterSends)
		for _, a := range rv.AfterRecvs {
			s.onApplied[a] = append(s.onApplied[a], ^k)
		}
		for _, a := range rv.AfterSends {
			s.onSent[a] = append(s.onSent[a], ^k)
		}
	}
	s.sendsTo = map[int][]int{}
	for k, sd := range pl.Sends {
		s.sendsTo[sd.Peer] = append(s.sendsTo[sd.Peer], k)
	}
	s.recvOrder = make([]int, len(pl.Recvs))
	for k := range s.recvOrder {
		s.recvOrder[k] = k
	}
	slices.SortStableFunc(s.recvOrder, func(a, b int) int {
		ra, rb := pl.Recvs[a], pl.Recvs[b]
		return cmp.Or(cmp.Compare(ra.Peer, rb.Peer), cmp.Compare(ra.PeerMsg, rb.PeerMsg))
	})
	for k, sd := range pl.Sends {
		s.sendNeeds[k] = len(sd.AfterRecvs) + len(sd.AfterSends)
		for _, a := range sd.AfterRecvs {
			if a == sd.From {
				s.onReceived[a] = append(s.onReceived[a], k)
			} else {
				s.onApplied[a] = append(s.onApplied[a], k)
			}
		}
		for _, a := range sd.AfterSends {
			s.onSent[a] = append(s.onSent[a], k)
		}
	}
	return s
}

// slotBytes is the staging memory a plan needs: one slot per receive.
func slotBytes(pl *collective.Plan) int {
	n := 0
	for _, rv := range pl.Recvs {
		n += rv.Len
	}
	return n
}

func (s *schedRank) peer(l int) int { return s.x.member(s.r.idx, l) }

// flow is the flow a message travels on: from rank from's send m to rank to.
func (s *schedRank) flow(from, to, m int) hostapi.FlowID {
	if s.x.perMessage {
		return s.r.p.messageFlow(s.r.st.step, from, m)
	}
	return s.x.pairFlow(from, to)
}

// flows lists the persistent flows rank i creates for x's plan pl: one
// to every peer it sends to and one from every peer it receives from, in
// the plan's order (none with a flow per message: those come and go with
// their messages).
func (x exchange) flows(i int, pl *collective.Plan) []flowSpec {
	if x.perMessage {
		return nil
	}
	seen := map[hostapi.FlowID]bool{}
	var out []flowSpec
	add := func(id hostapi.FlowID, peer int) {
		if !seen[id] {
			seen[id] = true
			out = append(out, flowSpec{id, peer, x.class})
		}
	}
	for _, sd := range pl.Sends {
		j := x.member(i, sd.Peer)
		add(x.pairFlow(i, j), j)
	}
	for _, rv := range pl.Recvs {
		j := x.member(i, rv.Peer)
		add(x.pairFlow(j, i), j)
	}
	return out
}

// begin resets the step's progress and, for the gradient, draws the
// shedding baseline's draws for the rank's receives: a shed message is
// received already (a shed partial sum adds nothing, a shed finished
// value is zeros), and its range is tainted. It returns the gradient
// bytes the step still brings.
func (s *schedRank) begin() uint64 {
	r, st := s.r, s.r.st
	s.sendLeft = append(s.sendLeft[:0], s.sendNeeds...)
	s.recvLeft = append(s.recvLeft[:0], s.recvNeeds...)
	s.shedRecv = make([]bool, len(s.plan.Recvs))
	s.waiting = make([]bool, len(s.plan.Sends))
	s.arrivedEarly = make([]bool, len(s.plan.Recvs))
	s.turn = map[int]int{}
	s.started, s.done = false, false
	s.applied, s.ready = 0, s.ready[:0]
	if !s.x.gradient {
		return 0
	}
	var expected uint64
	for k, rv := range s.plan.Recvs {
		if r.shedDraw(st.step, st.critical, s.peer(rv.Peer), uint64(rv.PeerMsg)) {
			s.shedRecv[k] = true
			if r.data() {
				r.taint.addBytes(rv.Off, rv.Len)
				clear(r.bytesAt(s.slot[k], rv.Len)) // a shed finished value is zeros, here and where it is forwarded
			}
			continue
		}
		expected += uint64(rv.Len)
	}
	return expected
}

// createMessageFlows creates, with FlowPerMessage, a flow for every
// message the rank sends or receives this step that is not shed.
func (s *schedRank) createMessageFlows(ctx context.Context) error {
	r, p, st := s.r, s.r.p, s.r.st
	if !s.x.perMessage {
		return nil
	}
	if s.live == nil {
		s.live = map[hostapi.FlowID]bool{}
	}
	create := func(id hostapi.FlowID, peer int) error {
		spec := hostapi.FlowSpec{Flow: id, Peer: p.hosts[peer], Class: hostapi.ClassGradient, Entropy: p.cfg.Entropy, Subflows: p.cfg.Subflows}
		if err := r.api.CreateFlow(ctx, spec); err != nil {
			return fmt.Errorf("create message flow %d to rank %d: %w", id, peer, err)
		}
		s.live[id] = true
		return nil
	}
	for k, sd := range s.plan.Sends {
		if !r.shedDraw(st.step, st.critical, r.idx, uint64(k)) {
			if err := create(s.flow(r.idx, s.peer(sd.Peer), k), s.peer(sd.Peer)); err != nil {
				return err
			}
		}
	}
	for k, rv := range s.plan.Recvs {
		if !s.shedRecv[k] {
			if err := create(s.flow(s.peer(rv.Peer), r.idx, rv.PeerMsg), s.peer(rv.Peer)); err != nil {
				return err
			}
		}
	}
	return nil
}

// destroyMessageFlow destroys a per-message flow once its message has
// completed at this end.
func (s *schedRank) destroyMessageFlow(ctx context.Context, id hostapi.FlowID) error {
	if !s.live[id] {
		return nil
	}
	delete(s.live, id)
	if err := s.r.api.DestroyFlow(ctx, id); err != nil {
		return fmt.Errorf("destroy message flow %d: %w", id, err)
	}
	return nil
}

// teardown destroys the per-message flows a failed step left.
func (s *schedRank) teardown(ctx context.Context) []error {
	var errs []error
	for id := range s.live {
		if err := s.r.api.DestroyFlow(ctx, id); err != nil {
			errs = append(errs, fmt.Errorf("rank %d: destroy message flow %d: %w", s.r.idx, id, err))
		}
	}
	clear(s.live)
	return errs
}

// postReceives posts every receive of the step that is not shed, in the
// plan's order.
func (s *schedRank) postReceives(ctx context.Context) error {
	r, st := s.r, s.r.st
	for _, k := range s.recvOrder {
		rv := s.plan.Recvs[k]
		if s.shedRecv[k] {
			continue
		}
		from := s.peer(rv.Peer)
		flow := s.flow(from, r.idx, rv.PeerMsg)
		desc := fmt.Sprintf("receive %d (%v, phase %d) on flow %d from rank %d", k, rv.Role, rv.Phase, flow, from)
		step, ph := r.daemonStep(st.step), declared(rv.Role)
		switch {
		case !s.x.gradient: // only a step's gradient messages have a step and a phase
			step, ph = 0, hostapi.PhaseUnspecified
		case ph == hostapi.PhaseGatherOwner && r.p.cfg.OwnerNotices:
			// The owner's message may go to several ranks, and only the
			// flat ring's notices zero a forgiven range alike everywhere:
			// the daemons repair it instead (Config.OwnerNotices).
			ph = hostapi.PhaseGather
		}
		if err := r.postRecv(ctx, span{flow, s.slot[k], rv.Len}, step, ph, work{s.x.recv, k, desc}); err != nil {
			return err
		}
	}
	return nil
}

// start begins the collective: every send that waits for nothing is
// ready, and the receives that the shedding draws settled or that arrived
// early count as in; run runs what is ready.
func (s *schedRank) start() {
	s.started = true
	for k := range s.plan.Sends {
		if s.sendLeft[k] == 0 {
			s.ready = append(s.ready, k)
		}
	}
	for k := range s.plan.Recvs {
		if s.shedRecv[k] || s.arrivedEarly[k] { // settled by the draw, or in before the start
			s.arrived(k)
		}
	}
}

// arrived counts receive k's arrival: sends forwarding from its slot may
// go, and its apply waits only for its dependencies.
func (s *schedRank) arrived(k int) {
	for _, w := range s.onReceived[k] {
		s.dec(w)
	}
	s.dec(^k)
}

// dec counts one met dependency of a send (w >= 0) or an apply (^w).
func (s *schedRank) dec(w int) {
	left := &s.sendLeft
	k := w
	if w < 0 {
		left, k = &s.recvLeft, ^w
	}
	(*left)[k]--
	if (*left)[k] == 0 {
		s.ready = append(s.ready, w)
	}
}

// run posts the ready sends and applies the ready receives until nothing
// more is ready; when the last receive is applied, the exchange is done
// (the gradient's EndStep goes out).
func (s *schedRank) run(ctx context.Context) error {
	if !s.started {
		return nil // receives that arrive early wait for the start
	}
	for len(s.ready) > 0 {
		w := s.ready[0]
		s.ready = s.ready[1:]
		if w >= 0 {
			if err := s.send(ctx, w); err != nil {
				return err
			}
			continue
		}
		s.apply(^w)
	}
	if s.applied < len(s.plan.Recvs) || s.done {
		return nil
	}
	s.done = true
	if !s.x.gradient {
		s.r.tensorDone()
		return nil
	}
	r, st := s.r, s.r.st
	st.arDone = true
	st.arTime = r.now() - st.ringStart
	if err := r.api.EndStep(ctx, r.daemonStep(st.step)); err != nil {
		return fmt.Errorf("end step: %w", err)
	}
	return nil
}

// send posts send k once it is its turn on its flow, and with it the
// sends to the same peer that waited for k.
func (s *schedRank) send(ctx context.Context, k int) error {
	if s.x.perMessage { // a flow of its own: no turn to wait for
		return s.post(ctx, k)
	}
	peer := s.plan.Sends[k].Peer
	line := s.sendsTo[peer]
	if line[s.turn[peer]] != k {
		s.waiting[k] = true
		return nil
	}
	for {
		if err := s.post(ctx, k); err != nil {
			return err
		}
		s.turn[peer]++
		if s.turn[peer] == len(line) {
			return nil
		}
		if k = line[s.turn[peer]]; !s.waiting[k] {
			return nil
		}
		s.waiting[k] = false
	}
}

// post posts send k, unless the shedding draw sheds a gradient message:
// then it counts as complete at once.
func (s *schedRank) post(ctx context.Context, k int) error {
	r, st := s.r, s.r.st
	sd := s.plan.Sends[k]
	if s.x.gradient && r.shedDraw(st.step, st.critical, r.idx, uint64(k)) {
		st.shed += int64(sd.Len)
		s.sent(k)
		return nil
	}
	off := s.x.acc + sd.Off
	if sd.From >= 0 {
		off = s.slot[sd.From]
	}
	to := s.peer(sd.Peer)
	flow := s.flow(r.idx, to, k)
	desc := fmt.Sprintf("send %d (%v, phase %d) on flow %d to rank %d", k, sd.Role, sd.Phase, flow, to)
	return r.postSend(ctx, span{flow, off, sd.Len}, work{s.x.send, k, desc})
}

// sent counts send k's completion.
func (s *schedRank) sent(k int) {
	for _, w := range s.onSent[k] {
		s.dec(w)
	}
}

// apply adds a partial sum into the accumulator, or copies a finished
// value there (or an all-to-all block into the output); a shed partial
// sum adds nothing.
func (s *schedRank) apply(k int) {
	r := s.r
	rv := s.plan.Recvs[k]
	s.applied++
	if r.data() {
		acc, slot := r.bytesAt(s.x.out+rv.Off, rv.Len), r.bytesAt(s.slot[k], rv.Len)
		switch {
		case rv.Role != collective.Reduce:
			copy(acc, slot)
		case !s.shedRecv[k]:
			addFloats(acc, slot)
		}
	}
	for _, w := range s.onApplied[k] {
		s.dec(w)
	}
}

// complete applies a completion of the exchange's own work: a send
// settled, or a receive in (counted when the exchange has started).
func (s *schedRank) complete(ctx context.Context, comp hostapi.Completion, k wrKind, index int) error {
	r := s.r
	if k == s.x.send {
		sd := s.plan.Sends[index]
		if err := s.destroyMessageFlow(ctx, s.flow(r.idx, s.peer(sd.Peer), index)); err != nil {
			return err
		}
		s.sent(index)
		return nil
	}
	rv := s.plan.Recvs[index]
	from := s.peer(rv.Peer)
	flow := s.flow(from, r.idx, rv.PeerMsg)
	if err := s.destroyMessageFlow(ctx, flow); err != nil {
		return err
	}
	s.received(comp, index, from, flow)
	if !s.started {
		s.arrivedEarly[index] = true
		return nil
	}
	s.arrived(index)
	return nil
}

// received checks receive k: a gradient message's forgiven ranges taint
// their elements and join the loss pattern; the tensor-parallel group's
// messages must arrive whole, nothing forgiven.
func (s *schedRank) received(comp hostapi.Completion, k, from int, flow hostapi.FlowID) {
	r, st := s.r, s.r.st
	rv := s.plan.Recvs[k]
	if !s.x.gradient {
		if len(comp.Forgiven) > 0 || int(comp.Len) != rv.Len {
			st.failures = append(st.failures, fmt.Sprintf("tensor-parallel receive %d from rank %d on flow %d: %d bytes arrived, %d forgiven, not the %d sent",
				k, from, flow, comp.Len, comp.ForgivenBytes(), rv.Len))
		}
		return
	}
	if int(comp.Len) != rv.Len {
		st.short = append(st.short, fmt.Sprintf("receive %d from rank %d: %d bytes completed, not the message's %d", k, from, comp.Len, rv.Len))
	}
	if r.data() {
		for _, f := range comp.Forgiven {
			r.taint.addBytes(rv.Off+int(f.Start), int(f.Len()))
		}
	}
	st.forgiven += forgivenBytes(comp)
	now := r.now()
	for _, f := range comp.Forgiven {
		st.pattern = append(st.pattern, ForgivenRange{Step: st.step, Receiver: r.idx, Sender: from, Flow: flow,
			Gather: rv.Role != collective.Reduce, Round: rv.Phase, Offset: int64(rv.Off) + int64(f.Start), Length: int64(f.Len()), Time: now})
	}
}

// declared is the phase a receive declares to the daemon.
func declared(ro collective.Role) hostapi.Phase {
	switch ro {
	case collective.Reduce:
		return hostapi.PhaseReduce
	case collective.GatherOwner:
		return hostapi.PhaseGatherOwner
	case collective.Gather:
		return hostapi.PhaseGather
	}
	return hostapi.PhaseUnspecified
}

// maxFlowID is the largest flow id a job's flows use above its base.
func (p *plan) maxFlowID() uint64 {
	w := uint64(stride(p.n))
	if p.groups == nil {
		return noticeIDs*w + w
	}
	if p.cfg.Collective.FlowPerMessage {
		return messageIDs(p.n) + uint64(2*p.n*p.groups.maxSends)
	}
	return tensorPairIDs(p.n) + w*w
}
