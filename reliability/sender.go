package reliability

import (
	"fmt"
	"math/bits"
	"time"

	"github.com/forgive-emu/forgive/wire"
)

// Segment is one data packet to put on the wire: the NIC builds the header
// from it and copies Len bytes of the message from Offset as the payload.
type Segment struct {
	PSN      wire.PSN
	Msg      uint32
	Offset   uint32
	Len      uint32
	MsgLen   uint32
	Flags    uint8 // wire.DataFirst, DataLast, DataAckReq, DataRetx
	Subflow  uint8 // PSN mod Subflows: the ordered path it must take
	Subflows uint8
	Retx     bool
}

// DataFields returns the header of s for flow info; the NIC picks the
// entropy of s.Subflow.
func (s Segment) DataFields(info FlowInfo, entropy uint16) wire.DataFields {
	return wire.DataFields{Flags: s.Flags, Entropy: entropy, Src: info.Local, Dst: info.Peer,
		Flow: info.Flow, PSN: s.PSN, Msg: s.Msg, Offset: s.Offset, MsgLen: s.MsgLen, Subflows: s.Subflows}
}

// SendCompletion reports a message whose every segment was acknowledged
// (received or forgiven: the receiver's report of forgiven ranges travels
// with its own completion).
type SendCompletion struct{ Msg, Len uint32 }

// SenderOutbox collects what a Sender wants sent or reported besides data
// segments. Probes appended by a Next call go on the wire after the
// segment that call returned. The driver drains and then calls Reset.
type SenderOutbox struct {
	// Probes carry no entropy: the NIC sets the entropy of the subflow.
	Probes      []wire.ProbeFields
	Completions []SendCompletion
}

// Reset empties the outbox, keeping its storage.
func (o *SenderOutbox) Reset() { o.Probes, o.Completions = o.Probes[:0], o.Completions[:0] }

// AckResult is what an ACK told the sender.
type AckResult struct {
	NewlyAcked      int           // PSNs newly acknowledged (cumulatively or selectively)
	NewlyAckedBytes int           // their payload bytes
	RTT             time.Duration // a round-trip sample, 0 if the ACK gave none
	// The report the ACK carries: FORGIVE's two flags and the ECN echo.
	Eligible, Exhausted, ECNEcho bool
}

// NackResult is what a retransmission request told the sender.
type NackResult struct {
	Reason wire.NackReason
	Queued int // PSNs queued for retransmission by this NACK
	// QueuedBytes is their payload; under go-back-N, every byte the
	// rewind resends.
	QueuedBytes         int
	Eligible, Exhausted bool
}

// sentRec is the sender's record of one PSN in [una, nextPSN).
type sentRec struct {
	msgSeq   uint64 // the message, as an index into the sender's message sequence
	off, len uint32
	flags    uint8
	sentAt   time.Duration
	acked    bool // acknowledged, cumulatively or selectively: not resent
	// settled: acknowledged cumulatively. Only that completes a message
	// and frees the record: a SACK is advice on what not to resend, as
	// TCP's (RFC 2018: SACKed data may be reneged), so a forged SACK can
	// delay a retransmission but never make the sender report success
	// for bytes the receiver does not have.
	settled bool
	queued  bool // waiting in the retransmission queue
	retx    bool // retransmitted at least once (Karn's rule)
}

// txMsg is a posted message not yet fully acknowledged.
type txMsg struct {
	id, len   uint32
	next      uint32 // offset of the next new segment
	unacked   int    // segments sent and not acknowledged
	segmented bool   // every segment was handed out
	done      bool
}

// probeSub is the per-subflow probing state.
type probeSub struct {
	last  wire.PSN // last new PSN sent on the subflow
	fresh bool     // new data went out since the last probe covering it
	count int      // new packets since the last periodic probe
}

