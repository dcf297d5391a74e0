// Package reliability is the per-flow loss recovery of the emulated NIC:
// a Sender and a Receiver state machine for each flow (queue pair), with
// no I/O of their own.
//
// What it owns:
//
//   - [Sender]: segmentation of posted messages into MTU-sized segments
//     with consecutive PSNs; IRN's BDP-FC window (at most one BDP from the
//     lowest unacknowledged PSN to the newest); cumulative and selective
//     acknowledgement; selective repeat, which resends exactly the PSNs a
//     NACK names within the same call, or go-back-N, which resends
//     everything from the PSN a NACK names; IRN's two timeouts (RTO_low
//     while at most three packets are in flight, RTO_high otherwise); RTT
//     samples under Karn's rule; PFLD probes (tail, periodic, retransmission).
//   - [Receiver]: the PSN bitmap behind the ACK's cumulative PSN and SACK
//     bitmap; the byte [Scoreboard] of every open message (rcv_nxt, and the
//     states Requested, Outstanding, Forgiven, Received); FORGIVE's
//     Receiver::OnTrimmedHeader and Receiver::Repair, line by line, with
//     the budget behind the [Decider] interface; ACK coalescing with a
//     delayed-ACK timer; loss inference from gaps and probes on ordered
//     subflows; message completions listing the forgiven ranges; and a
//     go-back-N mode that accepts only the expected PSN.
//
// What it does not own: the loss budget (package budget implements
// [Decider]; the NIC maps a flow to its step), the sender's congestion
// mode and rate (package congestion; [AckResult] and [NackResult] hand it
// the report flags), pacing (the NIC asks its pacer before calling
// [Sender.Next]), packet bytes and payload copies (the NIC builds packets
// from a [Segment] and copies exactly the [Result] Place ranges), and the
// mapping of a subflow to an entropy value.
//
// Sans-I/O: every method that depends on time takes now, nanoseconds since
// the driver's epoch. A Sender or Receiver that wants to be woken says
// when through NextDeadline, and the driver calls OnTimer at or after it.
// Output goes to the exported Out outbox of each (ACKs, NACKs, probes,
// completions), which the driver sends and then Resets; the outboxes and
// all internal lists keep their storage, so in steady state handling a
// packet allocates nothing. The exception is a message completion that
// lists forgiven ranges: it carries one new slice, once per message.
//
// Conventions worth knowing:
//
//   - The SACK bitmap's base is the cumulative PSN (bit 0, the cumulative
//     PSN itself, is always clear). htsim anchors it at max(epsn-63,
//     expected+1) instead; see Receiver's sendAck for why.
//   - A PSN is settled when its bytes are (received, or forgiven after a
//     trim); the cumulative PSN passes forgiven PSNs, so a sender never
//     retransmits a forgiven segment.
//   - Subflow s carries the PSNs p with p mod sigma = s, each subflow in
//     order; sigma is a power of two so the mapping survives wrap-around.
//     Wire subflow counts 0 and 1 both mean one ordered path. Per-packet
//     spraying, where nothing is ordered, is a receiver setting
//     (ReceiverConfig.SprayPerPacket): then only the sender's RTO recovers
//     a silent drop.
//   - Go-back-N NACKs carry the gap reason code in place of RoCE's PSN
//     sequence error, and name the expected PSN.
//
// Import rule: reliability imports the standard library and package wire
// only; never budget, congestion or any engine. Like every sans-I/O
// package it imports no net, os or syscall, reads no clock, sleeps never
// and starts no goroutine. A Sender or Receiver is not safe for concurrent
// use; one goroutine drives it.
package reliability
