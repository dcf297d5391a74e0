package nic

import (
	"slices"
	"time"

	"github.com/forgive-emu/forgive/congestion"
	"github.com/forgive-emu/forgive/internal/pfcwd"
	"github.com/forgive-emu/forgive/reliability"
	"github.com/forgive-emu/forgive/wire"
)

// Receive handles one datagram from the network with the TOS byte of its
// IP header. Anything that is not a valid packet for this host is counted
// and dropped; nothing from the network can make it fail. It keeps nothing
// of pkt once it returns (a payload is copied into registered memory), so
// the caller may reuse pkt's memory: forgived hands it the datagrams where
// the kernel wrote them (udpio.Options.ReceiveViews), the simulator its
// own packet buffers.
func (e *Engine) Receive(now time.Duration, pkt []byte, tos uint8) {
	e.ReceiveOrdered(now, pkt, tos, Order{})
}

// ReceiveOrdered is Receive for a packet whose place in its sender's
// output is known: a sealed packet, whose nonce names the sender's start
// and counts the packets that start sealed for this host (forgived passes
// tss.Opened's Start and Counter). The order binds each flow to the
// sender's incarnation it heard last: a CONNECT from an earlier one,
// delayed on the path and never opened before, cannot restart the flow
// (docs/security.md, "Incarnations"). The zero Order, Receive's, says
// nothing of the packet's place, as a plain packet cannot.
func (e *Engine) ReceiveOrdered(now time.Duration, pkt []byte, tos uint8, ord Order) {
	now = e.observe(now)
	e.stats.RxPackets++
	e.stats.RxBytes += uint64(len(pkt))
	typ, err := wire.Validate(pkt)
	if err != nil {
		e.stats.Malformed++
		return
	}
	h := wire.Header(pkt)
	if typ == wire.TypePause {
		e.onPause(now, wire.Pause(pkt))
		return
	}
	if h.Dst() != e.host {
		e.stats.Misdelivered++
		return
	}
	id, _ := h.Flow() // every validated type but PAUSE, handled above, has one
	// The flow is found by the peer's host id and the flow id: a packet
	// naming another source host is not this flow's, whatever it carries.
	f := e.flows.get(FlowKey{h.Src(), id})
	if f == nil || f.failed != nil {
		e.stats.UnknownFlow++
		return
	}
	e.touch(f)
	// The flow's identity before anything else: its tags.
	if typ == wire.TypeConnect || typ == wire.TypeAccept {
		e.onHandshake(now, f, wire.Connect(pkt), ord)
		return
	}
	tags, _ := h.Tags()
	if ok, _ := e.admitTags(now, f, tags, ord); !ok {
		return
	}
	switch typ {
	case wire.TypeData:
		e.onData(now, f, wire.Data(pkt), tos&3 == wire.ECNCE)
	case wire.TypeAck:
		e.onAck(now, f, wire.Ack(pkt).Fields())
	case wire.TypeNack:
		e.onNack(now, f, wire.Nack(pkt).Fields())
	case wire.TypeCNP:
		f.stats.CNPsRecv++
		f.cc.OnCongestionNotification(now)
	case wire.TypeProbe:
		if f.rx.OnProbe(now, wire.Probe(pkt).Fields()) != nil {
			e.stats.Malformed++
		}
		e.drainRx(f)
	}
}