// Sender is the sending end of one flow: segmentation into PSNs, the IRN
// window (BDP-FC), selective repeat or go-back-N, IRN's two timeouts, and
// PFLD probes. It never paces: the NIC asks its pacer before calling Next.
type Sender struct {
	// First, in one cache line, what the NIC reads of every flow at every
	// Advance and NextDeadline, sending or not: the timer and the window.
	rto struct {
		armed bool
		at    time.Duration
	}
	nextPSN  wire.PSN // the PSN of the next new segment
	una      wire.PSN // the lowest PSN not acknowledged
	inflight int      // PSNs sent and not acknowledged
	// outBytes is the payload of [una, nextPSN), acknowledged selectively
	// or not: IRN's BDP-FC bounds snd_nxt - snd_una.
	outBytes int
	// unacked is the payload of the PSNs sent and not acknowledged, the
	// bytes in flight a congestion window bounds; cwnd is that window
	// (SetCongestionWindow), 0 for none.
	unacked int
	cwnd    int

	info    FlowInfo
	cfg     SenderConfig
	recs    ring[sentRec]
	msgs    ring[txMsg]
	msgBase uint64 // sequence number of msgs.at(0)
	cursor  uint64 // sequence number of the first message with unsent bytes
	lastID  uint32
	posted  bool
	retxQ   ring[wire.PSN]
	gbn     struct {
		active bool
		from   wire.PSN
	}
	subs []probeSub
	rtt  RTTStats
	// rtoPending: a timeout resent the oldest PSN alone and waits for the
	// first ACK that acknowledges something new to tell whether it was
	// spurious (SenderConfig.DetectSpuriousRTO).
	rtoPending bool

	// Out is the outbox: probes and completions.
	Out   SenderOutbox
	stats SenderStats
}

// NewSender returns the sending end of a flow.
func NewSender(info FlowInfo, cfg SenderConfig) (*Sender, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Sender{info: info, cfg: cfg, nextPSN: info.InitialPSN, una: info.InitialPSN,
		subs: make([]probeSub, cfg.Subflows)}, nil
}

// Stats returns the sender's counters.
func (s *Sender) Stats() SenderStats { return s.stats }

// RTT returns the round-trip estimates.
func (s *Sender) RTT() RTTStats { return s.rtt }

// NextPSN returns the PSN the next new segment will carry.
func (s *Sender) NextPSN() wire.PSN { return s.nextPSN }

// Una returns the lowest PSN not acknowledged.
func (s *Sender) Una() wire.PSN { return s.una }

// UnackedBytes returns the payload bytes of the PSNs sent and not
// acknowledged, cumulatively or selectively: the bytes in flight.
func (s *Sender) UnackedBytes() int { return s.unacked }

// SetCongestionWindow bounds the bytes in flight for new data: a new
// segment goes only while UnackedBytes plus its length fit in bytes, or
// when nothing is unacknowledged. Retransmissions are not held back: the
// bytes they resend are still counted. 0 (the default) sets no bound;
// the Window (BDP-FC) applies either way.
func (s *Sender) SetCongestionWindow(bytes int) { s.cwnd = max(bytes, 0) }

// SetWindow changes the Window (BDP-FC) from now on: new data goes only
// while the bytes from the oldest unacknowledged PSN to the newest sent,
// plus the next packet, fit in it, or when nothing is outstanding, so a
// window below one packet still lets one packet go at a time. Bytes below
// 1 count as 1. Data already sent is not recalled.
func (s *Sender) SetWindow(bytes int) { s.cfg.Window = max(bytes, 1) }

// InFlight returns the number of PSNs sent and not acknowledged.
func (s *Sender) InFlight() int { return s.inflight }

// OutstandingBytes returns the bytes from the lowest unacknowledged PSN to
// the newest sent, the quantity Window bounds.
func (s *Sender) OutstandingBytes() int { return s.outBytes }

// Idle reports whether every posted message is fully acknowledged.
func (s *Sender) Idle() bool { return s.msgs.len() == 0 }

// Post queues message msg of length bytes. Ids must increase (serially)
// from one message to the next; consecutive ids keep the receiver's record
// of completed messages smallest. An empty message takes one packet.
func (s *Sender) Post(msg, length uint32) error {
	if s.posted && !msgBefore(s.lastID, msg) {
		return fmt.Errorf("%w: message %d after %d", ErrMsgOrder, msg, s.lastID)
	}
	s.msgs.push(txMsg{id: msg, len: length})
	s.lastID, s.posted = msg, true
	return nil
}

// NextDeadline returns when the retransmission timer fires, if armed.
func (s *Sender) NextDeadline() (time.Duration, bool) { return s.rto.at, s.rto.armed }

