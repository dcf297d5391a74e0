package collective

// Role is what the receiver does with a transfer.
type Role uint8

// The roles; docs/hostapi.md ("Gather policies") says what FORGIVE does
// with a trimmed range of each.
const (
	// Reduce is a partial sum: the receiver adds it into its accumulator.
	Reduce Role = iota + 1
	// Gather is a finished value: the receiver copies it into its
	// accumulator.
	Gather
	// GatherOwner is a finished value received from its owner: the rank
	// that performed the last reduction of every byte of the range (or, in
	// an AllGather, whose shard it is), so every other copy of the range
	// descends from the sender's.
	GatherOwner
	// Exchange is all-to-all data: the receiver keeps it as it is, in its
	// output buffer.
	Exchange
)

var roleNames = [...]string{Reduce: "reduce", Gather: "gather", GatherOwner: "gather-owner", Exchange: "exchange"}

// String is the role's name as docs/hostapi.md spells the phase.
func (r Role) String() string {
	if int(r) < len(roleNames) && roleNames[r] != "" {
		return roleNames[r]
	}
	return "role?"
}

// copies reports whether the receiver copies (rather than adds) the data.
func (r Role) copies() bool { return r == Gather || r == GatherOwner || r == Exchange }

// Send is one message a rank sends.
type Send struct {
	// Peer is the receiver's group-local rank.
	Peer int
	// Off and Len are the byte range of the vector it carries (for
	// AllToAll: of the sender's send buffer). Len is never 0.
	Off, Len int
	// Role is the receiver's role for it.
	Role Role
	// From is -1 when the data is read from the rank's accumulator; k >= 0
	// when it is forwarded from the staging slot of this rank's Recvs[k] (a
	// finished value received whole, so no copy into the accumulator needs
	// to wait).
	From int
	// AfterRecvs are this rank's Recvs that must be applied (or, for the
	// From slot, received) before the send is posted.
	AfterRecvs []int
	// AfterSends are this rank's Sends that must have completed before it
	// is posted (the direct window).
	AfterSends []int
	// Dim is the logical dimension it belongs to.
	Dim int
	// Phase indexes Schedule.Phases.
	Phase int
}

// Recv is one message a rank receives, into its own staging slot: every
// receive can be posted before any send.
type Recv struct {
	// Peer is the sender's group-local rank.
	Peer int
	// Off and Len are the byte range of the vector (AllToAll: of the
	// receiver's output buffer).
	Off, Len int
	// Role is what the apply does with it.
	Role Role
	// PeerMsg is the index of the matching Send in Plans[Peer].Sends.
	PeerMsg int
	// AfterRecvs must be applied before this one is applied.
	AfterRecvs []int
	// AfterSends are this rank's Sends from the accumulator that read the
	// range and must complete before the apply writes it (a send may be
	// retransmitted until it completes).
	AfterSends []int
	// Dim is the logical dimension it belongs to.
	Dim int
	// Phase indexes Schedule.Phases.
	Phase int
}

// Plan is one rank's part of a schedule.
type Plan struct {
	// Sends are in the rank's program order; a Send's index is its
	// message index (the shedding draw and work-request ids use it).
	Sends []Send
	// Recvs are in the order the receives are posted.
	Recvs []Recv
}

// Span is a byte range.
type Span struct {
	Off int `json:"off"`
	Len int `json:"len"`
}

// End is the first byte after the span.
func (s Span) End() int { return s.Off + s.Len }

// PhaseInfo names one phase of a schedule.
type PhaseInfo struct {
	// Name reads like "reduce-scatter dim 0 (ring)".
	Name string `json:"name"`
	// Op is what the phase does: reduce-scatter, all-gather, reduce (up a
	// tree), broadcast (down a tree) or all-to-all.
	Op string `json:"op"`
	// Dim is the logical dimension.
	Dim int `json:"dim"`
	// Algorithm is the dimension's algorithm.
	Algorithm Algorithm `json:"algorithm"`
}

// Schedule is a compiled collective.
type Schedule struct {
	// Spec is the compiled spec, with its defaults filled.
	Spec Spec
	// Plans has one plan per group-local rank.
	Plans []Plan
	// Phases are the phases in the order each piece goes through them;
	// Send.Phase and Recv.Phase index it.
	Phases []PhaseInfo
}

// SentBytes is the bytes rank sends.
func (s *Schedule) SentBytes(rank int) int {
	n := 0
	for _, m := range s.Plans[rank].Sends {
		n += m.Len
	}
	return n
}

// ReceivedBytes is the bytes rank receives (what a step's expected
// gradient bytes are built from).
func (s *Schedule) ReceivedBytes(rank int) int {
	n := 0
	for _, m := range s.Plans[rank].Recvs {
		n += m.Len
	}
	return n
}

// Shard is what rank holds of the vector between a reduce-scatter over
// every dimension and the all-gather back: the result of a ReduceScatter
// and the input of an AllGather (one span per piece). For an AllReduce or
// AllToAll it is the whole vector.
func (s *Schedule) Shard(rank int) []Span {
	if s.Spec.Kind == AllReduce || s.Spec.Kind == AllToAll {
		if s.Spec.Bytes == 0 {
			return nil
		}
		return []Span{{Len: s.Spec.Bytes}}
	}
	c := &compiler{spec: s.Spec}
	c.plan()
	var out []Span
	for _, p := range c.pieces() {
		if sh := c.shardBefore(p, rank, len(s.Spec.Dims)); sh.Len > 0 {
			out = append(out, sh)
		}
	}
	return out
}