func (e *Engine) onData(now time.Duration, f *flow, d wire.Data, ce bool) {
	h := reliability.HeaderOf(d, ce)
	// The PSN window first: a packet outside it is forged or long stale,
	// and neither its message length nor its CE mark may touch the flow.
	if !f.rx.Admits(h.PSN) {
		return
	}
	region, off, ok := e.recvFor(f, h)
	if !ok {
		return
	}
	if ce {
		f.stats.CEMarked++
		if f.np.OnCE(now) {
			e.sendCNP(f, h.PSN)
		}
	}
	if h.Trimmed() {
		f.stats.TrimmedRecv++
		f.stats.TrimmedBytes += uint64(h.PayloadLen)
		if _, err := f.rx.OnTrimmedHeader(now, h); err != nil {
			e.stats.Malformed++
		}
		e.drainRx(f)
		return
	}
	res, err := f.rx.OnData(now, h)
	if err != nil {
		e.stats.Malformed++
		e.drainRx(f)
		return
	}
	f.stats.RecvPackets++
	if len(res.Place) == 0 || region == 0 { // nothing new, or a message already completed
		e.drainRx(f)
		return
	}
	if e.noPayload {
		for _, r := range res.Place {
			f.stats.RecvBytes += uint64(r.End - r.Start)
		}
		e.drainRx(f)
		return
	}
	mem := e.regions[region].mem[off:]
	payload := d.Payload()
	for _, r := range res.Place {
		copy(mem[r.Start:r.End], payload[r.Start-h.Offset:r.End-h.Offset])
		f.stats.RecvBytes += uint64(r.End - r.Start)
	}
	e.drainRx(f)
}

// recvFor finds the posted receive of the packet's message. Data for a
// message nobody posted a receive for is dropped (the sender's timer
// brings it back, as after RDMA's receiver-not-ready); a message longer
// than its receive fails the flow, as it moves an RDMA queue pair to error.
//
// It returns where the receive's memory starts; region 0 (no region) for
// a message that already completed.
func (e *Engine) recvFor(f *flow, h reliability.DataHeader) (region RegionID, off int, ok bool) {
	i := h.Msg - f.recvMsg
	if int32(i) < 0 {
		return 0, 0, true // a completed message: the receiver acknowledges the duplicate
	}
	if int(i) >= len(f.recvs) {
		f.stats.RNRDrops++
		return 0, 0, false
	}
	rw := &f.recvs[i]
	if h.MsgLen > rw.len {
		e.fail(f, ErrMsgTooLong)
		return 0, 0, false
	}
	rw.touched = true
	return rw.region, rw.off, true
}

// drainRx moves the receiver's outbox into the control queue and turns its
// completions into receive completions.
func (e *Engine) drainRx(f *flow) {
	out := &f.rx.Out
	if len(out.Acks) == 0 && len(out.Nacks) == 0 && len(out.Completions) == 0 {
		return // most data packets: nothing to move, and Reset would change nothing
	}
	for _, a := range out.Acks {
		a.Tags = f.tags()
		e.ctrl.pushAck(a)
	}
	for _, n := range out.Nacks {
		n.Tags = f.tags()
		e.ctrl.pushNack(n)
	}
	for _, c := range out.Completions {
		e.completeRecv(f, c)
	}
	out.Reset()
}

func (e *Engine) completeRecv(f *flow, c reliability.Completion) {
	i := c.Msg - f.recvMsg
	if int32(i) < 0 || int(i) >= len(f.recvs) || f.recvs[i].done != nil {
		return // a stale duplicate
	}
	rw := &f.recvs[i]
	comp := Completion{Flow: f.key, WR: rw.wr, Kind: WorkRecv, Len: c.Len, Step: rw.step}
	if len(c.Forgiven) > 0 {
		if mem := e.regions[rw.region].mem; mem != nil { // nil: a region without memory (RegisterLength)
			mem := mem[rw.off:]
			for _, r := range c.Forgiven {
				clear(mem[r.Start:r.End]) // "zero-filled in its memory, so nothing is silently lost"
			}
		}
		comp.Forgiven = slices.Clone(c.Forgiven)
	}
	rw.done = &comp
	// Messages can settle out of order (a later one may have no hole);
	// receives complete in the order they were posted.
	for len(f.recvs) > 0 && f.recvs[0].done != nil {
		head := f.recvs[0]
		f.recvs = f.recvs[1:]
		f.recvMsg++
		e.inUse[head.region]--
		f.stats.RecvsDone++
		e.done = append(e.done, *head.done)
	}
}