// Next returns the next segment to transmit: retransmissions first, then
// new data while the window allows. It returns false when nothing may go.
func (s *Sender) Next(now time.Duration) (Segment, bool) {
	// nextRetx finds nothing, and changes nothing, with an empty
	// retransmission queue and no go-back-N rewind under way: skip the
	// call for the common case of new data.
	if s.retxQ.len() > 0 || s.gbn.active {
		if seg, ok := s.nextRetx(now); ok {
			return seg, true
		}
	}
	return s.nextNew(now)
}

func (s *Sender) rec(p wire.PSN) *sentRec { return s.recs.at(int(p.Sub(s.una))) }

// sent reports whether p is in [una, nextPSN).
func (s *Sender) sent(p wire.PSN) bool { return !p.Before(s.una) && p.Before(s.nextPSN) }

func (s *Sender) msg(seq uint64) *txMsg { return s.msgs.at(int(seq - s.msgBase)) }

func (s *Sender) nextRetx(now time.Duration) (Segment, bool) {
	if s.cfg.Mode == GoBackN {
		for s.gbn.active && s.gbn.from.Before(s.nextPSN) {
			p := s.gbn.from
			s.gbn.from = p.Add(1)
			if s.sent(p) && !s.rec(p).acked {
				return s.resend(now, p), true
			}
		}
		s.gbn.active = false
		return Segment{}, false
	}
	for s.retxQ.len() > 0 {
		p := *s.retxQ.at(0)
		s.retxQ.pop()
		if !s.sent(p) {
			continue
		}
		r := s.rec(p)
		if !r.queued {
			continue
		}
		r.queued = false
		if !r.acked {
			return s.resend(now, p), true
		}
	}
	return Segment{}, false
}

// resend hands out a retransmission of p.
func (s *Sender) resend(now time.Duration, p wire.PSN) Segment {
	r := s.rec(p)
	r.retx, r.sentAt = true, now
	s.stats.RetxPackets++
	s.stats.RetxBytes += uint64(r.len)
	s.arm(now)
	seg := s.segment(p, r)
	if s.cfg.RetxProbe {
		s.probe(wire.ProbeRetx, p)
	}
	return seg
}

func (s *Sender) segment(p wire.PSN, r *sentRec) Segment {
	m := s.msg(r.msgSeq)
	sub := subflowOf(p, s.cfg.Subflows)
	return Segment{PSN: p, Msg: m.id, Offset: r.off, Len: r.len, MsgLen: m.len,
		Flags: r.flags | retxFlag(r.retx), Subflow: uint8(sub), Subflows: uint8(s.cfg.Subflows), Retx: r.retx}
}

func retxFlag(retx bool) uint8 {
	if retx {
		return wire.DataRetx
	}
	return 0
}

// nextNew segments new data: "at most Window bytes unacknowledged" (IRN's
// BDP-FC), and at most MaxInFlight PSNs so the receiver's bitmap covers
// them.
func (s *Sender) nextNew(now time.Duration) (Segment, bool) {
	if s.cursor == s.msgBase+uint64(s.msgs.len()) {
		return Segment{}, false
	}
	m := s.msg(s.cursor)
	n := min(uint32(s.cfg.MTU), m.len-m.next)
	if int(s.nextPSN.Sub(s.una)) >= s.cfg.MaxInFlight || (s.outBytes > 0 && s.outBytes+int(n) > s.cfg.Window) {
		return Segment{}, false
	}
	if s.cwnd > 0 && s.unacked > 0 && s.unacked+int(n) > s.cwnd {
		s.stats.CwndBlocked++
		return Segment{}, false
	}
	var flags uint8
	if m.next == 0 {
		flags |= wire.DataFirst
	}
	rec := sentRec{msgSeq: s.cursor, off: m.next, len: n, sentAt: now}
	m.next += n
	m.unacked++
	if m.next == m.len {
		// "AckReq on the last segment of a message."
		flags |= wire.DataLast | wire.DataAckReq
		m.segmented = true
		s.cursor++
	}
	rec.flags = flags
	p := s.nextPSN
	s.recs.push(rec)
	s.nextPSN = p.Add(1)
	s.outBytes += int(n)
	s.unacked += int(n)
	s.inflight++
	s.stats.SentPackets++
	s.stats.SentBytes += uint64(n)
	s.arm(now)
	// segment(p, s.rec(p)) from what is at hand: the record just pushed
	// is of message m and was never retransmitted.
	seg := Segment{PSN: p, Msg: m.id, Offset: rec.off, Len: n, MsgLen: m.len, Flags: flags,
		Subflow: uint8(subflowOf(p, s.cfg.Subflows)), Subflows: uint8(s.cfg.Subflows)}
	s.probeAfterNew(p)
	return seg, true
}

