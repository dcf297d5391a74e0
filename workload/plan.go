package workload

import (
	"github.com/forgive-emu/forgive/hostapi"
)

// Flow-id banks of the scheme in the package doc: bank k of the flat
// ring's flows starts at k x the job's stride (ringIDs = 1: the ring's
// flows start at one stride).
const (
	ringIDs     = 1
	tensorIDs   = 2
	pipelineIDs = 3
	burstIDs    = 4
	noticeIDs   = 5
)

// minStride is the least width of a bank of per-rank flow ids: a job of
// up to minStride ranks has the ids it always had (1000 + i for the
// ring's), so every run of up to 1000 ranks, and its ECMP hashes, stay
// as they were.
const minStride = 1000

// stride is the width of a bank of per-rank flow ids for a job of n
// ranks: n, or minStride for a smaller job. It is the job's own size,
// not a fixed limit, so the ids hold any job the host ids hold.
func stride(n int) int { return max(minStride, n) }

// plan is what every rank knows about the job: sizes, who talks to whom
// on which flow, and where each buffer sits in a rank's region.
type plan struct {
	cfg   Config
	n     int
	hosts []hostapi.HostID
	chunk int // bytes of one all-reduce chunk: GradientBytes / n (a group's size, with a compiled schedule)
	// groups is the compiled schedule and its data-parallel groups; nil
	// for the flat ring.
	groups *groups
	// payloads generates and checks the non-gradient messages; nil in a
	// payload-free run.
	payloads *payloads
}

func newPlan(cfg Config, hosts []hostapi.HostID) *plan {
	p := &plan{cfg: cfg, n: len(hosts), hosts: hosts, chunk: cfg.GradientBytes / len(hosts), groups: cfg.groups}
	if p.groups != nil {
		p.chunk = cfg.GradientBytes / p.groups.size
	}
	if !cfg.PayloadFree { // a payload-free run generates and checks no payload
		p.payloads = newPayloads(cfg.Seed, map[int]int{payloadTensor: p.tensorBytes(), payloadPipeline: cfg.PPBytes, payloadBurst: cfg.Burst.Bytes})
	}
	return p
}

// mod is the non-negative remainder of i by the ring size.
func (p *plan) mod(i int) int { return ((i % p.n) + p.n) % p.n }

func (p *plan) flowID(kind, i int) hostapi.FlowID {
	return p.cfg.FlowBase + hostapi.FlowID(kind*stride(p.n)+i)
}

// ringOut is the flow rank i sends its ring messages on; ringIn the flow
// it receives them on (its predecessor's ringOut).
func (p *plan) ringOut(i int) hostapi.FlowID { return p.flowID(ringIDs, i) }
func (p *plan) ringIn(i int) hostapi.FlowID  { return p.flowID(ringIDs, p.mod(i-1)) }

// tensorBytes is the tensor-parallel message that crosses the fabric: 0
// when the exchanges run off it (TPLocal).
func (p *plan) tensorBytes() int {
	if p.cfg.TensorParallel == TPLocal {
		return 0
	}
	return p.cfg.TPBytes
}

// tensorPeer is rank i's tensor-parallel partner on the fabric, if it has
// one: none when the exchanges run off the fabric.
func (p *plan) tensorPeer(i int) (int, bool) {
	j := i ^ 1
	return j, p.tensorBytes() > 0 && j < p.n && !p.tensorGroups()
}

// tensorGroups reports whether the tensor-parallel groups run a compiled
// exchange (Collective.TPCollective) in place of the pairs.
func (p *plan) tensorGroups() bool { return p.groups != nil && p.groups.tensor != nil }

func (p *plan) tensorFlow(i int) hostapi.FlowID { return p.flowID(tensorIDs, i/2) }

// pipeOut is the rank i sends its pipeline message to, pipeIn the rank it
// receives one from.
func (p *plan) pipeOut(i int) int { return p.mod(i + p.n/2) }
func (p *plan) pipeIn(i int) int  { return p.mod(i - p.n/2) }
func (p *plan) pipeOn() bool      { return p.cfg.PPBytes > 0 }