func (e *Engine) onAck(now time.Duration, f *flow, a wire.AckFields) {
	f.stats.AcksRecv++
	res, err := f.tx.OnAck(now, a)
	if err != nil {
		e.stats.Malformed++
		return
	}
	// "Every acknowledgement and retransmission request is a report."
	f.cc.OnReport(now, res.Eligible, res.Exhausted)
	f.cc.OnAck(now, congestion.AckSignal{Acked: res.NewlyAckedBytes, RTT: res.RTT, ECN: res.ECNEcho, InFlight: f.tx.UnackedBytes()})
	e.unblock(f)
	e.drainTx(f)
}

func (e *Engine) onNack(now time.Duration, f *flow, n wire.NackFields) {
	f.stats.NacksRecv++
	res, err := f.tx.OnNack(now, n)
	if err != nil {
		e.stats.Malformed++
		return
	}
	// "OnReport has already applied this request's flags."
	f.cc.OnReport(now, res.Eligible, res.Exhausted)
	f.cc.OnRetransmissionRequest(now, res.QueuedBytes, f.tx.UnackedBytes())
	e.unblock(f)
	e.drainTx(f)
}

// drainTx turns the sender's completions into send completions and queues
// its probes.
func (e *Engine) drainTx(f *flow) {
	out := &f.tx.Out
	if len(out.Probes) == 0 && len(out.Completions) == 0 {
		// Nothing to move, and no send to complete: a send is marked done
		// only below, and every drainTx leaves an undone send (or none) at
		// the head (PostSend appends undone sends, restart keeps only
		// undone ones).
		return
	}
	for _, p := range out.Probes {
		p.Entropy = f.entropyFor(p.Subflow, 0, true, e)
		p.Tags = f.tags()
		e.ctrl.pushProbe(p, f.dscp<<2|e.ecn())
		f.stats.ProbesSent++
	}
	for _, c := range out.Completions {
		for i := range f.sends {
			if f.sends[i].msg == c.Msg {
				f.sends[i].done = true
				break
			}
		}
	}
	// A later message can be acknowledged first (selective repeat); sends
	// complete in posting order.
	for len(f.sends) > 0 && f.sends[0].done {
		sw := f.sends[0]
		f.sends = f.sends[1:]
		e.inUse[sw.region]--
		f.stats.SendsDone++
		e.done = append(e.done, Completion{Flow: f.key, WR: sw.wr, Kind: WorkSend, Len: sw.len})
	}
	out.Reset()
}

func (e *Engine) ecn() uint8 {
	if e.ecnOn {
		return wire.ECNECT0
	}
	return wire.ECNNotECT
}

func (e *Engine) sendCNP(f *flow, psn wire.PSN) {
	f.stats.CNPsSent++
	e.ctrl.pushCNP(wire.CNPFields{Src: e.host, Dst: f.key.Peer, Flow: f.key.ID, Tags: f.tags(), PSN: psn})
}

// onPause applies a PFC frame from the switch port: data stops for the
// pause time, control packets still leave (they travel in the strict-
// priority class, which PFC does not pause here).
// In watchdog recovery the frame is counted and ignored.
func (e *Engine) onPause(now time.Duration, p wire.Pause) {
	e.stats.Pauses++
	e.watchdog(now)
	if now < e.ignoreUntil {
		e.stats.PausesIgnored++
		return
	}
	if now >= e.pausedTo {
		e.endPause()
		// The watchdog's bucket drained while data was not paused, from
		// the end of the last pause to this one.
		e.wdLevel = pfcwd.Drain(e.wdLevel, now-e.pausedTo, e.wdLimit, e.wdDrain)
		e.pauseStart = now
	}
	e.pausedTo = now + time.Duration(p.Micros())*time.Microsecond
}

// endPause adds the pause that has ended, [pauseStart, pausedTo), to the
// paused time and to the watchdog's bucket.
func (e *Engine) endPause() {
	d := e.pausedTo - e.pauseStart
	e.pausedAcc += d
	e.wdLevel += d
	e.longestPause = max(e.longestPause, d)
	e.pauseStart = e.pausedTo
}

