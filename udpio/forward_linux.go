package udpio

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"time"
)

// ForwardBufSize is the per-datagram buffer of Forward: a jumbo frame, so
// that no emulation profile's packet is truncated by the reference.
const ForwardBufSize = 9216

// ForwardStats counts what Forward did.
type ForwardStats struct {
	Packets   uint64 // datagrams forwarded
	Bytes     uint64 // their payload bytes
	Truncated uint64 // datagrams longer than ForwardBufSize, dropped
	Dropped   uint64 // datagrams the kernel refused to send, dropped
}

// Forward is the performance reference for the switch: a plain batched UDP
// forwarder with no queues, no routing and no protocol. It reads batches
// from in and writes every datagram, payload and TOS byte unchanged, to the
// fixed destination to through out (which may be in itself). Benchmarks of
// trimswitch run it in the same process and report both, so that a result
// reads as "the switch costs X% over the kernel and this socket layer".
//
// Forward returns when ctx is cancelled (with a nil error) or when either
// Conn fails or is closed. It allocates its buffers once, at the start.
func Forward(ctx context.Context, in, out *Conn, to netip.AddrPort) (ForwardStats, error) {
	var st ForwardStats
	msgs := make([]Msg, in.BatchSize())
	for i := range msgs {
		msgs[i].Buf = make([]byte, ForwardBufSize)
	}
	stop := context.AfterFunc(ctx, in.Wake)
	defer stop()
	for ctx.Err() == nil {
		n, err := in.ReadBatchUntil(msgs, time.Time{})
		if err != nil {
			return st, err
		}
		kept := retarget(msgs[:n], to, &st)
		if err := writeAll(out, msgs[:kept], &st); err != nil {
			return st, err
		}
	}
	return st, nil
}

// retarget drops truncated datagrams, moving the kept ones to the front
// (swapping, so every buffer stays in msgs), and readdresses them to to.
func retarget(msgs []Msg, to netip.AddrPort, st *ForwardStats) int {
	kept := 0
	for i := range msgs {
		if msgs[i].Truncated {
			st.Truncated++
			continue
		}
		msgs[i].Addr = to
		msgs[kept], msgs[i] = msgs[i], msgs[kept]
		kept++
	}
	return kept
}

// writeAll sends msgs, skipping any datagram the kernel refuses (as a
// router drops a packet it cannot send) and stopping only when out is
// unusable.
func writeAll(out *Conn, msgs []Msg, st *ForwardStats) error {
	for len(msgs) > 0 {
		n, err := out.WriteBatch(msgs)
		for i := range n {
			st.Packets++
			st.Bytes += uint64(msgs[i].N)
		}
		if err == nil {
			return nil
		}
		if errors.Is(err, net.ErrClosed) || errors.Is(err, os.ErrDeadlineExceeded) {
			return err
		}
		st.Dropped++
		msgs = msgs[n+1:]
	}
	return nil
}
