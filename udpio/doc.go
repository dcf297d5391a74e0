// Package udpio is the batched UDP socket layer of the daemons: forgived
// opens one Conn per host, trimswitch one per switch port. It moves
// datagrams between caller-owned buffers and IPv4 UDP sockets, many per
// syscall, and carries the IPv4 TOS byte of every datagram in both
// directions, so that the DSCP (the traffic class) and the ECN codepoint
// (ECT on send, CE marks on receive) are per packet, as on a RoCEv2 fabric.
//
// # What it owns and what it must not import
//
// It owns sockets and the daemons' waits, and nothing else: socket
// options, recvmmsg/sendmmsg, the control messages that carry the TOS
// byte, the precise wait of an event loop (Conn.ReadBatchUntil, Waiter),
// and Forward, the plain forwarder that benchmarks use as their reference. It is a driver package:
// it may use net, os, syscall, golang.org/x/sys/unix and golang.org/x/net.
// It must not import the protocol or engine packages (wire, reliability,
// congestion, budget, nic, fabric, sim): it knows datagrams, not packets of
// the protocol, and the engines know neither it nor time. It is Linux only.
//
// # Batches and buffers
//
// A Msg is one datagram with a buffer its caller owns; ReadBatch fills a
// slice of them and WriteBatch sends one. Each Conn preallocates, once per
// direction, the mmsghdr array, iovecs, socket addresses and control
// buffers the kernel needs, so neither call allocates per packet.
//
// The TOS byte is read with IP_RECVTOS, which makes the kernel attach an
// IPPROTO_IP/IP_TOS control message to every datagram, and written as an
// IPPROTO_IP/IP_TOS control message on each message of sendmmsg, as quic-go
// does for ECN. golang.org/x/net/ipv4.ControlMessage has no TOS field, so
// both are raw control messages here.
//
// The syscalls are made directly (unix.SYS_RECVMMSG, unix.SYS_SENDMMSG)
// through syscall.RawConn, the same route x/net/ipv4.PacketConn.ReadBatch
// takes internally, rather than through that method: it returns every
// source address as a new *net.UDPAddr and IP slice, two allocations per
// datagram (BenchmarkXNetReadBatch), where decoding the sockaddr straight
// into a netip.AddrPort costs none. Going through RawConn keeps the runtime
// poller: reads and writes park the goroutine on EAGAIN, honour deadlines
// and return net.ErrClosed when another goroutine closes the Conn.
//
// # Segmentation offload
//
// With Options.Offload (both daemons set it) a Conn moves runs of
// datagrams through the kernel as one large UDP packet each way. WriteBatch
// groups consecutive messages with one destination, one TOS byte and one
// size (the last of a run may be shorter), at most 64 datagrams and 65,507
// bytes, into one sendmmsg message whose iovecs are the callers' buffers
// and whose control data adds a UDP_SEGMENT message (GSO); the TOS byte is
// a grouping key because the datagrams of one send share an IP header. The
// socket has UDP_GRO on, so a receive may return such a run whole, with
// its segment size in a UDP_GRO control message; ReadBatch reads those
// into the Conn's own 16 buffers of 64 KiB and copies each datagram into a
// caller's Msg, so the caller sees exactly the datagrams, sizes, order and
// TOS bytes that were sent. On loopback the sender's packet reaches the
// receiver uncut; a device with GRO merges only packets whose TOS bytes
// agree (inet_gro_receive flushes on a difference), so a coalesced buffer
// never mixes ECN or DSCP values either way.
//
// Where the kernel lacks UDP_GRO, Listen leaves it off; where a send with
// UDP_SEGMENT fails with EIO, ENOPROTOOPT or EINVAL (no checksum offload on
// the device; before Linux 6.14, also a segment over the route's MTU), the
// Conn turns GSO off and sends the same datagrams again one by one. Where
// it fails with EMSGSIZE (a segment over the route's MTU, which GSO cannot
// fragment: a sealed 4 KiB packet on a 4,164-byte veth), the Conn stops
// segmenting datagrams of that size or more, sends them one by one for the
// kernel to fragment, and keeps segmenting shorter ones. Conn.Offload,
// Conn.OffloadFailure and Conn.SegmentLimit say what is on and why not. Offload costs nothing in
// allocations (TestOffloadBatchesDoNotAllocate); it saves per-datagram work
// in the kernel and wake-ups of the goroutines on the way, and on receive
// it adds one copy per datagram. BenchmarkPlainForwarder measures the
// plain forwarder both ways.
//
// # The event loop
//
// A daemon's loop waits for "a datagram arrived, or the engine's next
// deadline passed, or a client asked for something". ReadBatchUntil is that
// wait, for a loop that owns one Conn:
//
//	msgs := make([]udpio.Msg, conn.BatchSize()) // each with its Buf
//	for {
//		deadline, ok := engine.NextDeadline()   // engine time, converted to wall time
//		if !ok {
//			deadline = time.Time{}              // nothing scheduled: wait for input
//		}
//		n, err := conn.ReadBatchUntil(msgs, deadline)
//		if err != nil {
//			return err                          // closed, or a socket error
//		}
//		now := clock()                          // read once per wake-up
//		for _, m := range msgs[:n] {
//			engine.Receive(now, m.Payload(), m.Addr, m.TOS)
//		}
//		drainInbox(engine, now)                 // requests queued by other goroutines
//		engine.Tick(now)
//		conn.WriteBatch(outbox(engine))
//	}
//
// Another goroutine (the host-API server, a signal handler) that queues
// work for the loop calls conn.Wake(), which ends the wait at once or, if
// the loop is not waiting, makes its next wait return at once. Under load
// ReadBatchUntil takes what is queued without touching the deadline, so
// the deadline is updated only when the loop is about to sleep, and a loop
// whose timers are always due still reads.
//
// This shape was chosen over a reader goroutine that passes batches to the
// loop through a channel because it is faster: the poller wakes the loop
// itself, with no goroutine handoff. BenchmarkWakeLatency measures a
// one-datagram echo round trip on loopback both ways; on the shared
// two-core development machine, over three runs, it took 17 to 19 µs with
// ReadBatchUntil waiting in the poller and 20 to 26 µs with a reader
// goroutine and a channel: the handoff adds a few microseconds to every
// wake-up, and more when the cores are busy. It also keeps every engine on
// one goroutine, with no locks.
//
// # Precise deadlines
//
// Go's timers, and so the poller's read deadlines, fire on a millisecond
// grid on Linux: a 200 µs read deadline ends about 900 µs late
// (BenchmarkWaitLateness). The engines' deadlines are often closer than
// that (a 4 KiB packet leaves every 335 µs at 100 Mb/s), so a loop woken
// on the grid would pace in millisecond bursts. ReadBatchUntil therefore
// does the last 2 ms of a wait in ppoll(2), on the socket and an eventfd
// that Wake signals, after setting the thread's timer slack (how late the
// kernel may end a sleep, 50 µs by default) to 1 µs; a wait with no
// deadline or a far one parks in the poller first, so an idle loop holds
// no thread in the kernel and costs no CPU. Measured over three runs of
// 200 waits of 200 µs, the median lateness fell from 921 to 931 µs to
// 25 to 38 µs (99th percentile: under 1 ms to under 60 µs). Waiter is the
// same wait without a socket, for a timer goroutine (trimswitch's).
//
// The slack is set on every precise wait, on whichever thread runs it,
// rather than once on a thread the loop goroutine is locked to: a locked
// goroutine that parks in the poller is handed back to its own thread on
// every wake-up, which more than doubled the median round trip through
// such a loop between two processes (about 27 µs to about 68 µs, with a
// two-process echo that is not kept in the tree). Within one process
// a loop in ppoll answers a peer goroutine more slowly than one in the
// poller (BenchmarkWakeLatency's deadline-ppoll, about 55 µs), since two
// threads hand the datagram over through the kernel instead of one thread
// serving both ends; between processes, as daemons talk, every hop wakes
// another thread either way, and the round trip through a loop in ppoll
// (median about 45 µs over eight noisy runs) matched the former
// ReadBatchUntil with a 1 ms poller deadline (about 43 µs).
//
// Wake sets a flag, signals the eventfd and moves the read deadline into
// the past, so whichever phase the wait is in ends; the eventfd is used
// only inside the socket's RawConn.Control, so Close cannot free its
// descriptor number under a Wake. Steady-state waits allocate nothing,
// except that a wait that ends in the poller (woken, or more than 2 ms long
// and expired) costs the net package's one error allocation.
//
// A loop that must wait on several Conns at once (trimswitch, one per
// port) cannot block in several reads; there a reader goroutine per Conn
// feeding one channel is the simple choice, at the cost measured above.
//
// # Reference forwarder
//
// Forward reads batches from one Conn and writes them unchanged (payload,
// TOS) to a fixed destination through another: no queue, no routing, no
// protocol. BenchmarkPlainForwarder measures it, on plain Conns and on
// Conns with Offload; trimswitch's benchmarks run it both ways in the same
// process so their results are read against it, and fail when it breaks.
package udpio