// wdDue is when the watchdog ends the current pause: when the bucket,
// holding wdLevel at its start, holds the limit.
func (e *Engine) wdDue() time.Duration { return e.pauseStart + e.wdLimit - e.wdLevel }

// pausedTime returns the time data was paused by PFC up to the engine's
// now, and the longest continuous pause. A pause past the watchdog's due
// time counts to that time, whether or not a call has applied it yet.
func (e *Engine) pausedTime() (total, longest time.Duration) {
	end := min(e.now, e.pausedTo)
	if e.wdOn {
		end = min(end, e.wdDue())
	}
	d := max(end-e.pauseStart, 0)
	return e.pausedAcc + d, max(e.longestPause, d)
}

// watchdog ends a pause once the watchdog's bucket holds WatchdogLimit
// (Config.WatchdogWindow): a pause from an empty bucket that lasted the
// limit, or one that began with the bucket part full from the pauses
// before it. It then ignores PAUSE frames for the recovery time, as the
// switch's PFC watchdog does: liveness over losslessness. The NIC drops
// nothing: its data waits in the senders, not in a queue. It fires at its
// due time even when the engine is first called after it: a pause never
// counts longer than the bucket allows, however late the driver.
func (e *Engine) watchdog(now time.Duration) {
	recovery, ok := e.wdRecover, e.wdOn // cfg.watchdog()
	due := e.wdDue()
	if !ok || now < due || e.pausedTo <= due {
		return
	}
	e.pausedTo = due
	e.ignoreUntil = due + recovery
	e.stats.WatchdogFires++
}

// watchdogDue is when the watchdog ends the current pause, if it does.
func (e *Engine) watchdogDue() (time.Duration, bool) {
	if !e.wdOn || e.now >= e.pausedTo {
		return 0, false
	}
	due := e.wdDue()
	return due, due < e.pausedTo
}

// Transmit writes the next packet the NIC may send at now into buf (which
// needs room for a header and an MTU of payload) and returns it with the
// TOS byte for its IP header. ok is false when nothing may leave now;
// NextDeadline says when to ask again.
func (e *Engine) Transmit(now time.Duration, buf []byte) (pkt []byte, tos uint8, ok bool) {
	pkt, _, tos, ok = e.transmit(now, buf, false)
	return pkt, tos, ok
}

// TransmitGather is Transmit for a driver that sends a datagram from two
// pieces (a gather write, udpio.Msg's Tail): a data packet's header is
// written into buf and returned as pkt, and its payload is returned as
// payload, a view of the posted send's registered memory, not copied. The
// datagram is pkt followed by payload, the same bytes Transmit writes; for
// every other packet payload is nil and pkt is the whole packet. payload
// is valid until the engine next runs a host-API request (a deregistered
// region is unmapped): a driver sends it before that.
func (e *Engine) TransmitGather(now time.Duration, buf []byte) (pkt, payload []byte, tos uint8, ok bool) {
	return e.transmit(now, buf, true)
}

