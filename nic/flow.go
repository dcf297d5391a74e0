package nic

import (
	"fmt"
	"time"

	"github.com/forgive-emu/forgive/budget"
	"github.com/forgive-emu/forgive/congestion"
	"github.com/forgive-emu/forgive/internal/splitmix"
	"github.com/forgive-emu/forgive/reliability"
	"github.com/forgive-emu/forgive/wire"
)

// FlowKey names a flow at one host: the peer host and the flow id both ends
// agreed on, like a connected pair of queue pairs. Data from the peer and
// acknowledgements of our data both carry (peer, id).
type FlowKey struct {
	Peer uint16
	ID   uint32
}

func (k FlowKey) String() string { return fmt.Sprintf("%d/%d", k.Peer, k.ID) }

// FlowSpec describes a flow; both ends create it with the same values.
type FlowSpec struct {
	Peer     uint16
	ID       uint32
	Class    Class
	Entropy  Entropy
	Subflows int // ordered subflows for EntropySubflows (a power of two)
	// Job is the local job whose ledger counts the flow's gradient bytes
	// (JobID); the only field the two ends need not share.
	Job JobID
}

// sendWR is a posted send: message Msg of the flow, read from a region.
type sendWR struct {
	wr     uint64
	msg    uint32
	region RegionID
	off    int
	len    uint32
	done   bool // acknowledged; completes once every earlier send has
	sent   bool // a packet of it left: a restart of the peer fails it
}

// recvWR is a posted receive: the next message of the flow lands here.
type recvWR struct {
	wr     uint64
	region RegionID
	off    int
	len    uint32
	step   budget.StepID // 0: not part of any step's all-reduce
	// touched: a packet of its message arrived; a restart of the peer
	// fails it, and keeps a receive nothing arrived for.
	touched bool
	phase   budget.Phase // what the message holds, as the application declared
	// done holds the completion of a message that settled before an
	// earlier one: receives complete in posting order, as in RDMA.
	done *Completion
}

type flow struct {
	// The fields every packet of the flow and every Advance and
	// NextDeadline read come first: the first 64 bytes hold the state
	// and the engines' pointers, the next line the key and the
	// notification point's state, whose counters spill past it (a flow is
	// allocated 64-byte aligned: 640-byte size class; TestFlowLayout holds
	// this). Its counters follow, then what only the control path and the
	// handshake read.
	failed   error
	tx       *reliability.Sender
	cc       *congestion.Sender
	rx       *reliability.Receiver
	lastMove time.Duration // when the oldest unacknowledged PSN last moved
	// The flow's identity: this end's tag, the peer's once bound (0
	// before), and the CONNECT retry schedule until then (below).
	tag, peerTag uint32
	lastUna      wire.PSN
	txBlocked    bool // the sender had nothing it may send; wait for an event
	dscp         uint8
	entropy      uint16 // base entropy of the flow
	key          FlowKey
	info         reliability.FlowInfo
	recvMsg      uint32 // message id recvs[0] receives
	np           congestion.Notifier

	sends   []sendWR // posted, not yet complete, in message order
	recvs   []recvWR // posted, not yet complete, in message order
	nextMsg uint32   // id of the next message posted for sending
	timers  uint32   // the flow's entry in the engine's timers (due.go)
	spec    FlowSpec

	stats FlowStats

	rxDec      reliability.Decider        // decider, or NoForgiveness when the flow can forgive nothing
	rcfg       reliability.ReceiverConfig // to start the receive side at bind
	scfg       reliability.SenderConfig   // to start the send side again when the peer restarts
	connectAt  time.Duration
	connectGap time.Duration
	// acceptAt paces the ACCEPTs the flow answers CONNECTs with (a GCRA,
	// the virtual scheduling form of a token bucket; acceptPace).
	acceptAt time.Duration
	// lastStep is the step of the latest receive posted with one: the
	// flags of an ACK for a message that already completed follow it.
	lastStep budget.StepID
	// The incarnation checks (identity.go): the order of the packet that
	// bound peerTag (zero if plain), and the peer tags the flow was
	// restarted away from, newest first.
	peerCtr   uint64
	peerStart uint32
	oldPeers  [oldPeersKept]uint32
}

// FlowStats are a flow's counters at one host.
type FlowStats struct {
	DataPackets, DataBytes uint64 // data packets sent (first transmissions and retransmissions)
	RetxPackets, RetxBytes uint64 // retransmissions among them
	ProbesSent             uint64
	AcksRecv, NacksRecv    uint64
	CNPsRecv               uint64
	RecvPackets            uint64 // data packets received (untrimmed)
	RecvBytes              uint64 // payload bytes placed in memory
	TrimmedRecv            uint64 // trimmed headers received
	TrimmedBytes           uint64 // payload bytes those headers reported missing
	ForgivenBytes          uint64 // bytes this receiver forgave on the flow
	CEMarked               uint64 // data packets that arrived CE-marked
	CNPsSent               uint64
	RNRDrops               uint64 // data for a message with no posted receive
	SendsDone, RecvsDone   uint64
	ConnectsSent           uint64        // CONNECTs sent until the peer's tag was known
	AcceptsSent            uint64        // ACCEPTs answering the peer's CONNECTs
	AcceptsLimited         uint64        // CONNECTs left unanswered: over the ACCEPT rate limit
	WrongTag               uint64        // packets refused: destination tag not this end's
	StaleIncarnation       uint64        // packets refused: an earlier or later peer incarnation
	BoundAt                time.Duration // when the peer's tag was bound (0 before)
	PeerRestarts           uint64        // new peer incarnations this end rebound to
}

