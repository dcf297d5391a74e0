package nic_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/congestion"
	"github.com/forgive-emu/forgive/nic"
	"github.com/forgive-emu/forgive/wire"
)

// pair is two engines wired back to back with no switch: what one
// transmits the other receives at the same instant.
type pair struct {
	a, b   *nic.Engine
	buf    []byte
	now    time.Duration
	region [2]nic.RegionID
	mem    [2][]byte // the registered memory of each region
}

func newPair(tb testing.TB, msg int) *pair { return newPairWith(tb, msg, nil) }

// newPairWith is newPair with tweak applied to both engines' configs.
func newPairWith(tb testing.TB, msg int, tweak func(*nic.Config)) *pair {
	tb.Helper()
	p := &pair{buf: make([]byte, wire.DataLen+4096)}
	for i, h := range []uint16{1, 2} {
		cfg := nicConfig(h)
		cfg.LineRate = 1e12 // pacing is not what these benchmarks measure
		cfg.DCQCN.LineRate = 0
		if tweak != nil {
			tweak(&cfg)
		}
		e, err := nic.New(cfg)
		if err != nil {
			tb.Fatal(err)
		}
		if err := e.CreateFlow(0, nic.FlowSpec{Peer: 3 - h, ID: 1, Class: nic.ClassGradient}); err != nil {
			tb.Fatal(err)
		}
		p.mem[i] = make([]byte, msg)
		if p.region[i], err = e.RegisterMemory(p.mem[i]); err != nil {
			tb.Fatal(err)
		}
		if i == 0 {
			p.a = e
		} else {
			p.b = e
		}
	}
	p.exchange()
	return p
}

// exchange moves packets both ways at the current time until neither
// engine has anything to send: the CONNECT/ACCEPT handshake, for one.
func (p *pair) exchange() { p.exchangeSeen(nil) }

// exchangeSeen is exchange that shows seen every packet before its
// receiver gets it.
func (p *pair) exchangeSeen(seen func(to *nic.Engine, pkt []byte)) {
	for moved := true; moved; {
		moved = false
		for _, dir := range [2][2]*nic.Engine{{p.a, p.b}, {p.b, p.a}} {
			for {
				pkt, tos, ok := dir[0].Transmit(p.now, p.buf)
				if !ok {
					break
				}
				if seen != nil {
					seen(dir[1], pkt)
				}
				dir[1].Receive(p.now, pkt, tos)
				moved = true
			}
		}
	}
}

// bindAlone completes the handshake of a lone engine's flow as the peer's
// ACCEPT would, with peerTag as the peer's tag, and drains what the engine
// sends in answer (its CONNECT naming the peer's tag).
func bindAlone(t testing.TB, e *nic.Engine, key nic.FlowKey, peerTag uint32) {
	t.Helper()
	r, ok := e.Flow(key)
	if !ok {
		t.Fatalf("no flow %v", key)
	}
	e.Receive(0, wire.AppendConnect(nil, wire.ConnectFields{Accept: true, Src: key.Peer, Dst: e.Config().Host,
		Flow: key.ID, Tags: wire.Tags{Dst: r.LocalTag, Src: peerTag}}), 0)
	if r, _ = e.Flow(key); r.PeerTag != peerTag {
		t.Fatalf("flow %v: peer tag %#x after the ACCEPT, want %#x", key, r.PeerTag, peerTag)
	}
	buf := make([]byte, wire.DataLen+4096)
	for {
		pkt, _, ok := e.Transmit(0, buf)
		if !ok {
			return
		}
		if typ := wire.Header(pkt).Type(); typ != wire.TypeConnect {
			t.Fatalf("flow %v: %v sent before any data was posted", key, typ)
		}
	}
}

// pump moves packets both ways until neither engine has anything to send
// at the current time, then advances time to the next deadline.
func (p *pair) pump() (data int) {
	for moved := true; moved; {
		moved = false
		for _, dir := range [2][2]*nic.Engine{{p.a, p.b}, {p.b, p.a}} {
			for {
				pkt, tos, ok := dir[0].Transmit(p.now, p.buf)
				if !ok {
					break
				}
				if wire.Type(pkt[0]&0x0F) == wire.TypeData {
					data++
				}
				dir[1].Receive(p.now, pkt, tos)
				moved = true
			}
		}
	}
	p.a.Advance(p.now)
	p.b.Advance(p.now)
	next := p.now + time.Microsecond
	for _, e := range []*nic.Engine{p.a, p.b} {
		if d, ok := e.NextDeadline(); ok && d > p.now && d < next {
			next = d
		}
	}
	p.now = next
	return data
}

