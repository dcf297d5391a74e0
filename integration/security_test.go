package integration

import (
	"bytes"
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/hostapi"
	"github.com/forgive-emu/forgive/wire"
)

// attacker is an off-path sender on the loopback fabric: an unconnected
// UDP socket on an address no daemon or switch port uses.
type attacker struct {
	t    *testing.T
	conn *net.UDPConn
}

func newAttacker(t *testing.T, s *star) *attacker {
	t.Helper()
	laddr, err := net.ResolveUDPAddr("udp4", s.addr(200, 0))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.ListenUDP("udp4", laddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &attacker{t: t, conn: conn}
}

// flood sends pkt to addr up to n times, pausing every burst packets for
// gap, until stop is closed; it returns how many it sent.
func (a *attacker) flood(addr string, pkt []byte, n, burst int, gap time.Duration, stop <-chan struct{}) int {
	raddr, err := net.ResolveUDPAddr("udp4", addr)
	if err != nil {
		a.t.Error(err)
		return 0
	}
	for i := range n {
		select {
		case <-stop:
			return i
		default:
		}
		if _, err := a.conn.WriteToUDP(pkt, raddr); err != nil {
			return i
		}
		if (i+1)%burst == 0 {
			time.Sleep(gap)
		}
	}
	return n
}

// timedTransfer runs one message of size bytes from host 1 to host 2 on
// flow id, checks it arrives byte-exact and returns how long it took.
func timedTransfer(t *testing.T, c1, c2 *hostapi.Client, id hostapi.FlowID, size int, during func(stop <-chan struct{})) time.Duration {
	t.Helper()
	x := prepare(t, c1, c2, 1, 2, id, hostapi.ClassTensor, size, 0)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	if during != nil {
		wg.Add(1)
		go func() { defer wg.Done(); during(stop) }()
	}
	start := time.Now()
	x.send()
	comp := awaitKind(t, c2, hostapi.KindRecv, time.Minute)
	elapsed := time.Since(start)
	close(stop)
	wg.Wait()
	if comp.Status != hostapi.StatusOK {
		t.Fatalf("receive %+v under attack: want success", comp)
	}
	if !bytes.Equal(x.dst, x.src) {
		t.Fatal("received bytes differ from the bytes sent")
	}
	if s := awaitKind(t, c1, hostapi.KindSend, 10*time.Second); s.Status != hostapi.StatusOK {
		t.Fatalf("send %+v: want success", s)
	}
	return elapsed
}

// Attack: "every CNP cuts the rate: 30,000 forged CNPs made a transfer
// 59 % slower". The sender cuts at most once per rate_reduce_period; the
// daemon here runs a 10 ms period (its default is 4 µs, the reference's
// rate_reduce_monitor_period), long enough for a flood on a loaded
// loopback to show the bound. Up to 30,000 forged CNPs for
// the flow, sent through the switch by an on-path attacker (it forges
// host 2's address and carries the flow's tags, read off the wire: an
// off-path one is refused at the switch and at the tag check, see
// TestOffPathForgedFileRefused), are counted as coalesced, the cuts stay
// within one per period, and the transfer completes byte-exact.
func TestForgedCNPFloodCutsAtMostOncePerPeriod(t *testing.T) {
	const period = 10 * time.Millisecond
	s := newStar(t, 2, "200Mbps", map[uint16]hostOpts{1: {extra: "dcqcn: {rate_reduce_period: 10ms}\n"}})
	c1, c2 := s.client(1), s.client(2)
	const size = 8 << 20
	base := timedTransfer(t, c1, c2, 11, size, nil)
	before := flowValues(t, c1, 11)

	sp := newSpoofer(t, s.addr(2, 4793))
	var sent atomic.Int64
	window := time.Now() // flow 12 is created after this
	attacked := timedTransfer(t, c1, c2, 12, size, func(stop <-chan struct{}) {
		local, peer := flowTags(t, c1, 12)
		cnp := wire.AppendCNPFields(nil, wire.CNPFields{Src: 2, Dst: 1, Flow: 12, Tags: wire.Tags{Dst: local, Src: peer}})
		// Into host 2's switch port: the switch forwards it to host 1 as
		// it would host 2's own CNPs.
		for i := range 30000 {
			select {
			case <-stop:
				return
			default:
			}
			if sp.send(s.addr(102, 4793), cnp) != nil {
				return
			}
			sent.Add(1)
			if i%64 == 63 {
				time.Sleep(50 * time.Microsecond)
			}
		}
	})
	tx := flowValues(t, c1, 12)
	span := time.Since(window)
	t.Logf("un-attacked %v (flow 11: %d CNPs, %d cuts); attacked %v: %d forged CNPs sent, %d received, %d cut, %d coalesced",
		base.Round(time.Millisecond), before["cnps_recv"], before["rate_cuts"], attacked.Round(time.Millisecond),
		sent.Load(), tx["cnps_recv"], tx["rate_cuts"], tx["cnps_coalesced"])
	if tx["cnps_recv"] < 100 {
		t.Fatalf("only %d CNPs reached the sender: the attack did not happen", tx["cnps_recv"])
	}
	// NACKs cut the rate too, so cuts and coalesced CNPs together are at
	// least the CNPs.
	if tx["rate_cuts"]+tx["cnps_coalesced"] < tx["cnps_recv"] {
		t.Errorf("%d cuts + %d coalesced < %d CNPs received", tx["rate_cuts"], tx["cnps_coalesced"], tx["cnps_recv"])
	}
	// The flow lives from its creation to the counters read: bound its
	// cuts by that span, measured around both. A loaded machine only
	// lengthens the span and loosens the bound; how long the transfer took
	// against the un-attacked one is the machine's, not the protocol's,
	// and is only logged.
	if limit := uint64(span/period) + 2; tx["rate_cuts"] > limit {
		t.Errorf("%d rate cuts in %v: more than one per %v (limit %d)", tx["rate_cuts"], span, period, limit)
	}
}

// hostValues returns host h's host-wide counters.
func hostValues(t *testing.T, c *hostapi.Client) map[string]uint64 {
	t.Helper()
	ct, err := c.Counters(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return ct.Host.Map()
}

// Attack: "forgived takes PAUSE frames from any source ... 20 forged
// PAUSEs a second stopped a host's progress for 10 s." A host is cabled
// to one switch port, so forgived refuses every datagram that does not
// come from it: forged PAUSEs (and forged CNPs and DATA) sent straight to
// the NIC from another loopback address are counted under foreign_source
// and change nothing; the transfer completes byte-exact. (A forger that
// spoofs the switch's address is the NIC's PAUSE watchdog's case:
// TestForgedPauseFloodBoundedByWatchdog, and package nic.)
func TestForeignSourceRefused(t *testing.T) {
	s := newStar(t, 2, "200Mbps", nil)
	c1, c2 := s.client(1), s.client(2)
	const size = 16 << 20
	base := timedTransfer(t, c1, c2, 21, size, nil)
	if v := hostValues(t, c1); v["foreign_source"] != 0 || v["pauses"] != 0 {
		t.Fatalf("un-attacked host 1: %d foreign datagrams, %d pauses; want none", v["foreign_source"], v["pauses"])
	}

	a := newAttacker(t, s)
	pause := wire.AppendPause(nil, 0xff, 65535)
	cnp := wire.AppendCNP(nil, 2, 1, 22, 0)
	ack := wire.AppendAck(nil, wire.AckFields{Src: 2, Dst: 1, Flow: 22, CumPSN: 1 << 20})
	var sent atomic.Int64
	attacked := timedTransfer(t, c1, c2, 22, size, func(stop <-chan struct{}) {
		// 200 PAUSEs a second, each for 65 ms: without the check, host 1
		// would not send again until its watchdog fired; with each a CNP
		// and an ACK for the flow, at most 300 rounds.
		for range 300 {
			for _, pkt := range [][]byte{pause, cnp, ack} {
				n := a.flood(s.addr(1, 4793), pkt, 1, 1, 0, stop)
				if n == 0 {
					return
				}
				sent.Add(int64(n))
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
	// The counters are read after the flood stopped; give the daemon a
	// moment to read the last datagrams.
	var v map[string]uint64
	settle(func() bool { v = hostValues(t, c1); return v["foreign_source"] >= uint64(sent.Load()) })
	tx := flowValues(t, c1, 22)
	t.Logf("un-attacked %v; attacked %v: %d forged datagrams sent, %d refused as foreign_source, %d pauses, flow 22: %d CNPs",
		base.Round(time.Millisecond), attacked.Round(time.Millisecond), sent.Load(), v["foreign_source"], v["pauses"], tx["cnps_recv"])
	if sent.Load() == 0 || v["foreign_source"] != uint64(sent.Load()) {
		t.Errorf("%d forged datagrams sent, %d refused as foreign_source; want all refused", sent.Load(), v["foreign_source"])
	}
	// Nothing forged reached the engine, so nothing paused or slowed the
	// flow: the counters say so exactly, where the transfer's time would
	// also say how loaded the machine was.
	if v["pauses"] != 0 || v["malformed"] != 0 || v["unknown_flow"] != 0 || v["paused_ns"] != 0 {
		t.Errorf("forged datagrams reached the engine: %d pauses, %d malformed, %d unknown flow, paused %v",
			v["pauses"], v["malformed"], v["unknown_flow"], time.Duration(v["paused_ns"]))
	}
}

// Attacks: "one forged DATA packet with a huge message length fails both
// ends of a flow" and "3,500 forged DATA packets with random PSNs on a
// real flow were marked received". Sent through the switch with host 1's
// address forged (so they pass the switch's neighbour check and source
// guard and forgived's source check), 3,500 forged DATA packets with
// random PSNs are refused: those that carry the flow's tags (an on-path
// attacker read them) are counted as out_of_window before their message
// length (2^30, one of them beyond any receive) or anything else is looked
// at; those without (an off-path guess) stop at the tag check, wrong_tag.
// The real transfer completes byte-exact.
func TestForgedDataThroughSwitchRefused(t *testing.T) {
	s := newStar(t, 2, "200Mbps", nil)
	c1, c2 := s.client(1), s.client(2)
	sp := newSpoofer(t, s.addr(1, 4793))
	const forged = 3500
	var withTags, withoutTags atomic.Int64
	payload := bytes.Repeat([]byte{0xEE}, 1024)
	timedTransfer(t, c1, c2, 31, 8<<20, func(stop <-chan struct{}) {
		local, peer := flowTags(t, c2, 31)
		start := wire.InitialPSN(peer) // where host 1's PSNs start
		for i := range forged {
			select {
			case <-stop:
				return
			default:
			}
			// PSNs from 2^20 past the start: far beyond any window of
			// this transfer. Every other packet knows the tags.
			psn := start.Add(1<<20 + uint32(i)*7919%(1<<30))
			tags := wire.Tags{}
			if i%2 == 0 {
				tags = tagsTo(local, peer)
			}
			pkt, err := wire.AppendData(nil, wire.DataFields{Src: 1, Dst: 2, Flow: 31, Tags: tags, PSN: psn,
				Msg: uint32(i % 3), MsgLen: 1 << 30}, payload)
			if err != nil {
				t.Error(err)
				return
			}
			if sp.send(s.addr(101, 4793), pkt) != nil { // host 1's port: the switch forwards to host 2
				return
			}
			if i%2 == 0 {
				withTags.Add(1)
			} else {
				withoutTags.Add(1)
			}
			if i%32 == 31 {
				time.Sleep(200 * time.Microsecond)
			}
		}
	})
	var rx map[string]uint64
	settle(func() bool {
		rx = flowValues(t, c2, 31)
		return rx["out_of_window"]+rx["wrong_tag"] >= uint64(withTags.Load()+withoutTags.Load())*9/10
	})
	host := hostValues(t, c2)
	t.Logf("forged DATA sent through the switch: %d with the tags, %d without; receiver: %d out of window, %d wrong tag, %d flows failed",
		withTags.Load(), withoutTags.Load(), rx["out_of_window"], rx["wrong_tag"], host["flows_failed"])
	if withTags.Load()+withoutTags.Load() < 100 {
		t.Fatalf("only %d forged packets sent: the attack did not happen", withTags.Load()+withoutTags.Load())
	}
	// The switch may drop some of the flood; every one it delivered is
	// refused under its reason, none more.
	if rx["out_of_window"] == 0 || rx["out_of_window"] > uint64(withTags.Load()) ||
		rx["wrong_tag"] == 0 || rx["wrong_tag"] > uint64(withoutTags.Load()) || host["flows_failed"] != 0 {
		t.Errorf("%d/%d forged, %d counted out of window, %d wrong tag, %d flows failed",
			withTags.Load(), withoutTags.Load(), rx["out_of_window"], rx["wrong_tag"], host["flows_failed"])
	}
}

// Attack: "with 2 % fabric loss, forged SACKs for a stale cumulative PSN
// made the sender fail and the receiver hang". Forged ACKs with a stale
// cumulative PSN and every SACK bit set, sent through the switch over the
// flow's whole PSN range by an on-path attacker (host 2's address forged,
// the flow's tags and so its initial PSN read off the wire; an off-path
// one stops at the switch and the tag check), arrive while 2 % of the
// data is lost: a SACK only stops a
// retransmission and the RTO resends a falsely SACKed head, so the sender
// reports success only once the receiver has everything, and the transfer
// completes byte-exact. ACKs naming PSNs never sent are refused whole
// (counted as malformed).
func TestForgedSacksUnderLossStillComplete(t *testing.T) {
	s := newStarPorts(t, 2, "200Mbps", nil, map[uint16]portOpts{2: {loss: 0.02}})
	c1, c2 := s.client(1), s.client(2)
	sp := newSpoofer(t, s.addr(2, 4793))
	const size = 4 << 20
	var sent atomic.Int64
	timedTransfer(t, c1, c2, 41, size, func(stop <-chan struct{}) {
		local, peer := flowTags(t, c1, 41)
		start := wire.InitialPSN(local) // host 1's first PSN
		packets := uint32(size / 4096)
		for range 200 {
			for base := uint32(0); base < packets+64; base += 64 {
				select {
				case <-stop:
					return
				default:
				}
				ack := wire.AppendAck(nil, wire.AckFields{Src: 2, Dst: 1, Flow: 41, Tags: wire.Tags{Dst: local, Src: peer},
					CumPSN: start, SackBase: start.Add(base), Sack: ^uint64(0), EchoPSN: start.Add(base)})
				if sp.send(s.addr(102, 4793), ack) != nil { // host 2's port: the switch forwards to host 1
					return
				}
				sent.Add(1)
			}
			time.Sleep(2 * time.Millisecond)
		}
	})
	tx := flowValues(t, c1, 41)
	host := hostValues(t, c1)
	t.Logf("%d forged SACKs sent; sender: %d ACKs received, %d retransmitted packets, %d RTOs; host malformed %d, flows failed %d",
		sent.Load(), tx["acks_recv"], tx["retx_packets"], tx["rtos"], host["malformed"], host["flows_failed"])
	if sent.Load() < 100 {
		t.Fatalf("only %d forged ACKs sent: the attack did not happen", sent.Load())
	}
	if host["flows_failed"] != 0 {
		t.Errorf("%d flows failed", host["flows_failed"])
	}
}