// noticeOut is the flow rank i sends its owner notices on, to its ring
// predecessor; noticeIn the flow it receives them on, from its successor.
func (p *plan) noticeOut(i int) hostapi.FlowID { return p.flowID(noticeIDs, i) }
func (p *plan) noticeIn(i int) hostapi.FlowID  { return p.flowID(noticeIDs, p.mod(i+1)) }

// noticeRanges is the most forgiven ranges a notice holds: one per 256
// bytes of the chunk, more than a chunk's trimmed packets can leave.
func (p *plan) noticeRanges() int { return p.chunk/256 + 2 }

// notices reports whether the ranks send owner notices: the flat ring's,
// under Config.OwnerNotices (a compiled schedule has the daemons repair
// its finished values instead).
func (p *plan) notices() bool { return p.cfg.OwnerNotices && p.groups == nil }

// noticeBytes is the size of a notice of k ranges: a count, then each
// range's start and end.
func noticeBytes(k int) int { return 8 + 16*k }

// burstSender reports whether rank i is a background burst sender.
func (p *plan) burstSender(i int) bool {
	return p.cfg.Burst.Bytes > 0 && len(p.cfg.Burst.Steps) > 0 && i >= 1 && i <= p.cfg.Burst.Senders
}

// burstReceiver reports whether rank i receives the burst (rank 0).
func (p *plan) burstReceiver(i int) bool { return i == 0 && p.burstSender(1) }

// flowSpec is one flow a rank creates.
type flowSpec struct {
	id    hostapi.FlowID
	peer  int
	class hostapi.Class
}

// flows lists the flows rank i creates, in an order every rank agrees on
// only up to the pair: both ends create each flow before any data moves.
func (p *plan) flows(i int) []flowSpec {
	out := []flowSpec{
		{p.ringOut(i), p.mod(i + 1), hostapi.ClassGradient},
		{p.ringIn(i), p.mod(i - 1), hostapi.ClassGradient},
	}
	if p.groups != nil {
		lay := p.layout(i)
		out = p.gradientExchange(i, lay).flows(i, p.groups.plan(i))
		if p.tensorGroups() {
			out = append(out, p.tensorExchange(i, lay).flows(i, p.tensorPlan(i))...)
		}
	}
	if j, ok := p.tensorPeer(i); ok {
		out = append(out, flowSpec{p.tensorFlow(i), j, hostapi.ClassTensor})
	}
	if p.pipeOn() {
		out = append(out,
			flowSpec{p.flowID(pipelineIDs, i), p.pipeOut(i), hostapi.ClassPipeline},
			flowSpec{p.flowID(pipelineIDs, p.pipeIn(i)), p.pipeIn(i), hostapi.ClassPipeline})
	}
	if p.notices() {
		out = append(out,
			flowSpec{p.noticeOut(i), p.mod(i - 1), hostapi.ClassOther},
			flowSpec{p.noticeIn(i), p.mod(i + 1), hostapi.ClassOther})
	}
	if p.burstSender(i) {
		out = append(out, flowSpec{p.flowID(burstIDs, i), 0, hostapi.ClassOther})
	}
	if p.burstReceiver(i) {
		for j := 1; j <= p.cfg.Burst.Senders; j++ {
			out = append(out, flowSpec{p.flowID(burstIDs, j), j, hostapi.ClassOther})
		}
	}
	return out
}

// layout places a rank's buffers in its one registered region. Every
// receive has its own slot, so all of a step's receives can be posted up
// front and no slot is written while a send still reads it.
type layout struct {
	acc     int // the gradient accumulator: GradientBytes
	rsStage int // n-1 reduce-scatter receive slots of one chunk (a compiled schedule's slots)
	agStage int // n-1 all-gather receive slots of one chunk
	// tpAcc, tpOut and tpSlots are the tensor-parallel group's compiled
	// exchange's: what it sends from, where it writes (an all-to-all's
	// output; tpAcc for an all-reduce) and its staging slots.
	tpAcc, tpOut, tpSlots int
	tpSend                int
	tpRecv                int
	ppSend                int
	ppRecv                int
	burstSend             int
	burstRecv             int // one slot of Burst.Bytes per sender
	// noticeSend and noticeRecv hold the owner notices (OwnerNotices).
	noticeSend int
	noticeRecv int
	size       int
}