// BenchmarkHostToHost measures the whole per-packet path of both NICs:
// segmentation, pacing, encoding, parsing, placement, ACK coalescing and
// completion. One op is one 4 KiB data packet.
func BenchmarkHostToHost(b *testing.B) { benchHostToHost(b, nil) }

// BenchmarkHostToHostNSCC is BenchmarkHostToHost under NSCC: the window
// check before each segment and the controller's work on each ACK.
func BenchmarkHostToHostNSCC(b *testing.B) {
	benchHostToHost(b, func(c *nic.Config) { c.CC = congestion.KindNSCC })
}

const benchMsg = 1 << 20

func benchHostToHost(b *testing.B, tweak func(*nic.Config)) {
	benchPair(b, newPairWith(b, benchMsg, tweak))
}

// benchPair sends messages on p's flow 1 from a to b, one after another,
// for b.N data packets.
func benchPair(b *testing.B, p *pair) {
	const msg = benchMsg
	key := nic.FlowKey{Peer: 2, ID: 1}
	back := nic.FlowKey{Peer: 1, ID: 1}
	post := func() {
		if err := p.b.PostRecv(nic.RecvReq{Key: back, Region: p.region[1], Length: msg}); err != nil {
			b.Fatal(err)
		}
		if err := p.a.PostSend(p.now, nic.SendReq{Key: key, Region: p.region[0], Length: msg}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.SetBytes(4096)
	b.ResetTimer()
	post()
	for sent := 0; sent < b.N; {
		sent += p.pump()
		if len(p.a.Completions()) > 0 {
			post()
		}
		p.b.Completions()
	}
}

// FuzzReceive feeds arbitrary datagrams to an engine with a live flow:
// nothing from the network may panic it, and it keeps working after.
func FuzzReceive(f *testing.F) {
	seed := wire.AppendAck(nil, wire.AckFields{Src: 2, Dst: 1, Flow: 1})
	f.Add(seed, uint8(0))
	f.Add(wire.AppendConnect(nil, wire.ConnectFields{Src: 2, Dst: 1, Flow: 1, Tags: wire.Tags{Src: 5}}), uint8(0))
	f.Add(wire.AppendConnect(nil, wire.ConnectFields{Accept: true, Src: 2, Dst: 1, Flow: 1, Tags: wire.Tags{Dst: 5, Src: 6}}), uint8(0))
	d, _ := wire.AppendData(nil, wire.DataFields{Src: 2, Dst: 1, Flow: 1, MsgLen: 8, Flags: wire.DataFirst | wire.DataLast}, []byte("abcdefgh"))
	f.Add(d, uint8(3))
	f.Add(wire.AppendNack(nil, wire.NackFields{Src: 2, Dst: 1, Flow: 1, Reason: wire.NackTrimmed, Count: 1}), uint8(0))
	f.Add(wire.AppendPause(nil, 1, 10), uint8(0))
	f.Fuzz(func(t *testing.T, pkt []byte, tos uint8) {
		p := newPair(t, 1<<12)
		if err := p.a.PostRecv(nic.RecvReq{Key: nic.FlowKey{Peer: 2, ID: 1}, WR: 1, Region: p.region[0], Length: 1 << 12, Step: 1}); err != nil {
			t.Fatal(err)
		}
		p.a.Receive(0, pkt, tos)
		p.a.Advance(time.Millisecond)
		for i := 0; i < 100; i++ {
			if _, _, ok := p.a.Transmit(time.Millisecond, p.buf); !ok {
				break
			}
		}
		_ = p.a.Completions()
	})
}

// BenchmarkTransmitIdleFlows is BenchmarkHostToHost with idle flows
// beside the one that sends: each host has flows flows to the other, all
// bound, one with data, and Transmit chooses the next flow by a scan of
// every flow or by its index (txindex.go). The flows here stay in cache,
// where a simulated fabric's hosts' mostly do not: it shows the index's
// cost where the scan costs least.
func BenchmarkTransmitIdleFlows(b *testing.B) {
	for _, flows := range []int{2, 4, 8, 16, 32, 64} {
		for _, way := range []string{"scan", "index"} {
			b.Run(fmt.Sprintf("flows=%d/%s", flows, way), func(b *testing.B) {
				scanMax := math.MaxInt
				if way == "index" {
					scanMax = 0
				}
				p := newPair(b, benchMsg)
				for _, e := range []*nic.Engine{p.a, p.b} {
					e.SetTxScanMax(scanMax) // the next flow created builds the index
					peer := 3 - e.Config().Host
					for id := 2; id <= flows; id++ {
						if err := e.CreateFlow(0, nic.FlowSpec{Peer: peer, ID: uint32(id), Class: nic.ClassGradient}); err != nil {
							b.Fatal(err)
						}
					}
				}
				p.exchange()
				benchPair(b, p)
			})
		}
	}
}
