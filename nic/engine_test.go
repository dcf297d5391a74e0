package nic_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/nic"
	"github.com/forgive-emu/forgive/wire"
)

// Destroying a flow while others keep sending must not break the
// round-robin scheduler (found by the workload's teardown).
func TestDestroyFlowKeepsSchedulerValid(t *testing.T) {
	p := newPair(t, 64<<10)
	for id := uint32(2); id <= 3; id++ {
		for _, e := range []struct {
			n    *nic.Engine
			peer uint16
		}{{p.a, 2}, {p.b, 1}} {
			if err := e.n.CreateFlow(0, nic.FlowSpec{Peer: e.peer, ID: id, Class: nic.ClassOther}); err != nil {
				t.Fatal(err)
			}
		}
	}
	p.exchange()
	for id := uint32(1); id <= 3; id++ {
		if err := p.a.PostSend(0, nic.SendReq{Key: nic.FlowKey{Peer: 2, ID: id}, WR: uint64(id), Region: p.region[0], Length: 64 << 10}); err != nil {
			t.Fatal(err)
		}
	}
	// Move the cursor past the first flows, then remove the last one.
	for i := 0; i < 2; i++ {
		if _, _, ok := p.a.Transmit(time.Duration(i)*time.Microsecond, p.buf); !ok {
			t.Fatal("nothing to transmit")
		}
	}
	if err := p.a.DestroyFlow(nic.FlowKey{Peer: 2, ID: 3}); err != nil {
		t.Fatal(err)
	}
	for i := 2; i < 12; i++ {
		p.a.Transmit(time.Duration(i)*time.Microsecond, p.buf) // must not panic
	}
}

// Receives complete in the order they were posted even when a later
// message settles first, as RDMA completion queues do; so do sends.
func TestCompletionsKeepPostingOrder(t *testing.T) {
	p := newPair(t, 8<<10)
	key, back := nic.FlowKey{Peer: 2, ID: 1}, nic.FlowKey{Peer: 1, ID: 1}
	for wr := uint64(0); wr < 2; wr++ {
		if err := p.b.PostRecv(nic.RecvReq{Key: back, WR: wr, Region: p.region[1], Off: int(wr) * 4096, Length: 4096}); err != nil {
			t.Fatal(err)
		}
		if err := p.a.PostSend(0, nic.SendReq{Key: key, WR: wr, Region: p.region[0], Off: int(wr) * 4096, Length: 4096}); err != nil {
			t.Fatal(err)
		}
	}
	var pkts [][]byte
	var toss []uint8
	for i := 0; i < 10; i++ {
		pkt, tos, ok := p.a.Transmit(time.Duration(i)*time.Microsecond, p.buf)
		if !ok {
			continue
		}
		pkts, toss = append(pkts, bytes.Clone(pkt)), append(toss, tos)
	}
	if len(pkts) < 2 || wire.Data(pkts[1]).Msg() != 1 {
		t.Fatalf("expected two data packets, messages 0 then 1; got %d packets", len(pkts))
	}
	// Message 1 arrives first and settles; its receive must wait for
	// message 0's.
	p.b.Receive(0, pkts[1], toss[1])
	if c := p.b.Completions(); len(c) != 0 {
		t.Fatalf("receive of message 1 completed before message 0: %+v", c)
	}
	p.b.Receive(0, pkts[0], toss[0])
	c := p.b.Completions()
	if len(c) != 2 || c[0].WR != 0 || c[1].WR != 1 {
		t.Fatalf("completions %+v, want WR 0 then WR 1", c)
	}
}

// The daemon names the congestion control and the loss recovery; the
// engine's config reads the names.
func TestConfigSettersReadNames(t *testing.T) {
	c := nic.DefaultConfig(1, 1e9)
	if err := c.SetCC("none"); err != nil || c.CC.String() != "none" {
		t.Fatalf("SetCC(none): %v, %v", err, c.CC)
	}
	if err := c.SetCC("cubic"); !errors.Is(err, nic.ErrConfig) {
		t.Fatalf("SetCC(cubic): %v", err)
	}
	if err := c.SetRecovery("gbn"); err != nil || c.Sender.Mode.String() != "go-back-n" || c.Receiver.Mode != c.Sender.Mode {
		t.Fatalf("SetRecovery(gbn): %v, %v/%v", err, c.Sender.Mode, c.Receiver.Mode)
	}
	if err := c.SetRecovery("selective-repeat"); err != nil || c.Sender.Mode.String() != "selective-repeat" || c.Receiver.Mode != c.Sender.Mode {
		t.Fatalf("SetRecovery(selective-repeat): %v", err)
	}
	if err := c.SetRecovery("stop-and-wait"); !errors.Is(err, nic.ErrConfig) {
		t.Fatalf("SetRecovery(stop-and-wait): %v", err)
	}
}