// probeAfterNew emits the probes due after new PSN p: a periodic probe
// every ProbeEvery packets of a subflow, and tail probes on every subflow
// that carried new data once the sender has no more data to send.
func (s *Sender) probeAfterNew(p wire.PSN) {
	sub := &s.subs[subflowOf(p, s.cfg.Subflows)]
	sub.last, sub.fresh = p, true
	sub.count++
	if s.cfg.ProbeEvery > 0 && sub.count >= s.cfg.ProbeEvery {
		s.probe(wire.ProbePeriodic, p)
	}
	if !s.cfg.TailProbe || s.cursor != s.msgBase+uint64(s.msgs.len()) {
		return
	}
	for i := range s.subs {
		if s.subs[i].fresh {
			s.probe(wire.ProbeTail, s.subs[i].last)
		}
	}
}

// probe emits a probe of kind k naming PSN p on p's subflow.
func (s *Sender) probe(k wire.ProbeKind, p wire.PSN) {
	sub := subflowOf(p, s.cfg.Subflows)
	if k != wire.ProbeRetx {
		s.subs[sub].fresh, s.subs[sub].count = false, 0
	}
	s.Out.Probes = append(s.Out.Probes, wire.ProbeFields{Kind: k, Src: s.info.Local, Dst: s.info.Peer,
		Flow: s.info.Flow, PSN: p, Subflow: uint8(sub), Subflows: uint8(s.cfg.Subflows)})
	s.stats.Probes++
}

// OnAck applies an ACK: every PSN before CumPSN and every PSN whose SACK
// bit is set is acknowledged. An RTT sample comes from the echoed PSN when
// this ACK newly acknowledges it and it was never retransmitted (Karn's
// rule: the sample of a retransmitted packet is ambiguous).
func (s *Sender) OnAck(now time.Duration, a wire.AckFields) (AckResult, error) {
	res := AckResult{Eligible: a.Flags&wire.FlagEligible != 0, Exhausted: a.Flags&wire.FlagExhausted != 0,
		ECNEcho: a.Flags&wire.FlagECNEcho != 0}
	if err := s.checkAck(a); err != nil {
		return res, err
	}
	s.stats.Acks++
	var echoSentAt time.Duration
	sample := s.sent(a.EchoPSN) && !s.rec(a.EchoPSN).acked && !s.rec(a.EchoPSN).retx
	if sample {
		echoSentAt = s.rec(a.EchoPSN).sentAt
	}
	// Every p in [una, CumPSN), walked by its record: rec(p) is
	// recs.at(p - una). checkAck let through only a CumPSN in [una,
	// nextPSN] or a stale one before una, for which the count is
	// negative and nothing is acknowledged cumulatively.
	for i, n := 0, int(a.CumPSN.Sub(s.una)); i < n; i++ {
		s.ackRec(s.recs.at(i), &res, true)
	}
	for sack := a.Sack; sack != 0; sack &= sack - 1 {
		if p := a.SackBase.Add(uint32(bits.TrailingZeros64(sack))); s.sent(p) {
			s.ack(p, &res, false)
		}
	}
	if sample && (a.EchoPSN.Before(s.una) || s.rec(a.EchoPSN).acked) {
		res.RTT = now - echoSentAt
		s.rtt.sample(res.RTT)
		s.stats.RTTSamples++
	}
	if s.rtoPending && res.NewlyAcked > 0 {
		s.rtoPending = false
		if a.Flags&wire.AckRetx == 0 {
			// An original arrived after the timeout fired: it was late,
			// not lost.
			s.stats.SpuriousRTOs++
		} else {
			s.queueAll()
		}
	}
	s.slide()
	s.arm(now)
	return res, nil
}

