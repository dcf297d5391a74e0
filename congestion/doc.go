// Package congestion is the rate side of the transport: DCQCN's reaction
// and notification points, the pacer that turns a rate into departure
// times, and FORGIVE's congestion-control exemption at the sender.
//
// What it owns:
//
//   - [Controller]: the reaction point of one flow, with three
//     implementations chosen by [Kind] through [New] or [ParseKind]:
//     [DCQCN] ("dcqcn"), [LineRate] ("none", congestion control off) and
//     [NSCC] ("nscc"), which is also a [WindowController]: it limits the
//     bytes in flight as well.
//   - [NSCC]: Ultra Ethernet 1.0's Network Signal-based Congestion Control
//     in the form of the public uet-htsim model: a window between one MTU
//     and 1.5 BDP driven by each ACK's ECN echo and queueing delay (RTT
//     sample minus base RTT, against a target of 0.75 base RTT) and by
//     trims, with fair, proportional and fast increase, multiplicative
//     decrease (γ = 0.8) and quick adapt; exempt, it holds the window at
//     its ceiling.
//   - [DCQCN]: the DCQCN paper's reaction point (SIGCOMM 2015), the form UEC
//     htsim's dcqcn.cpp also follows, or with DCQCNConfig.Variant =
//     [DCQCNMellanox] HPCC's "Mellanox" variant of ns-3's rdma-hw.cc,
//     the one ASTRA-sim's ns-3 backend runs (its rules are documented
//     there). The paper's form: on a CNP, R_T = R_C, R_C = R_C·(1 − α/2)
//     and α = (1 − g)·α + g; α decays
//     by (1 − g) every K without a CNP; the rate-increase timer and the
//     byte counter raise increase events whose phase depends on both stage
//     counts T and BC. Each event first increments its count, then: fast
//     recovery while max(T, BC) ≤ F, hyper increase R_T += R_HAI·(min(T,
//     BC) − F) when min(T, BC) > F, additive R_T += R_AI otherwise; then
//     R_C = (R_T + R_C)/2, capped at the line rate. With F = 5 a recovery
//     therefore starts with exactly the seed's "five steps" of fast
//     recovery, as in htsim (and in HPCC, which counts from zero and
//     compares with <). [DefaultDCQCN] scales R_AI, R_HAI and the minimum
//     rate with the line rate; see the Default*Fraction constants.
//   - [Notifier]: the notification point of one flow, at most one CNP per
//     interval (50 µs) for CE-marked arrivals, with the paper's deferred CNP
//     for marks the interval suppressed. One Notifier lives in each flow
//     record of the receiving NIC, so memory is bounded by the flow table.
//   - [Pacer]: departure-time pacing in integer nanoseconds with the
//     sub-nanosecond remainder carried, and a small burst allowance.
//   - [Sender] and [Mode]: the seed's Sender::OnFlowStart, OnReport,
//     OnCongestionNotification and OnRetransmissionRequest, composed with a
//     Controller and a Pacer per flow, and the counters behind the seed's
//     flag-change and "obeyed again" figures.
//
// What it does not own: the wire format of CNPs and of the two FORGIVE
// flags (package wire), the loss budget that sets the flags (package
// budget), retransmission itself (package reliability), and deciding
// which flow sends next (the NIC engine, which asks each flow's Sender
// whether it is Ready and sleeps until the earliest NextSend or
// NextDeadline).
//
// Units: a link's rate (DCQCNConfig.LineRate, NewLineRate) is a units.Rate
// of bits per second, as in every engine; the rates that move (R_C, R_T,
// what a Pacer is given) and the parameters derived from the line rate
// are float64 bits per second; time is a time.Duration of
// nanoseconds since the driver's epoch, passed to every method as now.
// A time earlier than one already seen is treated as that later time.
//
// Nothing here is safe for concurrent use; one goroutine drives a flow.
//
// Import rule: congestion is a leaf. It imports only the standard library
// and internal/units (for units.Rate; and pgregory.net/rapid in tests),
// never wire, budget, reliability or any other package of this module,
// and like every sans-I/O package it
// imports no net, os or syscall, reads no clock and starts no goroutine.
package congestion