// tags returns the tags of the packets this end sends on the flow.
func (f *flow) tags() wire.Tags { return wire.Tags{Dst: f.peerTag, Src: f.tag} }

// entropyFor returns the entropy a packet of subflow sub and message msg
// carries. A probe names no message: under EntropyMessage it carries the
// flow's base entropy.
func (f *flow) entropyFor(sub uint8, msg uint32, probe bool, e *Engine) uint16 {
	switch f.spec.Entropy {
	case EntropySpray:
		return uint16(e.pcg.Uint64() >> 32) // e.rng.Uint32(), without the call through rand.Source
	case EntropySubflows:
		return f.entropy + uint16(sub)*0x9E37
	case EntropyMessage:
		if !probe {
			return messageEntropy(f.tag, f.key.ID, msg)
		}
	}
	return f.entropy
}

// messageEntropy is the entropy of message msg of the flow with id id
// whose end here has tag tag: output msg of a SplitMix64 stream seeded by
// the tag and the id, its top 16 bits. It is a function of the flow's
// state, never a draw: every packet and every retransmission of a message
// carries the same value, messages spread uniformly over the 2^16 values,
// and a flow recreated with the same id (a new tag, a new incarnation)
// takes new paths, as a new queue pair with a new source port does. The
// tag comes from Config.TagSeed, itself derived from Seed and Host when
// zero, so the simulator's paths are deterministic from its seed.
func messageEntropy(tag, id, msg uint32) uint16 {
	s := splitmix.Mix(uint64(tag)<<32 | uint64(id))
	return uint16(splitmix.Next(s+uint64(msg)*splitmix.Golden) >> 48)
}

// step returns the step of message msg received on the flow, 0 if the
// message has no posted receive or is not part of a step.
func (f *flow) step(msg uint32) budget.StepID {
	i := msg - f.recvMsg
	if int32(i) < 0 || int(i) >= len(f.recvs) {
		return 0
	}
	return f.recvs[i].step
}

// phase returns the declared phase of message msg received on the flow.
func (f *flow) phase(msg uint32) budget.Phase {
	i := msg - f.recvMsg
	if int32(i) < 0 || int(i) >= len(f.recvs) {
		return budget.PhaseUnspecified
	}
	return f.recvs[i].phase
}

// decider connects a flow's receiver to the host's loss budget: it is the
// spec's IsGradientAllReduce and StepOf in one place.
type decider struct {
	f *flow
	e *Engine
}

// OnTrim implements reliability.Decider: "Only gradients are forgivable.
// Everything else is requested for retransmission."
func (d decider) OnTrim(_, msg uint32, missing, newlyOutstanding int64) (forgive, counted bool) {
	step := d.gradientStep(msg)
	if step == 0 {
		return false, false
	}
	d.e.lockBudget()
	var dec budget.Decision
	if l := d.e.ledgerOf(d.f.spec.Job); l != nil {
		dec = l.OnTrimPhaseAt(d.e.now, step, d.f.phase(msg), missing, newlyOutstanding)
	}
	d.e.unlockBudget()
	if dec.Forgive {
		d.f.stats.ForgivenBytes += uint64(missing)
	}
	return dec.Forgive, dec.Counted
}

// OnArrival implements reliability.Decider: "The data path counts a byte
// when it first becomes Received."
func (d decider) OnArrival(_, msg uint32, newlyReceived, fromOutstanding int64) {
	if step := d.gradientStep(msg); step != 0 {
		d.e.lockBudget()
		if l := d.e.ledgerOf(d.f.spec.Job); l != nil {
			_ = l.OnArrivalAt(d.e.now, step, newlyReceived, fromOutstanding) // an unknown step has no budget to count into
		}
		d.e.unlockBudget()
	}
}

// Flags implements reliability.Decider: "Both flags are sent with every
// acknowledgement and retransmission request." A flow lives across steps,
// so eligibility is derived from the step of the message reported on
// rather than fixed when the flow is created (docs/architecture.md,
// "Exemption eligibility"): an ACK for a message that has already
// completed, or one sent by the delayed-ACK timer after it, speaks for the
// flow's latest step rather than making an exempt sender obey.
func (d decider) Flags(_, msg uint32) (eligible, exhausted bool) {
	if !d.e.cfg.Forgive || d.f.spec.Class != ClassGradient {
		return false, false
	}
	step := d.f.step(msg)
	if step == 0 {
		step = d.f.lastStep
	}
	if step == 0 {
		return false, false
	}
	d.e.lockBudget()
	defer d.e.unlockBudget()
	if l := d.e.ledgerOf(d.f.spec.Job); l != nil {
		return l.Flags(step)
	}
	return false, false
}

func (d decider) gradientStep(msg uint32) budget.StepID {
	if !d.e.cfg.Forgive || d.f.spec.Class != ClassGradient {
		return 0
	}
	return d.f.step(msg)
}
