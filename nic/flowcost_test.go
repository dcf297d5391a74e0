package nic_test

import (
	"testing"

	"github.com/forgive-emu/forgive/nic"
)

// What a flow's creation costs in the engine, for a flow per message
// (docs/architecture.md, "What a flow costs"). Each op is one flow, a new
// id every time as a flow per message names them.

// BenchmarkFlowCreateDestroy: one end's CreateFlow, the CONNECT it
// queues going out, and DestroyFlow.
func BenchmarkFlowCreateDestroy(b *testing.B) {
	for _, ent := range []nic.Entropy{nic.EntropySingle, nic.EntropyMessage} {
		b.Run(ent.String(), func(b *testing.B) {
			e, err := nic.New(nicConfig(1))
			if err != nil {
				b.Fatal(err)
			}
			buf := make([]byte, 9000)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				key := nic.FlowKey{Peer: 2, ID: uint32(i + 1)}
				if err := e.CreateFlow(0, nic.FlowSpec{Peer: 2, ID: key.ID, Class: nic.ClassGradient, Entropy: ent}); err != nil {
					b.Fatal(err)
				}
				if _, _, ok := e.Transmit(0, buf); !ok {
					b.Fatal("no CONNECT")
				}
				if err := e.DestroyFlow(key); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkFlowPerMessage is a flow's whole life at both ends with one
// 4 KiB message on it: both create it, the CONNECT/ACCEPT handshake, the
// message and its ACK, both destroy it. BenchmarkMessageOnOpenFlow, the
// same message on a flow that stays open, is its reference: the
// difference is what a flow per message adds to each message.
func BenchmarkFlowPerMessage(b *testing.B) {
	for _, ent := range []nic.Entropy{nic.EntropySingle, nic.EntropyMessage} {
		b.Run(ent.String(), func(b *testing.B) {
			p := newPair(b, 4096)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				id := uint32(i + 2) // the pair's own flow is 1
				a, back := nic.FlowKey{Peer: 2, ID: id}, nic.FlowKey{Peer: 1, ID: id}
				if err := p.a.CreateFlow(p.now, nic.FlowSpec{Peer: 2, ID: id, Class: nic.ClassGradient, Entropy: ent}); err != nil {
					b.Fatal(err)
				}
				if err := p.b.CreateFlow(p.now, nic.FlowSpec{Peer: 1, ID: id, Class: nic.ClassGradient, Entropy: ent}); err != nil {
					b.Fatal(err)
				}
				oneMessage(b, p, a, back)
				if err := p.a.DestroyFlow(a); err != nil {
					b.Fatal(err)
				}
				if err := p.b.DestroyFlow(back); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkMessageOnOpenFlow(b *testing.B) {
	p := newPair(b, 4096)
	b.ReportAllocs()
	for b.Loop() {
		oneMessage(b, p, nic.FlowKey{Peer: 2, ID: 1}, nic.FlowKey{Peer: 1, ID: 1})
	}
}

// oneMessage sends one message of the pair's region from a to b's back
// and pumps until both ends completed it.
func oneMessage(b *testing.B, p *pair, key, back nic.FlowKey) {
	if err := p.b.PostRecv(nic.RecvReq{Key: back, Region: p.region[1], Length: len(p.mem[1])}); err != nil {
		b.Fatal(err)
	}
	if err := p.a.PostSend(p.now, nic.SendReq{Key: key, Region: p.region[0], Length: len(p.mem[0])}); err != nil {
		b.Fatal(err)
	}
	sent, recvd := 0, 0
	for n := 0; sent == 0 || recvd == 0; n++ {
		if n > 1000 {
			b.Fatal("the message did not complete")
		}
		p.pump()
		for _, c := range p.a.Completions() {
			if c.Err != nil {
				b.Fatal(c.Err)
			}
			sent++
		}
		for _, c := range p.b.Completions() {
			if c.Err != nil {
				b.Fatal(c.Err)
			}
			recvd++
		}
	}
}
