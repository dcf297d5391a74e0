package reliability

// Decider is the budget hook of the receiver: the half of
// Receiver::OnTrimmedHeader that charges a step's loss budget, and
// Receiver::Flags. Package budget implements it (through the NIC, which
// maps a flow to its step); this package only calls it.
//
// Byte counts are exact: the receiver reports each byte at most once as
// newly outstanding per stay in the Requested state, at most once as
// received, and at most once as forgiven.
type Decider interface {
	// OnTrim: a trimmed header reported missing bytes of (flow,msg); newlyOutstanding of them
	// were not yet counted. forgive: acknowledge past the hole; counted: the bytes are now
	// counted as outstanding by the budget (mark them Outstanding, else Requested).
	OnTrim(flow, msg uint32, missing, newlyOutstanding int64) (forgive, counted bool)
	// OnArrival: bytes of (flow,msg) first became Received; fromOutstanding had been Outstanding.
	OnArrival(flow, msg uint32, newlyReceived, fromOutstanding int64)
	// Flags: the two FORGIVE flags to put on every ACK and NACK of (flow,msg).
	Flags(flow, msg uint32) (eligible, exhausted bool)
}

// NoForgiveness is the Decider of a run without FORGIVE: it never forgives,
// never counts, and clears both flags, so every trimmed range is requested
// again and senders always obey congestion control.
type NoForgiveness struct{}

// OnTrim refuses every range.
func (NoForgiveness) OnTrim(flow, msg uint32, missing, newlyOutstanding int64) (forgive, counted bool) {
	return false, false
}

// OnArrival does nothing.
func (NoForgiveness) OnArrival(flow, msg uint32, newlyReceived, fromOutstanding int64) {}

// Flags reports a flow that is not exemption-eligible.
func (NoForgiveness) Flags(flow, msg uint32) (eligible, exhausted bool) { return false, false }

// isNoForgiveness reports whether d is NoForgiveness.
func isNoForgiveness(d Decider) bool {
	_, ok := d.(NoForgiveness)
	return ok
}