func (s *Sender) checkAck(a wire.AckFields) error {
	// The highest PSN the SACK names; it must have been sent.
	top := a.SackBase.Add(uint32(63 - bits.LeadingZeros64(a.Sack)))
	switch {
	case a.Flow != s.info.Flow:
		s.stats.Malformed++
		return fmt.Errorf("%w: ACK for flow %d at flow %d", ErrWrongFlow, a.Flow, s.info.Flow)
	case a.Sack != 0 && (!a.SackBase.Before(s.nextPSN) || !top.Before(s.nextPSN) || top.Before(a.SackBase)):
		// A SACK of a PSN never sent is refused whole, before anything
		// changes: an honest receiver cannot have it. (top before the
		// base means the bits wrap past nextPSN.)
		s.stats.Malformed++
		return fmt.Errorf("%w: SACK up to PSN %d, next PSN %d", ErrBadAck, top, s.nextPSN)
	case !a.CumPSN.InWindow(s.una, uint32(s.nextPSN-s.una)+1):
		// Outside [una, nextPSN]: an ACK cannot acknowledge what was never
		// sent, and one from before una is stale. Comparing offsets from
		// una also rejects a PSN exactly 2^31 away, which serial
		// arithmetic cannot order.
		if s.una.Sub(a.CumPSN) > 0 {
			return nil // stale cumulative PSN; its SACK bits may still be news
		}
		s.stats.Malformed++
		return fmt.Errorf("%w: cumulative PSN %d, window [%d, %d]", ErrBadAck, a.CumPSN, s.una, s.nextPSN)
	}
	return nil
}

// ack acknowledges p: it leaves the bytes in flight and is not resent.
// A cumulative acknowledgement also settles it, completing its message
// when it was the last segment outstanding.
func (s *Sender) ack(p wire.PSN, res *AckResult, cumulative bool) {
	s.ackRec(s.rec(p), res, cumulative)
}

// ackRec is ack for p's record r.
func (s *Sender) ackRec(r *sentRec, res *AckResult, cumulative bool) {
	if !r.acked {
		r.acked = true
		s.inflight--
		s.unacked -= int(r.len)
		res.NewlyAcked++
		res.NewlyAckedBytes += int(r.len)
	}
	if !cumulative || r.settled {
		return
	}
	r.settled = true
	m := s.msg(r.msgSeq)
	m.unacked--
	if m.unacked == 0 && m.segmented && !m.done {
		m.done = true
		s.Out.Completions = append(s.Out.Completions, SendCompletion{Msg: m.id, Len: m.len})
		s.stats.Completions++
	}
}

// slide drops the acknowledged records at the head of the window and the
// completed messages at the head of the message queue.
func (s *Sender) slide() {
	for s.recs.len() > 0 {
		r := s.recs.at(0)
		if !r.settled {
			break
		}
		s.outBytes -= int(r.len)
		s.recs.pop()
		s.una = s.una.Add(1)
	}
	for s.msgs.len() > 0 && s.msgs.at(0).done {
		s.msgs.pop()
		s.msgBase++
	}
}

// OnNack applies a retransmission request. Selective repeat queues exactly
// the PSNs requested, at once, so the next call to Next returns the first
// of them: "a trimmed-header NACK is answered within the same call, no
// timer". Go-back-N treats the NACK as RoCE treats a sequence-error NAK:
// every PSN before it arrived, and everything from it is sent again.
func (s *Sender) OnNack(now time.Duration, n wire.NackFields) (NackResult, error) {
	res := NackResult{Reason: n.Reason, Eligible: n.Flags&wire.FlagEligible != 0,
		Exhausted: n.Flags&wire.FlagExhausted != 0}
	if n.Flow != s.info.Flow {
		s.stats.Malformed++
		return res, fmt.Errorf("%w: NACK for flow %d at flow %d", ErrWrongFlow, n.Flow, s.info.Flow)
	}
	if err := s.checkNack(n); err != nil {
		return res, err
	}
	s.stats.Nacks.add(n.Reason)
	switch {
	case s.cfg.Mode == GoBackN:
		res.Queued = s.goBack(n.PSN)
		if res.Queued > 0 {
			res.QueuedBytes = s.unacked
		}
	case n.Count == 0:
		res.Queued, res.QueuedBytes = s.queueRange(n.Msg, ByteRange{n.Offset, n.Offset + n.Length})
	default:
		for i := range uint32(n.Count) {
			if p := n.PSN.Add(i); s.sent(p) && s.queue(p) {
				res.Queued++
				res.QueuedBytes += int(s.rec(p).len)
			}
		}
	}
	s.arm(now)
	return res, nil
}

