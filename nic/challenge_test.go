package nic_test

import (
	"bytes"
	"testing"

	"github.com/forgive-emu/forgive/nic"
	"github.com/forgive-emu/forgive/wire"
)

// "A receiver that has just started takes the first authentic packet from
// each sender as the current start, so a captured CONNECT of a flow end
// the sender has since recreated can bind the receiver's new flow."
//
// The handshake's challenge is the receiver's own tag: a random value
// each flow end draws at its creation, from the engine's TagSeed (the
// daemon fills it from crypto/rand at each start), which the peer must
// echo as the destination tag of every packet it sends, CONNECT and
// ACCEPT included, before anything binds. A capture made before the
// receiver's start cannot carry it.
//
// Host 1 binds flow 1, moves a message to host 2 and every packet it
// sends is captured; then host 1's flow end is destroyed (its tag dies in
// a live engine, so a sealed fabric's replay window of a receiver that
// has just started does not refuse its nonces), and host 2 is restarted:
// a new engine with another TagSeed, its flow created again and two
// receives posted as bait. The whole capture, the CONNECT that named no
// tag first, reaches host 2's new flow while it is unbound: nothing binds,
// no packet is received, no receive completes, and every packet naming a
// tag is counted as wrong_tag; the ACCEPT it draws for the CONNECT that
// named none carries host 1's dead tag and host 1 refuses it. Then host
// 1's flow end is created again and the live handshake binds; the capture
// replayed once more changes nothing (host 2 keeps its peer, no restart),
// and the live flow fills the bait byte-exact.
func TestCaptureBeforeReceiverStartBindsNothing(t *testing.T) {
	const size = 16 << 10
	newEngine := func(host uint16, seed byte) *nic.Engine {
		cfg := nicConfig(host)
		cfg.LineRate = 1e12
		cfg.DCQCN.LineRate = 0
		cfg.TagSeed[0], cfg.TagSeed[1] = seed, byte(host)
		e, err := nic.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.CreateFlow(0, nic.FlowSpec{Peer: 3 - host, ID: 1}); err != nil {
			t.Fatal(err)
		}
		return e
	}
	p := &pair{a: newEngine(1, 1), b: newEngine(2, 1), buf: make([]byte, wire.DataLen+4096)}
	var capture [][]byte
	seen := func(to *nic.Engine, pkt []byte) {
		if to == p.b {
			capture = append(capture, bytes.Clone(pkt))
		}
	}
	p.exchangeSeen(seen)
	ra, _ := p.a.Flow(keyAB)
	if ra.PeerTag == 0 {
		t.Fatal("the first handshake did not bind")
	}
	src, err := p.a.RegisterMemory(bytes.Repeat([]byte("old!"), size/4))
	if err != nil {
		t.Fatal(err)
	}
	dst, err := p.b.RegisterMemory(make([]byte, size))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.b.PostRecv(nic.RecvReq{Key: keyBA, WR: 1, Region: dst, Length: size}); err != nil {
		t.Fatal(err)
	}
	if err := p.a.PostSend(p.now, nic.SendReq{Key: keyAB, WR: 1, Region: src, Length: size}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 1000; i++ {
		if r, _ := p.b.Flow(keyBA); r.Stats.RecvsDone == 1 {
			break
		}
		p.exchangeSeen(seen)
		p.a.Advance(p.now)
		p.b.Advance(p.now)
		p.now += 1000
	}
	types := map[wire.Type]int{}
	named := 0 // captured packets naming a destination tag
	for _, pkt := range capture {
		types[wire.Header(pkt).Type()]++
		if tags, _ := wire.Header(pkt).Tags(); tags.Dst != 0 {
			named++
		}
	}
	if types[wire.TypeData] < size/4096 || types[wire.TypeConnect] < 2 || named == len(capture) {
		t.Fatalf("captured %v: want the data, a CONNECT naming no tag and one naming host 2's", types)
	}
	p.a.Completions()

	// Host 1's flow end dies; host 2 starts again with another seed.
	if err := p.a.DestroyFlow(keyAB); err != nil {
		t.Fatal(err)
	}
	p.b = newEngine(2, 2)
	baitMem := make([]byte, 2*size)
	bait, err := p.b.RegisterMemory(baitMem)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := p.b.PostRecv(nic.RecvReq{Key: keyBA, WR: uint64(10 + i), Region: bait, Off: i * size, Length: size}); err != nil {
			t.Fatal(err)
		}
	}
	for { // its own CONNECT goes nowhere: host 1 has no flow 1
		if _, _, ok := p.b.Transmit(p.now, p.buf); !ok {
			break
		}
	}
	rb, _ := p.b.Flow(keyBA)
	var answers [][]byte
	for _, pkt := range capture {
		p.b.Receive(p.now, pkt, 0)
		for {
			out, _, ok := p.b.Transmit(p.now, p.buf)
			if !ok {
				break
			}
			answers = append(answers, bytes.Clone(out))
		}
	}
	rb, _ = p.b.Flow(keyBA)
	st := p.b.Stats()
	t.Logf("replayed %d packets %v into host 2's new flow (tag %#x): wrong_tag %d, peer tag %#x, %d packets received, %d answers",
		len(capture), types, rb.LocalTag, st.WrongTag, rb.PeerTag, rb.Stats.RecvPackets, len(answers))
	if rb.PeerTag != 0 {
		t.Fatalf("a capture from before host 2's start bound its new flow to %#x", rb.PeerTag)
	}
	if rb.Stats.RecvPackets != 0 || rb.Stats.RecvsDone != 0 || len(p.b.Completions()) != 0 {
		t.Fatalf("the capture was received: %d packets, %d receives done", rb.Stats.RecvPackets, rb.Stats.RecvsDone)
	}
	if st.WrongTag != uint64(named) || rb.Stats.WrongTag != uint64(named) {
		t.Errorf("%d captured packets named a tag, %d counted as wrong_tag (flow %d)", named, st.WrongTag, rb.Stats.WrongTag)
	}
	// The answers: ACCEPTs to the dead tag, refused by host 1's new end.
	if err := p.a.CreateFlow(p.now, nic.FlowSpec{Peer: 2, ID: 1}); err != nil {
		t.Fatal(err)
	}
	ra, _ = p.a.Flow(keyAB)
	wrong := p.a.Stats().WrongTag
	for _, pkt := range answers {
		if wire.Header(pkt).Type() != wire.TypeAccept {
			t.Fatalf("host 2 answered the capture with a %v", wire.Header(pkt).Type())
		}
		p.a.Receive(p.now, pkt, 0)
	}
	if r, _ := p.a.Flow(keyAB); r.PeerTag != 0 || p.a.Stats().WrongTag != wrong+uint64(len(answers)) {
		t.Fatalf("host 1's new end took host 2's answers to the capture: peer tag %#x, wrong_tag %d -> %d",
			r.PeerTag, wrong, p.a.Stats().WrongTag)
	}

	// The live handshake binds; the capture again changes nothing.
	p.exchange()
	ra, _ = p.a.Flow(keyAB)
	rb, _ = p.b.Flow(keyBA)
	if ra.PeerTag != rb.LocalTag || rb.PeerTag != ra.LocalTag {
		t.Fatalf("the live handshake bound %#x and %#x, want %#x and %#x", ra.PeerTag, rb.PeerTag, rb.LocalTag, ra.LocalTag)
	}
	for _, pkt := range capture {
		p.b.Receive(p.now, pkt, 0)
	}
	p.exchange()
	if r, _ := p.b.Flow(keyBA); r.PeerTag != ra.LocalTag || r.Stats.PeerRestarts != 0 || r.Stats.RecvPackets != 0 {
		t.Fatalf("the capture replayed on the bound flow: peer tag %#x (live %#x), %d restarts, %d packets received",
			r.PeerTag, ra.LocalTag, r.Stats.PeerRestarts, r.Stats.RecvPackets)
	}
	liveMem := bytes.Repeat([]byte("new!"), size/2)
	live, err := p.a.RegisterMemory(liveMem)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := p.a.PostSend(p.now, nic.SendReq{Key: keyAB, WR: uint64(20 + i), Region: live, Off: i * size, Length: size}); err != nil {
			t.Fatal(err)
		}
	}
	done := 0
	for i := 0; i < 20000 && done < 2; i++ {
		p.pump()
		for _, c := range p.b.Completions() {
			if c.Err != nil || c.WR != uint64(10+done) {
				t.Fatalf("host 2's completion %+v: want the bait receives in order", c)
			}
			done++
		}
	}
	if done != 2 {
		t.Fatalf("%d bait receives completed, want 2", done)
	}
	if !bytes.Equal(baitMem, liveMem) {
		t.Fatal("the bait receives hold other bytes than the live flow sent")
	}
}
