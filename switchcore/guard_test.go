package switchcore

import (
	"testing"

	"github.com/forgive-emu/forgive/wire"
)

// "A packet arriving on a host-facing port only with that host's id as its
// source (a ToR's source guard)": host A's port refuses packets naming
// another source host, counted under source_guard, and takes A's own and
// its link-local PAUSE; a port facing a switch guards nothing.
func TestSourceGuardOnHostFacingPort(t *testing.T) {
	cfg := twoPorts()
	cfg.Ports[portA].Host = hostA
	h := newHarness(t, cfg)
	spoofed := []struct {
		name string
		pkt  []byte
	}{
		{"DATA from host 3", dataPacket(3, hostB, 7, 0, 0, 100)},
		{"DATA from host B", dataPacket(hostB, hostB, 7, 0, 0, 100)},
		{"ACK from host 3", ackPacket(3, hostB, 7)},
		{"CONNECT from host 3", wire.AppendConnect(nil, wire.ConnectFields{Src: 3, Dst: hostB, Flow: 7, Tags: wire.Tags{Src: 9}})},
		{"PAUSE from host 3", wire.AppendPauseFields(nil, wire.PauseFields{Src: 3, ClassMask: 0xFF, Micros: 100})},
	}
	for _, s := range spoofed {
		if r := h.recv(portA, s.pkt, tosData); r != DropSourceGuard {
			t.Errorf("%s on host A's port: %v, want %v", s.name, r, DropSourceGuard)
		}
	}
	if got := h.sw.Stats().Ports[portA].RxDrops[DropSourceGuard].Packets; got != uint64(len(spoofed)) {
		t.Errorf("source_guard drops %d, want %d", got, len(spoofed))
	}
	if r := h.recv(portA, dataPacket(hostA, hostB, 7, 0, 0, 100), tosData); r != DropNone {
		t.Errorf("host A's own DATA: %v", r)
	}
	if r := h.recv(portA, wire.AppendPause(nil, 0x01, 0), 0); r != DropNone {
		t.Errorf("host A's link-local PAUSE: %v", r)
	}
	if r := h.recv(portB, dataPacket(3, hostA, 7, 0, 0, 100), tosData); r != DropNone {
		t.Errorf("a port facing a switch guarded: %v", r)
	}
	if DropSourceGuard.String() != "source_guard" {
		t.Errorf("name %q", DropSourceGuard.String())
	}
}
