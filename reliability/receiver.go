package reliability

import (
	"fmt"
	"time"

	"github.com/forgive-emu/forgive/wire"
)

// DataHeader is what the receiver reads from a data packet or a trimmed
// data header, plus the ECN mark of its IP header.
type DataHeader struct {
	PSN        wire.PSN
	Msg        uint32
	Offset     uint32
	PayloadLen uint32 // as sent; a trimmed header keeps it
	MsgLen     uint32
	Flags      uint8 // wire.DataFirst, DataLast, DataRetx, DataAckReq, DataTrimmed
	Subflows   uint8 // sigma; 0 or 1: one ordered path
	CE         bool  // the packet arrived with ECN Congestion Experienced
}

// HeaderOf reads a parsed data packet or trimmed header.
func HeaderOf(d wire.Data, ce bool) DataHeader {
	// One bounds check for every field read below: byte 38, the subflow
	// count, is the last of them (the reserved byte 39 is not read, so a
	// 39-byte slice reads as it did).
	_ = d[wire.DataLen-2]
	return DataHeader{
		PSN: d.PSN(), Msg: d.Msg(), Offset: d.Offset(), PayloadLen: uint32(d.PayloadLen()),
		MsgLen: d.MsgLen(), Flags: d.Flags(), Subflows: d.Subflows(), CE: ce,
	}
}

// Range returns the bytes of the message the packet carries (or carried).
func (h DataHeader) Range() ByteRange { return ByteRange{h.Offset, h.Offset + h.PayloadLen} }

// Trimmed reports whether a switch removed the payload.
func (h DataHeader) Trimmed() bool { return h.Flags&wire.DataTrimmed != 0 }

// consistent reports whether the header's range fits its message and a
// packet; check gives the error when it does not.
func (h DataHeader) consistent() bool {
	return h.PayloadLen <= wire.MaxPayload && uint64(h.Offset)+uint64(h.PayloadLen) <= uint64(h.MsgLen)
}

func (h DataHeader) check() error {
	if !h.consistent() {
		return fmt.Errorf("%w: PSN %d bytes [%d,+%d) of a %d-byte message",
			ErrBadHeader, h.PSN, h.Offset, h.PayloadLen, h.MsgLen)
	}
	return nil
}

// Verdict says what the receiver did with a packet.
type Verdict uint8

const (
	// Placed: the packet was new; Result.Place lists the bytes to copy.
	Placed Verdict = iota + 1
	// Duplicate: nothing new; its PSN or all its bytes were settled.
	Duplicate
	// Discarded: its bytes were forgiven, "discard the payload, no credit back".
	Discarded
	// Acked: a trimmed header with nothing missing, "acknowledge and charge nothing".
	Acked
	// Repaired: a trimmed header whose range was requested again.
	Repaired
	// Forgave: a trimmed header whose missing bytes were forgiven.
	Forgave
	// Dropped: not accepted (go-back-N out of order, beyond the window,
	// too many open messages, or an inconsistent header).
	Dropped
)

var verdictNames = [...]string{"invalid", "placed", "duplicate", "discarded", "acked", "repaired", "forgave", "dropped"}

func (v Verdict) String() string {
	if int(v) < len(verdictNames) {
		return verdictNames[v]
	}
	return fmt.Sprintf("Verdict(%d)", uint8(v))
}

// Result is the outcome of one data packet or trimmed header.
type Result struct {
	Verdict Verdict
	// Place lists the byte ranges of the message that became Received: the
	// NIC copies exactly these bytes of the payload into memory, at
	// payload[r.Start-Offset : r.End-Offset]. The slice is reused by the
	// next call.
	Place []ByteRange
	// Completed: the packet completed its message (see Completion).
	Completed bool
}

// Completion reports a message whose every byte is settled.
type Completion struct {
	Flow, Msg, Len uint32
	// Forgiven lists the forgiven byte ranges, which the NIC zero-fills.
	// It is nil when nothing was forgiven; otherwise it is a new slice the
	// caller owns, the one allocation of a message with forgiven bytes.
	Forgiven []ByteRange
}

// ReceiverOutbox collects what a Receiver wants sent. The driver sends
// the entries in order and then calls Reset, which keeps the storage.
type ReceiverOutbox struct {
	Acks        []wire.AckFields
	Nacks       []wire.NackFields
	Completions []Completion
}

