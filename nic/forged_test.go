package nic_test

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/forgive-emu/forgive/nic"
	"github.com/forgive-emu/forgive/wire"
)

// forgedData is a DATA packet of flow 1 from host 1 to host 2 as a forger
// writes it, with the tags it knows (none off path).
func forgedData(t *testing.T, tags wire.Tags, psn wire.PSN, msg, msgLen uint32, payload []byte) []byte {
	t.Helper()
	pkt, err := wire.AppendData(nil, wire.DataFields{Src: 1, Dst: 2, Flow: 1, Tags: tags, PSN: psn, Msg: msg, MsgLen: msgLen}, payload)
	if err != nil {
		t.Fatal(err)
	}
	return pkt
}

// Attacks: "one forged DATA packet with a huge message length fails both
// ends of a flow: the length check runs before any PSN check", and
// "3,500 forged DATA packets with random PSNs on a real flow were marked
// received". The PSN window is checked first: forged packets outside it
// are counted as out of window and change nothing, and the real transfer
// completes byte-exact.
//
// Two forgers: an off-path one, who does not know the flow's tags, is
// refused at the tag check (wrong_tag) before the PSN is looked at; an
// on-path one, who read both tags from the wire, gets past it and is
// refused by the PSN window.
func TestForgedDataOutsideWindowChangesNothing(t *testing.T) {
	for _, onPath := range []bool{false, true} {
		name := "off path"
		if onPath {
			name = "on path"
		}
		t.Run(name, func(t *testing.T) { forgedDataOutsideWindow(t, onPath) })
	}
}

func forgedDataOutsideWindow(t *testing.T, onPath bool) {
	const size = 256 << 10
	p := &pair{buf: make([]byte, wire.DataLen+4096)}
	mem := [2][]byte{make([]byte, size), make([]byte, size)}
	for i := range mem[0] {
		mem[0][i] = byte(i*13 + 1)
	}
	for i, h := range []uint16{1, 2} {
		e, err := nic.New(nicConfig(h))
		if err != nil {
			t.Fatal(err)
		}
		if err := e.CreateFlow(0, nic.FlowSpec{Peer: 3 - h, ID: 1, Class: nic.ClassTensor}); err != nil {
			t.Fatal(err)
		}
		if p.region[i], err = e.RegisterMemory(mem[i]); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			p.a = e
		} else {
			p.b = e
		}
	}
	p.exchange()
	back := nic.FlowKey{Peer: 1, ID: 1}
	rb, _ := p.b.Flow(back)
	var tags wire.Tags // off path: a guess, here zero
	if onPath {
		tags = wire.Tags{Dst: rb.LocalTag, Src: rb.PeerTag}
	}
	start := wire.InitialPSN(rb.PeerTag) // where the sender's PSNs start
	if err := p.b.PostRecv(nic.RecvReq{Key: back, WR: 9, Region: p.region[1], Length: size}); err != nil {
		t.Fatal(err)
	}
	window := uint32(p.b.Config().Receiver.BitmapPSNs) + 64 // the bitmap rounds up to whole words
	rng := rand.New(rand.NewPCG(1, 2))
	garbage := bytes.Repeat([]byte{0xEE}, 4096)
	forged := 0
	forge := func(n int) {
		for range n {
			// Random PSNs at least a window away from the cumulative PSN
			// (which stays within a window of the initial PSN for this
			// transfer) on either side: never admitted.
			off := 2*window + 1 + rng.Uint32N(1<<31-4*window-2)
			psn := start.Add(off)
			if rng.IntN(2) == 0 {
				psn = start.Add(-off)
			}
			p.b.Receive(p.now, forgedData(t, tags, psn, rng.Uint32N(4), 1<<30, garbage), wire.ECNCE)
			forged++
		}
	}
	forge(1) // one with a huge message length before the transfer
	if err := p.a.PostSend(p.now, nic.SendReq{Key: nic.FlowKey{Peer: 2, ID: 1}, WR: 9, Region: p.region[0], Length: size}); err != nil {
		t.Fatal(err)
	}
	done := false
	for i := 0; i < 100000 && !done; i++ {
		if i%10 == 0 && forged < 4000 {
			forge(50) // interleaved with the real packets
		}
		p.pump()
		for _, c := range p.b.Completions() {
			if c.Kind != nic.WorkRecv || c.Err != nil {
				t.Fatalf("receive completion %+v", c)
			}
			done = true
		}
	}
	if !done {
		t.Fatal("the real transfer did not complete")
	}
	r, _ := p.b.Flow(back)
	st := p.b.Stats()
	t.Logf("receiver: %d forged, %d wrong tag, %d out of window, flow failed %q, flows failed %d, CE %d",
		forged, r.Stats.WrongTag, r.Receiver.OutOfWindow, r.Failed, st.FlowsFailed, r.Stats.CEMarked)
	if r.Failed != "" || st.FlowsFailed != 0 {
		t.Fatalf("the receiving flow failed: %q", r.Failed)
	}
	refused, other := r.Stats.WrongTag, r.Receiver.OutOfWindow
	if onPath {
		refused, other = other, refused
	}
	if forged < 3500 || refused != uint64(forged) || other != 0 || r.Stats.CEMarked != 0 {
		t.Errorf("%d forged packets, %d refused where expected (want all), %d elsewhere, %d CE marks taken from them",
			forged, refused, other, r.Stats.CEMarked)
	}
	if st.WrongTag != r.Stats.WrongTag {
		t.Errorf("host counts %d wrong tags, the flow %d", st.WrongTag, r.Stats.WrongTag)
	}
	if !bytes.Equal(mem[1], mem[0]) {
		t.Error("the received bytes differ from the sent ones")
	}
}