func (p *plan) layout(i int) layout {
	var l layout
	next := func(n int) int { off := l.size; l.size += n; return off }
	l.acc = next(p.cfg.GradientBytes)
	if p.groups != nil { // a staging slot per receive of the schedule
		l.rsStage = next(slotBytes(p.groups.plan(i)))
	} else {
		l.rsStage = next((p.n - 1) * p.chunk)
		l.agStage = next((p.n - 1) * p.chunk)
	}
	if _, ok := p.tensorPeer(i); ok {
		l.tpSend, l.tpRecv = next(p.cfg.TPBytes), next(p.cfg.TPBytes)
	}
	if p.tensorGroups() {
		l.tpAcc = next(p.cfg.TPBytes)
		l.tpOut = l.tpAcc
		if p.cfg.Collective.TPCollective == AllToAll {
			l.tpOut = next(p.cfg.TPBytes)
		}
		l.tpSlots = next(slotBytes(p.tensorPlan(i)))
	}
	if p.pipeOn() {
		l.ppSend, l.ppRecv = next(p.cfg.PPBytes), next(p.cfg.PPBytes)
	}
	if p.burstSender(i) {
		l.burstSend = next(p.cfg.Burst.Bytes)
	}
	if p.burstReceiver(i) {
		l.burstRecv = next(p.cfg.Burst.Senders * p.cfg.Burst.Bytes)
	}
	if p.notices() {
		n := noticeBytes(p.noticeRanges())
		l.noticeSend, l.noticeRecv = next(n), next(n)
	}
	return l
}

// The ring schedule (rank i, round r, both phases 0..n-2):
//
//	reduce-scatter: send chunk (i-r), receive chunk (i-r-1) and add it
//	all-gather:     send chunk (i+1-r), receive chunk (i-r) and keep it
//
// After reduce-scatter rank i holds the full sum of chunk i+1, which its
// all-gather round 0 sends on.
func (p *plan) rsSendChunk(i, r int) int { return p.mod(i - r) }
func (p *plan) rsRecvChunk(i, r int) int { return p.mod(i - r - 1) }
func (p *plan) agRecvChunk(i, r int) int { return p.mod(i - r) }

// messageIndex numbers a rank's ring messages of one step for the shedding
// draw: reduce-scatter rounds 0..n-2, then all-gather rounds n-1..2n-3.
func (p *plan) messageIndex(ph phase, r int) uint64 {
	if ph == allGather {
		return uint64(p.n - 1 + r)
	}
	return uint64(r)
}

// phase is a half of the ring all-reduce.
type phase uint8

const (
	reduceScatter phase = iota
	allGather
)

// declared is the phase a receive of round of the phase declares to the
// daemon: the all-gather's first round receives from the chunk's owner.
func (ph phase) declared(round int) hostapi.Phase {
	switch {
	case ph == reduceScatter:
		return hostapi.PhaseReduce
	case round == 0:
		return hostapi.PhaseGatherOwner
	}
	return hostapi.PhaseGather
}

func (ph phase) String() string {
	if ph == allGather {
		return "all-gather"
	}
	return "reduce-scatter"
}

// GradientFlow reports whether id is one of the all-reduce's flows in a
// job of n ranks with Config.FlowBase base (the package doc's scheme): the
// flat ring's, or a compiled schedule's persistent or per-message flows.
func GradientFlow(id, base hostapi.FlowID, n int) bool {
	if id < base {
		return false
	}
	k, w := uint64(id-base), uint64(stride(n))
	return k >= ringIDs*w && k < (ringIDs+1)*w || k >= pairIDs && k < tensorPairIDs(n) || k >= messageIDs(n)
}

// RingFlow is the flow rank i of a job of n ranks with Config.FlowBase
// base sends its flat ring's messages on.
func RingFlow(base hostapi.FlowID, n, i int) hostapi.FlowID {
	return base + hostapi.FlowID(ringIDs*stride(n)+i)
}