// Reset empties the outbox.
func (o *ReceiverOutbox) Reset() {
	clear(o.Completions) // drop references to forgiven lists
	o.Acks, o.Nacks, o.Completions = o.Acks[:0], o.Nacks[:0], o.Completions[:0]
}

// Receiver is the receiving end of one flow: the PSN bitmap behind ACKs,
// the byte scoreboard of each open message, FORGIVE's trimmed-header
// decision (with the budget behind a Decider), ACK coalescing, and loss
// inference from gaps and probes on ordered subflows.
type Receiver struct {
	// The delayed ACK first: the NIC reads its timer for every flow at
	// every Advance and NextDeadline; the PSN window follows.
	ack struct {
		pending   int // payload bytes since the last ACK
		armed     bool
		deadline  time.Duration
		echo      wire.PSN
		msg       uint32
		seenFirst bool
	}
	psns psnBitmap
	info FlowInfo
	cfg  ReceiverConfig
	dec  Decider
	// noDec: dec is NoForgiveness, whose answers are known, so the
	// per-packet calls through the interface are skipped.
	noDec   bool
	lastMsg uint32
	msgs    msgTable
	place   []ByteRange

	// Out is the outbox: ACKs, NACKs and completions to hand on.
	Out  ReceiverOutbox
	subs subflowState
	gbn  struct {
		sent  bool
		psn   wire.PSN
		until time.Duration
	}
	stats ReceiverStats
}

// NewReceiver returns the receiving end of a flow. Use NoForgiveness as
// the Decider of a run without FORGIVE.
func NewReceiver(info FlowInfo, cfg ReceiverConfig, d Decider) (*Receiver, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if d == nil {
		return nil, fmt.Errorf("%w: nil Decider", ErrConfig)
	}
	return &Receiver{
		info:  info,
		cfg:   cfg,
		dec:   d,
		noDec: isNoForgiveness(d),
		psns:  newPSNBitmap(info.InitialPSN, cfg.BitmapPSNs),
		msgs:  msgTable{max: cfg.MaxMessages},
	}, nil
}

// CumPSN returns the cumulative PSN: every PSN before it is settled.
func (r *Receiver) CumPSN() wire.PSN { return r.psns.cum }

// Window returns how many PSNs from CumPSN on the receiver can record.
func (r *Receiver) Window() int { return int(r.psns.size) }

// Stats returns the receiver's counters.
func (r *Receiver) Stats() ReceiverStats { return r.stats }

// OpenMessages returns the number of messages seen and not complete.
func (r *Receiver) OpenMessages() int { return len(r.msgs.open) }

// Scoreboard returns the scoreboard of an open message, for inspection.
func (r *Receiver) Scoreboard(msg uint32) (*Scoreboard, bool) {
	m, _ := r.msgs.find(msg)
	if m == nil {
		return nil, false
	}
	return &m.sb, true
}

// NextDeadline returns when the delayed ACK is due, if one is pending.
func (r *Receiver) NextDeadline() (time.Duration, bool) { return r.ack.deadline, r.ack.armed }

// OnTimer sends the delayed ACK if it is due, so a tail never waits.
func (r *Receiver) OnTimer(now time.Duration) {
	if r.ack.armed && now >= r.ack.deadline {
		r.sendAck(r.ack.echo, r.ack.msg, 0)
	}
}

// OnPacket hands in a data packet or trimmed header.
func (r *Receiver) OnPacket(now time.Duration, h DataHeader) (Result, error) {
	if h.Trimmed() {
		return r.OnTrimmedHeader(now, h)
	}
	return r.OnData(now, h)
}

// OnData handles a data packet, the last column of the seed's table:
// absent, Requested or Outstanding bytes become Received and are ACKed;
// Forgiven bytes are discarded with no credit back; Received bytes get a
// duplicate ACK.
func (r *Receiver) OnData(now time.Duration, h DataHeader) (Result, error) {
	r.place = r.place[:0]
	r.stats.DataPackets++
	// accept, inWindow and message, each with its common case written
	// out here and its other cases where they were.
	if !h.consistent() {
		r.stats.Malformed++
		return Result{Verdict: Dropped}, h.check()
	}
	if r.cfg.Mode == GoBackN {
		return r.gbnData(now, h)
	}
	if r.psns.isSettled(h.PSN) {
		return r.duplicate(h, Duplicate), nil
	}
	if !r.psns.inWindow(h.PSN) {
		return Result{Verdict: Dropped}, r.outOfWindow(h.PSN)
	}
	m, i := r.msgs.find(h.Msg)
	if m == nil || m.sb.Len() != h.MsgLen {
		var err error
		if m, err = r.openMessage(h, m, i); err != nil {
			return Result{Verdict: Dropped}, err
		}
	}
	if m == nil { // a late packet of a completed message
		r.psns.settle(h.PSN)
		return r.duplicate(h, Duplicate), nil
	}
	res := r.arrive(&h, m)
	r.detectGap(h)
	r.ackData(now, &h, &res)
	return res, nil
}

