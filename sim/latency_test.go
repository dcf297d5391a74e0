package sim_test

import (
	"testing"
	"time"

	"github.com/forgive-emu/forgive/congestion"
	"github.com/forgive-emu/forgive/nic"
	"github.com/forgive-emu/forgive/sim"
	"github.com/forgive-emu/forgive/switchcore"
	"github.com/forgive-emu/forgive/wire"
)

// Every hop delivers a packet at send + serialization + delay, with no
// other term, both directions: host 1 and host 2 on one switch, each host
// uplink and each switch downlink with a delay of its own (distinct, so a
// term taken from the wrong link or left out shows), the downlinks at 8
// Gb/s (one nanosecond a byte) with 24 bytes of framing per packet. The
// NIC transmits at the instant it decides (its pacing is the uplink's
// serialization). A one-packet send at 0 is four crossings of the switch:
//
//	CONNECT 1->2, ACCEPT 2->1, DATA 1->2 (the receive completes when it
//	arrives), ACK 2->1 (the send completes when it arrives)
//
// each a host uplink (its delay alone) and a switch downlink (the
// packet's serialization, then the downlink's delay). Host 1 answers the
// ACCEPT with a CONNECT of its own (it bound host 2's tag from a
// stateless answer, nic's onHandshake) at the instant it sends the DATA,
// so the DATA is serialized on the downlink behind those 20 bytes.
func TestLinkLatencyIsDelayPlusSerialization(t *testing.T) {
	const (
		up1     = 1100 * time.Nanosecond // host 1's uplink delay
		up2     = 1300 * time.Nanosecond // host 2's uplink delay
		down1   = 1700 * time.Nanosecond // the switch port toward host 1
		down2   = 1900 * time.Nanosecond // the switch port toward host 2
		framing = 24
		payload = 200
	)
	s := sim.New(4096)
	port := func(d time.Duration) switchcore.PortConfig {
		return switchcore.PortConfig{Rate: 8e9, Delay: d, Overhead: framing, DataCap: 64 << 10, Trim: switchcore.TrimNDP}
	}
	sw, err := switchcore.New(switchcore.Config{Ports: []switchcore.PortConfig{port(down1), port(down2)},
		Routes: map[uint16][]switchcore.PortID{1: {0}, 2: {1}}})
	if err != nil {
		t.Fatal(err)
	}
	s.AddSwitch(sw)
	var nics []*nic.Engine
	for i, d := range []time.Duration{up1, up2} {
		c := nic.DefaultConfig(uint16(i+1), 8e9)
		c.CC, c.Forgive = congestion.KindNone, false
		e, err := nic.New(c)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.AddHost(e, 0, switchcore.PortID(i), d); err != nil {
			t.Fatal(err)
		}
		if err := e.CreateFlow(0, nic.FlowSpec{Peer: uint16(2 - i), ID: 1}); err != nil {
			t.Fatal(err)
		}
		nics = append(nics, e)
	}
	ser := func(n int) time.Duration { return time.Duration(n+framing) * time.Nanosecond } // 8 Gb/s
	to2 := func(n int) time.Duration { return up1 + ser(n) + down2 }
	to1 := func(n int) time.Duration { return up2 + ser(n) + down1 }
	connect := to2(wire.ConnectLen)
	accept := connect + to1(wire.ConnectLen)
	data := accept + to2(wire.DataLen+payload) + ser(wire.ConnectLen)
	ack := data + to1(wire.AckLen)

	var recvAt, sendAt time.Duration = -1, -1
	s.OnCompletion = func(host int, c nic.Completion) {
		if c.Err != nil {
			t.Errorf("host %d: %v", host+1, c.Err)
		}
		switch c.Kind {
		case nic.WorkRecv:
			recvAt = s.Now()
		case nic.WorkSend:
			sendAt = s.Now()
		}
	}
	post(t, s, nics, 1, make([]byte, payload))
	s.Wake(0)
	s.Wake(1)
	if err := s.RunUntil(func() bool { return sendAt >= 0 && recvAt >= 0 }, time.Second); err != nil {
		t.Fatal(err)
	}
	if recvAt != data || sendAt != ack {
		t.Errorf("the DATA arrived at %v, its ACK at %v; want %v and %v (CONNECT at %v, ACCEPT at %v: "+
			"each hop the host uplink's delay, then the packet's %d bytes of framing and header at 8 Gb/s and the downlink's delay)",
			recvAt, sendAt, data, ack, connect, accept, framing)
	}
}
