// Package hostapi is the host-local interface between training ranks and
// their emulated NIC daemon (forgived): the protocol, the server the daemon
// embeds, and the client library applications link.
//
// FORGIVE needs "four facts that no packet contains" from the software
// above the transport: which step is beginning and what its gradient norms
// say, how many gradient bytes the step will bring this rank, which flows
// carry them, and which step a given flow belongs to. "Those facts cross a
// host-local interface between NCCL and the network interface card": this
// package is that interface. begin_step carries the step, its norms (or an
// explicit classification) and its expected gradient bytes; a flow's class
// says whether it carries gradients; a receive's step tag says which step
// it belongs to. Receive completions list the byte ranges that were
// forgiven (zero-filled in memory), so nothing is silently lost.
//
// The protocol (docs/hostapi.md has the full reference): SOCK_SEQPACKET
// unix sockets, so message boundaries and SCM_RIGHTS come from the kernel;
// every frame is a 16-byte header (magic "FGV", version, op, flags, request
// id) and a strict JSON body. Memory registration passes a sealed memfd
// that the daemon maps shared, so payload never crosses the socket.
//
// What it owns:
//
//   - the wire protocol: frame header, op codes, request, reply, push and
//     error types ([SendReq], [RecvReq], [StepReq], [Completion], [Error]...);
//   - [Server]: socket lifecycle (mode 0660, stale-socket recovery, live
//     daemon detection, graceful removal), peer credential checks
//     (SO_PEERCRED), the connection limits, memfd mapping and unmapping,
//     and bounded per-client completion queues. It calls a [Backend], which
//     decides what each client may do (its regions and flows, bounds, the
//     per-client limits): forgived's is hostapi/nicapi over its NIC engine;
//   - [Client] and [Region]: the application library.
//
// What it must not import: nic, reliability, congestion, budget or fabric.
// The daemon adapts between this package and the NIC engine, so the
// protocol packages never see a socket and this one never sees a packet.
// Unlike those packages it does I/O (net, os, golang.org/x/sys/unix) and
// runs goroutines. It is Linux-only (memfd, SO_PEERCRED, SOCK_SEQPACKET).
package hostapi