// arrive marks the packet's bytes Received and settles its PSN. It and
// ackData, which run for every data packet, read the header and the result
// through pointers rather than copies of them.
func (r *Receiver) arrive(h *DataHeader, m *rxMsg) Result {
	rng := h.Range()
	placed, fromOutstanding := m.sb.MarkReceived(rng, r.place)
	r.place = placed
	var newly uint64
	for _, p := range placed {
		newly += uint64(p.Len())
	}
	res := Result{Verdict: Placed, Place: placed}
	switch {
	case newly > 0:
		r.stats.BytesPlaced += newly
		if !r.noDec {
			r.dec.OnArrival(r.info.Flow, m.id, int64(newly), int64(fromOutstanding))
		}
	case h.PayloadLen == 0:
		// An empty message's only packet: new, with nothing to copy.
	case m.sb.HasForgiven(rng):
		res.Verdict = Discarded
		r.stats.Discarded++
	default:
		res.Verdict = Duplicate
		r.stats.Duplicates++
	}
	r.psns.settle(h.PSN)
	r.lastMsg = m.id
	res.Completed = r.maybeComplete(m)
	return res
}

// OnTrimmedHeader handles a trimmed header: the middle column of the
// seed's table, then Receiver::OnTrimmedHeader itself (see onTrim).
func (r *Receiver) OnTrimmedHeader(now time.Duration, h DataHeader) (Result, error) {
	r.place = r.place[:0]
	r.stats.TrimmedHeaders++
	if err := r.accept(h); err != nil {
		return Result{Verdict: Dropped}, err
	}
	if r.cfg.Mode == GoBackN {
		return r.gbnTrimmed(now, h), nil
	}
	if r.psns.isSettled(h.PSN) {
		// Forgiven or Received: "ACK, no charge" / "duplicate ACK, no charge".
		r.sendAck(h.PSN, h.Msg, ecnEcho(h))
		return Result{Verdict: Acked}, nil
	}
	if err := r.inWindow(h.PSN); err != nil {
		return Result{Verdict: Dropped}, err
	}
	m, err := r.message(h)
	if err != nil {
		return Result{Verdict: Dropped}, err
	}
	if m == nil {
		r.psns.settle(h.PSN)
		r.sendAck(h.PSN, h.Msg, ecnEcho(h))
		return Result{Verdict: Acked}, nil
	}
	r.lastMsg = m.id
	return r.onTrim(h, m), nil
}

// onTrim is Receiver::OnTrimmedHeader(flow, range). The budget checks of
// the seed's pseudocode (IsGradientAllReduce, an open step, the vesting
// rule, Draw(P)) live behind Decider.OnTrim.
func (r *Receiver) onTrim(h DataHeader, m *rxMsg) Result {
	rng := h.Range()
	// missing = Unsettled(flow, range)
	missing := m.sb.Tally(rng)

	// "Nothing is missing after all, so acknowledge and charge nothing."
	// if (missing is empty): SendAck(flow.rcv_nxt, Flags(flow))
	if missing.Missing() == 0 {
		r.psns.settle(h.PSN)
		// Only an empty message can be complete here: a trimmed header
		// is all an empty message has to carry.
		completed := r.maybeComplete(m)
		r.sendAck(h.PSN, m.id, ecnEcho(h))
		return Result{Verdict: Acked, Completed: completed}
	}

	// "A range trimmed again is already outstanding. Count only its new
	// bytes." entry.outstanding += Count(bytes of missing not marked
	// Requested); len = Count(missing). Here Requested bytes no budget
	// counts are new to it too, so the Decider gets NotCounted.
	var forgive, counted bool // NoForgiveness: neither
	if !r.noDec {
		forgive, counted = r.dec.OnTrim(r.info.Flow, m.id, int64(missing.Missing()), int64(missing.NotCounted()))
	}
	if !forgive {
		r.repair(h, m, counted)
		return Result{Verdict: Repaired}
	}

	// "Forgiving charges the loss budget once."
	// Mark(flow.scoreboard, missing, Forgiven)
	// flow.rcv_nxt = Advance(flow.rcv_nxt, flow.scoreboard)
	r.stats.BytesForgiven += m.sb.MarkForgiven(rng)
	r.stats.Forgiven++
	r.psns.settle(h.PSN)
	completed := r.maybeComplete(m)
	// "The acknowledgement carries the ECN echo whether or not this flow
	// is exempt, so the signal is still there when this flow obeys
	// congestion control again." SendAck(flow.rcv_nxt, ecn_echo, Flags(flow))
	// The trim itself is the congestion signal the echo carries.
	r.sendAck(h.PSN, m.id, wire.FlagECNEcho)
	return Result{Verdict: Forgave, Completed: completed}
}

