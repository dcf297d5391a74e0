package switchcore

import "time"

// PortDelay returns the propagation delay of port id's link: a packet put
// on that wire at t reaches the far end no earlier than t + PortDelay
// (serialization and fault jitter only add to it). A parallel driver uses
// it as the lookahead across a cut link.
func (s *Switch) PortDelay(id PortID) time.Duration { return s.ports[id].delay }

// InFlight appends to dst the packets on port id's wire that reach the far
// end at or after from and before to and that the link will hand over (a
// link-down window at their arrival cuts them, as the hand-over would), in
// the order they arrive, and returns it. It changes nothing: the packets
// stay on the wire, Outputs still hands them over when they arrive, and
// each Buf still belongs to the switch. A driver that splits a fabric
// across threads reads with it, while the switch is not running, what a
// cut link will deliver in the next window; it must copy a Buf's bytes
// before the switch hands the packet over.
func (s *Switch) InFlight(id PortID, from, to time.Duration, dst []Output) []Output {
	p := &s.ports[id]
	if p.wireAt >= to {
		return dst
	}
	w := &p.wire
	for i := range w.len() {
		e := w.at(i)
		at := e.at()
		if at >= to {
			break
		}
		if at < from || p.down(at) {
			continue
		}
		dst = append(dst, Output{Port: p.id, Pkt: e.packet(), At: at})
	}
	return dst
}
