// Package nic is the host NIC engine: it composes wire, reliability,
// congestion and budget into one host's emulated Ultra-Ethernet-style NIC.
//
// It owns the host's flows (queue pairs), the memory regions applications
// registered, the work requests they posted, and the receiving rank's
// FORGIVE loss budget. A message posted for sending is segmented into MTU
// packets by reliability.Sender, paced by the flow's congestion.Sender
// (DCQCN unless the flow is exempt) and by the host link's own pacer, and
// its payload is read straight from the registered region. On the
// receiving side payload is placed directly at its offset in the posted
// receive's region (no reorder buffer); a trimmed header goes through the
// FORGIVE decision, whose budget is a budget.Ledger shared by every flow to
// this rank; a completed message is reported with the byte ranges that
// were forgiven, which the engine has zero-filled so that a gradient sum
// treats them as no contribution.
//
// Each flow has an identity on the wire (identity.go, docs/wire.md "Flow
// identity"): a random tag per end, drawn from Config.TagSeed, learned by
// the peer through a CONNECT/ACCEPT handshake before any data leaves, and
// checked on every received packet before anything else; PSNs start where
// the tags say. A packet of another incarnation of the flow is refused and
// counted, and a recreated peer flow restarts this one.
//
// The four host facts FORGIVE needs from above the transport arrive
// through the engine's methods: BeginStep (the detector's input or an
// explicit classification, and the expected gradient bytes; or an open
// before the classification: StepReq), a posted receive's step tag
// (RecvReq.Step, StepOf) and the message's phase for the gather policy
// (RecvReq.Phase), and the flow's
// class (IsGradientAllReduce), which also picks the DSCP its packets carry.
//
// The engine is sans-I/O and single-threaded: it imports no net, os or
// syscall, reads no clock and starts no goroutine. A driver (the forgived
// daemon, the simulator, a test) feeds it packets with Receive, asks it for
// packets to send with Transmit, calls Advance when NextDeadline passes,
// and drains Completions.
package nic