// repair is Receiver::Repair(flow, range): "Every refusal takes this path.
// Mark only the unsettled subranges, so a range that is partly Received
// keeps its Received bytes."
func (r *Receiver) repair(h DataHeader, m *rxMsg, counted bool) {
	// Mark(flow.scoreboard, Unsettled(flow, range), Requested)
	m.sb.MarkRequested(h.Range(), counted)
	r.stats.Repairs++
	r.psns.setNacked(h.PSN)
	// SendRetransmissionRequest(range, kNormal, Flags(flow))
	reason := wire.NackTrimmed
	if r.cfg.TrimmedLastHop {
		reason = wire.NackTrimmedLastHop
	}
	r.sendNack(wire.NackFields{Flags: ecnEcho(h), Reason: reason, Priority: wire.PriorityNormal,
		PSN: h.PSN, Count: 1, Msg: m.id, Offset: h.Offset, Length: h.PayloadLen}, m.id)
}

// accept validates a header before it touches any state.
func (r *Receiver) accept(h DataHeader) error {
	if h.consistent() {
		return nil
	}
	r.stats.Malformed++
	return h.check()
}

// Admits reports whether a data packet or trimmed header with PSN p may
// be looked at: p is at most a window behind the cumulative PSN (a
// duplicate to acknowledge again) or inside the window. Callers check it
// before anything else in the packet (its message, its length) or any
// state changes, so a forged packet with a PSN it does not admit, which an
// off-path sender produces unless it guesses the window, is counted
// (OutOfWindow) and changes nothing.
func (r *Receiver) Admits(p wire.PSN) bool {
	if r.psns.inWindow(p) || (p.Before(r.psns.cum) && r.psns.cum.Sub(p) <= int32(r.psns.size)) {
		return true
	}
	r.stats.OutOfWindow++
	return false
}

func (r *Receiver) inWindow(p wire.PSN) error {
	if r.psns.inWindow(p) {
		return nil
	}
	return r.outOfWindow(p)
}

func (r *Receiver) outOfWindow(p wire.PSN) error {
	r.stats.OutOfWindow++
	return fmt.Errorf("%w: PSN %d, cumulative %d, window %d", ErrOutOfWindow, p, r.psns.cum, r.psns.size)
}

// message returns the open message of h, opening it if it is new, or nil
// for a message that already completed: a late packet never recreates it.
func (r *Receiver) message(h DataHeader) (*rxMsg, error) {
	m, i := r.msgs.find(h.Msg)
	if m != nil && m.sb.Len() == h.MsgLen {
		return m, nil // an open message, as most packets find theirs
	}
	return r.openMessage(h, m, i)
}

// openMessage is message for a header whose message is not open, or is
// open with another length: m and i are what find returned.
func (r *Receiver) openMessage(h DataHeader, m *rxMsg, i int) (*rxMsg, error) {
	if m != nil {
		if m.sb.Len() != h.MsgLen {
			r.stats.Malformed++
			return nil, fmt.Errorf("%w: message %d is %d bytes, PSN %d says %d",
				ErrBadHeader, h.Msg, m.sb.Len(), h.PSN, h.MsgLen)
		}
		return m, nil
	}
	if r.msgs.isDone(h.Msg) {
		return nil, nil
	}
	m, err := r.msgs.openMsg(h.Msg, h.MsgLen, i)
	if err != nil {
		r.stats.OutOfWindow++
		return nil, fmt.Errorf("%w: message %d with %d open", err, h.Msg, len(r.msgs.open))
	}
	return m, nil
}

