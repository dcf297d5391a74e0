package workload

import (
	"fmt"

	"github.com/forgive-emu/forgive/collective"
	"github.com/forgive-emu/forgive/hostapi"
)

// gradientExchange is rank i's gradient all-reduce as a compiled
// schedule runs it, over its data-parallel group.
func (p *plan) gradientExchange(i int, lay layout) exchange {
	return exchange{gradient: true, class: hostapi.ClassGradient, send: wrSchedSend, recv: wrSchedRecv,
		acc: lay.acc, out: lay.acc, slots: lay.rsStage, member: p.groups.global,
		perMessage: p.cfg.Collective.FlowPerMessage, pairFlow: p.pairFlow}
}

// tensorExchange is rank i's tensor-parallel group's exchange
// (Collective.TPCollective), on persistent flows of class tensor.
func (p *plan) tensorExchange(i int, lay layout) exchange {
	return exchange{class: hostapi.ClassTensor, send: wrTensorSchedSend, recv: wrTensorSchedRecv,
		acc: lay.tpAcc, out: lay.tpOut, slots: lay.tpSlots, member: p.groups.tensorMember, pairFlow: p.tensorPairFlow}
}

// tensorPlan is rank i's part of its tensor-parallel group's exchange.
func (p *plan) tensorPlan(i int) *collective.Plan { return &p.groups.tensor.Plans[i%p.groups.tp] }

// tensorPrefix seeds rank's activations on step, which its tensor-parallel
// group's exchange moves: small integers as the gradients are, so that
// every sum is exact and every element is checked.
func tensorPrefix(seed uint64, step, rank int) uint64 {
	return hash(seed, uint64(step), uint64(rank), 0x7e5a)
}

// fillTensor writes rank's activations of step into its exchange's buffer.
func (r *rank) fillTensor(step int) {
	prefix := tensorPrefix(r.p.cfg.Seed, step, r.idx)
	b := r.bytesAt(r.lay.tpAcc, r.p.cfg.TPBytes)
	for e := range len(b) / 4 {
		putFloat(b, e, elementValue(prefix, e))
	}
}

// tensorDone records that the rank's tensor-parallel exchange of the step
// is complete, and checks every element it holds: an all-reduce's sums
// over the group, an all-to-all's blocks as their senders wrote them.
func (r *rank) tensorDone() {
	st, p := r.st, r.p
	st.tp = append(st.tp, r.now()-st.commStart)
	if !r.data() {
		return
	}
	x := p.tensorExchange(r.idx, r.lay)
	pl := p.tensorPlan(r.idx)
	out := r.bytesAt(x.out, p.cfg.TPBytes)
	bad := func(e int, got, want float32) {
		st.failures = append(st.failures, fmt.Sprintf("tensor-parallel %s: element %d is %v, want %v", p.cfg.Collective.TPCollective, e, got, want))
	}
	if p.cfg.Collective.TPCollective == AllToAll {
		for _, rv := range pl.Recvs {
			from := x.member(r.idx, rv.Peer)
			src := p.groups.tensor.Plans[rv.Peer].Sends[rv.PeerMsg]
			prefix := tensorPrefix(p.cfg.Seed, st.step, from)
			for e := range rv.Len / 4 {
				if got, want := getFloat(out, rv.Off/4+e), elementValue(prefix, src.Off/4+e); got != want {
					bad(rv.Off/4+e, got, want)
					return
				}
			}
		}
		return
	}
	prefixes := make([]uint64, p.groups.tp)
	for l := range prefixes {
		prefixes[l] = tensorPrefix(p.cfg.Seed, st.step, x.member(r.idx, l))
	}
	for e := range len(out) / 4 {
		if got, want := getFloat(out, e), exactSum(prefixes, e); got != want {
			bad(e, got, want)
			return
		}
	}
}