func (e *Engine) transmit(now time.Duration, buf []byte, gather bool) (pkt, payload []byte, tos uint8, ok bool) {
	now = e.observe(now)
	if e.ctrl.len() > 0 {
		pkt, tos = e.ctrl.pop(buf[:0])
		e.sent(len(pkt))
		return pkt, nil, tos, true
	}
	e.watchdog(now)
	if now < e.pausedTo || !e.portReady(now) {
		return nil, nil, 0, false
	}
	for left := len(e.order); left > 0; {
		var f *flow
		if e.txIndexed { // many flows: the index (txindex.go) passes those that may not send
			if f, left = e.nextIndexed(now, left); f == nil {
				break
			}
		} else {
			f, left = e.order[e.rr], left-1
			if e.rr++; e.rr == len(e.order) { // (rr+1) mod len, rr < len: no division
				e.rr = 0
			}
			if f.held() || !f.cc.Ready(now) {
				continue
			}
		}
		e.touchSent(f)
		// A window controller's window bounds the bytes in flight where
		// the rate's pacer spaces them: new data waits for an ACK, which
		// clears txBlocked.
		if w, ok := f.cc.Window(); ok {
			f.tx.SetCongestionWindow(w)
		} else if e.cfg.RateScaledWindow {
			f.tx.SetWindow(scaledWindow(f.scfg.Window, f.cc.Rate(), e.ccLineRate()))
		}
		seg, ok := f.tx.Next(now)
		if !ok {
			f.txBlocked = true
			if e.txIndexed {
				e.txi.txNever(f.timers, int(e.txi.pos[f.timers]))
			}
			e.drainTx(f) // a sender that ran dry may have tail probes to send
			continue
		}
		pkt, payload = e.buildData(f, &seg, buf, gather)
		n := len(pkt) + len(payload) + e.overhead
		f.cc.OnSent(now, n)
		if e.txIndexed {
			e.txi.txSent(f)
		}
		e.portSent(now, n)
		f.stats.DataPackets++
		f.stats.DataBytes += uint64(seg.Len)
		if seg.Retx {
			f.stats.RetxPackets++
			f.stats.RetxBytes += uint64(seg.Len)
		}
		e.drainTx(f)
		e.sent(len(pkt) + len(payload))
		return pkt, payload, f.dscp<<2 | e.ecn(), true
	}
	return nil, nil, 0, false
}

func (e *Engine) sent(n int) {
	e.stats.TxPackets++
	e.stats.TxBytes += uint64(n)
}

// buildData writes segment seg of flow f into buf, payload read straight
// from the posted send's memory. With gather, only the header goes into
// buf and the payload is returned as a view of that memory.
//
// The header is built in place and handed to wire by pointer (the
// AppendData*From forms): the same bytes and checks as seg.DataFields
// passed by value, without copying its 40 bytes into each call.
func (e *Engine) buildData(f *flow, seg *reliability.Segment, buf []byte, gather bool) (pkt, view []byte) {
	hdr := wire.DataFields{Flags: seg.Flags, Entropy: f.entropyFor(seg.Subflow, seg.Msg, false, e),
		Src: f.info.Local, Dst: f.info.Peer, Flow: f.info.Flow, Tags: f.tags(),
		PSN: seg.PSN, Msg: seg.Msg, Offset: seg.Offset, MsgLen: seg.MsgLen, Subflows: seg.Subflows}
	sw := f.sendFor(seg.Msg)
	if sw != nil {
		sw.sent = true
	}
	if e.noPayload {
		n := 0
		if sw != nil {
			n = int(seg.Len)
		}
		pkt, err := wire.AppendDataHeaderFrom(buf[:0], &hdr, n)
		if err != nil || cap(pkt) < len(pkt)+n {
			return buf[:0], nil
		}
		return pkt[:len(pkt)+n], nil // the payload's bytes are left as they are
	}
	var payload []byte
	if sw != nil {
		mem := e.regions[sw.region].mem[sw.off:]
		payload = mem[seg.Offset : seg.Offset+seg.Len]
	}
	if gather {
		pkt, err := wire.AppendDataHeaderFrom(buf[:0], &hdr, len(payload))
		if err != nil {
			return buf[:0], nil
		}
		return pkt, payload
	}
	pkt, err := wire.AppendDataFrom(buf[:0], &hdr, payload)
	if err != nil { // a segment is at most one MTU: cannot happen with a valid config
		return buf[:0], nil
	}
	return pkt, nil
}

// sendFor finds the posted send of message msg, nil if there is none.
func (f *flow) sendFor(msg uint32) *sendWR {
	for i := range f.sends {
		if f.sends[i].msg == msg {
			return &f.sends[i]
		}
	}
	return nil
}