// maybeComplete reports a message whose bytes are all settled and closes it.
func (r *Receiver) maybeComplete(m *rxMsg) bool {
	if !m.sb.Complete() {
		return false
	}
	c := Completion{Flow: r.info.Flow, Msg: m.id, Len: m.sb.Len()}
	if m.sb.ForgivenBytes() > 0 {
		c.Forgiven = m.sb.Forgiven(nil)
	}
	r.Out.Completions = append(r.Out.Completions, c)
	r.stats.Completions++
	r.msgs.complete(m)
	return true
}

// duplicate answers a packet that brings nothing new with an ACK at once,
// which also stops a sender that retransmitted needlessly.
func (r *Receiver) duplicate(h DataHeader, v Verdict) Result {
	r.stats.Duplicates++
	r.sendAck(h.PSN, h.Msg, dataAckFlags(h))
	return Result{Verdict: v}
}

// ackData coalesces ACKs: one every AckEvery bytes, and one at once "on
// ECN CE, on an ack-request flag, on a retransmission, or on the first
// packet", on a completed message, and for anything but fresh data.
// Otherwise the delayed-ACK timer bounds the wait.
func (r *Receiver) ackData(now time.Duration, h *DataHeader, res *Result) {
	urgent := h.CE || h.Flags&(wire.DataAckReq|wire.DataRetx) != 0 ||
		!r.ack.seenFirst || res.Completed || res.Verdict != Placed
	r.ack.seenFirst = true
	r.ack.pending += int(h.PayloadLen)
	r.ack.echo, r.ack.msg = h.PSN, h.Msg
	if urgent || r.ack.pending >= r.cfg.AckEvery {
		r.sendAck(h.PSN, h.Msg, dataAckFlags(*h))
		return
	}
	if !r.ack.armed {
		r.ack.armed, r.ack.deadline = true, now+r.cfg.AckDelay
	}
}

func ecnEcho(h DataHeader) uint8 {
	if h.CE {
		return wire.FlagECNEcho
	}
	return 0
}

func dataAckFlags(h DataHeader) uint8 {
	f := ecnEcho(h)
	if h.Flags&wire.DataRetx != 0 {
		f |= wire.AckRetx
	}
	return f
}

// forgiveFlags asks the Decider for "the two FORGIVE flags to put on every
// ACK and NACK" of msg.
func (r *Receiver) forgiveFlags(msg uint32) uint8 {
	if r.noDec {
		return 0 // NoForgiveness: not eligible, not exhausted
	}
	eligible, exhausted := r.dec.Flags(r.info.Flow, msg)
	var f uint8
	if eligible {
		f |= wire.FlagEligible
	}
	if exhausted {
		f |= wire.FlagExhausted
	}
	return f
}

// sendAck queues an ACK: CumPSN is the cumulative PSN and the SACK bitmap
// starts at it (bit 0 is CumPSN itself and therefore clear). htsim instead
// anchors the bitmap at max(epsn-63, expected+1), so it reports the newest
// arrivals when the hole is far behind; anchoring at CumPSN reports the 63
// PSNs right after the first hole, which is where NACK-driven repair and
// the sender's RTO look, and needs no field the ACK does not already carry.
// Every ACK clears the coalescing state.
func (r *Receiver) sendAck(echo wire.PSN, msg uint32, flags uint8) {
	var sack uint64
	if r.cfg.Mode == SelectiveRepeat {
		sack = r.psns.sack64()
	}
	r.Out.Acks = append(r.Out.Acks, wire.AckFields{
		Flags: flags | r.forgiveFlags(msg), Src: r.info.Local, Dst: r.info.Peer, Flow: r.info.Flow,
		CumPSN: r.psns.cum, SackBase: r.psns.cum, Sack: sack, EchoPSN: echo,
	})
	r.stats.Acks++
	r.ack.pending, r.ack.armed = 0, false
}

// sendNack queues a retransmission request with the FORGIVE flags of msg.
func (r *Receiver) sendNack(n wire.NackFields, msg uint32) {
	n.Flags |= r.forgiveFlags(msg)
	n.Src, n.Dst, n.Flow = r.info.Local, r.info.Peer, r.info.Flow
	r.Out.Nacks = append(r.Out.Nacks, n)
	r.stats.Nacks.add(n.Reason)
}
