package reliability

import (
	"fmt"
	"time"

	"github.com/forgive-emu/forgive/wire"
)

// Loss inference without trims (PFLD-lite, after Ordered Chaos): the
// sender spreads a flow over sigma subflows, PSN p on subflow p mod sigma,
// and each subflow is delivered in order. "Packets between the maximum
// received PSN index and the first unset bit are identified as lost and
// NACKed immediately for retransmission."

// subflowOf returns the subflow PSN p travels on.
func subflowOf(p wire.PSN, sigma int) int {
	if sigma > 0 && sigma&(sigma-1) == 0 {
		// A sender's sigma is a power of two (SenderConfig.Validate), one
		// for every flow that does not use subflows: a mask, not a division.
		return int(uint32(p) & uint32(sigma-1))
	}
	return int(uint32(p) % uint32(sigma))
}

// subflowState remembers, per subflow, the highest PSN that arrived on it
// in order (retransmissions and trimmed headers excluded: a retransmission
// does not respect the subflow's order, and a trimmed header overtakes
// data on the priority queue).
type subflowState struct {
	sigma   int
	highest []wire.PSN
	seen    []bool
}

// use switches to sigma subflows, forgetting what it knew if sigma changed.
func (s *subflowState) use(sigma int) {
	if s.sigma == sigma {
		return
	}
	s.sigma = sigma
	if cap(s.highest) < sigma {
		s.highest, s.seen = make([]wire.PSN, sigma), make([]bool, sigma)
	}
	s.highest, s.seen = s.highest[:sigma], s.seen[:sigma]
	clear(s.seen)
}

// firstFrom returns the first PSN at or after from that travels on
// subflow sub.
func firstFrom(from wire.PSN, sub, sigma int) wire.PSN {
	d := (uint32(sub) + uint32(sigma) - uint32(from)%uint32(sigma)) % uint32(sigma)
	return from.Add(d)
}

// nextUnseen returns the first PSN of subflow sub that has not arrived in
// order and is not yet settled: the one after the highest, or the first
// at or after the cumulative PSN.
func (r *Receiver) nextUnseen(sub int) wire.PSN {
	first := firstFrom(r.psns.cum, sub, r.subs.sigma)
	if !r.subs.seen[sub] {
		return first
	}
	next := r.subs.highest[sub].Add(uint32(r.subs.sigma))
	if next.Before(first) {
		return first
	}
	return next
}

// detectGap runs when fresh data arrives on an ordered subflow: "a later
// packet or probe has arrived on the same ordered subflow while an earlier
// PSN has not", so the earlier PSN was lost without a trim.
func (r *Receiver) detectGap(h DataHeader) {
	if r.cfg.SprayPerPacket || h.Flags&wire.DataRetx != 0 {
		return // small enough to inline: a sprayed flow's packets stop here
	}
	r.detectOrderedGap(h)
}

func (r *Receiver) detectOrderedGap(h DataHeader) {
	r.subs.use(max(int(h.Subflows), 1))
	sub := subflowOf(h.PSN, r.subs.sigma)
	if r.subs.seen[sub] && !h.PSN.After(r.subs.highest[sub]) {
		return // out of order within a subflow: nothing can be inferred
	}
	r.inferLoss(r.nextUnseen(sub), h.PSN, wire.NackGap)
	r.subs.highest[sub], r.subs.seen[sub] = h.PSN, true
}

// OnProbe handles a loss-detection probe. "Upon receiving a probe, the
// receiver NACKs any unreceived PSNs with the same EV": everything the
// sender put on the probe's subflow up to its PSN has arrived or was lost.
// A retransmission probe names one PSN: "If the receiver receives the
// probe but not the corresponding data packet, it NACKs that PSN." Every
// probe is answered by an ACK with the probe flag.
func (r *Receiver) OnProbe(now time.Duration, p wire.ProbeFields) error {
	r.stats.Probes++
	sigma := max(int(p.Subflows), 1)
	switch {
	case p.Flow != r.info.Flow:
		r.stats.Malformed++
		return fmt.Errorf("%w: probe for flow %d at flow %d", ErrWrongFlow, p.Flow, r.info.Flow)
	case int(p.Subflow) >= sigma || subflowOf(p.PSN, sigma) != int(p.Subflow):
		r.stats.Malformed++
		return fmt.Errorf("%w: PSN %d on subflow %d of %d", ErrBadProbe, p.PSN, p.Subflow, p.Subflows)
	}
	if r.cfg.Mode == SelectiveRepeat && !r.cfg.SprayPerPacket {
		r.probe(p, sigma)
	}
	r.sendAck(p.PSN, r.lastMsg, wire.AckProbe)
	return nil
}