// Advance runs every timer due at now: retransmission timeouts, delayed
// ACKs, DCQCN's timers, deferred CNPs, and the failure of flows whose peer
// stopped answering. It visits the flows that are due or changed since
// the last Advance (due.go), in e.order's order.
func (e *Engine) Advance(now time.Duration) {
	now = e.observe(now)
	e.watchdog(now)
	for _, i := range e.visitOrder(now) {
		e.runTimers(now, e.tm.fs[i].f)
	}
	e.doneVisits(now)
}

// runTimers runs a flow's timers due at now (its CONNECT retry, its
// sender's, receiver's, rate controller's and notification point's) and
// checks its progress: what Advance does for each flow it visits.
func (e *Engine) runTimers(now time.Duration, f *flow) {
	if f.failed != nil {
		return
	}
	if f.peerTag == 0 && f.connectAt <= now {
		e.connect(now, f)
	}
	if d, ok := f.tx.NextDeadline(); ok && d <= now {
		f.tx.OnTimer(now)
		e.unblock(f)
		e.drainTx(f)
	}
	if d, ok := f.rx.NextDeadline(); ok && d <= now {
		f.rx.OnTimer(now)
		e.drainRx(f)
	}
	if d, ok := f.cc.NextDeadline(); ok && d <= now {
		f.cc.Advance(now)
	}
	if d, ok := f.np.NextDeadline(); ok && d <= now && f.np.Advance(now) {
		e.sendCNP(f, f.rx.CumPSN())
	}
	e.checkProgress(now, f)
}

// checkProgress fails a flow whose oldest unacknowledged packet has not
// moved for FailAfter: "a killed and restarted peer daemon makes
// transfers fail with a clear error, not hang".
func (e *Engine) checkProgress(now time.Duration, f *flow) {
	if f.peerTag == 0 { // still in the handshake: fail sends that wait too long for it
		if len(f.sends) > 0 && now-f.lastMove > e.failAfter {
			e.fail(f, ErrPeerTimeout)
		}
		return
	}
	if una := f.tx.Una(); una != f.lastUna || f.tx.InFlight() == 0 {
		f.lastUna, f.lastMove = una, now
		return
	}
	if now-f.lastMove > e.failAfter {
		e.fail(f, ErrPeerTimeout)
	}
}

// fail moves a flow to the error state: every posted work request
// completes with err and the flow accepts no more work.
func (e *Engine) fail(f *flow, err error) {
	if f.failed != nil {
		return
	}
	f.failed = err
	if err != ErrFlowDestroy { // a destroy is the application's, not a failure
		e.stats.FlowsFailed++
	}
	for _, sw := range f.sends {
		e.inUse[sw.region]--
		e.done = append(e.done, Completion{Flow: f.key, WR: sw.wr, Kind: WorkSend, Len: sw.len, Err: err})
	}
	for _, rw := range f.recvs {
		e.inUse[rw.region]--
		e.done = append(e.done, Completion{Flow: f.key, WR: rw.wr, Kind: WorkRecv, Step: rw.step, Err: err})
	}
	f.sends, f.recvs = nil, nil
}

// NextDeadline returns when the engine next wants Transmit or Advance
// called: now while control packets wait, the pacers' next send time for
// flows with data, and the earliest timer.
func (e *Engine) NextDeadline() (time.Duration, bool) {
	if e.ctrl.len() > 0 {
		return e.now, true
	}
	e.refreshStale(true)
	at, ok := e.tm.min(keyTimer)
	send, sending := e.tm.min(keySend)
	if !sending {
		return at, ok
	}
	// When a flow with data may send: its pacer's time, and the engine's
	// own gate (the host link's pacer and a pause, cut short by the
	// watchdog), the same for every flow.
	port := e.portNext()
	gate := max(port, e.pausedTo)
	if due, ok := e.watchdogDue(); ok {
		gate = max(port, min(due, e.pausedTo))
	}
	if send = max(send, gate); !ok || send < at {
		at, ok = send, true
	}
	return at, ok
}
