package trimswitchdrv

import (
	"errors"
	"net"
	"os"
	"time"

	"go.uber.org/zap"

	"github.com/forgive-emu/forgive/switchcore"
	"github.com/forgive-emu/forgive/udpio"
	"github.com/forgive-emu/forgive/wire"
)

// readLoop reads batches from one port into msgs (each with its buffer)
// and forwards them until the driver stops (nil) or the socket fails.
func (d *Driver) readLoop(p *port, msgs []udpio.Msg) error {
	out := make([]switchcore.Output, 0, 4*len(msgs))
	defer d.pool.putMsgs(msgs)
	for {
		n, err := p.conn.ReadBatch(msgs)
		if err != nil {
			// stop ends the read with a past deadline.
			if d.stopping.Load() || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		out = d.ingest(p, msgs[:n], out)
		d.pool.refill(msgs[:n])
	}
}

// ingest hands a batch to the engine and sends what comes out. Buffers
// the engine took are set to nil in msgs.
func (d *Driver) ingest(p *port, msgs []udpio.Msg, out []switchcore.Output) []switchcore.Output {
	d.mu.Lock()
	now := d.now()
	var hdr wire.Summary
	for i := range msgs {
		m := &msgs[i]
		if p.captured {
			// Before the check: a capture shows what arrived, garbage too.
			d.capture.ingress(d.start.Add(now), p, m.Addr, m.TOS, m.Buf[:m.N])
		}
		// A port takes datagrams from its neighbour only, as forgived
		// takes them from its switch port only: an off-path sender that
		// reaches the port's socket is refused before decoding.
		if m.Addr.Addr().Unmap() != p.neighbor.Addr().Unmap() || m.Addr.Port() != p.neighbor.Port() {
			p.invalid[InvalidForeignSource].Add(1)
			continue
		}
		if reason, ok := classify(m, &hdr); !ok {
			p.invalid[reason].Add(1)
			continue
		}
		d.sw.ReceiveInspected(now, switchcore.Packet{Buf: m.Buf[:m.N], TOS: m.TOS, In: p.id}, &hdr)
		m.Buf = nil
	}
	out = d.advanceLocked(out)
	if next, ok := d.sw.NextDeadline(); ok && next < d.armed {
		// The timer sleeps toward a later deadline (or none): move it.
		d.armed = next
		d.waiter.Wake()
	}
	return d.handOver(out)
}

// advanceLocked moves the engine to the current time, appends what it
// emitted to out and returns the buffers of dropped packets to the pool.
// The clock is read again rather than reusing the batch's now: packets an
// unshaped link released while the batch was processed leave with it.
func (d *Driver) advanceLocked(out []switchcore.Output) []switchcore.Output {
	d.sw.Advance(d.now())
	out = d.sw.Drain(out[:0])
	d.spare = d.sw.Reclaim(d.spare[:0])
	if len(d.spare) > 0 {
		d.pool.put(d.spare)
		clear(d.spare)
	}
	return out
}

// handOver releases the engine lock, holding the transmit lock from before
// the release so that outputs leave in the order the engine emitted them,
// and sends out. It returns out emptied.
func (d *Driver) handOver(out []switchcore.Output) []switchcore.Output {
	d.txMu.Lock()
	d.mu.Unlock()
	defer d.txMu.Unlock()
	if len(out) == 0 {
		return out
	}
	d.transmit(out)
	clear(out)
	return out[:0]
}

// transmit writes outputs, one WriteBatch per egress port, and returns
// their buffers to the pool. txMu is held.
func (d *Driver) transmit(out []switchcore.Output) {
	for i := range out {
		o := &out[i]
		p := d.ports[o.Port]
		if len(p.tx) == 0 {
			d.dirty = append(d.dirty, p)
		}
		p.tx = append(p.tx, udpio.Msg{Buf: o.Pkt.Buf, N: len(o.Pkt.Buf), Addr: p.neighbor, TOS: o.Pkt.TOS})
	}
	for _, p := range d.dirty {
		if p.captured {
			d.capture.egress(d.start.Add(d.now()), p, p.tx)
		}
		d.write(p)
		d.pool.putMsgs(p.tx)
		p.tx = p.tx[:0]
	}
	clear(d.dirty)
	d.dirty = d.dirty[:0]
}

// write sends p.tx, skipping a datagram the kernel refuses as a router
// drops a packet it cannot send, and giving up when the socket is closed
// or the driver is stopping.
func (d *Driver) write(p *port) {
	msgs := p.tx
	for len(msgs) > 0 {
		n, err := p.conn.WriteBatch(msgs)
		if err == nil {
			return
		}
		if errors.Is(err, net.ErrClosed) || errors.Is(err, os.ErrDeadlineExceeded) {
			if !d.stopping.Load() {
				p.sendErrors.Add(uint64(len(msgs) - n))
			}
			return
		}
		errs := p.sendErrors.Add(1)
		d.sendLog.Warn("send failed", zap.String("port", p.name), zap.Stringer("neighbor", p.neighbor),
			zap.Uint64("send_errors", errs), zap.Error(err))
		msgs = msgs[n+1:]
	}
}

// forever is the armed deadline when the engine has none.
const forever = time.Duration(1<<63 - 1)

// timerLoop advances the engine at its deadlines until the driver stops.
func (d *Driver) timerLoop() {
	out := make([]switchcore.Output, 0, 256)
	for !d.stopping.Load() {
		d.mu.Lock()
		out = d.advanceLocked(out)
		d.armed = forever
		if next, ok := d.sw.NextDeadline(); ok {
			d.armed = next
		}
		deadline := time.Time{} // nothing scheduled: sleep until a reader wakes it
		if d.armed != forever {
			deadline = d.start.Add(d.armed)
		}
		out = d.handOver(out)
		if err := d.waiter.Wait(deadline); err != nil && !d.stopping.Load() {
			d.log.Warn("timer wait failed", zap.Error(err))
		}
	}
}
