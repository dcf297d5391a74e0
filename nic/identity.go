package nic

import (
	"time"

	"github.com/forgive-emu/forgive/reliability"
	"github.com/forgive-emu/forgive/wire"
)

// Flow identity (docs/security.md, "Flow identity"): each end of a flow
// draws a random non-zero tag when the flow is created and sends with the
// peer's tag as destination and its own as source. A packet is accepted
// only if its destination tag is this end's, before its PSN, its length or
// any state is looked at; the peer's tag is bound from the first packet
// that carries this end's tag, which only an end that received it can
// send, so a forged CONNECT binds nothing.
//
// A packet with the right destination tag but another source tag comes
// from another incarnation of the peer's flow: it is refused and counted
// (StaleIncarnation). When it is a CONNECT, the peer's flow was recreated
// (a restarted daemon) and has learned this end's tag from an ACCEPT: the
// flow restarts, as SCTP restarts an association. Work that the old
// incarnation already moved bytes for fails with ErrPeerRestarted, work
// it never touched stays posted, and both directions start again from the
// PSNs the tags give. Failing the whole flow instead, as a RoCE queue
// pair goes to error, does not converge: the peer bound this end's tag
// when it restarted, so recreating this flow would in turn make the peer's
// new flow stale, and so on.

// A CONNECT restarts a flow only from an incarnation of the peer's flow
// later than the one it is bound to, as far as this end can tell
// (docs/security.md, "Incarnations"). A relay on the path may hold a
// CONNECT and deliver it after the peer recreated its flow; restarting
// to the dead incarnation it names would make the live one stale (and
// the flow fail). One check refuses it, counted as StaleConnects:
//
//   - sealed, by its Order (its sender's start and counter, which the
//     sublayer authenticates): every packet of a later incarnation of
//     the sender's flow is ordered after every packet of an earlier one,
//     since a flow key has one incarnation at a time and a host seals in
//     sending order, so a CONNECT ordered before the packet that bound
//     the current peer incarnation is refused, whatever tag it names;
//   - plain, by its tag: the flow remembers the last peer tags it was
//     restarted away from (oldPeers), and a CONNECT naming one of them is
//     refused.
//
// The order decides alone where it is known: it is exact, where a new
// incarnation's random tag may equal a remembered one (3 in 2^32).
//
// Plain packets carry no order, so plain refuses only the tags the flow
// has seen superseded: a held CONNECT of an incarnation this end never
// bound still restarts a plain flow, as any on-path forgery can.

// Order is a received packet's place in its sender host's output, as the
// security sublayer authenticated it: Start numbers the sender's starts
// this host has heard (1 for the first), Counter the packets that start
// sealed for this host. The zero Order is unknown: a plain packet's.
type Order struct {
	Start   uint32
	Counter uint64
}

// Known reports whether o places its packet.
func (o Order) Known() bool { return o.Start != 0 }

// Before reports whether o's packet left its sender before p's.
func (o Order) Before(p Order) bool {
	return o.Start < p.Start || o.Start == p.Start && o.Counter < p.Counter
}

// oldPeersKept is how many superseded peer tags a flow remembers.
const oldPeersKept = 3

// superseded reports whether tag is a peer incarnation the flow was
// restarted away from.
func (f *flow) superseded(tag uint32) bool {
	for _, t := range f.oldPeers {
		if t == tag && t != 0 {
			return true
		}
	}
	return false
}

// peerOrder is the order of the packet that bound the current peer tag.
func (f *flow) peerOrder() Order { return Order{Start: f.peerStart, Counter: f.peerCtr} }

// connectBackoff bounds the CONNECT retry interval: the first retry comes
// after the sender's high RTO, each next one after twice the last, up to
// this many RTOs.
const connectBackoff = 64

// ACCEPTs are rate-limited per flow: a burst of acceptBurst, then one per
// connectBackoff high RTOs, the longest gap between an honest peer's
// CONNECT retries. An honest peer's handshake takes two ACCEPTs, its
// retries the rest of the burst and then one per its own retry gap, so
// it is never refused; a flood of forged CONNECTs (a stateless answer
// reflects one packet for each, toward the real peer) draws at most
// acceptBurst + t/(connectBackoff x RTOHigh) ACCEPTs in t, about 49 a
// second at the default RTO, and the rest are counted as AcceptsLimited.
const acceptBurst = 4

// acceptPace reports whether the flow may send an ACCEPT at now, and if
// so takes the ACCEPT from its allowance: the generic cell rate algorithm
// with emission interval connectBackoff x RTOHigh and a tolerance of
// acceptBurst-1 intervals.
func (e *Engine) acceptPace(now time.Duration, f *flow) bool {
	interval := connectBackoff * e.rtoHigh()
	if now < f.acceptAt-(acceptBurst-1)*interval {
		return false
	}
	f.acceptAt = max(f.acceptAt, now) + interval
	return true
}

func (e *Engine) rtoHigh() time.Duration {
	if rto := e.cfg.Sender.RTOHigh; rto > 0 {
		return rto
	}
	return reliability.DefaultRTOHigh
}

// connect queues a CONNECT and schedules the next retry.
func (e *Engine) connect(now time.Duration, f *flow) {
	e.ctrl.pushConnect(wire.ConnectFields{Src: e.host, Dst: f.key.Peer, Flow: f.key.ID, Tags: f.tags()})
	f.stats.ConnectsSent++
	rto := e.rtoHigh()
	switch {
	case f.connectGap == 0:
		f.connectGap = rto
	case f.connectGap < connectBackoff*rto:
		f.connectGap *= 2
	}
	f.connectAt = now + f.connectGap
}