// checkNack rejects a request for PSNs never sent. A go-back-N NACK names
// the receiver's expected PSN, which may be the next PSN to send.
func (s *Sender) checkNack(n wire.NackFields) error {
	bad := false
	switch {
	case s.cfg.Mode == GoBackN:
		bad = n.PSN.After(s.nextPSN)
	case n.Count > 0:
		bad = !n.PSN.Before(s.nextPSN)
	}
	if bad {
		s.stats.Malformed++
		return fmt.Errorf("%w: PSN %d, next PSN %d", ErrBadNack, n.PSN, s.nextPSN)
	}
	return nil
}

// goBack acknowledges everything before p and rewinds to p.
func (s *Sender) goBack(p wire.PSN) int {
	if p.Before(s.una) {
		return 0 // a stale request: its PSN was acknowledged since
	}
	var res AckResult
	for q := s.una; q.Before(p); q = q.Add(1) {
		s.ack(q, &res, true)
	}
	s.slide()
	if !s.una.Before(s.nextPSN) {
		return 0
	}
	s.gbn.active, s.gbn.from = true, p
	return int(s.nextPSN.Sub(s.gbn.from))
}

// queue puts p in the retransmission queue unless it is acknowledged or
// already waiting there.
func (s *Sender) queue(p wire.PSN) bool {
	r := s.rec(p)
	if r.acked || r.queued {
		return false
	}
	r.queued = true
	s.retxQ.push(p)
	return true
}

// queueRange queues the segments of message msg that overlap r: a
// request that names its bytes rather than its PSNs. An empty range (a
// length of 0, or one that wraps past 2^32) names no byte and queues
// nothing.
func (s *Sender) queueRange(msg uint32, r ByteRange) (queued, bytes int) {
	if r.Len() == 0 {
		return 0, 0
	}
	for i := range s.recs.len() {
		rec := s.recs.at(i)
		if s.msg(rec.msgSeq).id == msg && rec.off < r.End && r.Start < rec.off+max(rec.len, 1) &&
			s.queue(s.una.Add(uint32(i))) {
			queued++
			bytes += int(rec.len)
		}
	}
	return queued, bytes
}

// OnTimer fires the retransmission timeout when it is due. Following IRN
// as conweave-ns3 runs it (HandleTimeout, then RecoverQueue), selective
// repeat resends every PSN not yet acknowledged, skipping those a SACK
// covered; go-back-N rewinds to the lowest unacknowledged PSN.
func (s *Sender) OnTimer(now time.Duration) {
	if !s.rto.armed || now < s.rto.at {
		return
	}
	s.stats.RTOs++
	if s.cfg.Mode == GoBackN {
		s.gbn.active, s.gbn.from = true, s.una
	} else {
		// The oldest unsettled PSN is resent even if a SACK covered it:
		// the cumulative PSN says the receiver lacks it, so that SACK was
		// false (an honest receiver never SACKs the PSN it waits for).
		if s.recs.len() > 0 {
			if r := s.rec(s.una); r.acked && !r.settled {
				r.acked = false
				s.inflight++
				s.unacked += int(r.len)
			}
		}
		if s.cfg.DetectSpuriousRTO && s.recs.len() > 0 {
			// The oldest alone; the first new acknowledgement decides
			// (OnAck). A timeout while waiting resends it again.
			s.rtoPending = true
			s.queue(s.una)
		} else {
			s.queueAll()
		}
	}
	s.arm(now)
}

// queueAll queues every PSN sent and not acknowledged: IRN's response to a
// timeout.
func (s *Sender) queueAll() {
	for i := range s.recs.len() {
		s.queue(s.una.Add(uint32(i)))
	}
}

// arm restarts the retransmission timer, as IRN's NIC does on every packet
// sent and every ACK or NACK received, so it fires only after RTO of
// silence. "RTO_low ... when <= 3 MTU in flight / RTO_high otherwise."
func (s *Sender) arm(now time.Duration) {
	// Records not settled keep the timer: all of them SACKed but the head
	// not cumulatively acknowledged means a SACK was false.
	if s.inflight == 0 && s.recs.len() == 0 {
		s.rto.armed = false
		return
	}
	d := s.cfg.RTOHigh
	if s.inflight <= s.cfg.RTOLowPackets {
		d = s.cfg.RTOLow
	}
	s.rto.armed, s.rto.at = true, now+d
}
