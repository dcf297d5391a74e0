// Package trimswitchdrv is the driver of trimswitch: it runs the sans-I/O switch
// engine (package switchcore) on real UDP sockets, one per switch port, in real
// time. It owns the configuration file (Config, LoadConfig), the sockets and
// the loop, the buffer free list, the Prometheus metrics and the readiness
// endpoints, and the packet capture. cmd/trimswitch is flags and signals
// around it.
//
// # What it must not import
//
// It sits beside hostapi and lab in the layer diagram: it may import fabric,
// wire, udpio and internal/units, and the I/O packages; it must not import
// the host-side engines (nic, reliability, congestion, budget) or the
// simulator, and it holds no switching logic: every forwarding decision is
// the engine's.
//
// # The loop
//
// The engine is not safe for concurrent use, so one mutex guards it. Each
// port has a reader goroutine that blocks in udpio.Conn.ReadBatch, and one
// timer goroutine sleeps until the engine's next deadline. Either, on
// waking, takes the engine lock, reads the clock once (now is the monotonic
// time since the driver started), hands the engine every datagram of its
// batch with that now, advances the engine to the clock as it reads after
// the batch (so packets that an unshaped link released during the batch
// leave with it), and drains the outputs. It then takes the transmit lock
// before releasing the engine lock (hand over hand), and writes the
// outputs, grouped by egress port, with one WriteBatch per port. Readers
// therefore receive in parallel with another goroutine's writes, while the
// transmit lock keeps every port's packets in the order the engine emitted
// them.
//
// A reader whose batch makes the engine's next deadline earlier than the
// one the timer sleeps toward wakes the timer (udpio.Waiter.Wake, a
// non-blocking eventfd write that coalesces). The timer sleeps in a
// udpio.Waiter: in ppoll on that eventfd with its thread's timer slack at
// one microsecond, because Go's own timers wake on a millisecond grid on
// Linux (a 20 µs time.Timer took 1.09 ms on the development machine),
// which would release a shaped link's packets in millisecond clumps, while
// ppoll overshoots by about 20 µs. Waits longer than two milliseconds, and
// waits with no deadline, park in the runtime's poller on the same eventfd
// until the last two milliseconds, so the timer does not hold a thread in
// the kernel while it has nothing to do soon.
//
// Why not one loop goroutine with a channel fed by the readers (the shape
// udpio recommends for one socket)? Every batch would cross a goroutine
// handoff, a few microseconds each on two busy cores
// (udpio.BenchmarkWakeLatency), and the single loop would do all the
// writes; here the goroutine that read a batch forwards it, as the plain
// forwarder does, and BenchmarkForwardingVsPlain measures the cost.
//
// # Buffers
//
// Every datagram is read into a buffer of max_datagram bytes from a free
// list. Its ownership passes to the engine with Receive and comes back
// through Drain (then, once written, to the free list) or Reclaim (dropped
// packets). A reader replaces the buffers it handed over from the free
// list, which allocates only while the queues reach a depth they never had:
// no allocation per packet in steady state. Invalid datagrams never reach
// the engine; they are counted per port and reason and their buffer is
// read into again.
package trimswitchdrv