// onHandshake answers a CONNECT and binds from an ACCEPT.
func (e *Engine) onHandshake(now time.Duration, f *flow, c wire.Connect, ord Order) {
	tags := c.Tags()
	if c.Accept() {
		// An ACCEPT answers this end's CONNECT: it must carry our tag.
		if ok, bound := e.admitTags(now, f, tags, ord); ok && bound {
			// Bound just now from the peer's stateless answer: the peer
			// may not know our tag yet, so tell it at once rather than
			// let it wait for its own retry.
			e.connect(now, f)
		}
		return
	}
	// A CONNECT names our tag if the peer knows it, else 0. Knowing it
	// proves what any other packet with our tag proves: bind or check it;
	// from a new incarnation of the peer's flow it restarts ours, and
	// from an earlier one (a CONNECT held on the path) it is refused.
	if tags.Dst != 0 {
		if f.peerTag != 0 && tags.Dst == f.tag && tags.Src != 0 && tags.Src != f.peerTag {
			e.stats.StaleIncarnation++
			f.stats.StaleIncarnation++
			stale := f.superseded(tags.Src)
			if ord.Known() {
				stale = !f.peerOrder().Before(ord)
			}
			if stale {
				e.stats.StaleConnects++
				return
			}
			e.restart(now, f, tags.Src, ord)
		} else if ok, _ := e.admitTags(now, f, tags, ord); !ok {
			return
		}
	}
	if f.failed != nil {
		return
	}
	if !e.acceptPace(now, f) {
		e.stats.AcceptsLimited++
		f.stats.AcceptsLimited++
		return
	}
	e.ctrl.pushConnect(wire.ConnectFields{Accept: true,
		Src: e.host, Dst: f.key.Peer, Flow: f.key.ID, Tags: wire.Tags{Dst: tags.Src, Src: f.tag}})
	f.stats.AcceptsSent++
}

// admitTags is the first check every packet of a known flow passes: its
// destination tag must be this end's. The first such packet binds the
// peer's tag; a later one with another source tag is a recreated peer
// incarnation and is refused. bound reports that this packet bound the tag.
func (e *Engine) admitTags(now time.Duration, f *flow, tags wire.Tags, ord Order) (ok, bound bool) {
	if tags.Dst != f.tag || tags.Src == 0 {
		e.stats.WrongTag++
		f.stats.WrongTag++
		return false, false
	}
	switch f.peerTag {
	case tags.Src:
		return true, false
	case 0:
		e.bind(now, f, tags.Src, ord)
		return true, true
	}
	e.stats.StaleIncarnation++
	f.stats.StaleIncarnation++
	return false, false
}

// restart rebinds the flow to a new incarnation of the peer's flow. Sends
// of which a packet left and receives into which a packet arrived fail
// with ErrPeerRestarted (acknowledged sends complete); the others, which
// the old incarnation never touched, are posted again, numbered from
// message 0 as the new peer expects, however much the flow moved before.
func (e *Engine) restart(now time.Duration, f *flow, peer uint32, ord Order) {
	f.stats.PeerRestarts++
	copy(f.oldPeers[1:], f.oldPeers[:])
	f.oldPeers[0] = f.peerTag
	var keepSends []sendWR
	for _, sw := range f.sends {
		if sw.sent || sw.done {
			e.inUse[sw.region]--
			err := ErrPeerRestarted
			if sw.done { // acknowledged by the old incarnation: it completed
				err = nil
			}
			e.done = append(e.done, Completion{Flow: f.key, WR: sw.wr, Kind: WorkSend, Len: sw.len, Err: err})
			continue
		}
		keepSends = append(keepSends, sw)
	}
	var keepRecvs []recvWR
	for _, rw := range f.recvs {
		if rw.touched || rw.done != nil {
			e.inUse[rw.region]--
			e.done = append(e.done, Completion{Flow: f.key, WR: rw.wr, Kind: WorkRecv, Step: rw.step, Err: ErrPeerRestarted})
			continue
		}
		keepRecvs = append(keepRecvs, rw)
	}
	tx, err := reliability.NewSender(f.info, f.scfg)
	if err != nil { // the same config was accepted at CreateFlow
		e.fail(f, err)
		return
	}
	f.tx = tx
	f.nextMsg, f.recvMsg = 0, 0
	f.sends, f.recvs = nil, keepRecvs
	for _, sw := range keepSends {
		sw.msg = f.nextMsg
		if err := f.tx.Post(sw.msg, sw.len); err != nil {
			e.inUse[sw.region]--
			e.done = append(e.done, Completion{Flow: f.key, WR: sw.wr, Kind: WorkSend, Len: sw.len, Err: ErrPeerRestarted})
			continue
		}
		f.nextMsg++
		f.sends = append(f.sends, sw)
	}
	e.bind(now, f, peer, ord)
}

// bind learns the peer's tag from a packet of order ord: the receive side
// starts at the PSN the tag gives, and data may leave.
func (e *Engine) bind(now time.Duration, f *flow, peer uint32, ord Order) {
	f.peerTag = peer
	f.peerStart, f.peerCtr = ord.Start, ord.Counter
	f.stats.BoundAt = now
	info := f.info
	info.InitialPSN = wire.InitialPSN(peer)
	rx, err := reliability.NewReceiver(info, f.rcfg, f.rxDec)
	if err == nil { // the same config was accepted at CreateFlow
		f.rx = rx
	}
	e.unblock(f)
	f.lastMove = now
}