func (r *Receiver) probe(p wire.ProbeFields, sigma int) {
	if p.Kind == wire.ProbeRetx {
		// The retransmission travelled just ahead of its probe. A NACK is
		// sent even if one was sent before: that one caused this resend.
		if !r.psns.isSettled(p.PSN) && r.psns.inWindow(p.PSN) {
			r.psns.setNacked(p.PSN)
			r.sendNack(wire.NackFields{Reason: wire.NackProbe, Priority: wire.PriorityNormal,
				PSN: p.PSN, Count: 1}, r.lastMsg)
		}
		return
	}
	r.subs.use(sigma)
	sub := int(p.Subflow)
	r.inferLoss(r.nextUnseen(sub), p.PSN.Add(1), wire.NackProbe)
	if !r.subs.seen[sub] || p.PSN.After(r.subs.highest[sub]) {
		r.subs.highest[sub], r.subs.seen[sub] = p.PSN, true
	}
}

// inferLoss NACKs every PSN of the current subflow stride in [from, to)
// that is neither settled nor already requested. On one path (sigma 1)
// consecutive lost PSNs share one NACK with a PSN count.
func (r *Receiver) inferLoss(from, to wire.PSN, reason wire.NackReason) {
	step := uint32(r.subs.sigma)
	var run wire.PSN
	var n uint32
	for q := from; q.Before(to) && r.psns.inWindow(q); q = q.Add(step) {
		if r.psns.isSettled(q) || r.psns.isNacked(q) {
			continue
		}
		r.psns.setNacked(q)
		if n > 0 && step == 1 && q == run.Add(n) && n < 0xFFFF {
			n++
			continue
		}
		r.flushLoss(run, n, reason)
		run, n = q, 1
	}
	r.flushLoss(run, n, reason)
}

func (r *Receiver) flushLoss(first wire.PSN, n uint32, reason wire.NackReason) {
	if n == 0 {
		return
	}
	r.sendNack(wire.NackFields{Reason: reason, Priority: wire.PriorityNormal, PSN: first, Count: uint16(n)}, r.lastMsg)
}

// Go-back-N (RoCE): "accept only the expected PSN"; anything else is
// dropped and the expected PSN NACKed, at most once per NackInterval, as
// HPCC's ns-3 NIC does. The NACK reason is the gap code, standing in for
// RoCE's PSN sequence error: the expected PSN was not received.

func (r *Receiver) gbnData(now time.Duration, h DataHeader) (Result, error) {
	switch d := h.PSN.Sub(r.psns.cum); {
	case d < 0:
		return r.duplicate(h, Duplicate), nil
	case d > 0:
		r.stats.OutOfOrder++
		r.gbnNack(now, wire.NackGap, h.Msg, false)
		return Result{Verdict: Dropped}, nil
	}
	m, err := r.message(h)
	if err != nil {
		return Result{Verdict: Dropped}, err
	}
	if m == nil {
		r.psns.settle(h.PSN)
		return r.duplicate(h, Duplicate), nil
	}
	res := r.arrive(&h, m)
	r.ackData(now, &h, &res)
	return res, nil
}

// gbnTrimmed: trimmed headers in go-back-N mode just NACK; nothing is
// ever forgiven. A trim of the expected PSN is NACKed at once.
func (r *Receiver) gbnTrimmed(now time.Duration, h DataHeader) Result {
	switch d := h.PSN.Sub(r.psns.cum); {
	case d < 0:
		r.sendAck(h.PSN, h.Msg, ecnEcho(h))
		return Result{Verdict: Acked}
	case d > 0:
		r.stats.OutOfOrder++
		r.gbnNack(now, wire.NackGap, h.Msg, false)
		return Result{Verdict: Dropped}
	}
	reason := wire.NackTrimmed
	if r.cfg.TrimmedLastHop {
		reason = wire.NackTrimmedLastHop
	}
	r.stats.Repairs++
	r.gbnNack(now, reason, h.Msg, true)
	return Result{Verdict: Repaired}
}

func (r *Receiver) gbnNack(now time.Duration, reason wire.NackReason, msg uint32, force bool) {
	cum := r.psns.cum
	if !force && r.gbn.sent && r.gbn.psn == cum && now < r.gbn.until {
		return
	}
	r.gbn.sent, r.gbn.psn, r.gbn.until = true, cum, now+r.cfg.NackInterval
	r.sendNack(wire.NackFields{Reason: reason, Priority: wire.PriorityNormal, PSN: cum, Count: 1}, msg)
}
